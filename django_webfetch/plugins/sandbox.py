"""Defence in depth at the operation boundary: while a plugin's tool runs, the network is
reachable only through the host-owned client.

The runner sets a context variable (``plugin_scope``) around the plugin's code.  A
``sys.addaudithook`` hook, installed on the first plugin run, then refuses inside that
context every

- ``socket.connect`` (TCP, UDP and Unix sockets), ``socket.sendto`` / ``sendmsg``,
- raw and packet sockets: creating one (``AF_PACKET``, ``SOCK_RAW``, ``SOCK_PACKET``, any
  family) and binding, connecting or sending on one made earlier (a packet socket writes
  whole frames, forged source address included, past every address rule),
- system name lookup (``getaddrinfo``, ``gethostbyname``, ``gethostbyaddr``, ...),
- process creation (``subprocess.Popen``, ``os.system``, ``os.exec*``, ``os.spawn*``,
  ``os.posix_spawn``, ``os.fork``): a child process would run outside the hook,

unless the host's own code opened a window for it (``host_io()``: the guarded transport,
the grant read, the audit write, the connection budget).  A refused operation raises
``UnguardedNetworkAccess`` (an ``EgressDenied``, reason ``unguarded_network``) in the
plugin, and the attempt is kept on the scope for the runner to record as an
``EgressEvent``.

Threads started inside the scope inherit it, however they are started (the ``_thread``
primitive is wrapped once, and only changes threads started while a scope is active), and
work handed to a ``concurrent.futures`` thread pool from inside a scope runs in that scope
(asyncio's executor included), while work handed to it from outside runs outside, whichever
call started the pool's threads.  The scope is found through the context variable *and*
through the thread it runs in, so an empty ``contextvars.Context`` does not leave it.
Process creation is checked at the primitive (``_posixsubprocess.fork_exec``) too, which
raises no audit event of its own (multiprocessing's spawn) and which ``subprocess`` reaches
through a replaceable ``sys.audit``.  ``ctypes`` loading a library or looking a symbol up
(libc's ``connect``) is refused as well.

What this does NOT cover (see docs/plugins.rst): code in C extensions (and ctypes
function pointers looked up before the tool ran) that calls the system's ``connect()``
directly (no audit event is raised), ``send()`` on a raw or packet socket opened *and
bound* before the tool ran (``socket.send`` raises no audit event), threads and pools
of other libraries that hand work over by other means than ``concurrent.futures``,
processes started before it ran, and anything a plugin does at import time or outside
its tools.  It is a safety net for plugins that import ``httpx`` or ``socket`` by habit,
not a sandbox for hostile code: untrusted plugins run in the plugin sandbox
(``runtime.bubblewrap``), where this hook is only the recording layer.
"""

from __future__ import annotations

import _posixsubprocess
import _thread
import concurrent.futures
import contextlib
import contextvars
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
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
#: Socket creation and binding: refused only for raw and packet sockets.
_RAW = frozenset({"socket.__new__", "socket.bind"})
_AF_PACKET = getattr(socket, "AF_PACKET", None)
#: Types that carry frames or IP packets the caller composed (low four bits of ``type``).
_RAW_TYPES = frozenset(
    t for t in (getattr(socket, "SOCK_RAW", None), getattr(socket, "SOCK_PACKET", None)) if t
)
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
#: A foreign-function call needs a library and a symbol first: both are refused in a scope.
_FOREIGN = frozenset({"ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle"})
_WATCHED = frozenset(_NETWORK) | _RAW | _LOOKUPS | _PROCESSES | _FOREIGN


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
    #: What the runner ran: the host-owned client takes its group and audit labels from
    #: here, never from attributes plugin code could change.
    group: str = ""
    tool: str = ""
    call_id: str = ""
    user: Any = None
    violations: list[Violation] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


_scope: contextvars.ContextVar[PluginScope | None] = contextvars.ContextVar(
    "django_webfetch_plugin_scope", default=None
)
_host: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "django_webfetch_plugin_host_io", default=False
)
#: thread ident -> the scope that thread runs in (None: explicitly none).  Found even when
#: the plugin runs code in an empty ``contextvars.Context``.
_threads: dict[int, PluginScope | None] = {}
_installed = False
_install_lock = threading.Lock()


def _active() -> PluginScope | None:
    scope = _scope.get()
    if scope is None:
        scope = _threads.get(threading.get_ident())
    return scope


# The two functions below run inside the audit hook, where CPython suspends tracing, so
# coverage cannot see them; their behaviour is asserted end to end in
# tests/plugins/test_egress_lab.py and tests/plugins/test_plugin_egress_tricks.py.
def _is_raw(family: Any, kind: Any) -> bool:  # pragma: no cover
    if _AF_PACKET is not None and family == _AF_PACKET:
        return True
    return isinstance(kind, int) and (kind & 0xF) in _RAW_TYPES


