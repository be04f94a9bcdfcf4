"""Defence in depth at the operation boundary: while a plugin's tool runs, the network is
reachable only through the host-owned client.

The runner sets a context variable (``plugin_scope``) around the plugin's code.  A
``sys.addaudithook`` hook, installed on the first plugin run, then refuses inside that
context every

- ``socket.connect`` (TCP, UDP and Unix sockets), ``socket.sendto`` / ``sendmsg``,
- system name lookup (``getaddrinfo``, ``gethostbyname``, ``gethostbyaddr``, ...),
- process creation (``subprocess.Popen``, ``os.system``, ``os.exec*``, ``os.spawn*``,
  ``os.posix_spawn``, ``os.fork``): a child process would run outside the hook,

unless the host's own code opened a window for it (``host_io()``: the guarded transport,
the grant read, the audit write, the connection budget).  A refused operation raises
``UnguardedNetworkAccess`` (an ``EgressDenied``, reason ``unguarded_network``) in the
plugin, and the attempt is kept on the scope for the runner to record as an
``EgressEvent``.

Threads started inside the scope inherit it (``threading.Thread.start`` is wrapped once,
and only changes threads started while a scope is active).

What this does NOT cover (see docs/plugins.rst): code in C extensions that calls the
system's ``connect()`` directly (no audit event is raised), threads of a pool created
before the tool ran, processes started before it ran, and anything a plugin does at import
time or outside its tools.  It is a safety net for plugins that import ``httpx`` or
``socket`` by habit, not a sandbox for hostile code: run untrusted plugins in a separate
service with an egress firewall.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django_webfetch.net.errors import EgressDenied

__all__ = [
    "PluginScope",
    "UnguardedNetworkAccess",
    "Violation",
    "current_scope",
    "host_io",
    "install",
    "plugin_scope",
]

logger = logging.getLogger("django_webfetch.plugins")

_NETWORK = {
    "socket.connect": "connect",
    "socket.sendto": "sendto",
    "socket.sendmsg": "sendmsg",
}
_LOOKUPS = frozenset(
    {
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
    }
)
_PROCESSES = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.spawn",
        "os.posix_spawn",
        "os.fork",
        "os.forkpty",
    }
)
_WATCHED = frozenset(_NETWORK) | _LOOKUPS | _PROCESSES


class UnguardedNetworkAccess(EgressDenied):
    """Raised in a plugin that reached for the network around the host-owned client."""

    code = "egress_denied"
    default_reason = "unguarded_network"


@dataclass(frozen=True)
class Violation:
    event: str
    target: str
    port: int | None


@dataclass
class PluginScope:
    reference: str
    violations: list[Violation] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_scope: contextvars.ContextVar[PluginScope | None] = contextvars.ContextVar(
    "django_webfetch_plugin_scope", default=None
)
_host: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "django_webfetch_plugin_host_io", default=False
)
_installed = False
_install_lock = threading.Lock()


# The two functions below run inside the audit hook, where CPython suspends tracing, so
# coverage cannot see them; their behaviour is asserted end to end in
# tests/plugins/test_egress_lab.py and tests/plugins/test_attacks.py.
def _describe(event: str, args: tuple[Any, ...]) -> Violation:  # pragma: no cover
    target = ""
    port: int | None = None
    try:
        if event in _NETWORK:
            address = args[1]
            if isinstance(address, tuple) and len(address) >= 2:
                target, port = str(address[0]), int(address[1])
            else:
                target = str(address)  # a Unix socket path
        elif event in _LOOKUPS:
            host = args[0]
            target = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
            if len(args) > 1 and isinstance(args[1], int) and not isinstance(args[1], bool):
                port = args[1]
        else:
            target = str(args[0])[:200] if args else ""
    except Exception:  # never let the description fail the refusal
        target = "?"
    return Violation(event, target[:255], port if port is not None and 0 < port < 65536 else None)


def _hook(event: str, args: tuple[Any, ...]) -> None:  # pragma: no cover
    if event not in _WATCHED:
        return
    scope = _scope.get()
    if scope is None or _host.get():
        return
    if event in _NETWORK:
        sock = args[0] if args else None
        family = getattr(sock, "family", None)
        if family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
            return  # netlink and other local families are not network egress
    violation = _describe(event, args)
    with scope.lock:
        scope.violations.append(violation)
    raise UnguardedNetworkAccess(
        detail=f"{violation.event} {violation.target}:{violation.port or ''}"
    )


_original_start = threading.Thread.start


def _start(self: threading.Thread) -> None:
    scope = _scope.get()
    if scope is not None:
        run = self.run

        def run_in_scope() -> None:
            _scope.set(scope)
            _host.set(False)
            run()

        self.run = run_in_scope  # type: ignore[method-assign]
    _original_start(self)


def install() -> None:
    """Install the audit hook (once per process; audit hooks cannot be removed)."""
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)
            threading.Thread.start = _start  # type: ignore[method-assign]
            _installed = True


def current_scope() -> PluginScope | None:
    return _scope.get()


@contextlib.contextmanager
def plugin_scope(reference: str) -> Iterator[PluginScope]:
    """Run the enclosed plugin code with the network reachable only through ``host_io``."""
    install()
    scope = PluginScope(reference)
    token = _scope.set(scope)
    host_token = _host.set(False)
    try:
        yield scope
    finally:
        _host.reset(host_token)
        _scope.reset(token)


@contextlib.contextmanager
def host_io() -> Iterator[None]:
    """The host's own I/O inside a plugin scope (guarded transport, DB, Redis)."""
    token = _host.set(True)
    try:
        yield
    finally:
        _host.reset(token)
