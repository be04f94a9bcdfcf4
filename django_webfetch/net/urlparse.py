"""Our own strict URL splitter (DESIGN.md §3 steps 2-3).

Lenient parsers disagree about where the host ends: WHATWG parsers treat ``\\`` as ``/`` for
special schemes and silently strip tab and newline, ``urllib.parse`` splits userinfo at the
*last* ``@``, others at the first.  A guard that checks one parser's idea of the host while
the HTTP client connects to another's is an SSRF bypass, so this module refuses every input
on which such parsers could differ, and hands the rest of the stack a normalised URL
(``ParsedURL.geturl()``) whose host no parser can misread.

Structure follows RFC 3986 §3 (``scheme "://" authority path-abempty [ "?" query ]
[ "#" fragment ]``); the authority ends at the first ``/``, ``?`` or ``#`` (§3.2), so
``http://a#@b/`` and ``http://a?@b/`` have host ``a``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .errors import EgressDenied, HostNotAllowed, InvalidURL, PortNotAllowed, SchemeNotAllowed
from .hosts import Host, parse_host, parse_port

__all__ = ["DEFAULT_PORTS", "MAX_URL_LENGTH", "ParsedURL", "join_url", "parse_url"]

MAX_URL_LENGTH = 8192
_SHOWN_URL = 500
#: The scheme rule: the only schemes any path may use, and their default ports.
DEFAULT_PORTS: Mapping[str, int] = MappingProxyType({"http": 80, "https": 443})

# RFC 3986 §3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")
# RFC 3986 Appendix B, for splitting references in join_url.
_REFERENCE = re.compile(r"(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?\Z", re.S)
# RFC 3986 §3.3/§3.4: characters allowed unescaped in a path (pchar / "/") and a query
# (pchar / "/" / "?").  "%" is handled separately (kept when it starts a valid escape).
_PATH_SAFE = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/"
)
_QUERY_SAFE = _PATH_SAFE | {"?"}
_HEXDIGITS = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class ParsedURL:
    """A URL that passed the strict syntax rules.  The fragment is dropped."""

    scheme: str
    host: Host
    port: int
    explicit_port: bool
    target: str
    query: str

    @property
    def default_port(self) -> bool:
        return self.port == DEFAULT_PORTS[self.scheme]

    @property
    def authority(self) -> str:
        text = self.host.url_text
        if self.explicit_port and not self.default_port:
            text += f":{self.port}"
        return text

    @property
    def path(self) -> str:
        """The path part of ``target`` (always starts with ``/``)."""
        return self.target.partition("?")[0]

    def geturl(self) -> str:
        return f"{self.scheme}://{self.authority}{self.target}"


def _bad_char(char: str) -> bool:
    code = ord(char)
    # C0 controls, space, DEL, C1 controls, and every Unicode whitespace character:
    # WHATWG parsers strip tab/LF/CR from anywhere and trim C0/space at the ends.
    return code < 0x21 or code == 0x7F or 0x80 <= code <= 0x9F or char.isspace()


def _encode(text: str, safe: frozenset[str]) -> str:
    """Percent-encode (UTF-8) what RFC 3986 does not allow; keep valid ``%XX`` escapes."""
    out: list[str] = []
    for index, char in enumerate(text):
        if char in safe or (
            char == "%"
            and text[index + 1 : index + 2] in _HEXDIGITS
            and text[index + 2 : index + 3] in _HEXDIGITS
        ):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return "".join(out)


_ENCODED_DOT = re.compile(r"(?:\.|%2[eE])(?:\.|%2[eE])?")
_LITERAL_DOTS = frozenset({".", ".."})


def _truncate(url: str) -> str:
    return url[:_SHOWN_URL]


def parse_url(url: str) -> ParsedURL:
    """Split and validate an absolute http(s) URL.

    Raises (all ``EgressDenied``): ``InvalidURL`` (reason ``invalid_url`` or ``userinfo``),
    ``SchemeNotAllowed``, ``HostNotAllowed`` (``host_syntax``, ``idn``,
    ``legacy_numeric_host``), ``PortNotAllowed``.
    """
    checked: object = url
    if not isinstance(checked, str):
        raise InvalidURL("invalid_url", detail="URL is not a string")
    shown = _truncate(url)
    try:
        return _parse(url)
    except EgressDenied as exc:
        exc.url = shown
        raise


def _parse(url: str) -> ParsedURL:
    if not url:
        raise InvalidURL("invalid_url", detail="empty URL")
    if len(url) > MAX_URL_LENGTH:
        raise InvalidURL("invalid_url", detail=f"URL longer than {MAX_URL_LENGTH} characters")
    if any(_bad_char(c) for c in url):
        raise InvalidURL("invalid_url", detail="whitespace or control character in URL")
    scheme, colon, rest = url.partition(":")
    if not colon or not _SCHEME.match(scheme) or rest[:2] != "//":
        raise InvalidURL("invalid_url", detail="not an absolute URL with '://'")
    scheme = scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise SchemeNotAllowed("scheme", detail="scheme is not http or https")
    rest = rest[2:]

    # RFC 3986 §3.2: the authority ends at the first "/", "?" or "#".
    end = len(rest)
    for delimiter in "/?#":
        found = rest.find(delimiter)
        if 0 <= found < end:
            end = found
    authority, rest = rest[:end], rest[end:]
    rest = rest.partition("#")[0]  # the fragment is never sent
    path, _, query = rest.partition("?")
    if "\\" in authority or "\\" in path:
        # WHATWG treats "\" as "/" for http(s): "http://evil\@good/" is host "evil" there.
        raise InvalidURL("invalid_url", detail="backslash in authority or path")
    if "@" in authority:
        # Userinfo, even empty: parsers disagree on which "@" ends it (RFC 3986 §3.2.1,
        # §7.6 warns about it as a semantic attack).
        raise InvalidURL("userinfo", detail="userinfo in authority")

    host_text, port_text, has_port = _split_authority(authority)
    host = parse_host(host_text)
    port = DEFAULT_PORTS[scheme]
    if has_port:
        try:
            port = parse_port(port_text)
        except ValueError as exc:
            raise PortNotAllowed("port", detail="port is not a number 1..65535") from exc

    path = _encode(path, _PATH_SAFE) or "/"
    # Dot segments are removed here (RFC 3986 §6.2.2.3), as httpx does before sending, so
    # the guard, the transport and the audit log all see the same path; a percent-encoded
    # dot segment is refused, since servers that decode before normalising would treat it
    # as ".." and step out of a configured endpoint's base path.
    if any(
        _ENCODED_DOT.fullmatch(segment) and segment not in _LITERAL_DOTS
        for segment in path.split("/")
    ):
        raise InvalidURL("invalid_url", detail="percent-encoded dot segment in path")
    path = _remove_dot_segments(path) or "/"
    query = _encode(query, _QUERY_SAFE)
    target = f"{path}?{query}" if query else path
    return ParsedURL(scheme, host, port, has_port, target, query)


def _split_authority(authority: str) -> tuple[str, str, bool]:
    """(host, port text, port present) of an authority without userinfo."""
    if authority[:1] == "[":
        close = authority.find("]")
        if close < 0:
            raise HostNotAllowed("host_syntax", detail="unterminated IPv6 literal")
        after = authority[close + 1 :]
        if after and after[0] != ":":
            raise HostNotAllowed("host_syntax", detail="junk after IPv6 literal")
        return authority[: close + 1], after[1:], bool(after)
    if authority.count(":") > 1:
        raise HostNotAllowed("host_syntax", detail="IPv6 literal without brackets")
    host, colon, port = authority.partition(":")
    return host, port, bool(colon)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4."""
    output: list[str] = []
    while path:
        if path.startswith("../"):
            path = path[3:]
        elif path.startswith("./") or path.startswith("/./"):
            path = path[2:]
        elif path == "/.":
            path = "/"
        elif path.startswith("/../"):
            path = path[3:]
            if output:
                output.pop()
        elif path == "/..":
            path = "/"
            if output:
                output.pop()
        elif path in (".", ".."):
            path = ""
        else:
            start = 1 if path[0] == "/" else 0
            slash = path.find("/", start)
            segment, path = (path, "") if slash < 0 else (path[:slash], path[slash:])
            output.append(segment)
    return "".join(output)


