"""The plugin process: ``python -I -S -B -c <bootstrap> ROOT SITE_DIR... PLUGIN_PATH FD``,
started by bubblewrap in the plugin sandbox (``bubblewrap.command``: its own user, PID,
network, IPC, UTS, mount and cgroup namespaces, uid 65534 with no capabilities, a
read-only minimal view, an empty environment and the allow-list seccomp filter already in
force).  Its ``sys.path``: the standard library only until the host says ``import``, then
the site's package directories, then the plugin's directory; ``django_webfetch`` is loaded
from ROOT by location.  Every module the guest itself imports is imported within
``own_modules``: the standard library and, of the site's package directories, httpx's own
packages only (``SITE_PACKAGES``), so no name the guest, the standard library or httpx
tries (``copy``'s ``org``, httpx's ``brotli``) resolves from a site or plugin directory
(decision 0065).

One inherited end of a Unix socketpair is its only way to talk to anyone.  In this order,
before any plugin code is imported, it

1. reads its ``setup`` message (limits, the plugin's location, the scratch directory),
2. sends its standard output and error to ``/dev/null``,
3. sets its resource limits for its whole life (address space, data, CPU time, file size,
   open files, threads, queued signals, no core, no locked memory, no message queues),
4. restricts the file system with Landlock where the kernel has it (read: the interpreter,
   its libraries, ``django_webfetch`` and the plugin's own package; write: the scratch
   directory only; and, from Landlock ABI 4 and 6, no TCP and no signals or abstract Unix
   sockets outside the process); a path whose rule the kernel refuses is left out (not
   readable then), the rest holds: ``_landlock``,
5. installs a second seccomp filter the host built (``bubblewrap.no_exec_program``) that
   refuses every further ``exec`` and every further Landlock layer or filter, and proves
   both filters are in force and that its death signal (bwrap's ``--die-with-parent``) is
   set and cannot be cleared,
6. installs the audit-hook sandbox as a second, recording layer,
7. says ``contained`` with what its Landlock enforced (the ABI, or no Landlock and why, and
   the paths whose rule the kernel refused), and waits for the host's ``import`` (the host
   keeps that report, said before any plugin code ran, and reads the process's
   signals and privileges from ``/proc`` meanwhile: what each call must leave as it found
   them for the process to be pooled), imports the plugin (inside a plugin scope: what
   the import tries is reported; every module of the plugin's package compiled from its
   source, never from a ``.pyc`` or an extension module beside it: ``_source_only``), and
   answers ``ready`` with the manifest it found (handlers named, not sent),
8. serves ``call`` messages: the tool's handler gets a handle whose ``http`` is an RPC to
   the host, which decides and performs every request.

A step that fails before the plugin is imported ends the process with an ``unavailable``
message: the host then refuses to run the plugin (``plugin_isolation_unavailable``).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.getsignal, without its enum
import contextlib
import ctypes
import errno
import json
import os
import resource
import signal
import socket
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator, Mapping
from importlib.machinery import BuiltinImporter, FrozenImporter, PathFinder
from types import MappingProxyType
from typing import Any

from .protocol import (
    MAX_DEPTH,
    MAX_REFUSED_CHARS,
    MAX_REFUSED_PATHS,
    MAX_VALUES,
    Channel,
    ChannelClosed,
    ProtocolError,
    UnencodableMessage,
    decode_bytes,
    encode_bytes,
    shape,
)

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1
_PR_GET_PDEATHSIG = 2
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
#: Threads: a tool may start a few; a thread bomb meets this (and RLIMIT_AS) first.
MAX_THREADS = 64
#: Open files: the channel, stdio and a tool's few; with setsockopt refused, this bounds
#: the socket buffers a plugin can fill (a default-sized buffer per socket: issue 30,
#: finding 5); none can be in flight over a socket (sendmsg is refused: issue 30, finding 8).
MAX_FILES = 32
#: Queued real-time signals (each a ``struct sigqueue`` of kernel memory a pooled process
#: would keep; the site's limit is tens of thousands): issue 30, sixth attack, finding 5.
MAX_PENDING_SIGNALS = 64


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


# -- Landlock (include/uapi/linux/landlock.h) ------------------------------------------------
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
#: Every file-system right of each ABI version (1: 13 rights; 2: REFER; 3: TRUNCATE;
#: 5: IOCTL_DEV).
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
#: Rights that apply to a file (not a directory): EXECUTE, WRITE_FILE, READ_FILE, TRUNCATE,
#: IOCTL_DEV.
_FS_FILE_RIGHTS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)
#: The devices the plugin may read and write once Landlock holds (of those
#: ``bubblewrap.command`` binds).
_DEVICES = ("/dev/null", "/dev/urandom")
_NET_BIND_TCP = 1
_NET_CONNECT_TCP = 2
_SCOPE_ABSTRACT_UNIX = 1
_SCOPE_SIGNAL = 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class Unavailable(Exception):
    """Isolation could not be set up: the plugin must not be imported."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _limits(setup: Mapping[str, Any]) -> None:
    """Whole-process limits, set before any plugin code runs and never raised again (the
    hard limit needs CAP_SYS_RESOURCE in the initial namespace; both filters refuse
    ``setrlimit`` with a new value once the second one is in force)."""

    def limit(which: int, value: int) -> None:
        resource.setrlimit(which, (value, value))

    memory = int(setup["memory_bytes"])
    limit(resource.RLIMIT_AS, memory)
    limit(resource.RLIMIT_DATA, memory)
    limit(resource.RLIMIT_CPU, int(setup["lifetime_cpu_seconds"]))
    limit(resource.RLIMIT_FSIZE, int(setup["file_bytes"]))
    limit(resource.RLIMIT_NOFILE, MAX_FILES)
    limit(resource.RLIMIT_CORE, 0)
    limit(resource.RLIMIT_NPROC, MAX_THREADS)
    limit(resource.RLIMIT_MEMLOCK, 0)
    limit(resource.RLIMIT_MSGQUEUE, 0)
    limit(resource.RLIMIT_SIGPENDING, MAX_PENDING_SIGNALS)


