"""A scripted LLM provider in the lab: the real OpenAI chat-completions and Anthropic Messages
wire formats over HTTPS, on a public-looking lab address.

This is the one third-party boundary the tests may fake.  The app reaches it as a configured
endpoint of the ``assistant`` group, through the guard, with the real ``openai`` /
``anthropic`` SDK client code (via Pydantic AI) doing the requests.

A test scripts the turns: each new provider request takes the next :class:`Turn` (or calls
it with the request, to answer from what the app sent).  Every request is recorded.

The script is keyed by request, not popped per delivery: the app retries a request that
timed out (``provider_timeout`` is retry-safe) with the very same body, and that repeat gets
the same turn again (or the turn's ``repeat``), never the next one.  On a busy machine an
answer can outlast the timeout; a popped script would let the retry eat the next turn and
the run end on "(script exhausted)".
"""

from __future__ import annotations

import json
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["HOST", "PORT", "ProviderServer", "Turn"]

HOST = "llm.lab.example"
PORT = 9443


@dataclass
class Turn:
    """One scripted provider answer (format-neutral)."""

    text: str = ""
    #: ``(name, arguments)``: a dict, or a raw string sent as it is (OpenAI only).
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)
    status: int = 200
    #: Send this body as it is (garbage, a truncated JSON...).
    raw: bytes | None = None
    #: Sleep this long before answering (a provider timeout).
    delay: float = 0.0
    #: Wait for this event before answering (a worker killed mid-request).
    hold: threading.Event | None = None
    #: Stop reason sent as it is ("length" / "max_tokens": cut at the token limit).
    finish: str | None = None
    #: The model name the server reports (default: the one asked for).
    model: str | None = None
    #: The error body of a non-200 answer (default: a generic scripted failure).
    error: Any = None
    #: Streamed (``"stream": true``): the text in chunks of this many characters.
    chunk: int = 8
    #: Streamed: after the first chunk, wait for this event before the rest (the test
    #: reads the first delta while the provider is still writing).
    pause: threading.Event | None = None
    #: Streamed: sleep this long between two chunks.
    chunk_delay: float = 0.0
    #: Streamed: after this many text chunks, close the connection mid-answer (no end of
    #: the chunked body): a stream cut by the network or a dying provider.
    cut_after: int | None = None
    #: The answer to a repeat of the same request (a retry after a timeout or a lost
    #: worker); default: this turn again.  Chains: the n-th repeat follows ``repeat`` n times.
    repeat: Turn | None = None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    kind: str  # "openai" | "anthropic" | "unknown"


class ProviderServer:
    """``context=None`` serves plain HTTP (a self-hosted server on loopback).

    ``context_window``: like llama.cpp's ``--ctx-size``, a request counted at more tokens
    (1 token per 4 bytes of its body) is answered HTTP 400 with llama.cpp's error body.
    """

    def __init__(self, address: str, context: ssl.SSLContext | None, port: int = PORT) -> None:
        self.address = address
        self.context_window: int | None = None
        self.script: list[Turn | Callable[[Recorded], Turn]] = []
        self.requests: list[Recorded] = []
        self.arrived = threading.Event()
        #: ``(characters of answer text written so far, time.monotonic())`` per text chunk
        #: streamed (for the benchmarks' latency).
        self.written: list[tuple[int, float]] = []
        self._lock = threading.Lock()
        self._counter = 0
        #: request body -> (the turn it was given, how many times it was delivered)
        self._given: dict[bytes, list[Any]] = {}
        server = self

        class Handler(_Handler):
            provider = server

        self._httpd = _Server((address, port), Handler, context)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True
        )
        self._thread.start()

    def reset(self) -> None:
        with self._lock:
            self.script = []
            self.requests = []
            self._given = {}
            self.arrived = threading.Event()
            self.context_window = None
            self.written = []

    def add(self, *turns: Turn | Callable[[Recorded], Turn]) -> None:
        with self._lock:
            self.script.extend(turns)

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def next_turn(self, record: Recorded, raw: bytes = b"") -> Turn:
        with self._lock:
            self.requests.append(record)
            self._counter += 1
            given = self._given.get(raw)
            if given is None:
                item = self.script.pop(0) if self.script else Turn(text="(script exhausted)")
                given = self._given[raw] = [item, 0]
            else:
                given[1] += 1
            item, repeats = given
        self.arrived.set()
        turn = item(record) if callable(item) else item
        for _ in range(repeats):
            turn = turn.repeat or turn
        return turn

    def next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    address_family = socket.AF_INET

    def __init__(self, address: Any, handler: Any, context: ssl.SSLContext | None) -> None:
        self._context = context
        super().__init__(address, handler)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # no getfqdn(): no DNS lookup
        self.server_name, self.server_port = self.server_address[:2]

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, peer = self.socket.accept()
        if self._context is None:
            return sock, peer
        return self._context.wrap_socket(sock, server_side=True), peer


