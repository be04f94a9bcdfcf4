"""Decode a fetched body: charset from the header, else BOM, else ``<meta>``, else UTF-8."""

from __future__ import annotations

import codecs
import re

import webencodings

__all__ = ["decode_body", "sniff_meta_charset"]

_UTF8 = codecs.lookup("utf-8")
_BOMS: tuple[tuple[bytes, codecs.CodecInfo], ...] = (
    (codecs.BOM_UTF8, _UTF8),
    (codecs.BOM_UTF16_LE, codecs.lookup("utf-16-le")),
    (codecs.BOM_UTF16_BE, codecs.lookup("utf-16-be")),
)

_META_WINDOW = 1024

# Linear byte patterns: each quantifier applies to a single character class.
_COMMENT_END_RE = re.compile(rb"-->")
_TAG_END_RE = re.compile(rb">")
_META_RE = re.compile(rb"<meta[\t\n\f\r /]", re.IGNORECASE)
_ATTR_RE = re.compile(
    rb"[\t\n\f\r /]*([^\t\n\f\r />][^\t\n\f\r />=]*)"
    rb"(?:[\t\n\f\r ]*=[\t\n\f\r ]*(\"[^\"]*\"?|'[^']*'?|[^\t\n\f\r >]*))?"
)
_CHARSET_IN_CONTENT_RE = re.compile(
    rb"charset[\t\n\f\r ]*=[\t\n\f\r ]*[\"']?([^\t\n\f\r \"';]*)", re.I
)


def _codec(label: str | bytes | None) -> codecs.CodecInfo | None:
    """The Python codec for a WHATWG encoding label, or None when it names none we use."""
    if label is None:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "replace")
    encoding = webencodings.lookup(label)
    if encoding is None or encoding.name == "replacement":
        return None
    return encoding.codec_info


def _meta_attributes(head: bytes, pos: int) -> tuple[dict[bytes, bytes], int]:
    attributes: dict[bytes, bytes] = {}
    size = len(head)
    while pos < size:
        if head[pos : pos + 1] == b">":
            return attributes, pos + 1
        match = _ATTR_RE.match(head, pos)
        if match is None or match.end() == pos:  # only trailing separators were left
            break
        value = match.group(2) or b""
        if value[:1] in (b'"', b"'"):
            value = value[1:-1] if len(value) > 1 and value[-1:] == value[:1] else value[1:]
        attributes.setdefault(match.group(1).lower(), value)
        pos = match.end()
    return attributes, size


def sniff_meta_charset(body: bytes) -> codecs.CodecInfo | None:
    """The codec named by a ``<meta>`` in the first 1,024 bytes (WHATWG prescan, simplified)."""
    head = body[:_META_WINDOW]
    pos = 0
    while True:
        pos = head.find(b"<", pos)
        if pos < 0:
            return None
        if head.startswith(b"<!--", pos):
            end = _COMMENT_END_RE.search(head, pos + 4)
            if end is None:
                return None
            pos = end.end()
            continue
        if _META_RE.match(head, pos):
            attributes, pos = _meta_attributes(head, pos + 5)
            label: bytes | None = attributes.get(b"charset")
            if label is None and attributes.get(b"http-equiv", b"").lower() == b"content-type":
                found = _CHARSET_IN_CONTENT_RE.search(attributes.get(b"content", b""))
                label = found.group(1) if found else None
            codec = _codec(label)
            if codec is not None:
                # A meta cannot truly declare UTF-16: the bytes read so far were ASCII.
                return _UTF8 if codec.name.startswith("utf-16") else codec
            continue
        end = _TAG_END_RE.search(head, pos + 1)
        if end is None:
            return None
        pos = end.end()


def decode_body(body: bytes, charset: str | None, *, html: bool) -> str:
    """Decode ``body``; undecodable bytes become U+FFFD, never an exception."""
    codec = _codec(charset)
    start = 0
    if codec is None:
        for bom, bom_codec in _BOMS:
            if body.startswith(bom):
                codec, start = bom_codec, len(bom)
                break
    if codec is None and html:
        codec = sniff_meta_charset(body)
    text, _ = (codec or _UTF8).decode(body[start:], "replace")
    return text[1:] if text.startswith("\ufeff") else text
