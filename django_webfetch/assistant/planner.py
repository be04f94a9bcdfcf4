"""The offline rule-based planner: a Pydantic AI ``FunctionModel`` with no language model.

It keeps the demo working with no provider configured, and goes through the same loop,
approval and bounds as a real model:

- the editor's message names http(s) URLs -> ``fetch_external_url`` for each (at most 3),
  except a URL of this site itself (``http://127.0.0.1:8000/about/``) -> ``read_page`` for
  its path;
- otherwise, a path of this site in the message (``/about/``) -> ``read_page`` for it
  ("Ask about this page" on a django CMS page asks so), or a question about the site's
  pages -> ``list_pages``, or a question about a page named by its title ("read the
  Opening hours page") -> ``list_pages``, then ``read_page`` for the listed page whose
  title the message names, when those content tools are offered;
- otherwise -> ``search_site`` with the message as the query, when that tool is offered;
- once the tools answered -> a reply quoting what they returned, each failure once in plain
  words (``runs.reasons``), never as a code.

Every reply starts with :data:`OFFLINE_PREFIX`, so nobody mistakes it for a model's answer.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from django_webfetch.text.patterns import compile_pattern

__all__ = ["MAX_URLS", "OFFLINE_PREFIX", "offline_model", "plan"]

OFFLINE_PREFIX = "[Offline rule-based planner - no language model was asked]"
MAX_URLS = 3
# Every pattern here runs on RE2 (linear time): the editor writes the message and page
# titles reach the listing (the path pattern backtracked exponentially on ``re``,
# a 39-character message held the request seconds).  RE2 has no look-around and its
# ``\w``, ``\s`` and ``\b`` are ASCII, so Python's Unicode classes are spelled out.
_SPACE = r"\s\x0b\x1c-\x1f\x85\pZ"  # what Python's ``\s`` matches
_WORD = r"\pL\pN_"  # what Python's ``\w`` matches
_URL_RE = compile_pattern(rf"(?i)https?://[^{_SPACE}<>\"'`]+")
#: A path of this site: "/" after a start or a character that is not a word character or
#: one of ``/:.@-`` (not inside a URL), segments without empty ones, then an end or one of
#: the characters that may follow a path in a sentence.  The character before and after are
#: consumed (RE2 has no look-around): group 1 is the path.
_SEGMENT = r"[A-Za-z0-9._~-]+"
_PATH_RE = compile_pattern(
    rf"(?:^|[^{_WORD}/:.@-])(/(?:{_SEGMENT}(?:/{_SEGMENT})*/?)?)(?:[{_SPACE}?!.,;:)]|$)"
)
_PAGES_RE = compile_pattern(
    rf"(?is)(?:^|[^{_WORD}])(?:which|what|list)[^{_WORD}](?:.*[^{_WORD}])?pages(?:[^{_WORD}]|$)"
)
_TRAILING = ".,;:!?)]}"


def _urls(text: str) -> list[str]:
    found: list[str] = []
    for match in _URL_RE.finditer(text):
        url = match.group(0).rstrip(_TRAILING)
        if url not in found:
            found.append(url)
        if len(found) == MAX_URLS:
            break
    return found


def _path(text: str) -> str:
    """The first path of this site named in ``text`` (``""``: none)."""
    text = _URL_RE.sub(" ", text)
    position = 0
    while (match := _PATH_RE.search(text, position)) is not None:
        path = str(match.group(1)).rstrip(".")
        if len(path) <= 500:
            return path
        # The character after the path may be the one before the next path.
        position = match.end(1)
    return ""


def own_hosts() -> tuple[str, ...]:
    """This installation's hosts as list entries (``egress.own_site_hosts``); read once per
    request, before the planner runs (``()`` when they cannot be read)."""
    from django_webfetch.egress import own_site_hosts

    try:
        return own_site_hosts()
    except Exception:  # the planner must answer even without its database
        return ()


def _own_path(url: str, hosts: tuple[str, ...]) -> str:
    """The path of ``url`` when its host is one of this site's own (``""`` otherwise)."""
    from django_webfetch.exceptions import WebFetchError
    from django_webfetch.net.hosts import HostList
    from django_webfetch.net.urlparse import parse_url

    if not hosts:
        return ""
    try:
        parsed = parse_url(url)
        listed = HostList.parse(hosts)
    except (WebFetchError, ValueError):
        return ""
    if listed.match_host(parsed.host, parsed.port) is None:
        return ""
    return parsed.path or "/"