def _quiet_stdio() -> None:
    """Nothing the plugin prints reaches the host (stdout and stderr to /dev/null)."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


def _no_new_privs() -> None:
    """Landlock and the second filter need it (bwrap set it already: checked, not hoped)."""
    if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise Unavailable(f"seccomp_unavailable: no_new_privs ({os.strerror(ctypes.get_errno())})")


def _seccomp(setup: Mapping[str, Any]) -> None:
    """The second filter, built by the host (``bubblewrap.no_exec_program``): no exec, no
    further Landlock layer or filter (loaded after ``_landlock``).  The allow-list bwrap
    loaded holds everything else."""
    fd = int(setup["no_exec_fd"])
    try:
        with os.fdopen(fd, "rb") as source:
            program = source.read()
    except OSError as exc:
        raise Unavailable(f"seccomp_unavailable: no program ({exc.strerror})") from exc
    count = len(program) // ctypes.sizeof(_SockFilter)
    if not count or len(program) % ctypes.sizeof(_SockFilter):
        raise Unavailable("seccomp_unavailable: a malformed program")
    instructions = (_SockFilter * count).from_buffer_copy(program)
    fprog = _SockFprog(count, instructions)
    libc = _libc()
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise Unavailable(f"seccomp_unavailable: {os.strerror(ctypes.get_errno())}")

    # Proof, not hope: both filters are in force before any plugin code runs.
    def no_exec() -> None:
        os.execv("/nonexistent", ["x"])

    def no_socket() -> None:
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()

    def no_layer() -> None:
        libc.syscall.restype = ctypes.c_long
        if _landlock_abi(libc) == 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    def no_orphan() -> None:
        # The death signal bwrap set (--die-with-parent) stays: the process never outlives
        # its host (issue 30, sixth attack, finding 1).
        signal_number = ctypes.c_int(0)
        if libc.prctl(_PR_GET_PDEATHSIG, ctypes.byref(signal_number), 0, 0, 0) != 0:
            raise Unavailable("seccomp_unavailable: no death signal to read")
        if signal_number.value != signal.SIGKILL:
            raise Unavailable("seccomp_unavailable: no death signal")
        if libc.prctl(_PR_SET_PDEATHSIG, 0, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    proofs: tuple[tuple[Callable[[], None], int], ...] = (
        (no_exec, errno.EPERM),
        (no_socket, errno.EPERM),
        (no_layer, errno.EPERM),
        (no_orphan, errno.EPERM),
    )
    for proof, expected in proofs:
        try:
            proof()
        except OSError as exc:
            if exc.errno == expected:
                continue
        raise Unavailable("seccomp_unavailable: the filter is not in force")


def _landlock_abi(libc: ctypes.CDLL) -> int:
    abi = int(libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION))
    return max(abi, 0)


def read_paths(
    plugin_path: str,
    top_level: str,
    hidden: list[str] | None = None,
    site: list[str] | None = None,
) -> tuple[list[str], list[str]]:
    """(directories whose files may be read, directories that may only be listed), with
    ``hidden`` (the site's code the sandbox masks) in neither: ``_excluding``.  ``site``:
    the site's package directories (not on ``sys.path`` yet: ``serve``)."""
    import django_webfetch

    paths = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.abspath(django_webfetch.__file__)),
        "/usr/lib",
        "/usr/lib64",
        "/lib",
        "/lib64",
        "/usr/local/lib",
    }
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        value = sysconfig.get_paths().get(name)
        if value:
            paths.add(value)
    for entry in [*sys.path, *(site or ())]:
        if entry.endswith(("site-packages", "dist-packages", "lib-dynload")) or ".zip" in entry:
            paths.add(entry)
    listed = [plugin_path]
    for candidate in (top_level, top_level + ".py"):
        full = os.path.join(plugin_path, candidate)
        # Never a rule through a link (the host binds none: ``bubblewrap._bound``).
        if os.path.exists(full) and not os.path.islink(full):
            paths.add(full)
    # Each rule where its path resolves, as every hidden path is (``bubblewrap``): a rule
    # opened through a link (``/lib -> usr/lib``, an OSTree host's ``/usr/local``) lands on
    # the target whole and would undo the split of the target's own rule (issue 30, round
    # 28, finding 5).
    resolved = {os.path.realpath(p) for p in paths if os.path.exists(p)}
    read, split = _excluding(sorted(resolved), hidden or [])
    return read, listed + split


