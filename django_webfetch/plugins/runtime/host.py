"""The host side of the plugin runtime: spawns and pools plugin processes, speaks the RPC,
enforces the limits, and performs each request the plugin makes with the host-owned client
(``plugins.client.PluginHttp``: the instance's authority, read per request).

A call ends ``failed`` with a stable code when the process does not behave:

``plugin_crashed``                the process died or broke the protocol
``plugin_timeout``                no answer within ``WEBFETCH_PLUGIN_WALL_SECONDS``
``plugin_limit``                  CPU time, memory, output size or requests per call exceeded
``plugin_isolation_unavailable``  this host cannot isolate plugin code (no seccomp)

and the process is killed; the host is untouched either way.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django_webfetch.net.errors import (
    EgressDenied,
    FetchError,
    FetchTimeout,
    ResolutionError,
    ResponseTooLarge,
    WebFetchError,
)

from .protocol import Channel, ChannelClosed, ChannelTimeout, ProtocolError, decode_bytes
from .protocol import encode_bytes as _encode

__all__ = [
    "CallOutcome",
    "IsolationUnavailable",
    "Limits",
    "Origin",
    "RuntimeFailure",
    "capabilities",
    "describe",
    "execute",
    "idle_processes",
    "isolation_label",
    "shutdown",
]

logger = logging.getLogger("django_webfetch.plugins")

_BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from django_webfetch.plugins.runtime.guest import main; main()"
)
#: A process serves at most this many calls, then a fresh one takes over.
MAX_CALLS_PER_PROCESS = 100
#: Idle processes kept by one host process, all instances together.
MAX_IDLE_PROCESSES = 32
_STARTUP_SECONDS = 30.0
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class RuntimeFailure(Exception):
    """A plugin process misbehaved; ``code`` is the stable reason."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(detail or code)
        self.code = code
        self.detail = detail


class IsolationUnavailable(RuntimeFailure):
    def __init__(self, detail: str = "") -> None:
        super().__init__("plugin_isolation_unavailable", detail)


@dataclass(frozen=True)
class Origin:
    """Where a plugin's code is: the entry point (``module:attr``), the ``sys.path`` entry
    it was found on and its top-level package."""

    entry: str
    path: str
    top_level: str


@dataclass(frozen=True)
class Limits:
    cpu_seconds: float
    wall_seconds: float
    memory_bytes: int
    max_output_bytes: int
    max_requests: int
    pool_size: int

    @classmethod
    def from_settings(cls) -> Limits:
        from django_webfetch.conf import conf

        return cls(
            cpu_seconds=conf.WEBFETCH_PLUGIN_CPU_SECONDS,
            wall_seconds=conf.WEBFETCH_PLUGIN_WALL_SECONDS,
            memory_bytes=conf.WEBFETCH_PLUGIN_MEMORY_BYTES,
            max_output_bytes=conf.WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES,
            max_requests=conf.WEBFETCH_PLUGIN_MAX_REQUESTS,
            pool_size=conf.WEBFETCH_PLUGIN_POOL_SIZE,
        )


@dataclass
class CallOutcome:
    """What the plugin's tool ended with (``kind``), as the guest reported it."""

    kind: str
    text: str = ""
    ok: bool = True
    reason: str = ""
    code: str = ""
    error: str = ""
    violations: list[tuple[str, str, int | None]] = field(default_factory=list)


# -- one process -------------------------------------------------------------------------


def _root() -> str:
    import django_webfetch

    return os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))