_TOOL_ERROR_RE = compile_pattern(r"^\[tool error: ([a-z0-9_:]{1,64})\]")
_RULE_RE = compile_pattern(r"\(rule: ([a-z0-9_:]{1,64})\)")


def _target(part: Any) -> str:
    """What a tool call asked for, for the reply (its URL, path or query)."""
    args = part.args_as_dict() if hasattr(part, "args_as_dict") else {}
    for key in ("url", "path", "query", "page_id"):
        value = args.get(key)
        if isinstance(value, (str, int)) and str(value):
            return str(value)[:200]
    return ""


def _outcome(part: Any, asked: str) -> list[str]:
    """One tool result in the reply: its text, or why it failed in plain words."""
    from django_webfetch.runs.reasons import plain_reason

    content = str(part.content)
    named = f"{part.tool_name} ({asked})" if asked else part.tool_name
    error = _TOOL_ERROR_RE.match(content)
    if error is None:
        return [f"{named} returned:", content]
    rule = _RULE_RE.search(content)
    reason = plain_reason(rule.group(1) if rule else error.group(1))
    return [f"{named} did not give a result: {reason}."]


#: A message about one of the site's pages ("read the Opening hours page").
_PAGE_RE = compile_pattern(rf"(?i)(?:^|[^{_WORD}])page(?:[^{_WORD}]|$)")
#: One line of ``list_pages``: ``[id] Title - /path/``.
_LISTED_RE = compile_pattern(
    rf"(?m)^\[[0-9]{{1,12}}\] (.{{1,300}}) - (/[^{_SPACE}]{{0,500}})(?: \(home page\))?$"
)
_WORD_RE = compile_pattern(rf"[{_WORD}]+")


def _last_prompt(messages: list[Any], request: Any, prompt: Any) -> str:
    for message in reversed(messages):
        if isinstance(message, request):
            parts: list[Any] = list(getattr(message, "parts", ()))
            texts = [
                p.content for p in parts if isinstance(p, prompt) and isinstance(p.content, str)
            ]
            if texts:
                return "\n".join(texts)
    return ""


def _page_named(text: str, listing: str) -> str:
    """The path of the listed page whose whole title the message writes ("the Opening hours
    page"; the longest such title wins); ``""`` when none does."""
    said = " " + " ".join(_WORD_RE.findall(text.casefold())) + " "
    best, best_size = "", 0
    for match in _LISTED_RE.finditer(listing):
        title = " ".join(_WORD_RE.findall(match.group(1).casefold()))
        if title and f" {title} " in said and len(title) > best_size:
            best, best_size = match.group(2), len(title)
    return best


