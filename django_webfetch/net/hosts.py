"""Host syntax (DESIGN.md §3 steps 3 and 9) and allow/deny list entries (§3, last paragraph).

``parse_host`` accepts exactly two things: an ASCII LDH host name (RFC 1123 §2.1, RFC 952)
or an IP literal (a canonical dotted quad, or a bracketed IPv6 address, RFC 3986 §3.2.2).
Everything a lenient parser would "fix up" is refused instead:

- IDN and any other non-ASCII (``idn``): UTS #46 mapping turns fullwidth letters, enclosed
  letters and the Unicode full stops U+3002/U+FF0E/U+FF61 into ASCII, so a name we saw is
  not the name that gets resolved.  Punycode ``xn--`` A-labels are plain LDH and work.
- legacy numeric forms (``legacy_numeric_host``): ``inet_aton`` and the WHATWG URL standard
  read ``2130706433``, ``0177.0.0.1``, ``0x7f.1`` and ``127.1`` as 127.0.0.1.  Following the
  WHATWG "ends in a number" rule, any host whose last label is numeric and which is not a
  canonical dotted quad is refused.
- percent-encoding, whitespace, control characters, backslashes, ``@``, underscores, zone
  ids (``host_syntax``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

from .errors import HostNotAllowed, PolicyError

__all__ = [
    "EntryKind",
    "Host",
    "HostKind",
    "HostList",
    "ListEntry",
    "parse_host",
    "parse_list_entry",
    "parse_port",
    "spells_address",
]

_LDH = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_LDH_DOT = _LDH | {"."}
_DIGITS = frozenset("0123456789")
_HEX = frozenset("0123456789abcdef")
_IPV6_CHARS = frozenset("0123456789abcdefABCDEF:.")
_MAX_NAME = 253  # RFC 1035 §2.3.4 (255 octets on the wire = 253 characters of text)
_MAX_LABEL = 63  # RFC 1035 §2.3.4


class HostKind(str, enum.Enum):
    NAME = "name"
    IPV4 = "ipv4"
    IPV6 = "ipv6"


@dataclass(frozen=True)
class Host:
    """A validated host.

    ``name`` is the lower-case ASCII name without a trailing dot, or the canonical text of
    the IP literal (``ipaddress``'s, without brackets).  ``address`` is set for literals.
    """

    kind: HostKind
    name: str
    address: IPv4Address | IPv6Address | None = None

    @property
    def is_ip(self) -> bool:
        return self.address is not None

    @property
    def url_text(self) -> str:
        """The host as written in a URL authority (IPv6 in brackets)."""
        return f"[{self.name}]" if self.kind is HostKind.IPV6 else self.name


def _fail(reason: str, detail: str) -> HostNotAllowed:
    return HostNotAllowed(reason, detail=detail)


def _is_numeric_label(label: str) -> bool:
    """WHATWG URL "ends in a number": all decimal digits, or ``0x`` + hex digits (maybe none)."""
    if label[:2] == "0x":
        return all(c in _HEX for c in label[2:])
    return all(c in _DIGITS for c in label)


def _canonical_quad(labels: list[str]) -> IPv4Address | None:
    """The address if ``labels`` is a canonical dotted quad (RFC 3986 §3.2.2 dec-octet)."""
    if len(labels) != 4:
        return None
    for label in labels:
        if not all(c in _DIGITS for c in label):
            return None
        if len(label) > 3 or (len(label) > 1 and label[0] == "0") or int(label) > 255:
            return None
    return IPv4Address(".".join(labels))


def _parse_ipv6_literal(raw: str) -> Host:
    inner = raw[1:-1]
    if "%" in inner:
        # RFC 6874 zone ids (``%25eth0``) name a local interface: never a fetch target.
        raise _fail("host_syntax", "IPv6 zone id")
    if not inner or not all(c in _IPV6_CHARS for c in inner):
        raise _fail("host_syntax", "invalid IPv6 literal")
    try:
        address = IPv6Address(inner)
    except ValueError as exc:
        raise _fail("host_syntax", "invalid IPv6 literal") from exc
    return Host(HostKind.IPV6, str(address), address)


def parse_host(raw: str) -> Host:
    """Validate the host component of a URL authority (IPv6 in brackets).

    Raises ``HostNotAllowed`` with reason ``host_syntax``, ``idn`` or
    ``legacy_numeric_host``.
    """
    checked: object = raw  # typed callers pass str; untyped ones are refused, not crashed
    if not isinstance(checked, str) or not checked:
        raise _fail("host_syntax", "empty host")
    for char in raw:
        code = ord(char)
        if code < 0x21 or code == 0x7F or (0x80 <= code <= 0x9F) or char.isspace():
            raise _fail("host_syntax", "whitespace or control character")
    if not raw.isascii():
        raise _fail("idn", "non-ASCII host")
    if raw[0] == "[" and raw[-1] == "]":
        return _parse_ipv6_literal(raw)

    name = raw.lower()
    if not all(c in _LDH_DOT for c in name):
        # Percent-encoding, "@", "\\", ":", "_", "*", brackets...: refused before any
        # numeric interpretation, so "%31%32%37.0.0.1" is a syntax error, not a number.
        raise _fail("host_syntax", "character outside letters, digits, hyphen and dot")
    trailing_dot = name.endswith(".")
    if trailing_dot:
        name = name[:-1]  # one trailing dot: the absolute form of the same name
    labels = name.split(".")
    if any(not label for label in labels):
        raise _fail("host_syntax", "empty label")
    if _is_numeric_label(labels[-1]):
        address = None if trailing_dot else _canonical_quad(labels)
        if address is None:
            raise _fail("legacy_numeric_host", "numeric host that is not a canonical dotted quad")
        return Host(HostKind.IPV4, str(address), address)
    if len(name) > _MAX_NAME:
        raise _fail("host_syntax", "name longer than 253 characters")
    for label in labels:
        # RFC 1123 §2.1 LDH labels; underscores (legal in DNS, not in host names) refused.
        if len(label) > _MAX_LABEL or label[0] == "-" or label[-1] == "-":
            raise _fail("host_syntax", "label is not letters, digits and inner hyphens")
    return Host(HostKind.NAME, name, None)


def parse_port(raw: str) -> int:
    """A port: 1 to 5 ASCII digits, 1..65535.  Raises ``ValueError`` otherwise."""
    if not 0 < len(raw) <= 5 or not all(c in _DIGITS for c in raw):
        raise ValueError("port must be 1 to 5 digits")
    port = int(raw)
    if not 0 < port < 65536:
        raise ValueError("port must be 1..65535")
    return port


class EntryKind(str, enum.Enum):
    NAME = "name"
    SUFFIX = "suffix"
    ADDRESS = "address"


@dataclass(frozen=True)
class ListEntry:
    """One allowlist/denylist entry.

    ``value`` is the lower-case name (``NAME``), the suffix *without* the leading ``*.``
    (``SUFFIX``: ``"example.org"`` for ``*.example.org``) or the canonical IP text
    (``ADDRESS``).  ``raw`` is the entry as written.
    """

    kind: EntryKind
    value: str
    address: IPv4Address | IPv6Address | None
    port: int | None
    raw: str

    def matches_port(self, port: int) -> bool:
        return self.port is None or self.port == port


def _entry_error(raw: object, why: str) -> PolicyError:
    shown = raw[:100] if isinstance(raw, str) else raw
    return PolicyError(f"invalid host list entry {shown!r}: {why}")


def parse_list_entry(raw: str) -> ListEntry:
    """Parse one list entry (``docs.example.org``, ``*.example.org:443``, ``[2001:db8::1]``...).

    Does not strip whitespace: an entry with whitespace anywhere is invalid, so a caller
    reading entries from a text field strips them first.  Raises ``PolicyError``.
    """
    checked: object = raw
    if not isinstance(checked, str):
        raise _entry_error(checked, "not a string")
    if not raw:
        raise _entry_error(raw, "empty entry")
    if any(ord(c) < 0x21 or ord(c) == 0x7F or c.isspace() for c in raw):
        raise _entry_error(raw, "whitespace or control character")
    if not raw.isascii():
        raise _entry_error(raw, "non-ASCII (IDN) names are not supported; use the xn-- form")
    if "/" in raw or "@" in raw:
        raise _entry_error(
            raw, "a host name, *.suffix or exact IP address is expected, not a URL or a range"
        )

    port: int | None = None
    if raw[0] == "[":
        close = raw.find("]")
        host_text, rest = raw[: close + 1], raw[close + 1 :]
        if close < 0 or (rest and rest[0] != ":"):
            raise _entry_error(raw, "malformed bracketed IPv6 address")
        if rest:
            port = _entry_port(raw, rest[1:])
    elif raw.count(":") > 1:
        host_text = f"[{raw}]"  # a bare IPv6 address; it cannot carry a port
    else:
        host_text, colon, port_text = raw.partition(":")
        if colon:
            port = _entry_port(raw, port_text)

    suffix = host_text[:2] == "*."
    if suffix:
        host_text = host_text[2:]
    if "*" in host_text:
        raise _entry_error(raw, "a wildcard is only allowed as a leading '*.' label")
    try:
        host = parse_host(host_text)
    except HostNotAllowed as exc:
        raise _entry_error(raw, f"not a valid host ({exc.reason})") from exc
    if suffix:
        if host.kind is not HostKind.NAME:
            raise _entry_error(raw, "'*.' must be followed by a host name")
        return ListEntry(EntryKind.SUFFIX, host.name, None, port, raw)
    if host.kind is HostKind.NAME:
        return ListEntry(EntryKind.NAME, host.name, None, port, raw)
    return ListEntry(EntryKind.ADDRESS, host.name, host.address, port, raw)


def _entry_port(raw: str, text: str) -> int:
    try:
        return parse_port(text)
    except ValueError as exc:
        raise _entry_error(raw, "port must be a number 1..65535") from exc


@dataclass(frozen=True)
class HostList:
    """A parsed allowlist or denylist.  Build with ``HostList.parse`` (fail closed)."""

    entries: tuple[ListEntry, ...] = ()

    @classmethod
    def parse(cls, raw_entries: Iterable[str]) -> HostList:
        """Parse every entry; ``PolicyError`` if any one is invalid."""
        checked: object = raw_entries
        if isinstance(checked, str):
            raise PolicyError("a host list must be a list of entries, not one string")
        return cls(tuple(parse_list_entry(raw) for raw in raw_entries))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def match_host(self, host: Host, port: int) -> ListEntry | None:
        """The first entry matching the URL host and port, or None.

        Name entries match name hosts exactly; ``*.suffix`` matches strict subdomains only
        (never the apex); address entries match IP literals (packed comparison).
        """
        if host.address is not None:
            return self.match_address(host.address, port)
        for entry in self.entries:
            if not entry.matches_port(port):
                continue
            if entry.kind is EntryKind.NAME and entry.value == host.name:
                return entry
            if entry.kind is EntryKind.SUFFIX and host.name.endswith("." + entry.value):
                return entry
        return None

    def match_address(self, address: IPv4Address | IPv6Address, port: int) -> ListEntry | None:
        """The first address entry equal to ``address`` (packed comparison), or None."""
        packed = address.packed
        for entry in self.entries:
            if (
                entry.address is not None
                and entry.address.packed == packed
                and entry.matches_port(port)
            ):
                return entry
        return None


def _address_spellings(address: IPv4Address | IPv6Address) -> tuple[tuple[str, ...], str, str]:
    """``(dotted labels, dashed form, hex form)`` of an address as wildcard-DNS services
    write it in a name (``1.2.3.4`` / ``1-2-3-4`` / ``01020304``; IPv6: ``2001-db8--1``)."""
    if isinstance(address, IPv4Address):
        dotted = tuple(str(address).split("."))
        return dotted, "-".join(dotted), address.packed.hex()
    return (), str(address).replace(":", "-"), address.packed.hex()


def spells_address(name: str, address: IPv4Address | IPv6Address) -> bool:
    """Do the labels of ``name`` spell ``address``, as wildcard-DNS services answer
    (``1.2.3.4.nip.io``, ``app-1-2-3-4.sslip.io``, ``01020304.x``, rbndr's
    ``01020304.05060708.rbndr.us``)?  A host under a ``*.suffix`` grant that does is a
    grant of whatever address its name says (the guard refuses it, ``host_spells_address``).
    """
    labels = name.lower().split(".")
    dotted, dashed, hexed = _address_spellings(address)
    width = len(dotted)
    if width and any(
        tuple(labels[start : start + width]) == dotted for start in range(len(labels))
    ):
        return True
    return any(label in (dashed, hexed) or label.endswith("-" + dashed) for label in labels)