def _excluding(paths: list[str], hidden: list[str]) -> tuple[list[str], list[str]]:
    """``paths`` with every ``hidden`` path left out, and the directories that held one.
    A Landlock rule cannot except a path beneath it, so a path holding a hidden one is
    replaced by its entries but the hidden one (again for an entry on the way to it), and
    kept as listable only (its listing is what the import system reads; the masked
    directory beneath it is empty anyway).  An entry of a split directory that is a
    symbolic link gets no rule: ``_allow`` follows a link, so its rule would land on the
    target (the split directory itself, or one on the way to a hidden path) and undo its
    split; a target that is needed has its own rule (issue 30, round 26, finding 6)."""
    read: list[str] = []
    split: list[str] = []
    pending = list(paths)
    entries: set[str] = set()
    while pending:
        path = pending.pop()
        if path in entries and path not in paths and os.path.islink(path):
            continue
        inside = [h for h in hidden if h == path or h.startswith(path.rstrip("/") + "/")]
        if not inside:
            read.append(path)
            continue
        if path in hidden or os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            names = os.listdir(path)
        except OSError:
            continue
        split.append(path)
        found = [os.path.join(path, name) for name in names]
        entries.update(found)
        pending += found
    return sorted(set(read)), sorted(set(split))


def _landlock(setup: Mapping[str, Any], site: list[str]) -> dict[str, Any]:
    """Restrict the file system (and, where the kernel can, TCP and signals); returns what
    was enforced (``_enforced``), which the guest says in its ``contained`` message.

    Only a ruleset the kernel does not make (``landlock_create_ruleset``) or does not put
    in force (``landlock_restrict_self``) means no Landlock: reported with the reason, not
    fatal (seccomp already holds the network).  A path whose rule the kernel refuses
    (``landlock_add_rule``, any errno) is left out, and only it: no rule grants it then,
    so it is not readable (fail closed), and every other rule holds (issue 30, round 13,
    finding 3: one refused rule dropped the whole ruleset, and the host never learnt)."""
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = _landlock_abi(libc)
    if abi < 1:
        return _unenforced("landlock_create_ruleset", ctypes.get_errno())
    handled = _FS_BY_ABI[max(v for v in _FS_BY_ABI if v <= abi)]
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
        size = 24
    ruleset = int(libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0))
    if ruleset < 0:
        return _unenforced("landlock_create_ruleset", ctypes.get_errno())
    hidden = [str(path) for path in setup.get("hidden") or ()]
    read, listed = read_paths(str(setup["plugin_path"]), str(setup["top_level"]), hidden, site)
    try:
        rules = _rules(read, listed, str(setup["scratch"]), handled)
        refused = _add_rules(rules, lambda path, rights: _allow(libc, ruleset, path, rights))
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return _unenforced("landlock_restrict_self", ctypes.get_errno())
    finally:
        os.close(ruleset)
    return _enforced(abi, refused)


def _rules(read: list[str], listed: list[str], scratch: str, handled: int) -> list[tuple[str, int]]:
    """Every path rule of the ruleset, in the order they are added, with its rights: read
    (the interpreter, its libraries, django_webfetch, the plugin's package), list only,
    write the scratch directory, and read and write ``/dev/null`` and ``/dev/urandom``."""
    readable = (_FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR) & handled
    rules = [(path, readable) for path in read]
    rules += [(path, _FS_READ_DIR) for path in listed]
    rules.append((scratch, handled))
    rules += [(device, (_FS_READ_FILE | _FS_WRITE_FILE) & handled) for device in _DEVICES]
    return rules