class Worker:
    """One plugin process, bound to one instance (or to one manifest read)."""

    def __init__(self, origin: Origin, limits: Limits, label: str) -> None:
        self.origin = origin
        self.limits = limits
        self.calls = 0
        self.scratch = tempfile.mkdtemp(prefix=f"webfetch-plugin-{label}-")
        host_end, guest_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", _BOOTSTRAP, _root(), str(guest_end.fileno())],
                pass_fds=(guest_end.fileno(),),
                env={},
                cwd=self.scratch,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            host_end.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise IsolationUnavailable(f"cannot start a plugin process: {exc}") from exc
        finally:
            guest_end.close()
        self.channel = Channel(host_end, max_message=2 * limits.max_output_bytes + (1 << 20))
        self.ready = self._start()

    def _start(self) -> dict[str, Any]:
        lifetime = int(self.limits.cpu_seconds * MAX_CALLS_PER_PROCESS + _STARTUP_SECONDS)
        try:
            self.channel.send(
                {
                    "op": "setup",
                    "entry": self.origin.entry,
                    "plugin_path": self.origin.path,
                    "top_level": self.origin.top_level,
                    "scratch": self.scratch,
                    "memory_bytes": self.limits.memory_bytes,
                    "lifetime_cpu_seconds": lifetime,
                    "file_bytes": 64 * 1024 * 1024,
                    "max_output_bytes": self.limits.max_output_bytes,
                    "host_pid": os.getpid(),
                }
            )
            message = self.channel.recv(time.monotonic() + _STARTUP_SECONDS)
        except ProtocolError as exc:
            self.kill()
            raise RuntimeFailure(
                "plugin_crashed", f"the plugin process did not start: {exc}"
            ) from exc
        if message["op"] == "unavailable":
            self.kill()
            raise IsolationUnavailable(str(message.get("why", ""))[:300])
        if message["op"] != "ready":
            self.kill()
            raise RuntimeFailure("plugin_crashed", "the plugin process did not get ready")
        return message

    @property
    def isolation(self) -> dict[str, Any]:
        return dict(self.ready.get("isolation") or {})

    def alive(self) -> bool:
        return self.process.poll() is None

    def cpu_seconds(self) -> float:
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        self.channel.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def close(self) -> None:
        with contextlib.suppress(ProtocolError):
            self.channel.send({"op": "exit"})
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(2)
        self.kill()


# -- the pool ----------------------------------------------------------------------------


class Pool:
    """Idle processes per key (an instance and the manifest read it runs); one process
    serves one call at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[Any, list[Worker]] = {}
        self._pid = os.getpid()

    def _check_fork(self) -> None:
        if os.getpid() != self._pid:  # a forked host (Celery prefork): not our children
            self.forget()

    def forget(self) -> None:
        """In a forked child: drop (never kill) the parent's processes, closing only this
        process's copies of their sockets."""
        for workers in self._idle.values():
            for worker in workers:
                with contextlib.suppress(OSError):
                    worker.channel.close()
        self._idle = {}
        self._pid = os.getpid()
        self._lock = threading.Lock()  # another thread of the parent may have held it

    def acquire(self, key: Any) -> Worker | None:
        with self._lock:
            self._check_fork()
            idle = self._idle.get(key, [])
            while idle:
                worker = idle.pop()
                if worker.alive():
                    return worker
                worker.kill()
        return None

    def release(self, key: Any, worker: Worker, size: int) -> None:
        if worker.calls >= MAX_CALLS_PER_PROCESS or not worker.alive():
            worker.close()
            return
        with self._lock:
            self._check_fork()
            idle = self._idle.setdefault(key, [])
            total = sum(len(workers) for workers in self._idle.values())
            if len(idle) < size and total < MAX_IDLE_PROCESSES:
                idle.append(worker)
                return
        worker.close()

    def idle(self) -> int:
        with self._lock:
            self._check_fork()
            return sum(len(workers) for workers in self._idle.values())

    def clear(self) -> None:
        with self._lock:
            workers = [w for idle in self._idle.values() for w in idle]
            self._idle = {}
        for worker in workers:
            worker.close()


_pool = Pool()
atexit.register(_pool.clear)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.forget)


def idle_processes() -> int:
    """How many warm plugin processes this host process keeps."""
    return _pool.idle()


def shutdown() -> None:
    """End every idle plugin process of this host process."""
    _pool.clear()


# -- reading a manifest, and what this host can do ---------------------------------------