class _Handler(BaseHTTPRequestHandler):
    provider: ProviderServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            kind = "openai"
        elif path.endswith("/v1/messages"):
            kind = "anthropic"
        else:
            kind = "unknown"
        record = Recorded(path, {k.lower(): v for k, v in self.headers.items()}, body, kind)
        turn = self.provider.next_turn(record, raw)
        if turn.hold is not None:
            turn.hold.wait(120)
        if turn.delay:
            time.sleep(turn.delay)
        tokens = len(raw) // 4
        window = self.provider.context_window
        if kind == "unknown":
            self._send(404, b'{"error": "not found"}')
        elif window is not None and tokens > window:
            # llama.cpp's llama-server, past --ctx-size.
            error = {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": tokens,
                "n_ctx": window,
            }
            self._send(400, json.dumps({"error": error}).encode())
        elif turn.raw is not None:
            self._send(turn.status, turn.raw)
        elif turn.status != 200:
            error = turn.error if turn.error is not None else {"message": "scripted failure"}
            self._send(turn.status, json.dumps({"error": error}).encode())
        elif (body or {}).get("stream"):
            events = (
                self._openai_stream(turn, body, tokens)
                if kind == "openai"
                else self._anthropic_stream(turn, body, tokens)
            )
            self._send_stream(turn, events)
        else:
            payload = (
                self._openai(turn, body, tokens)
                if kind == "openai"
                else self._anthropic(turn, body, tokens)
            )
            self._send(200, json.dumps(payload).encode())

    def _send_stream(self, turn: Turn, events: list[tuple[str | None, Any]]) -> None:
        """Server-sent events, one chunk of the chunked body each (as the providers do)."""
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            texts = 0
            chars = 0
            for name, data in events:
                is_text = _is_text_event(data)
                if is_text:
                    texts += 1
                    if texts == 2 and turn.pause is not None:
                        turn.pause.wait(120)
                    elif texts > 1 and turn.chunk_delay:
                        time.sleep(turn.chunk_delay)
                payload = data if isinstance(data, str) else json.dumps(data)
                frame = (f"event: {name}\n" if name else "") + f"data: {payload}\n\n"
                raw = frame.encode()
                self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
                self.wfile.flush()
                if is_text:
                    chars += len(_text_of(data))
                    self.provider.written.append((chars, time.monotonic()))
                    if turn.cut_after is not None and texts >= turn.cut_after:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass

    def _openai_stream(self, turn: Turn, body: Any, tokens: int) -> list[tuple[str | None, Any]]:
        n = self.provider.next_id()
        base = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": turn.model or (body or {}).get("model", "scripted"),
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        events: list[tuple[str | None, Any]] = [(None, chunk({"role": "assistant"}))]
        for piece in _pieces(turn.text, turn.chunk):
            events.append((None, chunk({"content": piece})))
        for i, (name, args) in enumerate(turn.tool_calls):
            arguments = args if isinstance(args, str) else json.dumps(args)
            events.append(
                (
                    None,
                    chunk(
                        {
                            "tool_calls": [
                                {
                                    "index": i,
                                    "id": f"call_{n}_{i}",
                                    "type": "function",
                                    "function": {"name": name, "arguments": ""},
                                }
                            ]
                        }
                    ),
                )
            )
            # Large pieces: a megabyte of arguments stays a megabyte of stream.
            for piece in _pieces(arguments, 4096):
                events.append(
                    (None, chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
                )
        events.append(
            (None, chunk({}, turn.finish or ("tool_calls" if turn.tool_calls else "stop")))
        )
        usage = {"prompt_tokens": tokens, "completion_tokens": 7, "total_tokens": tokens + 7}
        events.append((None, {**base, "choices": [], "usage": usage}))
        events.append((None, "[DONE]"))
        return events

    def _anthropic_stream(self, turn: Turn, body: Any, tokens: int) -> list[tuple[str | None, Any]]:
        n = self.provider.next_id()
        message = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": turn.model or (body or {}).get("model", "scripted"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": tokens, "output_tokens": 1},
        }
        events: list[tuple[str | None, Any]] = [
            ("message_start", {"type": "message_start", "message": message})
        ]
        index = 0
        if turn.text:
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            for piece in _pieces(turn.text, turn.chunk):
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": piece},
                        },
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        for i, (name, args) in enumerate(turn.tool_calls):
            arguments = json.dumps(args if isinstance(args, dict) else {"raw": args})
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"toolu_{n}_{i}",
                            "name": name,
                            "input": {},
                        },
                    },
                )
            )
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": arguments},
                    },
                )
            )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": turn.finish
                        or ("tool_use" if turn.tool_calls else "end_turn"),
                        "stop_sequence": None,
                    },
                    "usage": {"output_tokens": 5},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    def _send(self, status: int, data: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def _openai(self, turn: Turn, body: Any, tokens: int) -> dict[str, Any]:
        n = self.provider.next_id()
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for i, (name, args) in enumerate(turn.tool_calls)
            ]
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": turn.model or (body or {}).get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": turn.finish or ("tool_calls" if turn.tool_calls else "stop"),
                }
            ],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 7, "total_tokens": tokens + 7},
        }

    def _anthropic(self, turn: Turn, body: Any, tokens: int) -> dict[str, Any]:
        n = self.provider.next_id()
        content: list[dict[str, Any]] = []
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for i, (name, args) in enumerate(turn.tool_calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{n}_{i}",
                    "name": name,
                    "input": args if isinstance(args, dict) else {"raw": args},
                }
            )
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": turn.model or (body or {}).get("model", "scripted"),
            "content": content,
            "stop_reason": turn.finish or ("tool_use" if turn.tool_calls else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": tokens, "output_tokens": 5},
        }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), max(size, 1))]


def _text_of(data: dict[str, Any]) -> str:
    if data.get("type") == "content_block_delta":
        return str(data["delta"].get("text", ""))
    return str(data["choices"][0]["delta"].get("content", ""))


def _is_text_event(data: Any) -> bool:
    """An event that carries answer text (either wire format)."""
    if not isinstance(data, dict):
        return False
    if data.get("type") == "content_block_delta":
        return data.get("delta", {}).get("type") == "text_delta"
    choices = data.get("choices") or []
    return bool(choices and choices[0].get("delta", {}).get("content"))


# -- reading what the app sent ------------------------------------------------------------


def tool_results(record: Recorded) -> list[str]:
    """The tool results the app sent in this request (either wire format)."""
    out: list[str] = []
    for message in (record.body or {}).get("messages", []):
        if record.kind == "openai" and message.get("role") == "tool":
            out.append(message.get("content") or "")
        if record.kind == "anthropic" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):
                        content = "".join(b.get("text", "") for b in content)
                    out.append(content or "")
    return out


def offered_tools(record: Recorded) -> list[str]:
    tools = (record.body or {}).get("tools") or []
    if record.kind == "openai":
        return sorted(t["function"]["name"] for t in tools)
    return sorted(t["name"] for t in tools)