def _add_rules(
    rules: list[tuple[str, int]], add: Callable[[str, int], int]
) -> list[tuple[str, int]]:
    """Each rule added with ``add`` (``_allow``: 0, or the errno of the kernel's refusal);
    the ``(path, errno)`` of each the kernel refused, in order.  A refused rule leaves out
    its path only: the others are added all the same."""
    refused: list[tuple[str, int]] = []
    for path, rights in rules:
        code = add(path, rights)
        if code:
            refused.append((path, code))
    return refused


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> int:
    """One path rule: 0 when the kernel took it (or the path is not in this sandbox: there
    is nothing to allow), else the errno it refused it with."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        if not os.path.isdir(path):
            rights &= _FS_FILE_RIGHTS
        rule = _PathBeneath(allowed_access=rights, parent_fd=fd)
        if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH,
                        ctypes.byref(rule), 0) != 0:  # fmt: skip
            return ctypes.get_errno() or errno.EINVAL
        return 0
    finally:
        os.close(fd)


def _shortened(text: str) -> str:
    """``text`` in at most ``MAX_REFUSED_CHARS`` characters: its start and its end (a
    path's file name and the error) with ``...`` between."""
    if len(text) <= MAX_REFUSED_CHARS:
        return text
    half = (MAX_REFUSED_CHARS - 3) // 2
    return text[:half] + "..." + text[len(text) - (MAX_REFUSED_CHARS - 3 - half) :]


def _enforced(abi: int, refused: list[tuple[str, int]]) -> dict[str, Any]:
    """The report of a Landlock in force (``contained``): its ABI, whether it holds TCP
    (ABI 4) and signals and abstract Unix sockets (ABI 6), and the paths whose rule the
    kernel refused (the first ``MAX_REFUSED_PATHS``, each shortened; the count is whole)."""
    return {
        "landlock": abi,
        "landlock_network": abi >= 4,
        "landlock_scoped": abi >= 6,
        "landlock_refused": [
            _shortened(f"{path}: {os.strerror(code)}") for path, code in refused[:MAX_REFUSED_PATHS]
        ],
        "landlock_refused_count": len(refused),
        "landlock_error": "",
    }


def _unenforced(call: str, code: int) -> dict[str, Any]:
    """The report of no Landlock: which call the kernel refused, and why."""
    return {
        "landlock": 0,
        "landlock_network": False,
        "landlock_scoped": False,
        "landlock_refused": [],
        "landlock_refused_count": 0,
        "landlock_error": _shortened(f"{call}: {os.strerror(code or errno.ENOSYS)}"),
    }


# -- what the plugin sees ----------------------------------------------------------------


#: One request on the channel at a time, whichever call's client (a plugin thread may
#: outlive its call) sends it.
_CHANNEL_LOCK = threading.Lock()


class GuestHttp:
    """The plugin's ``http``: the host-owned client's API, each request an RPC to the host,
    where the instance's authority decides and performs it."""

    def __init__(self, channel: Channel, lock: threading.Lock) -> None:
        self._channel = channel
        self._lock = lock
        self._next = 0

    def __repr__(self) -> str:
        return "<PluginHttp (host RPC)>"

    def get(self, url: str, **kwargs: Any) -> Any:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Any:
        return self.request("POST", url, **kwargs)

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        content: bytes | str | None = None,
        json: Any = None,
        data: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        message: dict[str, Any] = {
            "op": "http",
            "method": method,
            "url": url,
            "params": dict(params) if isinstance(params, Mapping) else params,
            "headers": dict(headers) if isinstance(headers, Mapping) else headers,
            "data": dict(data) if isinstance(data, Mapping) else data,
            "json": json,
            "timeout": timeout,
        }
        if isinstance(content, bytes):
            message["content_b64"] = encode_bytes(content)
        elif content is not None:
            message["content"] = content
        with self._lock:
            self._next += 1
            message["id"] = self._next
            try:
                self._channel.send(message)
            except (TypeError, ValueError) as exc:
                raise TypeError("the request's arguments must be JSON values") from exc
            reply = self._channel.recv()
        if reply.get("op") != "http_reply" or reply.get("id") != message["id"]:
            raise ProtocolError("an answer out of order")
        if "error" in reply:
            raise _error(reply["error"])
        return _response(method, url, reply["response"])


def _error(error: Mapping[str, Any]) -> BaseException:
    from django_webfetch.net import errors

    kind = error.get("class")
    if kind == "EgressDenied":
        return errors.EgressDenied(str(error.get("reason", "egress_denied")))
    classes: dict[str, type[Exception]] = {
        "FetchTimeout": errors.FetchTimeout,
        "ResponseTooLarge": errors.ResponseTooLarge,
        "FetchError": errors.FetchError,
        "ResolutionError": errors.ResolutionError,
        "WebFetchError": errors.WebFetchError,
    }
    if kind in classes:
        return classes[str(kind)]()
    if kind in ("TypeError", "ValueError"):
        return (TypeError if kind == "TypeError" else ValueError)(str(error.get("message", "")))
    return errors.WebFetchError()


def _response(method: str, url: str, answer: Mapping[str, Any]) -> Any:
    with own_modules():  # httpx's optional imports look in no plugin's directory
        import httpx

    headers = [(str(k), str(v)) for k, v in answer["headers"]]
    body = decode_bytes(answer["content_b64"])
    request = httpx.Request(str(method).upper(), str(answer.get("url") or url))
    # The body is already decoded: build it without Content-Encoding (httpx would decode
    # it again), then show the headers as the server sent them.
    plain = [(k, v) for k, v in headers if k.lower() != "content-encoding"]
    response = httpx.Response(int(answer["status"]), headers=plain, content=body, request=request)
    response.headers = httpx.Headers(headers)
    return response


class GuestHandle:
    """What a tool handler gets here: the same attributes as ``tools.PluginHandle``."""

    __slots__ = ("alias", "config", "http", "plugin")

    def __init__(self, plugin: str, alias: str, config: Mapping[str, Any], http: Any) -> None:
        self.plugin = plugin
        self.alias = alias
        self.config: Mapping[str, Any] = MappingProxyType(dict(config))
        self.http = http

    def __repr__(self) -> str:
        return f"<PluginHandle {self.plugin}:{self.alias}>"


# -- loading and serving -----------------------------------------------------------------


def _refuse_network_sockets(event: str, args: tuple[Any, ...]) -> None:  # pragma: no cover
    """Audit hook of the plugin process: creating an IP socket is refused and recorded on
    the call's scope (the system call would fail anyway; this says why, on the record)."""
    if event != "socket.__new__" or len(args) < 3:
        return
    if args[1] not in (socket.AF_INET, socket.AF_INET6):
        return
    from django_webfetch.plugins.sandbox import (
        UnguardedNetworkAccess,
        Violation,
        current_scope,
    )

    violation = Violation(event, f"family={args[1]} type={args[2]}", None)
    scope = current_scope()
    if scope is not None:
        with scope.lock:
            scope.violations.append(violation)
    raise UnguardedNetworkAccess(detail=f"{event} {violation.target}")


#: Audit hooks added after the guest's own counter (``sys.addaudithook`` raises its event to
#: the hooks already there, first to this one): a hook cannot be removed, and one a call
#: adds would run in every later call.
_AUDIT_HOOKS_ADDED = [0]


#: Every signal this system has, read once: (number, name in ``_hooks``).
_SIGNALS = tuple((int(n), f"signal {int(n)}") for n in sorted(signal.valid_signals()))


#: ``rt_sigaction``'s number where it is known (the generic table of arm64, riscv64 and
#: loongarch64; x86_64's own); elsewhere libc's ``sigaction`` is asked (it hides the two
#: signals glibc keeps for itself).
_RT_SIGACTION = {"x86_64": 13, "aarch64": 134, "riscv64": 134, "loongarch64": 134}.get(
    os.uname().machine
)
#: Larger than any ``struct sigaction`` (the kernel's is 32 bytes here, glibc's 152).
_SIGACTION_BYTES = 256
#: libc, and ``/proc/self/status`` open for ``pread``: both before the plugin is imported
#: (and the file before Landlock, which refuses ``/proc`` after: ``serve``).
_KERNEL: dict[str, Any] = {"libc": None, "status": -1}
_MASKS = (b"SigBlk:", b"SigIgn:", b"SigCgt:")


def _kernel_dispositions() -> bytes:
    """Every signal's disposition as the kernel holds it: the blocked, ignored and caught
    masks (``/proc/self/status``, read through the descriptor opened before Landlock), and
    the whole action (handler, flags, restorer, mask) of each caught signal (read with
    ``rt_sigaction`` and no new action).  A handler set below Python's ``signal`` module
    (``PyOS_setsig``, or libc's ``sigaction`` through ctypes) changes these, not the table
    ``_signal.getsignal`` answers from (issue 30 attack 6, finding 7).  Compared as bytes:
    any difference is a change.  Without the status file every signal's action is read."""
    libc = _KERNEL["libc"] or _libc()
    caught = (1 << 64) - 1
    found = []
    if _KERNEL["status"] >= 0:
        try:
            status = os.pread(_KERNEL["status"], 1 << 14, 0)
        except OSError:
            return b"unreadable " + os.urandom(8)  # never equal: the process is not kept
        found = [line for line in status.split(b"\n") if line.startswith(_MASKS)]
        caught = int(found[-1].split()[-1], 16) if len(found) == 3 else caught
    action = ctypes.create_string_buffer(_SIGACTION_BYTES)
    for number in range(1, 65):
        if not caught >> (number - 1) & 1:
            continue
        if _RT_SIGACTION is not None:
            failed = libc.syscall(_RT_SIGACTION, number, None, action, 8)
        else:
            failed = libc.sigaction(number, None, action)
        found.append(b"%d-" % number if failed else b"%d:%s" % (number, action.raw))
    return b"\n".join(found)


def _count_audit_hooks(event: str, args: tuple[Any, ...]) -> None:  # pragma: no cover
    if event == "sys.addaudithook":
        _AUDIT_HOOKS_ADDED[0] += 1


def _hooks() -> list[tuple[str, Any]]:
    """Every process-wide hook through which work of a call could run after it, in this
    process: each signal's disposition (``SIGCONT`` runs when the host continues a pooled
    process for its next call), the signal wake-up descriptor, the threading profile and
    trace hooks, the exception, unraisable, display and breakpoint hooks, ``gc.callbacks``,
    import finders and the audit hooks added.  Compared by identity (``_same``), never by
    ``==``: a plugin's object decides what its ``__eq__`` says.  ``sys.setprofile`` and
    ``sys.settrace`` are read (and cleared) by ``_call`` as soon as the tool returns."""
    import gc

    hooks: list[tuple[str, Any]] = []
    for number, name in _SIGNALS:
        try:  # the C function: ``signal.getsignal`` makes an enum of each answer (slow)
            hooks.append((name, _signal.getsignal(number)))
        except (OSError, ValueError):
            continue
    hooks.append(("kernel signal actions", _kernel_dispositions()))
    hooks.append(("wakeup_fd", _signal.set_wakeup_fd(-1)))  # -1 at ready: cleared either way
    hooks += [
        ("threading profile", getattr(threading, "_profile_hook", None)),
        ("threading trace", getattr(threading, "_trace_hook", None)),
        ("threading excepthook", threading.excepthook),
        ("excepthook", sys.excepthook),
        ("unraisablehook", sys.unraisablehook),
        ("displayhook", sys.displayhook),
        ("breakpointhook", sys.breakpointhook),
        ("audit hooks", _AUDIT_HOOKS_ADDED[0]),
    ]
    hooks += [("gc callback", callback) for callback in list(gc.callbacks)]
    hooks += [("meta_path", finder) for finder in list(sys.meta_path)]
    hooks += [("path_hooks", hook) for hook in list(sys.path_hooks)]
    return hooks


def _same(before: list[tuple[str, Any]], after: list[tuple[str, Any]]) -> bool:
    if len(before) != len(after):
        return False
    for (name, value), (other_name, other) in zip(before, after, strict=True):
        if name != other_name:
            return False
        if type(value) in (int, bytes) and type(other) is type(value):
            if value != other:  # numbers and bytes the guest read: compared by value
                return False
        elif value is not other:
            return False
    return True


def _source_only(plugin_path: str, top: str) -> Any:
    """A finder for directory ``plugin_path`` that finds modules by their source only, and
    a path hook giving every directory of the plugin's package (``plugin_path/top`` and
    below) one: every module of the plugin is compiled from its ``.py`` file, never loaded
    from a ``.pyc`` (a ``__pycache__`` entry, checked or unchecked, PEP 552; a sourceless
    module) or an extension module, whatever its package ships (decision 0050,
    tests/plugins/test_hostile_plugin_distributions.py).  Nothing is written (``-B``)."""
    from importlib.machinery import SOURCE_SUFFIXES, FileFinder, SourceFileLoader

    class SourceOnlyLoader(SourceFileLoader):
        def get_code(self, fullname: str) -> Any:
            path = self.get_filename(fullname)
            return self.source_to_code(self.get_data(path), path)

    details = (SourceOnlyLoader, SOURCE_SUFFIXES)
    package = os.path.join(plugin_path, top)
    roots = {package, os.path.realpath(package)}

    def plugin_package_hook(path: str) -> Any:
        full = os.path.abspath(path)
        if any(full == root or full.startswith(root + os.sep) for root in roots):
            return FileFinder(path, details)
        raise ImportError("not the plugin's package")

    sys.path_hooks.insert(0, plugin_package_hook)
    for path in list(sys.path_importer_cache):
        if any(path == root or path.startswith(root + os.sep) for root in roots):
            del sys.path_importer_cache[path]
    return FileFinder(plugin_path, details)


def _import_top(plugin_path: str, top: str) -> None:
    """The plugin's top-level package (or module) from its own directory, whatever else of
    that name ``sys.path`` holds: a package of a site directory does not stand in for it,
    and a module the guest imported (the standard library's, django_webfetch's) is never
    the plugin's.  Every module of it is compiled from its source (``_source_only``)."""
    from importlib.machinery import PathFinder
    from importlib.util import module_from_spec

    if top in sys.modules:
        raise ImportError(f"{top!r} is a module the plugin process uses")
    # The plugin's directory searched by source only for this look-up: it may be a site
    # directory too, whose other packages keep their compiled modules.
    missing = object()
    before = sys.path_importer_cache.get(plugin_path, missing)
    sys.path_importer_cache[plugin_path] = _source_only(plugin_path, top)
    try:
        spec = PathFinder.find_spec(top, [plugin_path])
    finally:
        if before is missing:
            sys.path_importer_cache.pop(plugin_path, None)
        else:
            sys.path_importer_cache[plugin_path] = before  # type: ignore[assignment]
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(top)
    module = sys.modules[top] = module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(top, None)
        raise


class ManifestNondeterministic(Exception):
    """Two reads of the manifest in this process differ (the host refuses the plugin:
    ``manifest_nondeterministic``)."""


def _load(entry: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The entry point's manifest, described (``_describe``), read twice: a manifest its
    code computes differently from one read to the next (the clock, a random draw) is
    refused, since what the operator is shown (``install``, ``upgrade``) would not be what
    another read serves (tests/plugins/test_owned_tool_names_and_groups.py)."""
    import importlib

    module_name, _, attribute = entry.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in filter(None, attribute.split(".")):
        target = getattr(target, part)

    def read() -> Any:
        return target() if callable(target) and not isinstance(target, Mapping) else target

    described, handlers = _describe(read())
    again, _handlers = _describe(read())
    if json.dumps(described, sort_keys=True) != json.dumps(again, sort_keys=True):
        raise ManifestNondeterministic
    return described, handlers


def _describe(raw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the manifest as JSON with each handler replaced by a flag, handlers by tool name)."""
    if not isinstance(raw, Mapping):
        raise TypeError("a manifest must be a mapping")
    described = dict(raw)
    handlers: dict[str, Any] = {}
    tools = []
    for tool in raw.get("tools") or ():
        if isinstance(tool, Mapping):
            tool = dict(tool)
            handler = tool.pop("handler", None)
            if isinstance(tool.get("name"), str) and callable(handler):
                handlers[tool["name"]] = handler
            tool["handler"] = callable(handler)
        tools.append(tool)
    if "tools" in raw:
        described["tools"] = tools
    # Refuses what the channel cannot carry (JSON's gaps, a lone surrogate: the manifest
    # is refused with that error's name, never a message the guest cannot send).
    json.dumps(described, ensure_ascii=False, allow_nan=False).encode("utf-8")
    return described, handlers


def _violations(scope: Any) -> list[list[Any]]:
    """The scope's first 100 violations, each cut as the host keeps it (``host.READY_BYTES``
    counts on it: a ``ready`` within that cap carries any manifest of at most
    ``MAX_MANIFEST_BYTES``)."""
    return [[str(v.event)[:100], str(v.target)[:255], v.port] for v in list(scope.violations)[:100]]


def _serialise(outcome: Any, cap: int) -> dict[str, Any]:
    result: dict[str, Any]
    if isinstance(outcome, str):
        result = {"kind": "text", "text": outcome}
    elif hasattr(outcome, "content") and hasattr(outcome, "ok"):  # a ToolResult
        result = {"kind": "tool_result", "ok": bool(outcome.ok), "text": str(outcome.content)}
    else:
        try:
            result = {"kind": "json", "text": json.dumps(outcome, ensure_ascii=False,
                                                         allow_nan=False)}  # fmt: skip
        except (TypeError, ValueError):
            return {"kind": "not_text"}
    encoded = result["text"].encode("utf-8", "replace")
    if len(encoded) > cap:
        return {"kind": "limit", "what": "output"}
    if result["kind"] == "json":
        # What the host reads it with (``protocol.parse``): a value past its bounds is a
        # limit of the tool's, said here, not a message the host refuses.
        deepest, values = shape(encoded)
        if deepest > MAX_DEPTH or values > MAX_VALUES:
            return {"kind": "limit", "what": "output values"}
    return result


def _valid_text(value: Any) -> Any:
    """``value`` with every string's lone surrogates replaced by U+FFFD (a surrogate pair
    joined), in the nesting of a reply (a dict of strings and lists); what is not a string,
    a list or a dict as it is."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_valid_text(item) for item in value]
    if isinstance(value, dict):
        return {_valid_text(key): _valid_text(item) for key, item in value.items()}
    return value


def _send(channel: Channel, reply: dict[str, Any]) -> None:
    """Send ``reply``; one a plugin's text made unencodable (a lone surrogate in its result,
    its error's name, a violation's target) is sent with that text made valid: the plugin
    gets its answer through, never a process that ends on it (issue 30, attack 16)."""
    try:
        channel.send(reply)
    except UnencodableMessage:
        channel.send(_valid_text(reply))


def _call(
    message: Mapping[str, Any],
    channel: Channel,
    handlers: Mapping[str, Any],
    cap: int,
    at_ready: list[tuple[str, Any]],
) -> dict[str, Any]:
    from django_webfetch.net.errors import EgressDenied, WebFetchError
    from django_webfetch.plugins.sandbox import plugin_scope

    handler = handlers.get(str(message.get("tool")))
    if handler is None:
        return {"op": "result", "kind": "error", "error": "unknown_tool", "violations": []}
    handle = GuestHandle(
        str(message.get("plugin", "")),
        str(message.get("alias", "")),
        message.get("config") or {},
        GuestHttp(channel, _CHANNEL_LOCK),
    )
    reply: dict[str, Any] = {"op": "result"}
    with plugin_scope(str(message.get("reference", "")), tool=str(message.get("tool"))) as scope:
        try:
            reply.update(_serialise(handler(handle, dict(message.get("arguments") or {})), cap))
        except EgressDenied as exc:
            reply.update(kind="egress_denied", reason=exc.reason)
        except (ChannelClosed, ProtocolError):
            raise
        except WebFetchError as exc:
            reply.update(kind="webfetch_error", code=exc.code)
        except MemoryError:
            reply.update(kind="limit", what="memory")
        except RecursionError:
            reply.update(kind="error", error="RecursionError")
        except BaseException as exc:  # a plugin's SystemExit too: the call fails, we serve on
            reply.update(kind="error", error=type(exc).__name__[:100])
        finally:
            # First, before any more of the guest's own Python: a profile or trace function
            # the call set would run it (and its work) after the result is sent.
            profile, trace = sys.getprofile(), sys.gettrace()
            sys.setprofile(None)
            sys.settrace(None)
    reply["violations"] = _violations(scope)
    if profile is not None or trace is not None or not _same(at_ready, _hooks()):
        # Work of this call could run outside it, in the next one: this process serves
        # no other call (the host ends it: ``Pool.release``).
        reply["hooks_changed"] = True
    return reply


#: The only top-level names the guest's own imports may find in the site's package
#: directories (``own_modules``): httpx, which ``_response`` builds the plugin's responses
#: with, and the packages it or its own imports need.  Each is in
#: ``registry.RESERVED_NAMES``: no plugin's entry point can be named so.
SITE_PACKAGES = frozenset(
    {"anyio", "certifi", "h11", "httpcore", "httpx", "idna", "sniffio", "typing_extensions"}
)

#: Where the guest's own imports look (``serve`` sets it): ``stdlib``, the bootstrap's
#: ``sys.path`` (the standard library only), and ``site``, the site's package directories.
_OWN_PATHS: dict[str, list[str]] = {}


class _OwnImportsFinder:
    """``sys.meta_path``'s first finder while the guest imports a module of its own, in
    the importing thread only: a top-level name of ``SITE_PACKAGES`` is found in the site's
    package directories, any other in the interpreter (built-in, frozen) or the standard
    library's directories, or nowhere (``ModuleNotFoundError``, which the import's
    ``except ImportError`` takes as "not installed"): never in a directory the plugin's
    import put on ``sys.path``, whatever that directory holds.  A submodule is found in its
    package's ``__path__``, as always."""

    def __init__(self, stdlib: list[str], site: list[str]) -> None:
        self.stdlib = list(stdlib)
        self.site = list(site)
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if path is not None or threading.get_ident() != self.thread:
            return None
        if name in SITE_PACKAGES:
            spec = PathFinder.find_spec(name, self.site)
        else:
            spec = (
                BuiltinImporter.find_spec(name)
                or FrozenImporter.find_spec(name)
                or PathFinder.find_spec(name, self.stdlib)
            )
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec


