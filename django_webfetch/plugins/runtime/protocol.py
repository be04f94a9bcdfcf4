"""The runtime's wire format: length-prefixed JSON messages over a Unix socketpair.

Each message is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (one
object with an ``"op"``).  Bytes travel base64-encoded.  Both ends bound what they read:
a length over the reader's cap ends the connection (``ProtocolError``) before the body is
read, so a hostile guest cannot make the host buffer more than the cap.

Pure standard library: the guest imports it before any plugin code, with no Django.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import select
import socket
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "MAX_MESSAGE",
    "MAX_REFUSED_CHARS",
    "MAX_REFUSED_PATHS",
    "Channel",
    "ChannelClosed",
    "ChannelTimeout",
    "MessageTooLarge",
    "ProtocolError",
    "UnencodableMessage",
    "decode_bytes",
    "depth",
    "encode",
    "encode_bytes",
    "parse",
    "readable",
    "shape",
]


def readable(fd: Any, timeout: float) -> bool:
    """Whether ``fd`` (a descriptor or an object with ``fileno()``) has data within
    ``timeout`` seconds.  ``poll``, not ``select``: ``select`` refuses a descriptor numbered
    1024 or above, which a busy host process has."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, math.ceil(timeout * 1000))))


#: The default cap of one message (either direction).
MAX_MESSAGE = 8 * 1024 * 1024
#: The guest's report of its Landlock (``contained``): at most this many of the paths whose
#: rule the kernel refused, each in at most this many characters (the count is whole).
MAX_REFUSED_PATHS = 8
MAX_REFUSED_CHARS = 200
#: The deepest nesting of arrays and objects a message may have (checked before parsing).
MAX_DEPTH = 64
#: The most values (objects, arrays, keys, strings, numbers, literals) a message may hold,
#: counted before parsing: a parsed value costs the reader up to ~200 bytes whatever its
#: size on the wire (``{}`` is 3 bytes there and 72 in the reader), so this, not the byte
#: cap, bounds what parsing one message costs (issue 30, finding 8).  The largest message
#: of the protocol (a manifest, a request's headers) holds a few thousand.
MAX_VALUES = 1 << 14
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_VALUE_STARTS = bytes(b for b in range(256) if b not in b"[{,:")
#: The scan's slice of the message: what it holds at once besides the message.
_SCAN_CHUNK = 1 << 16
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_HEADER = struct.Struct("!I")
#: How often a waiting reader wakes up to run its ``poll`` (CPU limit, liveness).
SLICE = 0.05


class ProtocolError(Exception):
    """The peer sent something that is not a message of this protocol (or too large)."""


class ChannelClosed(ProtocolError):
    """The peer closed its end (it exited or crashed)."""


class ChannelTimeout(ProtocolError):
    """No whole message arrived before the deadline."""


class MessageTooLarge(ProtocolError):
    """The peer announced a message over the reader's cap; its body was not read."""

    def __init__(self, length: int, cap: int) -> None:
        super().__init__(f"message of {length} bytes over the cap of {cap}")
        self.length = length
        self.cap = cap


class UnencodableMessage(ProtocolError, ValueError):
    """A message this end cannot write as UTF-8 JSON (a lone surrogate in a string, a value
    JSON has no form for): nothing of it was sent, and the channel is as it was."""