def join_url(base: ParsedURL, reference: str) -> str:
    """Resolve ``reference`` (e.g. a ``Location`` header) against ``base``: RFC 3986 §5.2.

    A reference with a scheme is returned unchanged, whatever the scheme, so the caller's
    ``parse_url`` refuses ``file:`` and friends.  The result is not validated here: always
    pass it to ``parse_url``.
    """
    match = _REFERENCE.match(reference)
    assert match is not None  # every string matches RFC 3986 Appendix B's expression
    scheme, authority, path, query, fragment = match.groups()
    if scheme is not None:
        return reference  # strict resolution (§5.2.2): T = R
    if authority is not None:
        target_authority = authority
        target_path = _remove_dot_segments(path)
        target_query = query
    else:
        target_authority = base.authority
        if path == "":
            target_path = base.path
            target_query = query if query is not None else (base.query or None)
        else:
            if path.startswith("/"):
                target_path = _remove_dot_segments(path)
            else:
                # §5.2.3 merge: the base always has an authority and a non-empty path.
                merged = base.path[: base.path.rfind("/") + 1] + path
                target_path = _remove_dot_segments(merged)
            target_query = query
    result = f"{base.scheme}://{target_authority}{target_path}"
    if target_query is not None:
        result += f"?{target_query}"
    if fragment is not None:
        result += f"#{fragment}"
    return result
