"""The guard decides on the caller's URL string, as written, on every path.

httpx (and httpx2) normalise a URL when they parse it: ``http://1.1.1.1:８０/``, ``:8_0``
and Arabic-Indic port digits become the default port, a Unicode host becomes its ``xn--``
form.  ``net.fetch`` refuses those (``port``, ``idn``), so a guard that saw only httpx's
parse would connect where ``net.fetch`` refuses.  The clients this package hands out (the
guarded httpx clients, the httpx2 bridge, the plugin client) therefore keep the caller's
string in the request's ``RAW_URL`` extension before httpx parses it, and the guarded
transport checks *that* string; the URL httpx built must then name the same origin
(scheme, host, port) as the guard's parse, or the request is refused (``invalid_url``).

Redirects are decided the same way: the next URL is the one ``net.fetch`` would check (the
``Location`` values joined, resolved against the checked URL by our own ``join_url``), kept
in ``RAW_URL`` for the follow-up request; a ``Location`` httpx cannot parse is refused with
the guard's verdict on that URL instead of httpx's ``RemoteProtocolError``.
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import ip_address
from typing import Any, Protocol

from .errors import EgressDenied, InvalidURL, WebFetchError
from .urlparse import DEFAULT_PORTS, join_url, parse_url

__all__ = [
    "CHECKED_URL",
    "FOLLOW",
    "RAW_URL",
    "keep_built",
    "mark_follow",
    "next_url",
    "on_redirect",
    "same_origin",
    "stamp",
    "syntax_verdict",
]

#: Request extension: the caller's URL string, before httpx parsed it.
RAW_URL = "webfetch.url"
#: Response extension: the URL the guard checked for this response (normalised).
CHECKED_URL = "webfetch.checked_url"
#: Request extension: whether the client follows this request's redirects.
FOLLOW = "webfetch.follow"


class _URL(Protocol):
    @property
    def scheme(self) -> str: ...

    @property
    def raw_host(self) -> bytes: ...

    @property
    def port(self) -> int | None: ...


def stamp(request: Any, url: object) -> Any:
    """Keep ``url`` (when it is the caller's string) on ``request`` for the guard."""
    if isinstance(url, str):
        request.extensions[RAW_URL] = url
    return request


def keep_built(
    build: Callable[[], Any],
    url: object,
    unbuildable: tuple[type[BaseException], ...],
    refuse: Callable[[object], WebFetchError],
) -> Any:
    """A client's ``build_request``: the request, with the caller's string kept; a URL the
    library cannot build a request for is refused (``refuse``) with the guard's verdict."""
    try:
        request = build()
    except unbuildable:
        raise refuse(url) from None
    return stamp(request, url)


def mark_follow(request: Any, follow: object, default: bool) -> None:
    """A client's ``send``: note whether this request's redirects are followed."""
    request.extensions[FOLLOW] = follow if isinstance(follow, bool) else default


def syntax_verdict(url: object) -> EgressDenied:
    """The refusal for a URL httpx could not parse: the guard's syntax verdict on the
    caller's string when it has one (``scheme``, ``port``, ``idn``, ...), else
    ``invalid_url``."""
    if not isinstance(url, str):
        return InvalidURL(detail="the URL must be a string")
    try:
        parse_url(url)
    except EgressDenied as exc:
        return exc
    return InvalidURL(detail="httpx cannot parse a URL the guard can")


def _host(text: str) -> str:
    text = text.strip("[]").lower().rstrip(".")
    try:
        return str(ip_address(text))
    except ValueError:
        return text


def same_origin(sent: _URL, scheme: str, host: str, port: int) -> bool:
    """Whether the URL httpx built names the origin the guard checked."""
    try:
        sent_host = sent.raw_host.decode("ascii")
    except UnicodeDecodeError:
        return False
    sent_port = sent.port or DEFAULT_PORTS.get(sent.scheme)
    return (sent.scheme, _host(sent_host), sent_port) == (scheme, _host(host), port)


def next_url(checked: str, location: str) -> str:
    """The redirect target ``net.fetch`` would check next (see ``Fetcher.fetch``)."""
    return join_url(parse_url(checked), location)


def on_redirect(response: Any, refuse: Callable[[str, EgressDenied], WebFetchError]) -> None:
    """A client's response hook, run before httpx (or httpx2) builds a redirect request.

    The follow-up request carries the next URL ``net.fetch`` would check (``RAW_URL``);
    a ``Location`` the client library cannot parse is refused with the guard's verdict on
    that URL (recorded by ``refuse``), never with the library's ``RemoteProtocolError``.
    """
    checked = response.extensions.get(CHECKED_URL)
    if not response.has_redirect_location or not isinstance(checked, str):
        return
    target = next_url(checked, response.headers.get("location"))
    response.request.extensions[RAW_URL] = target
    try:
        type(response.request.url)(response.headers["location"])
    except Exception:  # the library's InvalidURL (httpx's or httpx2's)
        raise refuse(target, syntax_verdict(target)) from None
