"""Response bodies under a cap: the content codings we ask for, decoded without ever
producing (or allocating) much more than the cap, so a compression bomb cannot inflate past
it.  Only ``gzip`` and ``deflate`` are asked for; any other coding is refused.
"""

from __future__ import annotations

import zlib

import httpx

from .errors import FetchError, ResponseTooLarge, UnsupportedContentEncoding

__all__ = ["ACCEPT_ENCODING", "BoundedDecoder", "content_coding"]

#: The ``Accept-Encoding`` every path sends (and the only codings it decodes).
ACCEPT_ENCODING = "gzip, deflate"


class BoundedDecoder:
    """Decode a content-coded body without ever producing more than ``limit`` bytes."""

    def __init__(self, coding: str, limit: int) -> None:
        self._coding = coding
        self._limit = limit
        self.total = 0
        self._first = True
        self._buffer = b""
        self._obj: zlib._Decompress | None = None
        if coding == "gzip":
            self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self._obj = zlib.decompressobj(zlib.MAX_WBITS)

    def _emit(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self._limit:
            raise ResponseTooLarge(detail=f"decoded body passed {self._limit} bytes")
        return data

    def feed(self, data: bytes) -> bytes:
        if self._obj is None:
            return self._emit(data)
        out = bytearray()
        pending = data
        while pending:
            try:
                chunk = self._obj.decompress(pending, self._limit - self.total + 1)
            except zlib.error as exc:
                if self._coding == "deflate" and self._first:
                    # Some servers send raw deflate without the zlib wrapper (as httpx
                    # tolerates); retry once as raw deflate.
                    self._first = False
                    self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise FetchError("the compressed body is corrupt", detail=str(exc)) from exc
            self._first = False
            out += self._emit(chunk)
            if self._obj.eof:
                rest = self._obj.unused_data
                if rest and self._coding == "gzip":
                    # Concatenated gzip members (RFC 1952 §2.2).
                    self._obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    pending = rest
                    continue
                break
            pending = self._obj.unconsumed_tail
        return bytes(out)

    def flush(self) -> bytes:
        if self._obj is None:
            return b""
        return self._emit(self._obj.flush(self._limit - self.total + 1))


def content_coding(response: httpx.Response) -> str:
    values = [
        part.strip().lower()
        for header in response.headers.get_list("content-encoding")
        for part in header.split(",")
    ]
    codings = [v for v in values if v and v != "identity"]
    if not codings:
        return "identity"
    if len(codings) == 1 and codings[0] in {"gzip", "x-gzip", "deflate"}:
        return "gzip" if codings[0] == "x-gzip" else codings[0]
    raise UnsupportedContentEncoding(detail="content-encoding not asked for")