@contextlib.contextmanager
def own_modules() -> Iterator[None]:
    """Within it, an import finds only the standard library and ``SITE_PACKAGES``
    (``_OwnImportsFinder``): what a module the guest imports tries and does not find
    (``copy`` tries ``org``; httpx ``brotli``, ``zstandard``, ``click``...) is never
    looked up in a site directory or a plugin's directory, so a package of that name there
    never runs in a plugin process on the guest's behalf (issue 30, round 25, finding 3:
    an ``org`` package ran in every plugin process and wrapped its call loop;
    tests/plugins/test_guest_own_imports.py).  Outside a plugin process (``serve`` not
    started) it changes nothing."""
    if not _OWN_PATHS:
        yield
        return
    finder = _OwnImportsFinder(_OWN_PATHS["stdlib"], _OWN_PATHS["site"])
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def own_imports() -> None:
    """Every module the guest uses, imported (``own_modules``) before it says
    ``contained``, with ``sys.path`` the standard library only: all but httpx, which
    ``_response`` imports (``own_modules`` again) at the plugin's first request, so that a
    plugin process that makes none starts without it."""
    with own_modules():
        import gc  # noqa: F401  # ``_hooks``
        import importlib  # noqa: F401  # ``_load``
        import importlib.machinery  # noqa: F401  # ``_source_only``, ``_import_top``
        import importlib.util  # noqa: F401  # ``_import_top``

        import django_webfetch.net.errors  # noqa: F401  # ``_error``, ``_call``
        import django_webfetch.plugins.sandbox  # noqa: F401  # ``serve``, ``_call``


