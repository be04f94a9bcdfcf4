"""One spelling per URL, to compare URLs for equality (issue 19, item 15).

:func:`normalise_url` maps the spellings RFC 3986 §6.2.2-6.2.3 calls equivalent to one
string, and nothing else (no guessing, no dot-segment removal, no query reordering):

- the scheme and the host in lower case (§3.1, §3.2.2); only ``http`` and ``https``;
- the default port dropped (``:80`` for http, ``:443`` for https, an empty ``:``);
- an empty path is ``/`` (§6.2.3);
- percent-encoding normalised (§6.2.2.1-2): an escaped unreserved character
  (``A-Z a-z 0-9 - . _ ~``) is written as itself, every other escape in upper-case hex,
  and a character that may not appear unescaped (non-ASCII as UTF-8, a lone ``%``, a space)
  is escaped;
- the fragment dropped (it is never sent).

A URL with userinfo, whitespace, a backslash or a control character, a port that is not
1-5 ASCII digits up to 65535, or no host normalises to ``None``: it is never equal to any
other (the guard refuses such URLs anyway).  Pure, linear in the URL's length.
"""

from __future__ import annotations

import string

__all__ = ["normalise_url"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_UNRESERVED = frozenset((string.ascii_letters + string.digits + "-._~").encode())
#: Written as they are in a path or a query (RFC 3986 gen-delims and sub-delims but ``#``
#: and ``[ ]``, which may not appear there unescaped).
_LITERAL = _UNRESERVED | frozenset(b"!$&'()*+,;=:@/?")
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _escapes(text: str) -> str | None:
    """``text`` with its percent-encoding normalised; ``None`` for a lone surrogate."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        byte = data[i]
        if byte == 0x25 and i + 2 < n and data[i + 1] in _HEX and data[i + 2] in _HEX:
            value = int(data[i + 1 : i + 3], 16)
            out.append(chr(value) if value in _UNRESERVED else f"%{value:02X}")
            i += 3
            continue
        out.append(chr(byte) if byte in _LITERAL else f"%{byte:02X}")
        i += 1
    return "".join(out)


def _host_and_port(netloc: str, scheme: str) -> str | None:
    if "@" in netloc:
        return None
    if netloc.startswith("["):
        close = netloc.find("]")
        if close < 0:
            return None
        host, rest = netloc[: close + 1], netloc[close + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else ""
    else:
        host, _, port = netloc.partition(":")
        if ":" in port:
            return None
    if not host or host == "[]":
        return None
    if port:
        if len(port) > 5 or not all(c in string.digits for c in port) or int(port) > 65535:
            return None
        if int(port) != _DEFAULT_PORTS[scheme]:
            return f"{host.lower()}:{int(port)}"
    return host.lower()


def normalise_url(url: str) -> str | None:
    """The one spelling of ``url`` (module docstring), or ``None``."""
    if any(c <= " " or c in "\\\x7f" for c in url):
        return None
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        return None
    rest = rest.partition("#")[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    netloc, tail = rest[:cut], rest[cut:]
    authority = _host_and_port(netloc, scheme)
    if authority is None:
        return None
    path, _question, query = tail.partition("?")
    normal_path = _escapes(path or "/")
    normal_query = _escapes(query)
    if normal_path is None or normal_query is None:
        return None
    tail = f"?{normal_query}" if normal_query else ""
    return f"{scheme}://{authority}{normal_path}{tail}"