def plan(messages: list[Any], info: Any, *, hosts: tuple[str, ...] = ()) -> Any:
    """The ``FunctionModel`` function: one step of the planner (``hosts``: the site's own,
    as :func:`own_hosts` reads them)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    offered = {tool.name for tool in info.function_tools}
    last = messages[-1] if messages else None
    results = [p for p in getattr(last, "parts", ()) if isinstance(p, ToolReturnPart)]
    step = sum(1 for m in messages if isinstance(m, ModelResponse))
    if (
        isinstance(last, ModelRequest)
        and [p.tool_name for p in results] == ["list_pages"]
        and "read_page" in offered
    ):
        # The editor named a page by its title ("the Opening hours page"): read it.
        asked = _last_prompt(messages, ModelRequest, UserPromptPart)
        path = _page_named(asked, str(results[0].content))
        if path:
            return ModelResponse(
                parts=[ToolCallPart("read_page", {"path": path}, tool_call_id=f"offline-{step}-0")]
            )
    if isinstance(last, ModelRequest) and results:
        targets = {
            p.tool_call_id: _target(p)
            for m in messages
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        }
        lines = [OFFLINE_PREFIX]
        for part in results:
            lines += ["", *_outcome(part, targets.get(part.tool_call_id, ""))]
        return ModelResponse(parts=[TextPart("\n".join(lines))])

    prompt = ""
    if isinstance(last, ModelRequest):
        prompt = "\n".join(
            p.content
            for p in last.parts
            if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        )
    calls: list[Any] = []
    urls = _urls(prompt)
    own = [path for path in (_own_path(url, hosts) for url in urls) if path]
    if own and len(own) == len(urls) and "read_page" in offered:
        # The site's own address, written in full: read it as one of the site's pages.
        calls = [
            ToolCallPart("read_page", {"path": path}, tool_call_id=f"offline-{step}-{i}")
            for i, path in enumerate(dict.fromkeys(own))
        ]
    elif urls and not own and "fetch_external_url" in offered:
        calls = [
            ToolCallPart("fetch_external_url", {"url": url}, tool_call_id=f"offline-{step}-{i}")
            for i, url in enumerate(urls)
        ]
    elif not urls and "read_page" in offered and _path(prompt):
        calls = [
            ToolCallPart("read_page", {"path": _path(prompt)}, tool_call_id=f"offline-{step}-0")
        ]
    elif (
        not urls
        and "list_pages" in offered
        and (_PAGES_RE.search(prompt) or ("read_page" in offered and _PAGE_RE.search(prompt)))
    ):
        # A question about the site's pages, or about one page named by its title: list
        # them first (the next step reads the page whose title the message names).
        calls = [ToolCallPart("list_pages", {}, tool_call_id=f"offline-{step}-0")]
    elif not urls and "search_site" in offered and prompt.strip():
        calls = [
            ToolCallPart(
                "search_site", {"query": prompt.strip()[:200]}, tool_call_id=f"offline-{step}-0"
            )
        ]
    if calls:
        return ModelResponse(parts=calls)
    why = _why(prompt, urls, own, offered)
    return ModelResponse(parts=[TextPart(f"{OFFLINE_PREFIX}\n\n{why}")])


_CONTENT_OFF = (
    "The content tools are off, so this site's pages cannot be read: an administrator "
    "enables the “content” tool group in the admin (Tool groups)."
)


def _why(prompt: str, urls: list[str], own: list[str], offered: set[str]) -> str:
    """Why nothing was done, in plain words: the real reason, said once."""
    if own and "read_page" not in offered:
        return _CONTENT_OFF
    if own:
        return (
            "Some of these addresses are this site's own and some are not: ask about them "
            "one at a time."
        )
    if urls:
        return (
            "Reading web pages is off for you, so nothing was read: an administrator enables "
            "the “web” tool group (fetch_external_url) in the admin."
        )
    if _path(prompt) or _PAGES_RE.search(prompt) or _PAGE_RE.search(prompt):
        return _CONTENT_OFF
    if not offered:
        return (
            "The assistant's tools are off, so nothing was read: an administrator enables a "
            "tool group in the admin (Tool groups)."
        )
    if not prompt.strip():
        return "The message is empty: write a question."
    return (
        "I can read the web pages whose addresses you write in your message, or this site's "
        "pages (name a path such as /about/), but site search is off, so nothing was read."
    )


#: Characters per chunk of an offline answer streamed (as a model streams tokens).
OFFLINE_CHUNK_CHARS = 24


async def stream_plan(messages: list[Any], info: Any, *, hosts: tuple[str, ...] = ()) -> Any:
    """:func:`plan` as a stream: its text in chunks, then its tool calls, so the page
    behaves the same without a language model."""
    import json

    from pydantic_ai.messages import TextPart, ToolCallPart
    from pydantic_ai.models.function import DeltaToolCall

    response = plan(messages, info, hosts=hosts)
    for index, part in enumerate(response.parts):
        if isinstance(part, TextPart):
            text = part.content
            for start in range(0, len(text), OFFLINE_CHUNK_CHARS):
                yield text[start : start + OFFLINE_CHUNK_CHARS]
        elif isinstance(part, ToolCallPart):
            args = part.args if isinstance(part.args, str) else json.dumps(part.args or {})
            yield {
                index: DeltaToolCall(
                    name=part.tool_name, json_args=args, tool_call_id=part.tool_call_id
                )
            }


def offline_model() -> Any:
    from pydantic_ai.models.function import FunctionModel

    hosts = own_hosts()
    return FunctionModel(
        partial(plan, hosts=hosts),
        stream_function=partial(stream_plan, hosts=hosts),
        model_name="offline-planner",
    )