_capabilities: dict[str, Any] | None = None
_capabilities_lock = threading.Lock()


def describe(origin: Origin) -> dict[str, Any]:
    """Import the plugin in a plugin process and return what it found: ``manifest`` (JSON,
    each tool's handler replaced by ``True``/``False``), ``problem`` (the exception type
    the import or the manifest callable raised), ``violations`` and ``isolation``.

    Raises ``IsolationUnavailable`` where plugin code cannot be isolated here."""
    global _capabilities
    limits = Limits.from_settings()
    worker = Worker(origin, limits, "manifest")
    try:
        with _capabilities_lock:
            _capabilities = {"isolated": True, **worker.isolation}
        return {
            "manifest": worker.ready.get("manifest"),
            "problem": _name(worker.ready.get("problem")),
            "violations": _violation_list(worker.ready.get("violations")),
            "isolation": worker.isolation,
        }
    finally:
        worker.close()


def capabilities() -> dict[str, Any]:
    """What this host gives plugin processes: ``{"isolated": bool, "seccomp": bool,
    "landlock": ABI or 0, ...}`` (found out once per process by starting one)."""
    global _capabilities
    with _capabilities_lock:
        if _capabilities is not None:
            return dict(_capabilities)
    probe = Origin("json:dumps", os.path.dirname(os.__file__), "json")
    try:
        worker = Worker(probe, Limits.from_settings(), "probe")
    except RuntimeFailure as exc:
        found: dict[str, Any] = {"isolated": False, "why": exc.detail or exc.code}
    else:
        found = {"isolated": True, **worker.isolation}
        worker.close()
    with _capabilities_lock:
        _capabilities = found
    return dict(found)


def isolation_label(trusted: bool) -> str:
    """How an instance's tools run on this host, in words (``webfetch plugin list``)."""
    if trusted:
        return "trusted: in this process, audit hook only (check W032)"
    found = capabilities()
    if not found.get("isolated"):
        return f"none: untrusted plugins do not run here ({found.get('why', 'no seccomp')})"
    landlock = found.get("landlock")
    files = f"Landlock ABI {landlock}" if landlock else "no Landlock: file system not restricted"
    return f"isolated process: seccomp (no network), {files}"


def _name(raw: Any) -> str:
    """An exception's type name as the plugin process reported it: a plugin chooses it, so
    only name characters are kept (it reaches logs and check messages)."""
    return re.sub(r"[^\w.]", "?", str(raw or ""))[:100]


def _violation_list(raw: Any) -> list[tuple[str, str, int | None]]:
    found: list[tuple[str, str, int | None]] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, list) and len(item) == 3:
            port = item[2] if isinstance(item[2], int) and not isinstance(item[2], bool) else None
            found.append((str(item[0])[:100], str(item[1])[:255], port))
    return found[:100]


# -- one call ----------------------------------------------------------------------------

_ERROR_CLASSES = (FetchTimeout, ResponseTooLarge, FetchError, ResolutionError)


def _perform(message: Mapping[str, Any], http: Any) -> dict[str, Any]:
    """One request of the plugin, decided and sent by the host-owned client."""
    try:
        content: Any = message.get("content")
        if "content_b64" in message:
            content = decode_bytes(message["content_b64"])
        response = http.request(
            message.get("method"),
            message.get("url"),
            params=message.get("params"),
            headers=message.get("headers"),
            content=content,
            json=message.get("json"),
            data=message.get("data"),
            timeout=message.get("timeout"),
        )
    except EgressDenied as exc:  # already redacted by the client
        return {"error": {"class": "EgressDenied", "reason": exc.reason}}
    except WebFetchError as exc:
        kind = next((k.__name__ for k in _ERROR_CLASSES if isinstance(exc, k)), "WebFetchError")
        return {"error": {"class": kind}}
    except (TypeError, ValueError) as exc:
        return {"error": {"class": type(exc).__name__, "message": str(exc)[:200]}}
    except ProtocolError:
        return {"error": {"class": "TypeError", "message": "invalid request body"}}
    except Exception as exc:  # a foreign error the client did not map: nothing of it leaks
        logger.warning("plugin request failed in the host: %s", type(exc).__name__)
        return {"error": {"class": "WebFetchError"}}
    return {
        "response": {
            "status": response.status_code,
            "headers": [list(pair) for pair in response.headers.multi_items()],
            "content_b64": _encode(response.content),
            "url": str(response.request.url),
        }
    }