def _describe(event: str, args: tuple[Any, ...]) -> Violation:  # pragma: no cover
    target = ""
    port: int | None = None
    try:
        if event == "socket.__new__":
            target = f"family={args[1]} type={args[2]}"
        elif event in _NETWORK or event == "socket.bind":
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
    scope = _active()
    if scope is None or _host.get():
        return
    if event == "socket.__new__":
        # args: (socket, family, type, proto); -1 when taken from a file descriptor, whose
        # real family the bind/connect/send checks below see.
        if not (len(args) >= 3 and _is_raw(args[1], args[2])):
            return
    elif event in _NETWORK or event == "socket.bind":
        sock = args[0] if args else None
        family = getattr(sock, "family", None)
        if _is_raw(family, getattr(sock, "type", None)):
            pass  # a raw or packet socket made before the scope: refused whatever it does
        elif event == "socket.bind":
            return  # binding an ordinary socket reaches no one
        elif family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
            return  # netlink and other local families are not network egress
    violation = _describe(event, args)
    with scope.lock:
        scope.violations.append(violation)
    raise UnguardedNetworkAccess(
        detail=f"{violation.event} {violation.target}:{violation.port or ''}"
    )


@contextlib.contextmanager
def _in(scope: PluginScope | None, host: bool = False) -> Iterator[None]:
    """This thread runs in ``scope`` (or explicitly in none) until the block ends;
    ``host``: as host code (``host_io``) of that scope."""
    ident = threading.get_ident()
    had = ident in _threads
    previous = _threads.get(ident)
    _threads[ident] = scope
    token = _scope.set(scope)
    host_token = _host.set(host)
    try:
        yield
    finally:
        _host.reset(host_token)
        _scope.reset(token)
        if had:
            _threads[ident] = previous
        else:
            _threads.pop(ident, None)


def _carry(function: Callable[..., Any], scope: PluginScope | None) -> Callable[..., Any]:
    """``function`` to run in another thread as it would run here: in this scope (or none),
    as host code if the host handed it over."""
    host = scope is not None and _host.get()

    def run_in(*args: Any, **kwargs: Any) -> Any:
        with _in(scope, host):
            return function(*args, **kwargs)

    return run_in


_original_start_new_thread = _thread.start_new_thread


def _start_new_thread(function: Any, args: Any, kwargs: Any = None) -> int:
    scope = _active()
    if scope is not None:
        function = _carry(function, scope)
    if kwargs is None:
        return _original_start_new_thread(function, args)
    return _original_start_new_thread(function, args, kwargs)


_original_fork_exec = _posixsubprocess.fork_exec


def _fork_exec(*args: Any, **kwargs: Any) -> Any:
    # Raises no audit event itself; subprocess raises one through ``sys.audit``, which
    # plugin code can replace.  The check is called directly.
    _hook("subprocess.Popen", (args[0] if args else "",))
    return _original_fork_exec(*args, **kwargs)


_original_submit = concurrent.futures.ThreadPoolExecutor.submit


def _submit(
    self: concurrent.futures.ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any
) -> Any:
    # The work runs in the submitter's scope (or in none), not in whatever scope the
    # pool's thread was started from.
    return _original_submit(self, _carry(fn, _active()), *args, **kwargs)


def install() -> None:
    """Install the audit hook and the thread, pool and process wrappers (once per process;
    audit hooks cannot be removed)."""
    global _installed
    with _install_lock:
        if not _installed:
            sys.addaudithook(_hook)
            _thread.start_new_thread = _start_new_thread
            threading._start_new_thread = _start_new_thread  # type: ignore[attr-defined]
            _posixsubprocess.fork_exec = _fork_exec
            if getattr(subprocess, "_fork_exec", None) is _original_fork_exec:
                subprocess._fork_exec = _fork_exec  # type: ignore[attr-defined]
            concurrent.futures.ThreadPoolExecutor.submit = _submit  # type: ignore[method-assign,assignment]
            _installed = True


def current_scope() -> PluginScope | None:
    return _active()


@contextlib.contextmanager
def plugin_scope(reference: str, **labels: Any) -> Iterator[PluginScope]:
    """Run the enclosed plugin code with the network reachable only through ``host_io``.

    ``labels``: ``group``, ``tool``, ``call_id``, ``user`` of the call being run."""
    install()
    scope = PluginScope(reference, **labels)
    with _in(scope):
        yield scope


@contextlib.contextmanager
def host_io() -> Iterator[None]:
    """The host's own I/O inside a plugin scope (guarded transport, DB, Redis)."""
    token = _host.set(True)
    try:
        yield
    finally:
        _host.reset(token)