def serve(channel: Channel, site: list[str] | None = None) -> None:
    """Serve one plugin process; ``site``: the site's package directories
    (``bubblewrap.site_dirs``, the bootstrap's arguments)."""
    site = list(site or ())
    _OWN_PATHS.update(stdlib=list(sys.path), site=site)
    setup = channel.recv()
    if setup.get("op") != "setup":
        raise ProtocolError("expected setup")
    try:
        _quiet_stdio()
        _limits(setup)
        _no_new_privs()
        with contextlib.suppress(OSError):  # read by ``_kernel_dispositions`` (pread)
            _KERNEL["status"] = os.open("/proc/self/status", os.O_RDONLY | os.O_CLOEXEC)
        # Landlock first, then the filter that refuses landlock_* (issue 30, sixth attack,
        # finding 5b: a plugin's own layers are kernel memory a pooled process keeps).
        enforced = _landlock(setup, site)
        _seccomp(setup)
    except Unavailable as exc:
        _send(channel, {"op": "unavailable", "why": str(exc)[:300]})
        return
    finally:
        # Where the site keeps what the sandbox hides is the Landlock rules' business
        # alone: never left where the plugin's code finds it (``gc.get_objects()``, this
        # frame), though ``setup`` stays (issue 30, round 28, finding 4).
        setup.pop("hidden", None)
    own_imports()
    from django_webfetch.plugins.sandbox import plugin_scope

    _KERNEL["libc"] = _libc()  # the snapshot's, before any plugin code (``_hooks``)
    # glibc sets its own handler of an internal signal (SIGSETXID) at a process's first
    # thread: set here, before any snapshot, a plugin's thread changes nothing of it.
    primer = threading.Thread(target=int)
    primer.start()
    primer.join()
    # No signal caught by the guest's own interpreter (Python's SIGINT handler, which no
    # one here sends): a handler the plugin sets, in Python or below it, changes the
    # caught mask the host reads (``host._kernel_state``), not only which function runs.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    # Contained: from here on, a process that ends is the plugin's doing, not the host's.
    # The host reads this process's kernel state now, before any plugin code, and then
    # says ``import``.  What this process enforced of Landlock (which ``/proc`` does not
    # show) is said here and only here: no plugin code has run yet (the import waits for
    # the host's ``import`` below), so the host takes it as the guest's own word; after the
    # import nothing this process says of its sandbox is taken (``ready`` carries none).
    channel.send({"op": "contained", "isolation": enforced})
    if channel.recv().get("op") != "import":
        raise ProtocolError("expected import")
    sys.addaudithook(_count_audit_hooks)
    sys.addaudithook(_refuse_network_sockets)
    # Only now, after every module of the guest's own was imported (``own_imports``): the
    # site's package directories, then, last, the plugin's directory: the standard library
    # and the site's package directories come first, so the plugin's directory provides
    # its own package only (tests/plugins/test_guest_import_order_and_path_owners.py).
    for directory in [*site, str(setup["plugin_path"])]:
        if directory not in sys.path:
            sys.path.append(directory)
    described: dict[str, Any] | None = None
    handlers: dict[str, Any] = {}
    problem = ""
    with plugin_scope("import") as scope:
        try:
            _import_top(str(setup["plugin_path"]), str(setup["top_level"]))
            described, handlers = _load(str(setup["entry"]))
        except BaseException as exc:
            problem = type(exc).__name__[:100]
    _send(
        channel,
        {
            "op": "ready",
            "manifest": described,
            "problem": problem,
            "violations": _violations(scope),
        },
    )
    cap = int(setup["max_output_bytes"])
    at_ready = _hooks()
    while True:
        message = channel.recv()
        if message["op"] == "call":
            reply = _call(message, channel, handlers, cap, at_ready)
            reply["call_id"] = message.get("call_id")  # the host takes no answer to another
            _send(channel, reply)
            if reply.get("hooks_changed"):
                return  # and serves no other call, whatever the host does
        else:
            raise ProtocolError(f"unexpected {message['op']!r}")


def main() -> None:
    os.environ.pop("PWD", None)  # bwrap's --chdir sets it; the environment stays empty
    fd = int(sys.argv[-1])
    channel = Channel(socket.socket(fileno=fd))
    try:
        serve(channel, sys.argv[2:-2])
    except (ChannelClosed, ProtocolError):
        pass
    finally:
        channel.close()
    os._exit(0)