def encode(message: Mapping[str, Any]) -> bytes:
    """``message`` as the bytes ``Channel.send`` writes (strict UTF-8 JSON), or
    ``UnencodableMessage``: never a foreign error (issue 30, attack 16, finding 3: a lone
    surrogate in a tool's argument raised ``UnicodeEncodeError`` out of the call)."""
    try:
        return json.dumps(message, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError is one
        raise UnencodableMessage(
            f"a message that is not UTF-8 JSON ({type(exc).__name__})"
        ) from exc


def depth(body: bytes) -> int:
    """How deep arrays and objects nest in the JSON text ``body`` (``shape``, read whole)."""
    return shape(body, len(body) + 1)[0]


def shape(body: bytes, most: int = MAX_VALUES) -> tuple[int, int]:
    """How deep arrays and objects nest in the JSON text ``body`` and how many values it
    holds, found by a linear scan (no recursion: a hostile message cannot exhaust the
    reader's stack before it is refused) that holds at most a slice of ``_SCAN_CHUNK``
    bytes' worth of pieces at once besides two copies of ``body`` (issue 30, finding 8:
    splitting the whole message at its quotes cost ~10 bytes per byte).  The scan stops
    at the first slice that takes the count over ``most`` (the depth is then of what it
    read).  Strings are skipped first; brackets, commas and colons in them do not count.
    Every value but the first follows a ``[``, ``{`` (a key), ``,`` or ``:`` outside a
    string, so their count plus one bounds the values from above."""
    # Escapes first (an escaped backslash, then an escaped quote: read left to right as
    # the decoder does), then every other segment between two quotes is outside a string.
    # Only bytes methods: linear by construction (a regex skipping strings retried at each
    # escaped quote of an unterminated string, quadratic in the message).
    plain = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    inside = False
    level = deepest = 0
    values = 1
    for start in range(0, len(plain), _SCAN_CHUNK):
        pieces = plain[start : start + _SCAN_CHUNK].split(b'"')
        outside = b"".join(pieces[1 if inside else 0 :: 2])
        if len(pieces) % 2 == 0:  # an odd number of quotes in this slice
            inside = not inside
        del pieces
        values += len(outside.translate(None, _NOT_VALUE_STARTS))
        brackets = outside.translate(None, _NOT_BRACKETS)
        after = level + len(brackets) - 2 * (brackets.count(b"]") + brackets.count(b"}"))
        if after < 0:
            # More brackets closed than opened: no JSON text (the parse refuses it), and
            # never walked: each bracket walked is one opened (a value, so bounded by
            # ``most``) or one closed after it (issue 30, round 31, finding 2: 8 MiB of
            # ``]`` walked whole cost the host 0.6 s of CPU).
            break
        steps = itertools.accumulate(map(_STEP.__getitem__, brackets), initial=level)
        deepest = max(itertools.chain((deepest,), steps))
        level = after
        if values > most:
            break
    return deepest, values


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if math.isinf(number):  # ``1e999``: valid JSON that no JSON writer here can write back
        raise ValueError("a number out of range")
    return number


def parse(body: bytes, what: str = "a message") -> Any:
    """The one reader of JSON a peer sent (a whole message, or a JSON text a message
    carries: a tool's ``json`` result, issue 30 attack 6, finding 3): the value, or
    ``ProtocolError``.  Bounded before parsing, whatever the text: at most ``MAX_DEPTH``
    deep and ``MAX_VALUES`` values (``shape``); the caller bounds its bytes.  Strict UTF-8
    and strict JSON (no ``NaN``, ``Infinity`` or number too large for a float, which the
    senders never write: ``allow_nan=False``)."""
    deepest, values = shape(body)
    if deepest > MAX_DEPTH:
        raise ProtocolError(f"{what} nested deeper than {MAX_DEPTH}")
    if values > MAX_VALUES:
        raise ProtocolError(f"{what} of more than {MAX_VALUES} values")
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constant, parse_float=_finite)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"{what} that is not UTF-8 JSON") from exc


def encode_bytes(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_bytes(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ProtocolError("bytes must travel as base64 text")
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise ProtocolError("invalid base64") from exc


class Channel:
    """One end of the socketpair.  Not thread-safe: one reader, one writer at a time."""

    def __init__(self, sock: socket.socket, *, max_message: int = MAX_MESSAGE) -> None:
        self.sock = sock
        self.max_message = max_message

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    def send(self, message: dict[str, Any], deadline: float | None = None) -> None:
        """Send one message; with a ``deadline``, a peer that stops reading cannot hold
        the sender past it (``ChannelTimeout``).  A message that cannot be encoded raises
        ``UnencodableMessage`` before any byte of it is written."""
        body = encode(message)
        if len(body) > self.max_message:
            raise ProtocolError(f"message of {len(body)} bytes over the cap")
        if deadline is not None:
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            self.sock.sendall(_HEADER.pack(len(body)) + body)
        except TimeoutError as exc:
            raise ChannelTimeout("the peer stopped reading") from exc
        except OSError as exc:
            raise ChannelClosed(f"send failed: {type(exc).__name__}") from exc
        finally:
            if deadline is not None:
                self.sock.settimeout(None)

    def recv(
        self,
        deadline: float | None = None,
        *,
        max_message: int | None = None,
        poll: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """The next message; ``deadline`` on ``time.monotonic()``; ``poll`` is called every
        few milliseconds while waiting (it may raise to end the wait)."""
        cap = self.max_message if max_message is None else max_message
        (length,) = _HEADER.unpack(self._read(_HEADER.size, deadline, poll))
        if length > cap:
            raise MessageTooLarge(length, cap)
        message = parse(self._read(length, deadline, poll))
        if not isinstance(message, dict) or not isinstance(message.get("op"), str):
            raise ProtocolError("a message without an op")
        return message

    def _read(self, size: int, deadline: float | None, poll: Callable[[], None] | None) -> bytes:
        chunks: list[bytes] = []
        missing = size
        while missing:
            if deadline is not None or poll is not None:
                self._wait(deadline, poll)
            try:
                chunk = self.sock.recv(min(missing, 1 << 20))
            except OSError as exc:
                raise ChannelClosed(f"receive failed: {type(exc).__name__}") from exc
            if not chunk:
                raise ChannelClosed("the peer closed the channel")
            chunks.append(chunk)
            missing -= len(chunk)
        return b"".join(chunks)

    def _wait(self, deadline: float | None, poll: Callable[[], None] | None) -> None:
        while True:
            if poll is not None:
                poll()
            wait = SLICE
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout("no message before the deadline")
                wait = min(wait, left)
            if readable(self.sock, wait):
                return
