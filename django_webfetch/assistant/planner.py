"""The offline rule-based planner: a Pydantic AI ``FunctionModel`` with no language model.

It keeps the demo working with no provider configured, and goes through the same loop,
approval and bounds as a real model:

- the editor's message names http(s) URLs -> ``fetch_external_url`` for each (at most 3);
- otherwise, a path of this site in the message (``/about/``) -> ``read_page`` for it
  ("Ask about this page" on a django CMS page asks so), or a question about the site's
  pages -> ``list_pages``, or a question about a page named by its title ("read the
  Opening hours page") -> ``list_pages``, then ``read_page`` for the listed page whose
  title the message names, when those content tools are offered;
- otherwise -> ``search_site`` with the message as the query, when that tool is offered;
- once the tools answered -> a reply quoting what they returned.

Every reply starts with :data:`OFFLINE_PREFIX`, so nobody mistakes it for a model's answer.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["MAX_URLS", "OFFLINE_PREFIX", "offline_model", "plan"]

OFFLINE_PREFIX = "[Offline rule-based planner - no language model was asked]"
MAX_URLS = 3
_URL_RE = re.compile(r"https?://[^\s<>\"'`]+", re.IGNORECASE)
#: A path of this site: starts at a word boundary with "/", not inside a URL.
_PATH_RE = re.compile(r"(?<![\w/:.@-])(/(?:[A-Za-z0-9._~-]+/?)*)(?=[\s?!.,;:)]|$)")
_PAGES_RE = re.compile(r"\b(?:which|what|list)\b.*\bpages\b", re.IGNORECASE | re.DOTALL)
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
    for match in _PATH_RE.finditer(_URL_RE.sub(" ", text)):
        path = match.group(1).rstrip(".")
        if len(path) <= 500:
            return path
    return ""


#: A message about one of the site's pages ("read the Opening hours page").
_PAGE_RE = re.compile(r"\bpage\b", re.IGNORECASE)
#: One line of ``list_pages``: ``[id] Title - /path/``.
_LISTED_RE = re.compile(
    r"^\[\d{1,12}\] (.{1,300}) - (/\S{0,500})(?: \(home page\))?$", re.MULTILINE
)
_WORD_RE = re.compile(r"\w+")


def _last_prompt(messages: list[Any], request: Any, prompt: Any) -> str:
    for message in reversed(messages):
        if isinstance(message, request):
            texts = [
                p.content
                for p in message.parts
                if isinstance(p, prompt) and isinstance(p.content, str)
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


def plan(messages: list[Any], info: Any) -> Any:
    """The ``FunctionModel`` function: one step of the planner."""
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
        lines = [OFFLINE_PREFIX, "", "Here is what the tools returned:"]
        for part in results:
            lines += ["", f"--- {part.tool_name} ---", str(part.content)]
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
    if urls and "fetch_external_url" in offered:
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
    if urls:
        why = "the tool that reads web pages (fetch_external_url) is not enabled for you"
    elif "search_site" in offered:
        why = "the message is empty"
    else:
        why = "no URL is in the message and site search (search_site) is not enabled for you"
    return ModelResponse(
        parts=[
            TextPart(
                f"{OFFLINE_PREFIX}\n\nI can only fetch the web pages whose URLs you write in "
                f"your message, or search this site. Nothing was done: {why}."
            )
        ]
    )


#: Characters per chunk of an offline answer streamed (as a model streams tokens).
OFFLINE_CHUNK_CHARS = 24


async def stream_plan(messages: list[Any], info: Any) -> Any:
    """:func:`plan` as a stream: its text in chunks, then its tool calls, so the page
    behaves the same without a language model."""
    import json

    from pydantic_ai.messages import TextPart, ToolCallPart
    from pydantic_ai.models.function import DeltaToolCall

    response = plan(messages, info)
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

    return FunctionModel(plan, stream_function=stream_plan, model_name="offline-planner")