def execute(
    origin: Origin,
    key: Any,
    call: Mapping[str, Any],
    http: Any,
    *,
    limits: Limits | None = None,
) -> CallOutcome:
    """Run one tool call in a plugin process of ``key`` (warm from the pool, or new).

    ``call``: ``tool``, ``arguments``, ``config``, ``plugin``, ``alias``, ``reference``.
    ``http``: the host-owned client that performs the plugin's requests.
    Raises ``RuntimeFailure`` (with its stable code) when the process misbehaves."""
    limits = limits or Limits.from_settings()
    worker = _pool.acquire(key)
    if worker is None:
        worker = Worker(origin, limits, str(key[0]) if isinstance(key, tuple) else "call")
    try:
        outcome = _run(worker, call, http, limits)
        if worker.calls == 0:  # what its import tried, on the record of its first call
            outcome.violations[:0] = _violation_list(worker.ready.get("violations"))
    except RuntimeFailure:
        worker.kill()
        raise
    except BaseException:
        worker.kill()
        raise
    worker.calls += 1
    _pool.release(key, worker, limits.pool_size)
    return outcome


def _run(worker: Worker, call: Mapping[str, Any], http: Any, limits: Limits) -> CallOutcome:
    deadline = time.monotonic() + limits.wall_seconds
    cpu_start = worker.cpu_seconds()

    def poll() -> None:
        if worker.cpu_seconds() - cpu_start > limits.cpu_seconds:
            raise RuntimeFailure("plugin_limit", "CPU time")

    requests = 0
    try:
        worker.channel.send({"op": "call", **call}, deadline)
        while True:
            message = worker.channel.recv(deadline, poll=poll)
            if message["op"] == "http":
                requests += 1
                if requests > limits.max_requests:
                    raise RuntimeFailure("plugin_limit", "requests per call")
                reply = _perform(message, http)
                worker.channel.send(
                    {"op": "http_reply", "id": message.get("id"), **reply}, deadline
                )
            elif message["op"] == "result":
                return _outcome(message)
            else:
                raise RuntimeFailure("plugin_crashed", f"unexpected {message['op'][:40]!r}")
    except ChannelTimeout as exc:
        raise RuntimeFailure("plugin_timeout", "wall time") from exc
    except ChannelClosed as exc:
        try:
            code: int | None = worker.process.wait(2)
        except subprocess.TimeoutExpired:
            code = None
        if code == -signal.SIGXCPU:
            raise RuntimeFailure("plugin_limit", "CPU time") from exc
        raise RuntimeFailure("plugin_crashed", f"the plugin process ended ({code})") from exc
    except ProtocolError as exc:
        raise RuntimeFailure("plugin_limit", f"protocol: {exc}") from exc


def _outcome(message: Mapping[str, Any]) -> CallOutcome:
    kind = str(message.get("kind", ""))
    outcome = CallOutcome(kind=kind, violations=_violation_list(message.get("violations")))
    if kind in ("text", "json", "tool_result"):
        outcome.text = str(message.get("text", ""))
        outcome.ok = bool(message.get("ok", True))
    elif kind == "egress_denied":
        outcome.reason = str(message.get("reason", ""))[:100]
    elif kind == "webfetch_error":
        outcome.code = str(message.get("code", ""))[:100]
    elif kind == "limit":
        raise RuntimeFailure("plugin_limit", str(message.get("what", ""))[:40])
    else:
        outcome.kind = "error" if kind != "not_text" else kind
        outcome.error = _name(message.get("error"))
    return outcome
