"""The sandbox every untrusted plugin process starts in, built by bubblewrap (``bwrap``,
Debian's ``bubblewrap``, what Flatpak uses): a well-kept setuid-free binary that makes the
namespaces, the mount view and the seccomp filter from its command line (DESIGN.md §8).

What the command below gives the plugin process:

- its own **user namespace**, uid/gid 65534, every capability dropped, no further user
  namespace (``--disable-userns``): it has no privilege over anything of the host; where
  the site runs as root, bwrap itself is started under a uid and gid of the plugin
  process's own (``identity``, ``launch``), so uid 65534 inside is that unprivileged uid
  outside, never root;
- its own **PID namespace**, where it is PID 1: no host process can be named, so no
  signal (``kill``, ``F_SETOWN``/``SIGIO``), ``ptrace``, scheduling, priority, affinity or
  I/O-priority call reaches one;
- its own **network namespace** with no interface but ``lo``: the inherited socketpair to
  the host is its only channel;
- its own **IPC, UTS and cgroup namespaces**, and a new session (no terminal);
- a **read-only mount view** of only the interpreter (its executable, standard library and
  ``libpython``: never the rest of its prefix, the base interpreter's package directories
  that are none of the site's, nor the root of a virtual environment), the
  site's package directories, the plugin's own package and the system libraries, a fresh
  ``/proc`` of its PID namespace, a ``/dev`` of ``null``/``zero``/``urandom`` only, a small
  ``/tmp`` of its own (its scratch directory), and nothing of the site: no project
  directory, settings, database, ``/etc`` beyond the loader's cache, ``/home``, ``/root``
  or ``/run``; the site's own code wherever it lies in a bound directory, the system
  libraries' included (every copy on ``sys.path`` of the top-level packages of
  ``DJANGO_SETTINGS_MODULE`` and ``ROOT_URLCONF``, a zip archive one is imported from,
  ``WEBFETCH_PLUGIN_HIDDEN_PATHS``) is masked with every copy of it (``hidden_paths``,
  ``copies``: its bytecode, a legacy ``.pyc``, editors' backups), and the guest leaves it
  out of its Landlock rules (``guest._excluding``); so is the site's data its settings
  name (``_site_data``: SQLite databases with their journals, ``MEDIA_ROOT``, log files
  and the rest, and ``BASE_DIR`` whole where it holds nothing the guest needs:
  ``_site_base``; docs/decisions/0060), and so are the root of the site's
  virtual environment and the base interpreter's package directories that are none of the
  site's, wherever a bound directory holds them (``_prefix_hidden``); a hidden path that
  holds what the guest needs is hollowed (an empty directory, what the guest needs bound
  back beneath it: ``_placed``, ``_arranged``), and one that is what it needs is never
  left readable: the sandbox is not built (``unmaskable``);
- an empty environment;
- the **allow-list seccomp filter** of ``ALLOWED`` (default: ``EPERM``), loaded by bwrap
  just before it executes the interpreter; the guest narrows it further before any plugin
  code runs (``guest._seccomp``).

Where a piece of this cannot be built (no ``bwrap``, user namespaces refused, seccomp
refused), the process does not start and the host says why with a stable reason
(``REASONS``): nothing of an untrusted package is run then.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib.machinery
import itertools
import os
import re
import socket
import stat
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

__all__ = [
    "ALLOWED",
    "REASONS",
    "SandboxSpec",
    "bwrap_path",
    "command",
    "covers",
    "reason_of",
    "seccomp_program",
    "sources",
]

#: Where bwrap is; ``WEBFETCH_PLUGIN_BWRAP`` (environment) names another (tests point it at
#: a missing file to play a host without bubblewrap).
DEFAULT_BWRAP = "/usr/bin/bwrap"
#: The uid and gid the plugin runs as inside its user namespace ("nobody").
SANDBOX_ID = 65534
#: The plugin's own /tmp (its scratch directory) and /dev, in bytes: files there hold
#: memory outside the address-space limit, so they are small.
TMP_BYTES = 16 * 1024 * 1024
DEV_BYTES = 64 * 1024
#: Inodes of the private /tmp (files and directories, its own root included): each holds
#: kernel memory however few bytes it has.  bwrap cannot bound them (``--size`` only): a
#: root host's ``launch`` mounts the tmpfs itself, with ``nr_inodes``, at ``TMP_STAGING``
#: in its own mount namespace, and bwrap binds it as /tmp (``command``'s ``tmp_from``).
TMP_FILES = 4096
TMP_STAGING = "/dev/shm"

#: Stable reasons a sandbox could not be built (``webfetch plugin list``, check W033).
REASONS = {
    "bwrap_missing": "bubblewrap (bwrap) is not installed",
    "userns_unavailable": "the kernel refuses to create user namespaces",
    "seccomp_unavailable": "the kernel refuses seccomp filters",
    "libseccomp_unavailable": "libseccomp (pyseccomp) is missing, the filter cannot be built",
    "sandbox_failed": "bubblewrap could not build the sandbox",
    "mount_point_gone": "a path the sandbox masks went away while the sandbox was built "
    "(twice in a row)",
    "uid_unavailable": "no unprivileged uid is free for the plugin process (a root site)",
    "site_code_unmaskable": "a path the sandbox hides is what the plugin process needs "
    "(its own package, the standard library, django_webfetch, a package directory, a "
    "directory bound whole), so it cannot be masked",
}


class PluginEntryLinked(OSError):
    """An entry of the plugin's directory named like its top-level package or module is a
    symbolic link (``filename``): the sandbox binds a plugin's own files only, so no
    process of it is started (``host.PATH_UNSAFE``; docs/decisions/0058, round 29)."""


class SiteCodeUnmaskable(OSError):
    """A path the sandbox hides (the site's code, ``_site_code``; ``_prefix_hidden``) is a
    path the guest needs, so it cannot be masked in the sandbox: the process is not started
    (reason ``site_code_unmaskable``) rather than the path left readable
    (docs/decisions/0058; one that only holds such a path is hollowed: 0061)."""


_MAP_SHARED = 0x01
_MAP_ANONYMOUS = 0x20
_CLONE_THREAD = 0x00010000
#: The type bits of socketpair's second argument (SOCK_NONBLOCK and SOCK_CLOEXEC above).
_SOCK_TYPE_MASK = 0xF
#: Out-of-band data (``MSG_OOB``): on ``AF_UNIX`` stream sockets the code of CVE-2025-38236;
#: refused in every send and receive call's flags.
MSG_OOB = 0x1

#: The allow-list: (reason, syscalls).  Every other system call fails with EPERM.  The
#: test tests/plugins/test_containment.py::test_the_allow_list_is_what_the_docs_say prints
#: and checks it.  Calls with argument conditions are in ``_CONDITIONAL``.
ALLOWED: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "start: bwrap executes the interpreter after loading this filter; the guest's own "
        "filter refuses every later exec before any plugin code runs",
        ("execve",),
    ),
    (
        "private memory: counted by RLIMIT_AS/RLIMIT_DATA (shared anonymous mappings are "
        "refused, see mmap below)",
        ("brk", "munmap", "mremap", "mprotect", "madvise", "membarrier"),
    ),
    (
        "files: the read-only view and the private /tmp",
        (
            "read",
            "write",
            "readv",
            "writev",
            "pread64",
            "pwrite64",
            "preadv",
            "pwritev",
            "preadv2",
            "pwritev2",
            "open",
            "openat",
            "close",
            "close_range",
            "stat",
            "fstat",
            "lstat",
            "newfstatat",
            "statx",
            "statfs",
            "fstatfs",
            "lseek",
            "access",
            "faccessat",
            "faccessat2",
            "getdents",
            "getdents64",
            "readlink",
            "readlinkat",
            "getcwd",
            "chdir",
            "fchdir",
            "mkdir",
            "mkdirat",
            "unlink",
            "unlinkat",
            "rename",
            "renameat",
            "renameat2",
            "rmdir",
            "ftruncate",
            "truncate",
            "fsync",
            "fdatasync",
            "fchmod",
            "chmod",
            "fchmodat",
            "umask",
            "utimensat",
            "dup",
            "dup2",
            "dup3",
            "pipe",
            "pipe2",
            "getxattr",
            "lgetxattr",
            "fgetxattr",
            "listxattr",
            "llistxattr",
            "flistxattr",
            "sendfile",
            "copy_file_range",
            "fadvise64",
        ),  # fmt: skip
    ),
    (
        "the RPC channel: the inherited, connected socket (no socket() at all: the network "
        "namespace has no interface anyway; no setsockopt(): nothing the guest runs sets an "
        "option, and SO_SNDBUF/SO_RCVBUF would let a socket queue kernel memory past every "
        "limit; no sendmsg/recvmsg/sendmmsg/recvmmsg: socket.send and recv are sendto and "
        "recvfrom, with conditions below, and SCM_RIGHTS would put descriptors in flight, "
        "each keeping its socket's queued bytes while in no /proc/<pid>/fd)",
        (
            "shutdown",
            "getsockname",
            "getpeername",
        ),  # fmt: skip
    ),
    (
        "waiting and threads' synchronisation",
        (
            "select",
            "pselect6",
            "poll",
            "ppoll",
            "epoll_create",
            "epoll_create1",
            "epoll_ctl",
            "epoll_wait",
            "epoll_pwait",
            "epoll_pwait2",
            "eventfd2",
            "nanosleep",
            "clock_nanosleep",
            "futex",
            "set_robust_list",
            "get_robust_list",
            "sched_yield",
        ),  # fmt: skip
    ),
    (
        "time: reading clocks only (clock_settime, settimeofday, adjtimex are not here)",
        ("clock_gettime", "clock_getres", "gettimeofday", "time"),
    ),
    (
        "about itself: identity, limits and CPU set (reading), random bytes",
        (
            "getpid",
            "gettid",
            "getppid",
            "getuid",
            "geteuid",
            "getgid",
            "getegid",
            "getgroups",
            "getresuid",
            "getresgid",
            "getpgrp",
            "getpgid",
            "getsid",
            "uname",
            "sysinfo",
            "getrusage",
            "times",
            "getrlimit",
            "sched_getaffinity",
            "sched_getscheduler",
            "sched_getparam",
            "getpriority",
            "getcpu",
            "getrandom",
        ),  # fmt: skip
    ),
    (
        "lowering its own limits (raising a hard limit needs CAP_SYS_RESOURCE in the "
        "initial namespace, which it has not)",
        ("setrlimit", "prlimit64"),
    ),
    (
        "signals: in its own PID namespace only its own threads exist to receive one",
        (
            "rt_sigaction",
            "rt_sigprocmask",
            "rt_sigreturn",
            "sigaltstack",
            "rt_sigpending",
            "rt_sigtimedwait",
            "rt_sigsuspend",
            "kill",
            "tgkill",
            "tkill",
            "restart_syscall",
        ),  # fmt: skip
    ),
    (
        "threads (clone only with CLONE_THREAD, below) and the C library's thread setup",
        ("set_tid_address", "rseq", "arch_prctl", "exit", "exit_group"),
    ),
    (
        "narrowing itself further: Landlock, then the guest's own seccomp filter, which "
        "refuses all four from then on (no_exec_program: a Landlock layer a plugin added "
        "would keep a copy of every rule in kernel memory, for the life of a pooled process)",
        ("seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"),
    ),
)

#: fcntl commands a Python program uses: F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL,
#: F_GETLK, F_OFD_GETLK, F_DUPFD_CLOEXEC, F_GETPIPE_SZ, F_GET_SEALS.  Not
#: F_SETOWN(_EX)/F_SETSIG (signals without kill), F_SETLEASE, F_NOTIFY, F_SETPIPE_SZ
#: (pipe buffers are memory outside every limit), F_ADD_SEALS, nor the commands that take
#: a lock (``LOCK_COMMANDS``).
FCNTL_COMMANDS = (0, 1, 2, 3, 4, 5, 36, 1030, 1032, 1034)
#: fcntl commands that take (or drop) a file lock: F_SETLK, F_SETLKW, F_OFD_SETLK,
#: F_OFD_SETLKW; with ``flock``, refused with ``ENOSYS`` (locks not implemented here), so a
#: plugin process holds no file lock, by construction: none of the site's files (a
#: database's) is kept locked, and no lock's kernel memory idles in a pooled process,
#: whatever the host could read of the kernel's lock table (issue 30, round 22; decision
#: 0062).  ``ENOSYS``, not ``ENOLCK``: SQLite takes ``ENOLCK`` for a busy database and
#: waits out its busy timeout on every statement (issue 30, round 23); with ``ENOSYS`` a
#: SQLite file fails at once (``disk I/O error``) and ``filelock`` says the file system
#: does not support locks.  An in-memory database, or a file opened with ``nolock=1`` (or
#: ``immutable=1`` for read-only data), needs none.
LOCK_COMMANDS = (6, 7, 37, 38)
#: ioctl requests: FIOCLEX, FIONCLEX, FIONBIO, FIONREAD, TCGETS (isatty).  Not TIOCSTI.
IOCTL_REQUESTS = (0x5451, 0x5450, 0x5421, 0x541B, 0x5401)
#: prctl options: PR_GET_PDEATHSIG, PR_GET_DUMPABLE, PR_SET_NAME, PR_GET_NAME,
#: PR_GET_SECCOMP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS,
#: PR_CAPBSET_READ.  Never PR_SET_PDEATHSIG (1): bwrap's ``--die-with-parent`` is the
#: plugin process's death signal, and clearing it would let the process outlive its host
#: (issue 30, sixth attack, finding 1); the guest checks it is SIGKILL.
PRCTL_OPTIONS = (2, 3, 15, 16, 21, 22, 38, 39, 23)
#: prctl options that are never in PRCTL_OPTIONS (tests/plugins/test_containment.py).
PRCTL_REFUSED = (1,)
#: getsockopt options, of SOL_SOCKET only: SO_TYPE, SO_ERROR, SO_PROTOCOL, SO_DOMAIN (what
#: ``socket.socket(fileno=...)`` and a connect's outcome read).  Never SO_PEERPIDFD (77):
#: a descriptor of the host process from the channel (issue 30, round 31, finding 1), nor
#: SO_PEERCRED (17) or SO_PEERSEC (31), what the peer is.
GETSOCKOPT_OPTIONS = (3, 4, 38, 39)
#: getsockopt options that are never in GETSOCKOPT_OPTIONS (tests/plugins/test_containment.py).
GETSOCKOPT_REFUSED = (17, 31, 59, 77)
#: With arguments: why each is allowed only so.
CONDITIONAL = {
    "getsockopt": "SOL_SOCKET's options of GETSOCKOPT_OPTIONS only: no SO_PEERPIDFD (a "
    "descriptor of the host process, outside the PID namespace), no peer credentials",
    "mmap": "private or file-backed only: MAP_SHARED|MAP_ANONYMOUS is memory a file "
    "descriptor can keep past the address-space limit",
    "clone": "threads only (CLONE_THREAD): no new process",
    "clone3": "ENOSYS: its flags are in memory a filter cannot read; the C library then uses clone",
    "fcntl": "the commands of FCNTL_COMMANDS; those of LOCK_COMMANDS fail with ENOSYS",
    "flock": "never: ENOSYS (no file lock, see LOCK_COMMANDS)",
    "ioctl": "the requests of IOCTL_REQUESTS",
    "prctl": "the options of PRCTL_OPTIONS",
    "socketpair": "AF_UNIX stream only (asyncio's self-pipe); both ends stay in the "
    "process, at the default buffer size (setsockopt is refused), and RLIMIT_NOFILE "
    "(guest.MAX_FILES) bounds how many exist; none is in flight (sendmsg is refused)",
    "sendto": "without an address (a send on the connected channel) and without MSG_OOB",
    "recvfrom": "without MSG_OOB (out-of-band data on AF_UNIX sockets: CVE-2025-38236's code)",
}


@dataclass(frozen=True)
class SandboxSpec:
    """What one plugin process's sandbox holds besides the interpreter."""

    #: The plugin's ``sys.path`` entry and its top-level package (``Origin``).
    plugin_path: str
    top_level: str
    #: Inherited file descriptors: the RPC socket, bwrap's info pipe, the seccomp program.
    rpc_fd: int
    info_fd: int
    seccomp_fd: int
    #: The working directory inside (under the private /tmp).
    scratch: str


def bwrap_path() -> str:
    return os.environ.get("WEBFETCH_PLUGIN_BWRAP") or DEFAULT_BWRAP


def interpreter_path() -> str:
    """The interpreter as the sandbox runs it: the executable itself (symbolic links
    resolved), not a virtual environment's ``bin/python``: the guest needs nothing of the
    virtual environment but its package directories, given explicitly (``site_dirs``)."""
    return os.path.realpath(sys.executable)


#: The guest's first lines: ``sys.path`` is the standard library only; ``django_webfetch``
#: is found in argv[1] only.  The site's package directories (argv[2:-2]) go on
#: ``sys.path`` at the host's ``import``, after ``contained`` (``guest.serve``; until then
#: the guest's own imports find only httpx's of them: ``guest.own_imports``).
_BOOTSTRAP = (
    "import sys; "
    "from importlib.machinery import PathFinder; "
    "from importlib.util import module_from_spec; "
    "spec = PathFinder.find_spec('django_webfetch', [sys.argv[1]]); "
    "package = sys.modules['django_webfetch'] = module_from_spec(spec); "
    "spec.loader.exec_module(package); "
    "from django_webfetch.plugins.runtime.guest import main; main()"
)


def _package_root() -> str:
    """The directory holding ``django_webfetch`` (a checkout, or site-packages)."""
    import django_webfetch

    return os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))


def _python_dirs() -> list[str]:
    """What the guest runs on, and nothing else of the interpreter's prefix or of a virtual
    environment (whose root holds ``bin/activate`` and the env files many deployments keep
    beside it: issue 30, sixth attack, finding 2): the executable, the standard library
    (``lib-dynload`` and a zipped standard library), ``libpython`` where the executable is
    linked to one, a copied virtual environment's ``pyvenv.cfg`` (its executable finds the
    standard library through it), the package directories the guest imports from
    (``site_dirs``: httpx and the plugin's dependencies) and ``django_webfetch``."""
    executable = interpreter_path()
    dirs = {executable, os.path.dirname(os.path.realpath(os.__file__))}
    dynload = sysconfig.get_config_var("DESTSHARED")
    if isinstance(dynload, str):
        dirs.add(dynload)
    # The zipped standard library (``python311.zip``) only: any other archive on
    # ``sys.path`` is no package directory of the guest, and may be the site's own code
    # (tests/plugins/test_sites_code_hidden_from_the_sandbox.py).
    stdlib_zip = f"python{sys.version_info.major}{sys.version_info.minor}.zip"
    for entry in sys.path:
        if entry.endswith("lib-dynload") or (
            os.path.basename(entry) == stdlib_zip and os.path.isfile(entry)
        ):
            dirs.add(entry)
    library = _libpython()
    if library is not None:
        dirs.add(os.path.realpath(library))
    prefix = os.path.realpath(sys.prefix)
    if sys.prefix != sys.base_prefix and executable.startswith(prefix + "/"):
        dirs.add(os.path.join(prefix, "pyvenv.cfg"))
    dirs.update(site_dirs())
    dirs.add(os.path.join(_package_root(), "django_webfetch"))
    return [os.path.realpath(d) for d in dirs if os.path.exists(d)]


def _libpython() -> str | None:
    """The shared ``libpython`` the executable loads (by its ``SONAME`` in ``LIBDIR``), or
    ``None`` for a statically linked interpreter."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return None
    directory = sysconfig.get_config_var("LIBDIR")
    name = sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")
    if not isinstance(directory, str) or not isinstance(name, str):
        return None
    path = os.path.join(directory, name)
    return path if os.path.exists(path) else None


def site_dirs() -> list[str]:
    """The package directories of the site's ``sys.path`` (``site-packages``,
    ``dist-packages``), resolved, in order: the guest's ``sys.path`` after the standard
    library.  The guest starts with ``-S``, so no ``.pth`` file of these directories runs
    in it (an installed distribution's ``.pth`` would run before the guest sets its
    limits: tests/plugins/test_pth_files_and_entry_point_values.py)."""
    found: list[str] = []
    for entry in sys.path:
        if not entry.endswith(("site-packages", "dist-packages")):
            continue
        _note_parent(entry)
        if os.path.isdir(entry):
            real = os.path.realpath(entry)
            if real not in found:
                found.append(real)
    return found


def _collapse(paths: list[str]) -> list[str]:
    """``paths`` without those already under another one, shortest first."""
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def _system() -> list[tuple[str, ...]]:
    """The loader, the C library and the shared libraries Python's modules link:
    ``("bind", path)`` and ``("symlink", target, path)``."""
    found: list[tuple[str, ...]] = []
    for top in ("/usr/lib", "/usr/lib64", "/usr/local/lib"):
        if os.path.isdir(top) and not os.path.islink(top):
            # Bound where it resolves, the name given a link to it: every path the
            # sandbox hides is resolved (``_site_code``, ``_site_data``), so a bind under
            # a linked parent (an OSTree host's ``/usr/local -> ../var/usrlocal``) must be
            # its resolved path for those to fall under it and be masked (issue 30, round
            # 28, finding 5).
            real = os.path.realpath(top)
            found.append(("bind", real))
            if real != top:
                found.append(("symlink", real, top))
    for top in ("/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(top):
            found.append(("symlink", os.readlink(top), top))
        elif os.path.isdir(top):
            found.append(("bind", top))
    if os.path.isfile("/etc/ld.so.cache"):
        found.append(("bind", "/etc/ld.so.cache"))
    return found


def _layout(spec: SandboxSpec) -> list[tuple[str, ...]]:
    """What is bound read-only into the sandbox, in order: the system libraries, then the
    interpreter, its packages and the plugin's package; then each hidden path that holds
    what the guest needs hollowed (``("hollow", path)``: an empty directory laid over it,
    what the guest needs beneath it bound back, each mount after those above it:
    ``_hollowed``); then the hidden paths that hold nothing it needs masked (``("mask",
    path)``).  Neither a hollow nor a mask is a source: nothing of the host is opened for
    it."""
    system = _system()
    kept, needed = _bound(spec)
    visible = [*kept, *(entry[1] for entry in system if entry[0] == "bind")]
    exposed, hollows, masked = _placed(visible, needed)
    if exposed:
        raise SiteCodeUnmaskable(errno.EPERM, "site_code_unmaskable", exposed[0])
    layout = list(system)
    library = _libpython()
    links: list[tuple[str, ...]] = []
    # The executable asks for libpython by its SONAME, maybe a link to the file bound.
    if (
        library is not None
        and os.path.islink(library)
        and not any(_under(library, entry[-1]) for entry in system if entry[0] == "bind")
    ):
        links.append(("symlink", os.readlink(library), library))
    return layout + _arranged(kept, hollows, masked, [*needed, *site_dirs()], links)


def _arranged(
    kept: list[str],
    hollows: list[str],
    masked: list[str],
    wanted: list[str],
    links: list[tuple[str, ...]],
) -> list[tuple[str, ...]]:
    """The mounts after the system libraries', in order: ``links`` and the directories of
    ``kept`` outside every hollow; then each hollow and what the guest needs (``wanted``)
    bound back beneath it, by depth (a mount after the one that holds it: a hollow after
    the bind it lies in, before what is bound back into it); then the masks."""
    outer: list[tuple[str, ...]] = []
    inner: list[tuple[str, ...]] = [("hollow", path) for path in hollows]
    for link in links:
        (inner if any(_under(link[-1], h) for h in hollows) else outer).append(link)
    outer += [("bind", path) for path in kept if not any(_under(path, h) for h in hollows)]
    inner += [("bind", path) for path in _hollowed(hollows, wanted)]
    inner.sort(key=lambda entry: entry[-1].rstrip("/").count("/"))  # stable
    return outer + inner + [("mask", path) for path in masked]


def _hollowed(hollows: list[str], wanted: list[str]) -> list[str]:
    """What the guest needs (``wanted``) under a hollow: bound back into it, each but those
    under another one with no hollow between (bound with it)."""
    inside = [path for path in _unique(wanted) if any(_under(path, h) for h in hollows)]
    return [
        path
        for path in inside
        if not any(
            _under(path, outer) and not any(_under(h, outer) and _under(path, h) for h in hollows)
            for outer in inside
        )
    ]


def _visible(spec: SandboxSpec) -> tuple[list[str], list[str]]:
    """(every directory and file bound, the system libraries' directories included; those
    of them the guest needs): where the site's code is masked (``hidden_paths``)."""
    kept, needed = _bound(spec)
    system = [entry[1] for entry in _system() if entry[0] == "bind"]
    return [*kept, *system], needed


def _bound(spec: SandboxSpec) -> tuple[list[str], list[str]]:
    """(the directories and files bound, collapsed; those of them the guest needs: every
    one but the site's package directories)."""
    binds = list(_python_dirs())
    packages = site_dirs()
    needed = [path for path in binds if path not in packages]
    # A Python name only: an absolute path or ``..`` would make the bind leave the
    # plugin's directory (tests/plugins/test_pth_files_and_entry_point_values.py).
    if spec.top_level.isidentifier():
        home = os.path.realpath(spec.plugin_path)
        for candidate in (spec.top_level, spec.top_level + ".py"):
            full = os.path.join(spec.plugin_path, candidate)
            if not os.path.lexists(full):
                continue
            # The plugin's own entry, never where a link leads: a link named like its
            # package or module (``webfetch_x.py -> ..``, ``-> /proc/self/cwd/.env``) would
            # bind its target, resolved in the host, into the sandbox (issue 30, round 29,
            # finding 1).  Refused, whether or not the import would use it.
            if os.path.islink(full) or os.path.realpath(full) != os.path.join(home, candidate):
                raise PluginEntryLinked(errno.ELOOP, "plugin_entry_linked", full)
            binds.append(os.path.join(home, candidate))
            needed.append(os.path.join(home, candidate))
    return _collapse(binds), needed


def _under(path: str, top: str) -> bool:
    return path.startswith(top.rstrip("/") + "/")


def site_names() -> list[str]:
    """The top-level names of the site's own code: those of ``DJANGO_SETTINGS_MODULE``
    (the environment's and the one Django loaded) and ``ROOT_URLCONF``."""
    names = [os.environ.get("DJANGO_SETTINGS_MODULE") or ""]
    if "django.conf" in sys.modules:
        from django.conf import settings

        if settings.configured:
            names += [getattr(settings, "SETTINGS_MODULE", None) or ""]
            urlconf = getattr(settings, "ROOT_URLCONF", None)
            names += [urlconf if isinstance(urlconf, str) else ""]
    found: list[str] = []
    for name in names:
        top = name.partition(".")[0]
        if top.isidentifier() and top not in found:
            found.append(top)
    return found


def _places(top: str) -> list[str]:
    """Every place the top-level module or package ``top`` is on the site's ``sys.path``:
    where the import system finds it, and each copy in every other entry that it never
    reaches (a project run from its directory and also installed in ``site-packages``),
    with the archive a copy is imported from (``zipimport``: ``spec.loader.archive``)."""
    import importlib.util

    specs = []
    entries = [*sys.path, *site_dirs()]
    for entry in entries:
        # Each directory the import system lists for it decides what is found there.
        _note(os.path.abspath(entry or "."))
    with contextlib.suppress(ImportError, ValueError):
        specs.append(importlib.util.find_spec(top))
    for entry in entries:
        with contextlib.suppress(ImportError, ValueError, OSError):
            specs.append(importlib.machinery.PathFinder.find_spec(top, [entry]))
    paths: list[str] = []
    for spec in specs:
        if spec is None:
            continue
        if spec.submodule_search_locations:
            paths += [str(p) for p in spec.submodule_search_locations]
        elif spec.origin and os.path.isabs(spec.origin):
            paths.append(spec.origin)
        archive = getattr(spec.loader, "archive", None)
        if isinstance(archive, str):
            paths.append(archive)
    return paths


def _site_code(needed: list[str] | None = None) -> list[str]:
    """The site's own code and data, resolved, each that exists: every copy on
    ``sys.path`` of the top-level packages (or modules) of ``DJANGO_SETTINGS_MODULE`` and
    ``ROOT_URLCONF`` (``site_names``, ``_places``), the paths of
    ``WEBFETCH_PLUGIN_HIDDEN_PATHS``, the data the settings name (``_site_data``) and,
    when ``needed`` is given, ``BASE_DIR`` where it holds none of it (``_site_base``)."""
    paths: list[str] = []
    places = {top: _places(top) for top in site_names()}
    for place in places.values():
        paths += place
    # Every other release of the project beside the one the site runs from (round 28).
    paths += _releases(places, needed)
    from django.conf import settings

    if settings.configured:
        from django_webfetch.conf import conf

        paths += conf.WEBFETCH_PLUGIN_HIDDEN_PATHS
    paths += _site_data()
    if needed is not None:
        paths += _site_base(needed)
    found: list[str] = []
    for path in paths:
        # Both names of a path: as given (the kernel walks a link before the ``..`` after
        # it) and its lexical form (``abspath`` drops ``link/..`` as text); issue 30,
        # round 22, finding 2.
        for form in _unique([path, os.path.abspath(path)]):
            real = os.path.realpath(form)
            candidates = [real]
            for name in _unique([os.path.abspath(form), _beside(form)]):
                if name != real:
                    # Reached through a link: its copies beside the name the site gives
                    # it too (an operator's ``db.sqlite3.bak`` beside a linked database;
                    # issue 30, round 21), not only beside its target (``_placed``).
                    candidates += [os.path.realpath(copy) for copy in _copies_noted(name)]
            for candidate in candidates:
                _note_parent(candidate)
                if os.path.exists(candidate) and candidate not in found:
                    found.append(candidate)
    return found


def _beside(path: str) -> str:
    """The name ``path`` reaches with every directory on the way resolved as the kernel
    walks it (a link before the ``..`` after it), its last component not: where the
    copies beside the name the site gives lie.  A path ending in ``.`` or ``..`` names a
    directory, resolved whole."""
    head, name = os.path.split(path.rstrip("/") or "/")
    if name in ("", ".", ".."):
        return os.path.realpath(path)
    return os.path.join(os.path.realpath(head), name)


#: The files SQLite writes beside a database ``NAME``: its write-ahead log, its
#: shared-memory index and its rollback journal; a super-journal is ``NAME-mj<random>``
#: (``_site_data`` takes every existing ``NAME-*``).
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")


def _paths_of(value: object, *, empty: bool = False) -> list[str]:
    """A path-valued setting (``str`` or ``os.PathLike``; relative to the host's working
    directory, as the site opens it) under both names the site may open it by, absolute,
    neither resolved (``_site_code`` resolves each, and seeks its copies beside the name
    and beside its target): as given, joined to the working directory and never
    normalised (the kernel, SQLite, the file session backend and ``tempfile`` walk a link
    before the ``..`` after it), and its lexical form (``os.path.abspath``, which drops
    ``link/..`` as text: what Django's storages, file cache, e-mail backend and
    ``logging`` open); one when both are the same; none for a value that is unset, empty
    or no path, but the working directory for an empty one when ``empty`` (a setting the
    site resolves as ``os.path.abspath("")``: ``MEDIA_ROOT``'s default; round 24).
    docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst (round 22)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    if empty and value == "":
        return [os.getcwd()]
    if not isinstance(value, str) or not value or "\0" in value:
        return []
    return _unique([os.path.join(os.getcwd(), value), os.path.abspath(value)])


def _sqlite_files(name: object) -> list[str]:
    """The file of a SQLite ``NAME`` under both its names (``_paths_of``; Django opens it
    with ``uri=True``: ``file:`` URIs too), or none for an in-memory database."""
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    if not isinstance(name, str) or name in ("", ":memory:"):
        return []
    if name.startswith("file:"):
        import urllib.parse

        parts = urllib.parse.urlsplit(name)
        query = urllib.parse.parse_qs(parts.query)
        path = urllib.parse.unquote(parts.path)
        if "memory" in query.get("mode", []) or path in ("", ":memory:"):
            return []
        name = path
    return _paths_of(name)


def _logging_files(config: object) -> list[str]:
    """The files of ``LOGGING``'s handlers (``filename``, whatever the handler's class or
    factory), and of every file handler the host's ``logging`` holds (``basicConfig``, a
    handler made in code, a ``QueueListener``'s)."""
    import logging

    found: list[object] = []
    handlers = config.get("handlers") if isinstance(config, Mapping) else None
    if isinstance(handlers, Mapping):
        for handler in handlers.values():
            if isinstance(handler, Mapping):
                found.append(handler.get("filename"))
    live: list[object] = [ref() for ref in list(getattr(logging, "_handlerList", []))]
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        live += list(getattr(logger, "handlers", []))
    for handler in live:
        if isinstance(handler, logging.FileHandler):
            found.append(handler.baseFilename)
    return [path for value in found for path in _paths_of(value)]


#: The ``OPTIONS`` of a ``DATABASES`` entry that name a client's credential files:
#: PostgreSQL's (libpq) password file and TLS client key, certificate, root certificate and
#: revocation list, MySQL's option file (``read_default_file``, a ``my.cnf`` with the
#: password).  Masked as data with their copies (issue 30, round 26, finding 5).
CREDENTIAL_OPTIONS = ("passfile", "sslkey", "sslcert", "sslrootcert", "sslcrl", "read_default_file")

#: What the name of a key of a backend's ``OPTIONS`` holds (lowercased, ``-`` as ``_``)
#: when its value names a client's key, certificate, CA bundle or password file: redis-py's
#: ``ssl_keyfile``/``ssl_certfile``/``ssl_ca_certs`` (Django's ``RedisCache``, django-redis's
#: ``CONNECTION_POOL_KWARGS``), ``ssl``'s ``keyfile``/``cafile``, libpq's names; and
#: every key ending in ``_file``, ``_filename`` or ``_path`` (``key_filename``,
#: ``known_host_file``).  Such a value is the site's data where it names an existing
#: regular file (``_option_files``; issue 30, round 27, finding 4).
CREDENTIAL_KEY_PARTS = (
    "keyfile",
    "certfile",
    "ca_certs",
    "cafile",
    "passfile",
    "sslkey",
    "sslcert",
    "sslrootcert",
    "sslcrl",
)
CREDENTIAL_KEY_ENDINGS = ("_file", "_filename", "_path")

#: How deep and how many values ``_option_files`` walks in one ``OPTIONS``: settings are
#: the site's own, but a walk per sandbox build stays bounded whatever they hold.
OPTIONS_WALK_DEPTH = 8
OPTIONS_WALK_VALUES = 1000


def _credential_key(key: object) -> bool:
    """Whether an ``OPTIONS`` key names a credential file (``CREDENTIAL_KEY_PARTS``,
    ``CREDENTIAL_KEY_ENDINGS``, ``CREDENTIAL_OPTIONS``)."""
    if not isinstance(key, str):
        return False
    name = key.lower().replace("-", "_")
    return (
        name in CREDENTIAL_OPTIONS
        or any(part in name for part in CREDENTIAL_KEY_PARTS)
        or name.endswith(CREDENTIAL_KEY_ENDINGS)
    )


def _option_files(options: object) -> list[object]:
    """The values of a backend's ``OPTIONS`` (nested mappings, lists and tuples, to
    ``OPTIONS_WALK_DEPTH`` levels and ``OPTIONS_WALK_VALUES`` values) held under a key that
    names a credential file (``_credential_key``; each item of a list under one) and that
    name an existing regular file under either of their names (``_paths_of``): a value that
    is no path (``"required"``, a number, an ``SSLContext``) or names a socket, a
    directory or nothing is not taken.  docs/decisions/0060 (round 27)."""
    found: list[object] = []
    budget = OPTIONS_WALK_VALUES
    stack: list[tuple[object, int, bool]] = [(options, 0, False)]
    while stack and budget > 0:
        value, depth, named = stack.pop()
        budget -= 1
        if isinstance(value, Mapping):
            if depth < OPTIONS_WALK_DEPTH:
                for key, item in itertools.islice(value.items(), budget):
                    stack.append((item, depth + 1, _credential_key(key)))
        elif isinstance(value, (list, tuple)):
            if depth < OPTIONS_WALK_DEPTH:
                stack += [(item, depth + 1, named) for item in value[:budget]]
        elif named and any(os.path.isfile(path) for path in _paths_of(value)):
            found.append(value)
    return found


def _site_data() -> list[str]:
    """The site's data the settings name, whether it exists yet or not (the guest's
    Landlock ``guards`` for what does not), each under both of its names (``_paths_of``:
    as given, which the kernel resolves, and its lexical form), not resolved (each use
    resolves it): each SQLite database of ``DATABASES`` (``NAME`` and ``TEST``'s
    ``NAME``) with ``SQLITE_SIDECARS`` and every existing ``NAME-*``, beside its name and
    beside its target (SQLite resolves a linked ``NAME``); ``MEDIA_ROOT``,
    ``STATIC_ROOT``, ``FILE_UPLOAD_TEMP_DIR``, ``SESSION_FILE_PATH``, ``EMAIL_FILE_PATH``,
    ``FIXTURE_DIRS``; each ``STORAGES`` backend's ``location``; each cache's ``LOCATION``
    that is a directory (``FileBasedCache``'s, or any absolute path); the log files
    (``_logging_files``); the credential files of each database's ``OPTIONS``
    (``CREDENTIAL_OPTIONS``, MySQL's ``ssl`` files), ``EMAIL_SSL_KEYFILE`` and
    ``EMAIL_SSL_CERTFILE`` (round 26); each existing file a ``DATABASES``, ``CACHES`` or
    ``STORAGES`` entry's ``OPTIONS`` names under a credential key (``_option_files``),
    ``WEBFETCH_LOG_FILES`` and ``WEBFETCH_CA_FILE`` (round 27).  Those the site resolves
    against its working directory when empty (``MEDIA_ROOT``'s default ``""``) are the
    working directory then (round 24).
    docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst"""
    if "django.conf" not in sys.modules:
        return []
    from django.conf import settings

    if not settings.configured:
        return []
    found: list[str] = []
    # Credential files the settings name (issue 30, round 26, finding 5): any backend's
    # client files in ``OPTIONS`` (``CREDENTIAL_OPTIONS``; MySQL's ``ssl`` dict too) and
    # the SMTP backend's key and certificate.
    credentials: list[object] = [
        getattr(settings, name, None) for name in ("EMAIL_SSL_KEYFILE", "EMAIL_SSL_CERTFILE")
    ]
    databases = getattr(settings, "DATABASES", None)
    for database in databases.values() if isinstance(databases, Mapping) else ():
        if not isinstance(database, Mapping):
            continue
        options = database.get("OPTIONS")
        if isinstance(options, Mapping):
            credentials += [options.get(name) for name in CREDENTIAL_OPTIONS]
            ssl = options.get("ssl")
            if isinstance(ssl, Mapping):
                credentials += [ssl.get(name) for name in ("key", "cert", "ca", "capath")]
        credentials += _option_files(options)
        engine = str(database.get("ENGINE") or "")
        if "sqlite" not in engine and "spatialite" not in engine:
            continue
        test = database.get("TEST")
        for name in (database.get("NAME"), test.get("NAME") if isinstance(test, Mapping) else None):
            for path in _sqlite_files(name):
                for where in _unique([path, os.path.realpath(path)]):
                    found += [where, *(where + ending for ending in SQLITE_SIDECARS)]
                    found += _listed(where)
    named: list[object] = [
        getattr(settings, name, None) for name in ("STATIC_ROOT", "SESSION_FILE_PATH")
    ]
    # Each setting the site resolves against its working directory when it is empty:
    # ``MEDIA_ROOT`` (Django's default, ``""``: ``FileSystemStorage`` stores under
    # ``os.path.abspath("")``), ``FILE_UPLOAD_TEMP_DIR`` (``tempfile``'s ``dir=""``),
    # the file e-mail backend's ``EMAIL_FILE_PATH``, ``FIXTURE_DIRS`` (``realpath``), a
    # storage's ``location`` and a file cache's ``LOCATION`` (``abspath``); issue 30,
    # round 24, finding 2.
    rooted: list[object] = [getattr(settings, "MEDIA_ROOT", None)]
    rooted.append(getattr(settings, "FILE_UPLOAD_TEMP_DIR", None))
    if "filebased" in str(getattr(settings, "EMAIL_BACKEND", "") or "").lower():
        rooted.append(getattr(settings, "EMAIL_FILE_PATH", None))
    else:
        named.append(getattr(settings, "EMAIL_FILE_PATH", None))
    fixtures = getattr(settings, "FIXTURE_DIRS", None)
    if isinstance(fixtures, (list, tuple)):
        rooted += list(fixtures)
    storages = getattr(settings, "STORAGES", None)
    for storage in storages.values() if isinstance(storages, Mapping) else ():
        options = storage.get("OPTIONS") if isinstance(storage, Mapping) else None
        if isinstance(options, Mapping):
            # None or missing: ``MEDIA_ROOT`` (``STATIC_ROOT`` for static files).
            rooted.append(options.get("location"))
        credentials += _option_files(options)
    caches = getattr(settings, "CACHES", None)
    for cache in caches.values() if isinstance(caches, Mapping) else ():
        if not isinstance(cache, Mapping):
            continue
        # Its client's key, certificate and CA files (``RedisCache``'s ``ssl_keyfile``,
        # django-redis's ``CONNECTION_POOL_KWARGS``); issue 30, round 27, finding 4.
        credentials += _option_files(cache.get("OPTIONS"))
        locations = cache.get("LOCATION", "")  # Django's default: ``""``
        for location in locations if isinstance(locations, (list, tuple)) else [locations]:
            if isinstance(location, os.PathLike):
                location = os.fspath(location)
            if "filebased" in str(cache.get("BACKEND") or "").lower():
                rooted.append(location)
            elif isinstance(location, str) and os.path.isabs(location):
                named.append(location)
    # This application's own path settings (round 27, finding 4): the files the log
    # tools read (written by any process of the site: gunicorn's access log, a worker's)
    # and the fetches' CA bundle; ``WEBFETCH_PROJECT_ROOT`` is ``_site_base``'s, and
    # ``WEBFETCH_PLUGIN_DIRS`` are the plugins' own.
    logs = getattr(settings, "WEBFETCH_LOG_FILES", None)
    if isinstance(logs, (list, tuple)):
        credentials += list(logs)
    credentials.append(getattr(settings, "WEBFETCH_CA_FILE", None))
    named += credentials
    found += [path for value in named for path in _paths_of(value)]
    found += [path for value in rooted for path in _paths_of(value, empty=True)]
    found += _logging_files(getattr(settings, "LOGGING", None))
    # Every file the host holds open for writing is data it writes: a ``StreamHandler``'s
    # file, ``stderr`` a process manager points at a log (issue 30, round 26, finding 7).
    found += [path for value in written_files() for path in _paths_of(value)]
    return _unique(found)


#: The settings ``hidden_paths`` and ``masks`` are computed from (``site_names``,
#: ``_site_code``, ``_site_data``, ``_site_base``).
SITE_SETTINGS = (
    "SETTINGS_MODULE",
    "ROOT_URLCONF",
    "BASE_DIR",
    "WEBFETCH_PLUGIN_HIDDEN_PATHS",
    "DATABASES",
    "MEDIA_ROOT",
    "STATIC_ROOT",
    "FILE_UPLOAD_TEMP_DIR",
    "SESSION_FILE_PATH",
    "EMAIL_FILE_PATH",
    "EMAIL_BACKEND",
    "EMAIL_SSL_KEYFILE",
    "EMAIL_SSL_CERTFILE",
    "FIXTURE_DIRS",
    "STORAGES",
    "CACHES",
    "LOGGING",
    "WEBFETCH_LOG_FILES",
    "WEBFETCH_CA_FILE",
    "WEBFETCH_PROJECT_ROOT",
)


def site_inputs() -> tuple[object, ...]:
    """What decides the masks of a plugin process started now, but the files themselves:
    the working directory (every relative or empty path of the settings is resolved
    against it), ``DJANGO_SETTINGS_MODULE``, ``sys.path``, the values of
    ``SITE_SETTINGS`` (as ``repr``: a dict mutated in place compares as it is now) and
    the files of the host's live log handlers.  A pooled process started under other
    inputs is not handed another call (``host.Pool.acquire``; issue 30, round 24, finding
    4): far cheaper than ``masks`` per call (no directory is read)."""
    import logging

    # What cannot be read is an object equal to no other: no pooled process is reused.
    values: list[object] = [os.environ.get("DJANGO_SETTINGS_MODULE"), *sys.path]
    try:
        values.append(os.getcwd())
    except OSError:  # the working directory was removed
        values.append(object())
    if "django.conf" in sys.modules:
        from django.conf import settings

        if settings.configured:
            try:
                values.append(repr([getattr(settings, name, None) for name in SITE_SETTINGS]))
            except Exception:  # a value whose ``repr`` fails
                values.append(object())
    # Every live handler is in ``_handlerList`` (``Handler.__init__``), those of the
    # loggers too: the loggers themselves (thousands in a large site) are not walked.
    for ref in list(getattr(logging, "_handlerList", [])):
        handler = ref()
        if isinstance(handler, logging.FileHandler):
            values.append(handler.baseFilename)
    return tuple(values)


#: How long after a directory's last change its fingerprint is too young to hold: the
#: kernel stamps a change with a clock that ticks every 1 to 10 ms (a jiffy), so a second
#: change within the tick of the one seen leaves the same ``st_mtime_ns``.  A younger one
#: matches nothing (``_fingerprint``): the process is not handed another call.
RECENT_NS = 50_000_000


class _Ledger(threading.local):
    #: While ``prepared`` computes the masks: each directory whose listing decided them (or
    #: the existence of an entry in it), with its fingerprint taken before it was read.
    listings: dict[str, object] | None = None


_ledger = _Ledger()


def _fingerprint(directory: str) -> object:
    """What changes when an entry of ``directory`` is made, removed or renamed (its
    ``st_mtime_ns``), or the directory is replaced (``st_dev``, ``st_ino``) or made; an
    object equal to no other when it changed within ``RECENT_NS``."""
    try:
        info = os.stat(directory)
    except OSError as exc:
        return ("missing", exc.errno)
    if time.time_ns() - info.st_mtime_ns < RECENT_NS:
        return object()
    return (info.st_dev, info.st_ino, info.st_mtime_ns)


def _note(directory: str) -> None:
    """Record ``directory``'s fingerprint before it is read, while masks are computed."""
    listings = _ledger.listings
    if listings is not None and directory not in listings:
        listings[directory] = _fingerprint(directory)


def _note_parent(path: str) -> None:
    _note(os.path.dirname(path.rstrip("/")) or "/")


def _copies_noted(path: str) -> list[str]:
    """``copies(path)[0]``, each directory it lists or looks in noted first: the one
    holding ``path`` (its siblings), and the cache directories of ``path``'s directory (a
    module's bytecode) and those holding ``path``'s own mirror (a package's)."""
    directory = os.path.dirname(path.rstrip("/")) or "/"
    _note(directory)
    for cache in _cache_dirs(directory):
        _note(cache)
    for mirror in _cache_dirs(path)[1:]:
        _note_parent(mirror)
    return copies(path)[0]


#: Where a descriptor the host writes through is never the site's data: a ``/proc``,
#: ``/sys`` or ``/dev`` file (the sandbox binds none), a ``memfd`` (the seccomp programs).
_NOT_WRITTEN_DATA = ("/proc/", "/sys/", "/dev/", "/memfd:")
#: ``O_WRONLY``, ``O_RDWR``, ``O_APPEND`` of a descriptor's ``fdinfo`` ``flags`` (octal).
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND


def written_files() -> list[str]:
    """Every regular file the host process holds open for writing (``/proc/self/fd``; the
    ``flags`` of its ``fdinfo``: ``O_WRONLY``, ``O_RDWR`` or ``O_APPEND``), by the name
    its descriptor leads to where that name is still the file (not removed nor replaced),
    sorted: a log a ``StreamHandler`` writes, ``stderr`` a process manager points at a
    file, a SQLite database.  None that is no regular file (the plugin channels and other
    sockets, pipes, devices, ``/proc`` and ``/sys`` files), a ``memfd`` or a removed file
    (the seccomp programs, a plugin process's ``stderr`` file: ``tempfile``).  Bounded
    reads of ``/proc``; a descriptor closed meanwhile is skipped (issue 30, round 26,
    finding 7)."""
    try:
        numbers = os.listdir("/proc/self/fd")
    except OSError:
        return []
    found: list[str] = []
    for number in numbers:
        where = f"/proc/self/fd/{number}"
        try:
            link = os.readlink(where)
            if not link.startswith("/") or link.startswith(_NOT_WRITTEN_DATA):
                continue
            held = os.stat(where)
            if not stat.S_ISREG(held.st_mode):
                continue
            with open(f"/proc/self/fdinfo/{number}", "rb") as fh:
                info = fh.read(1 << 12)
            named = os.stat(link)
        except OSError:
            continue
        if (named.st_dev, named.st_ino) != (held.st_dev, held.st_ino):
            continue
        for line in info.splitlines():
            if line.startswith(b"flags:"):
                with contextlib.suppress(ValueError):
                    if int(line.partition(b":")[2].strip(), 8) & _WRITE_FLAGS:
                        found.append(link)
                break
    return sorted(set(found))


@dataclass(frozen=True)
class Reading:
    """What decided a plugin process's masks besides ``site_inputs``: the fingerprint of
    each directory whose listing decided them (``listings``: the bound package
    directories searched for the site's code, the directories searched for copies, a
    database's directory, each hollow), and the files the host writes under the
    directories bound (``written``, ``written_files``).  ``changed`` says whether either
    differs now (``host.Pool.acquire``; issue 30, round 26, findings 2 and 7)."""

    listings: Mapping[str, object]
    binds: tuple[str, ...]
    written: tuple[str, ...]

    def changed(self) -> str | None:
        """What changed since (for the log), or ``None``."""
        for directory, before in self.listings.items():
            if _fingerprint(directory) != before:
                return f"the directory {directory} changed"
        if _within(written_files(), self.binds) != self.written:
            return "the files the host writes changed"
        return None


def _within(paths: list[str], binds: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p for p in paths if any(p == top or _under(p, top) for top in binds))


@contextlib.contextmanager
def _reading() -> Iterator[dict[str, object]]:
    outer = _ledger.listings
    listings: dict[str, object] = {} if outer is None else outer
    _ledger.listings = listings
    try:
        yield listings
    finally:
        _ledger.listings = outer


def prepared(spec: SandboxSpec) -> tuple[list[str], list[str], Reading]:
    """``command(spec)``, ``masks(spec)`` and what decided them (``Reading``), each
    directory's fingerprint and the files the host writes read before they are."""
    written = written_files()
    with _reading() as listings:
        argv = command(spec)
        hidden = masks(spec)
        binds = tuple(_visible(spec)[0])
    # A directory outside every bind decides no mask: what lies in it is never masked
    # (``_shape``), and it may change all the time (``/tmp``, where ``stderr`` is kept).
    kept = {d: before for d, before in listings.items() if _within([d], binds)}
    return argv, hidden, Reading(kept, binds, _within(written, binds))


def _listed(path: str) -> list[str]:
    """Every existing ``NAME-*`` beside the SQLite database ``path`` (a super-journal
    ``NAME-mj<random>``, an operator's ``NAME-old``)."""
    directory, base = os.path.split(path)
    _note(directory)
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    return [os.path.join(directory, entry) for entry in entries if entry.startswith(base + "-")]


def _site_base(needed: list[str]) -> list[str]:
    """``BASE_DIR`` (where the settings define it: a ``startproject`` project's directory,
    holding its ``.env``, local settings, database and media) and ``WEBFETCH_PROJECT_ROOT``
    (the source the code tools read; round 27) under each of its names
    (``_paths_of``; ``_site_code`` resolves each, and seeks its copies beside the name
    too) whose resolved directory exists and is and holds none of ``needed`` nor a
    package directory: masked whole then; else only the data in it is (``_site_data``),
    and it refuses no sandbox."""
    from django.conf import settings

    if not settings.configured:
        return []
    found: list[str] = []
    roots = [getattr(settings, name, None) for name in ("BASE_DIR", "WEBFETCH_PROJECT_ROOT")]
    for name in [name for root in roots for name in _paths_of(root)]:
        path = os.path.realpath(name)
        _note_parent(path)
        if not os.path.isdir(path):
            continue
        if any(path == need or _under(need, path) for need in [*needed, *site_dirs()]):
            continue
        found.append(name)
    return found


#: The most entries ``_releases`` looks at in the directory that holds a project
#: directory of the site's: past it, that directory is masked whole (fail closed:
#: hollowed where it holds what the guest needs; refused, ``site_code_unmaskable``,
#: where it is a bound directory).
_RELEASES_MAX_ENTRIES = 1_000


def _site_modules() -> list[str]:
    """The dotted names of the site's own modules: ``DJANGO_SETTINGS_MODULE`` (the
    environment's and the one Django loaded) and ``ROOT_URLCONF`` (``site_names``'s)."""
    names = [os.environ.get("DJANGO_SETTINGS_MODULE") or ""]
    if "django.conf" in sys.modules:
        from django.conf import settings

        if settings.configured:
            names += [getattr(settings, "SETTINGS_MODULE", None) or ""]
            urlconf = getattr(settings, "ROOT_URLCONF", None)
            names += [urlconf if isinstance(urlconf, str) else ""]
    return _unique([name for name in names if all(p.isidentifier() for p in name.split("."))])


def _markers(top: str) -> list[str]:
    """What a directory holds, relative to it, when it holds the site's top-level package
    or module ``top`` as the project does: the settings (or URLconf) module's file under
    it (``top/settings.py``, ``top/settings/__init__.py``), or, where no such module is
    known under ``top``, ``top/__init__.py``; or the module ``top.py``.  Not a bare
    ``top/__init__.py`` where the settings module is known: a package of the standard
    library holds ``tests/__init__.py`` or ``core/__init__.py`` under other names."""
    found = [top + ".py"]
    for name in _site_modules():
        first, _, rest = name.partition(".")
        if first == top and rest:
            module = os.path.join(top, *rest.split("."))
            found += [module + ".py", os.path.join(module, "__init__.py")]
    if len(found) == 1:
        found.append(os.path.join(top, "__init__.py"))
    return _unique(found)


def _releases(places: Mapping[str, list[str]], needed: list[str] | None) -> list[str]:
    """Every other copy of the project beside a directory the site runs from: the
    previous releases of a deploy tool's layout (``releases/<timestamp>/``, ``current``
    a link to the newest: Capistrano, Deployer, Fabric recipes), a sibling copy under
    any name.

    For each directory ``E`` holding the site's top-level package or module (where it is
    found on ``sys.path``: ``places``; ``BASE_DIR`` and ``WEBFETCH_PROJECT_ROOT`` where
    they hold it) that is not itself what the guest needs (a package directory, the
    standard library: no project's release), under both of its names (as found and
    resolved), each sibling ``S`` of ``E`` (an entry of its parent, ``E`` itself left
    out) that is a directory holding the site's package as ``E`` does (``_markers``:
    ``S/<top>/settings.py``, ``S/<top>/settings/__init__.py``) is a copy: ``S`` whole,
    or, where ``S`` is or holds what the guest needs (``needed``, a package directory),
    ``S/<top>`` and, where ``E`` holds none of it (a project, not a package directory),
    each entry of ``S`` named as one of ``E``'s that holds none of it either.  At most
    ``_RELEASES_MAX_ENTRIES`` entries of a parent are looked at; past it the parent is
    returned, masked whole.  The parent, each directory sibling and its ``<top>`` are
    noted (``_note``): a new release retires the pooled processes whose masks it
    decided.  Issue 30, round 28, finding 1;
    docs/decisions/0058-every-copy-of-the-sites-code-is-masked.rst."""
    if "django.conf" not in sys.modules:
        return []
    from django.conf import settings

    wanted = [*(needed or []), *site_dirs()]
    roots: list[str] = []
    if settings.configured:
        for setting in ("BASE_DIR", "WEBFETCH_PROJECT_ROOT"):
            roots += _paths_of(getattr(settings, setting, None))
    homes: list[tuple[str, str]] = []
    for top, found in places.items():
        for place in found:
            name = os.path.basename(place.rstrip("/"))
            if name in (top, top + ".py"):
                homes += [(os.path.dirname(place.rstrip("/")), top)]
        for root in roots:
            if os.path.exists(os.path.join(root, top)) or os.path.exists(
                os.path.join(root, top + ".py")
            ):
                homes += [(root, top)]
    copied: list[str] = []
    seen: set[tuple[str, str]] = set()
    for home, top in homes:
        if os.path.realpath(home) in wanted:
            continue  # a package directory, the standard library: no project's release
        for form in _unique([os.path.abspath(home), os.path.realpath(home)]):
            if (form, top) not in seen:
                seen.add((form, top))
                copied += _beside_home(form, top, wanted)
    return _unique(copied)


def _holds(path: str, wanted: list[str]) -> bool:
    return any(path == need or _under(need, path) for need in wanted)


def _beside_home(home: str, top: str, wanted: list[str]) -> list[str]:
    """``_releases`` for the one directory ``home`` holding the site's ``top``."""
    parent = os.path.dirname(home)
    if not parent or parent == home:
        return []
    real_home = os.path.realpath(home)
    _note(parent)
    try:
        with os.scandir(parent) as listing:
            entries = list(itertools.islice(listing, _RELEASES_MAX_ENTRIES + 1))
    except OSError:
        return []
    if len(entries) > _RELEASES_MAX_ENTRIES:
        return [parent]  # too many to look at: all of it masked (fail closed)
    markers = _markers(top)
    found: list[str] = []
    for entry in entries:
        with contextlib.suppress(OSError):
            if not entry.is_dir():
                continue
            sibling = os.path.realpath(entry.path)
            if sibling == real_home or not os.path.isdir(sibling):
                continue
            _note(sibling)
            if os.path.isdir(os.path.join(sibling, top)):
                _note(os.path.join(sibling, top))
            if not any(os.path.isfile(os.path.join(sibling, m)) for m in markers):
                continue
            if not _holds(sibling, wanted):
                found.append(sibling)
                continue
            names = [top, top + ".py"]
            if not _holds(real_home, wanted):
                names += os.listdir(real_home)[:_RELEASES_MAX_ENTRIES]
            for name in _unique(names):
                path = os.path.join(sibling, name)
                if os.path.lexists(path) and not _holds(os.path.realpath(path), wanted):
                    found.append(path)
    return found


def unmaskable(binds: list[str], needed: list[str]) -> list[str]:
    """What the sandbox hides (``_placed``) that is a directory of ``binds`` or what the
    guest needs (``needed``, a package directory): it cannot be masked, so the sandbox is
    not built (``SiteCodeUnmaskable``), never left readable silently.  A hidden path that
    holds what the guest needs is hollowed, not refused; one that only holds binds and
    lies under none (a checkout holding ``django_webfetch``) shows nothing in the sandbox
    but what the guest needs."""
    return _placed(binds, needed)[0]


def hidden_paths(binds: list[str], needed: list[str]) -> list[str]:
    """The site's code (``_site_code``) that lies under a directory of ``binds`` (a package
    directory the guest imports from: a project installed with ``pip install .``, as a
    container image does), with every copy of it (``copies``), and what of the
    interpreter's prefixes the guest does not need (``_prefix_hidden``), each masked in the
    sandbox by an empty read-only directory (or an unreadable file); a path that holds
    what the guest needs (``needed``: the standard library, ``django_webfetch``, the
    plugin's package; a package directory) is hollowed instead (``_placed``)."""
    return _placed(binds, needed)[2]


def _placed(binds: list[str], needed: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Where each path the sandbox hides lies (the site's code under ``binds`` with its
    copies, ``_prefix_hidden``): (those that are a bound directory or what the guest needs:
    refused, ``unmaskable``; those under a bound directory that hold what the guest needs:
    hollowed, shallowest first; those under a bound directory that hold none of it and are
    seen through no hollow: masked).  What the guest needs (``wanted``) is ``needed`` and
    the site's package directories, each bound itself."""
    wanted = _unique([*needed, *site_dirs()])
    hidden: list[str] = []
    for path in _site_code(needed):
        if any(path == top or _under(path, top) for top in binds):
            hidden += [path, *_copies_noted(path)]
    hidden += _prefix_hidden()
    return _shape(binds, wanted, hidden)


def _shape(
    binds: list[str], wanted: list[str], hidden: list[str]
) -> tuple[list[str], list[str], list[str]]:
    """``_placed`` for the ``hidden`` paths given (resolved paths only, nothing read)."""
    refused: list[str] = []
    hollows: list[str] = []
    masked: list[str] = []
    for path in _unique(hidden):
        if path in binds or path in wanted:
            refused.append(path)
        elif not any(_under(path, top) for top in binds):
            continue
        elif any(_under(need, path) for need in wanted):
            hollows.append(path)
        else:
            masked.append(path)
    hollows.sort(key=lambda path: path.count("/"))
    shown = [path for path in _collapse(masked) if _shown(path, hollows, wanted)]
    return refused, hollows, shown


def _shown(path: str, hollows: list[str], wanted: list[str]) -> bool:
    """Whether ``path`` is in the sandbox's view: under no hollow, or under what the guest
    needs bound back below the deepest hollow that holds it (a mask elsewhere in a hollow
    would only make a mount point there, showing its name)."""
    holding = [h for h in hollows if _under(path, h)]
    if not holding:
        return True
    deepest = max(holding, key=len)
    return any((path == need or _under(path, need)) and _under(need, deepest) for need in wanted)


def _unique(paths: list[str]) -> list[str]:
    found: list[str] = []
    for path in paths:
        if path not in found:
            found.append(path)
    return found


def _prefix_hidden() -> list[str]:
    """What of the interpreter's prefixes the guest never needs, though a directory the
    sandbox binds whole may hold it (issue 30, round 20, findings 3 and 4): the root of the
    site's virtual environment (``sys.prefix`` where it is not ``sys.base_prefix``), where
    ``bin/activate`` and the env files beside it may export ``SECRET_KEY``; and the base
    interpreter's package directories that are none of the site's (``site_dirs``): its
    ``site-packages`` lies in the standard library's directory, and a site run from a
    virtual environment never imports from it.  Resolved, existing directories."""
    bases = _unique([os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)])
    found = [
        real
        for real in (os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix))
        if real not in bases
    ]
    packages = site_dirs()
    found += [path for path in _base_packages(tuple(bases)) if path not in packages]
    for path in found:
        _note_parent(path)
    return [path for path in _unique(found) if os.path.isdir(path)]


@functools.lru_cache(maxsize=4)
def _base_packages(bases: tuple[str, ...]) -> list[str]:
    """The base interpreter's package directories: ``site.getsitepackages`` of its prefixes
    (a distribution's ``dist-packages`` too) and the ``purelib``/``platlib`` of each install
    scheme but the user's, with its prefixes; those that lie in them, resolved (whether
    each exists is asked at each use)."""
    import site

    paths: list[str] = []
    with contextlib.suppress(AttributeError, ValueError, OSError):
        paths += site.getsitepackages(list(bases))
    config = {"base": bases[0], "platbase": bases[-1]}
    config |= {"installed_base": bases[0], "installed_platbase": bases[-1]}
    for scheme in sysconfig.get_scheme_names():
        if "user" in scheme:
            continue
        with contextlib.suppress(KeyError, ValueError):
            got = sysconfig.get_paths(scheme, vars=config)
            paths += [got[name] for name in ("purelib", "platlib") if name in got]
    found = _unique([os.path.realpath(path) for path in paths])
    return [p for p in found if any(p == b or _under(p, b) for b in bases)]


def _complement(hollow: str, wanted: list[str]) -> list[str]:
    """Every entry of the host's ``hollow`` that leads to nothing of ``wanted``, down each
    way to one (a directory on the way is listed; what it holds on the way is not among
    them): what a hollow hides, which the guest leaves out of its Landlock rules."""
    found: list[str] = []
    pending = [hollow]
    while pending:
        directory = pending.pop()
        _note(directory)
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in sorted(names):
            path = os.path.join(directory, name)
            if path in wanted:
                continue
            if not os.path.islink(path) and any(_under(need, path) for need in wanted):
                pending.append(path)
            else:
                found.append(path)
    return found


def _guards(binds: list[str], needed: list[str]) -> list[str]:
    """Where a copy of the site's code masked here would be written later (``copies``'s
    second list): no file, never masked, but the guest leaves it out of its Landlock rules,
    so the directory that would hold it gets a rule for each entry it has when the process
    starts, and none for an entry made (or replaced) after."""
    found: list[str] = []
    for path in _kept(_site_code(needed), binds, needed):
        for guard in copies(path)[1]:
            if any(_under(guard, top) for top in binds) and guard not in found:
                found.append(guard)
    # The site's data not written yet (a SQLite journal, a media root, a log file):
    # where it would be, under each of its names (decision 0060, round 22).
    for guard in _kept([os.path.realpath(p) for p in _site_data()], binds, needed):
        if guard not in found:
            found.append(guard)
    # Each path the operator lists, whether it exists or not (an ``.env`` rendered at
    # release time, after a pooled process started), with where its bytecode would be
    # written: ``_site_code`` keeps only what exists (issue 30, round 26, finding 1).
    for guard in _kept(_listed_guards(), binds, needed):
        if guard not in found:
            found.append(guard)
    return found


def _listed_guards() -> list[str]:
    """Each path of ``WEBFETCH_PLUGIN_HIDDEN_PATHS`` under both of its names (as given and
    lexical), resolved, whether it exists or not, with ``copies``' second list of each."""
    if "django.conf" not in sys.modules:
        return []
    from django.conf import settings

    if not settings.configured:
        return []
    from django_webfetch.conf import conf

    found: list[str] = []
    for path in conf.WEBFETCH_PLUGIN_HIDDEN_PATHS:
        for form in _unique([path, os.path.abspath(path)]):
            real = os.path.realpath(form)
            found += [real, *copies(real)[1]]
    return _unique(found)


def _kept(paths: list[str], binds: list[str], needed: list[str]) -> list[str]:
    """``paths`` under a directory of ``binds``, but none that is or holds what the guest
    needs."""
    return [
        path
        for path in paths
        if any(_under(path, top) for top in binds)
        and not any(path == need or _under(need, path) for need in needed)
    ]


#: The endings of a file that is a Python module (its source, stub, bytecode or
#: extension): its copies are named by the module's name, what comes before them.
_MODULE_SUFFIXES = tuple(
    sorted({*importlib.machinery.all_suffixes(), ".pyi", ".pyw"}, key=len, reverse=True)
)
#: Editors' copies beside a file ``NAME``: ``.NAME.swp`` (vim), ``#NAME#`` (emacs'
#: auto-save), ``.#NAME`` (emacs' lock).
_EDITOR_PREFIXES = (".#", "#", ".")


def _stem(name: str) -> str:
    """What every copy of the file ``name`` starts with: a module's name (``settings`` of
    ``settings.py``, ``settings.cpython-311.pyc`` and ``settings.abi3.so``), else the
    whole name (``secrets.json``)."""
    for suffix in _MODULE_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _of_stem(entry: str, stem: str, *, data: bool = False) -> bool:
    """Whether the directory entry ``entry`` holds a copy of what is named ``stem``: named
    ``STEM.<anything>``, ``STEM~<anything>`` or ``STEM#<anything>`` (another form of the
    module: ``.py``, ``.pyc``, ``.pyi``, ``.so``; an editor's or a tool's backup:
    ``.py~``, ``.py.orig``, ``.py.bak``, ``.bak``; a rotated log: ``.1``, ``.1.gz``,
    ``.2026-12-07``), also after one of the editors' prefixes (``.STEM.py.swp``,
    ``#STEM.py#``, ``.#STEM.py``); and, for a file that is no module (``data``: a log, a
    database), ``STEM-<anything>`` (logrotate's ``dateext``: ``django.log-20261207``,
    ``.gz``; a SQLite super-journal; issue 30, round 24, finding 3) and the names that
    keep its extension last (``_keeps_extension``: logrotate's ``extension``,
    ``django.1.log.gz``, ``django-20261206.log``; round 28, finding 3) or hold its name,
    or its root with the extension last, as a word in any case (``_data_copy``:
    ``backup-db.sqlite3``, ``db (1).sqlite3``, ``old.django.log``; round 30, finding 1)."""
    core = entry
    for prefix in _EDITOR_PREFIXES:
        if core.startswith(prefix):
            core = core[len(prefix) :]
            break
    endings = (stem + ".", stem + "~", stem + "#", *((stem + "-",) if data else ()))
    # The entry as it is too: a stem that starts with a prefix (``.env``, ``.env.bak``).
    if core.startswith(endings) or entry.startswith(endings):
        return True
    return data and (
        _keeps_extension(core, stem) or _keeps_extension(entry, stem) or _data_copy(entry, stem)
    )


#: Rotated copies of a data file that keep its extension last: ``<root><sep>...<ext>``.
_ROTATION_SEPARATORS = (".", "-", "_")
#: What a rotator (logrotate's ``compresscmd``, savelog) or an operator appends to a
#: rotated copy to compress it: gzip, bzip2, xz, zstd, lz4, compress, lzip, lzma, lzop,
#: brotli, zip, 7-Zip, snappy.
_COMPRESSION_SUFFIXES = (
    ".gz", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".Z", ".z", ".lz", ".lzma", ".lzo",
    ".br", ".zip", ".7z", ".sz",
)  # fmt: skip
#: The most compression suffixes stripped from one name (``.log.gz.gz`` is two).
_COMPRESSION_DEPTH = 4


def _keeps_extension(entry: str, name: str) -> bool:
    """Whether ``entry`` is named as a copy of the data file ``name`` that keeps its
    extension last, as logrotate's ``extension`` directive and an operator's copies name
    it: ``<root><sep><anything><ext>``, optionally followed by compression suffixes
    (``_COMPRESSION_SUFFIXES``), where ``<root>`` and ``<ext>`` split ``name`` at its
    last dot and ``<sep>`` is ``.``, ``-`` or ``_`` (``django.log``: ``django.1.log``,
    ``django.2.log.gz``, ``django-20261206.log``, ``django-20261205.log.gz``;
    ``db.sqlite3``: ``db-20261207.sqlite3``, ``db_backup.sqlite3``).  Never a
    neighbour whose root only starts with ``<root>`` (``djangoapp.log``) or that has
    another extension (``django-1.txt``).  Plain string operations, linear in the
    names.  Issue 30, round 28, finding 3;
    docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst."""
    root, dot, extension = name.rpartition(".")
    if not root or not dot or not extension:
        return False
    ext = "." + extension
    start = len(root) + 1
    if len(entry) < start + len(ext) or not entry.startswith(root):
        return False
    if entry[len(root)] not in _ROTATION_SEPARATORS:
        return False
    rest = entry[start:]
    for _ in range(_COMPRESSION_DEPTH):
        if rest.endswith(ext):
            return True
        for suffix in _COMPRESSION_SUFFIXES:
            if rest.endswith(suffix):
                rest = rest[: -len(suffix)]
                break
        else:
            return False
    return rest.endswith(ext)


#: ``_COMPRESSION_SUFFIXES`` casefolded, for names compared in any case.
_FOLDED_COMPRESSION_SUFFIXES = tuple(dict.fromkeys(s.casefold() for s in _COMPRESSION_SUFFIXES))


def _as_word(folded: str, start: int, end: int) -> bool:
    """Whether ``folded[start:end]`` is bounded on each side by an end of ``folded`` or a
    character that is no letter or digit."""
    return (start == 0 or not folded[start - 1].isalnum()) and (
        end == len(folded) or not folded[end].isalnum()
    )


def _data_copy(entry: str, name: str) -> bool:
    """Whether the directory entry ``entry`` is named as a copy of the data file ``name``
    beside it, as a directory's copies are (``_of_directory``), in any case: ``name`` in
    it as a word (``backup-db.sqlite3``, ``old.django.log``, ``db.sqlite3 (copy)``,
    ``DB.SQLITE3.BAK``), or ``<root>`` in it as a word with ``<ext>`` last after it,
    optionally followed by compression suffixes (``db (1).sqlite3``, ``db copy.sqlite3``,
    ``old_db-20261207.sqlite3.gz``), or followed directly by a date, a version or a copy
    word (``_GLUED_COPY``: ``db20261207.sqlite3``, ``djangoOLD.log``), where ``<root>``
    and ``<ext>`` split ``name`` at its last dot; a word is bounded on each side by an
    end of the entry or a character that is no letter or digit (space, parenthesis,
    ``-``, ``_``, ``.``).  Never the entry ``name`` itself, nor a neighbour that holds
    the root only inside a longer word (``mydb.sqlite3``, ``dbx.sqlite3``, ``db2.sqlite3``,
    ``xdb.sqlite3``, ``djangoapp.log``) or has another extension last (``db-old.txt``: a
    copy keeps the extension, or the whole name).  A glued prefix (``olddb.sqlite3``)
    stays a neighbour: the root is no word there.  Plain string operations and one
    anchored ``_GLUED_COPY`` match per occurrence of the root, linear in the name (at
    most ``NAME_MAX`` bytes).  Issue 30, round 30, finding 1;
    docs/decisions/0060-the-sites-data-is-masked-with-its-code.rst."""
    if entry == name:
        return False
    folded, word = entry.casefold(), name.casefold()
    start = folded.find(word)
    while start != -1:
        if _as_word(folded, start, start + len(word)):
            return True
        start = folded.find(word, start + 1)
    root, dot, extension = word.rpartition(".")
    if not root or not dot or not extension:
        return False
    # Where ``<ext>`` starts when it is last, before at most ``_COMPRESSION_DEPTH``
    # compression suffixes: the latest such place (the fewest suffixes taken off).
    ext, rest, limit = "." + extension, folded, -1
    for _ in range(_COMPRESSION_DEPTH + 1):
        if rest.endswith(ext):
            limit = len(rest) - len(ext)
            break
        for suffix in _FOLDED_COMPRESSION_SUFFIXES:
            if rest.endswith(suffix):
                rest = rest[: -len(suffix)]
                break
        else:
            break
    start = folded.find(root)
    while start != -1 and start + len(root) <= limit:
        end = start + len(root)
        if _as_word(folded, start, end) or (
            (start == 0 or not folded[start - 1].isalnum())
            and end < limit
            and _GLUED_COPY.match(folded, end) is not None
        ):
            return True
        start = folded.find(root, start + 1)
    return False


def _cache_dirs(directory: str) -> list[str]:
    """Where the interpreter keeps the bytecode of the modules of ``directory``: its
    ``__pycache__``, and the same directory under each bytecode cache prefix the site
    may use (``sys.pycache_prefix``, ``PYTHONPYCACHEPREFIX``: a tree mirroring the
    source's absolute path)."""
    found = [os.path.join(directory, "__pycache__")]
    for prefix in (sys.pycache_prefix, os.environ.get("PYTHONPYCACHEPREFIX")):
        if prefix and os.path.isabs(prefix):
            mirror = os.path.join(os.path.realpath(prefix), directory.lstrip(os.sep))
            if mirror not in found:
                found.append(mirror)
    return found


def _entries(directory: str, stem: str, *, data: bool = False) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    # ``stem in name`` first: a package directory holds thousands of entries (a data
    # file's copies that keep its extension hold only what comes before its last dot, in
    # any case: ``_data_copy``).
    if not data:
        return [
            os.path.join(directory, name) for name in names if stem in name and _of_stem(name, stem)
        ]
    word = (stem.rpartition(".")[0] or stem).casefold()
    return [
        os.path.join(directory, name)
        for name in names
        if word in name.casefold() and _of_stem(name, stem, data=True)
    ]


#: What makes a copy when glued to a directory's name with no separator (casefolded):
#: a date or a serial of 4 digits or more (``mysite20261207``, ``mysite2026-12-07``), a
#: day-first date (``media07.12.2026``), a version (``mysitev41``) or a copy word
#: followed by no letter (``mysiteOLD``, ``mediabak2``, ``mysitecopy``).  Issue 30,
#: round 27, finding 2.
_GLUED_COPY = re.compile(
    r"\d{4}|\d{1,2}[-._]\d{1,2}[-._]\d{2}|v\d"
    r"|(?:backup|bak|copy|orig|old|previous|prev|saved|save|new)(?:$|[\W\d_])"
)


def _of_directory(entry: str, name: str) -> bool:
    """Whether the directory entry ``entry`` is named as a copy of the directory ``name``
    beside it (a package, a media root): ``name`` in it as a word, in any case, bounded
    on each side by an end of the entry or a character that is no letter or digit
    (``mysite-20261207``, ``mysite_old``, ``Mysite.BAK``, ``mysite~``, ``old-mysite``,
    ``.#mysite``, ``mysite copy``, ``MEDIA``), or followed directly by a date, a version
    or a copy word (``_GLUED_COPY``: ``mysite20261207``, ``mysitev41``, ``mysiteOLD``),
    the entry not ``name`` itself; never a neighbour that only starts with it
    (``mysites``, ``media2``, ``mysitenews``).  Issue 30, round 26, finding 3, round 27,
    finding 2; docs/decisions/0058-every-copy-of-the-sites-code-is-masked.rst."""
    if entry == name:
        return False
    folded, word = entry.casefold(), name.casefold()
    start = folded.find(word)
    while start != -1:
        end = start + len(word)
        if (start == 0 or not folded[start - 1].isalnum()) and (
            end == len(folded)
            or not folded[end].isalnum()
            or _GLUED_COPY.match(folded, end) is not None
        ):
            return True
        start = folded.find(word, start + 1)
    return False


def _directory_entries(directory: str, name: str) -> list[str]:
    """The copies beside the directory ``name`` in ``directory`` (``_of_directory``), but
    each entry other distributions installed there whole (``_theirs``: a dependency
    ``mysite_helpers`` beside the site's package ``mysite``, its ``.dist-info``)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    word = name.casefold()
    # ``word in name`` first: a package directory holds thousands of entries.
    found = [entry for entry in names if word in entry.casefold() and _of_directory(entry, name)]
    if not found:
        return []
    try:
        identity = os.stat(directory)
    except OSError:
        return []
    owners = _installed(directory, (identity.st_dev, identity.st_ino, identity.st_mtime_ns))
    # The site's own distribution (its ``RECORD`` lists ``name``) accounts for nothing.
    theirs: set[str] = set()
    listed: set[str] = set()
    for tops, paths in owners.values():
        if name not in tops and not tops.isdisjoint(found):
            theirs |= tops
            listed |= paths
    masked: list[str] = []
    for entry in found:
        caches = _theirs(directory, entry, listed) if entry in theirs else None
        masked += [os.path.join(directory, entry)] if caches is None else caches
    return masked


#: The most entries ``_theirs`` looks at under one entry: past it, the entry is masked.
_THEIRS_MAX_ENTRIES = 20_000


def _theirs(directory: str, entry: str, listed: set[str]) -> list[str] | None:
    """The bytecode caches to mask in ``entry`` of ``directory`` if it is other
    distributions' as a whole, else None: a regular file ``listed`` names, or a directory
    (no link) under which every entry is a directory or a regular file ``listed`` names,
    or a file in a ``__pycache__`` (bytecode the interpreter wrote after the install:
    that ``__pycache__`` is returned, masked, as the guest reads the listed source),
    found within ``_THEIRS_MAX_ENTRIES``.  Any other file their ``RECORD`` files do not
    list (an operator's ``settings.py`` in a copy a wheel wrote one file into), a link or
    a special file makes the entry a copy (issue 30, round 27, finding 1; decision 0058,
    amended for round 27).  Each directory looked in is noted (``_note``): a file made
    in it later retires the pooled processes whose masks it decided."""
    pending = [entry]
    caches: list[str] = []
    seen = 0
    while pending:
        relative = pending.pop()
        path = os.path.join(directory, relative)
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISREG(info.st_mode):
            if relative not in listed:
                cache = os.path.dirname(path)
                if os.path.basename(cache) != "__pycache__" or relative == entry:
                    return None
                if cache not in caches:
                    caches.append(cache)
            continue
        if not stat.S_ISDIR(info.st_mode):
            return None
        _note(path)
        try:
            names = os.listdir(path)
        except OSError:
            return None
        seen += len(names)
        if seen > _THEIRS_MAX_ENTRIES:
            return None
        pending += [relative + "/" + name for name in names]
    return caches


#: The largest ``RECORD`` ``_installed`` reads (as ``provenance.METADATA_MAX_BYTES``).
_RECORD_MAX_BYTES = 32 * 1024 * 1024


@functools.lru_cache(maxsize=16)
def _installed(
    directory: str, identity: tuple[int, ...]
) -> dict[str, tuple[frozenset[str], frozenset[str]]]:
    """The files under ``directory`` each distribution installed there lists in its
    ``RECORD`` (the files its installer wrote; each path under ``directory``, normalized,
    none leaving it) and their first components: ``{dist-info name: (entries, paths)}``.
    Remembered by the directory's identity and modification time (an install or removal
    adds or removes a ``.dist-info``).
    A distribution with no ``RECORD`` (an ``.egg-info``, a distribution's own package
    manager's install) lists nothing: an entry named after a masked directory beside it
    stays masked (decision 0058, amended for rounds 26 and 27)."""
    import csv

    del identity  # the cache key only
    owners: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return owners
    for meta in names:
        if not meta.casefold().endswith(".dist-info"):
            continue
        lines: list[str] = []
        with contextlib.suppress(OSError, UnicodeDecodeError):
            # Non-blocking: a FIFO named ``RECORD`` never holds up the sandbox's build.
            fd = os.open(os.path.join(directory, meta, "RECORD"), os.O_RDONLY | os.O_NONBLOCK)
            with open(fd, encoding="utf-8", newline="") as f:
                info = os.fstat(fd)
                if stat.S_ISREG(info.st_mode) and info.st_size <= _RECORD_MAX_BYTES:
                    lines = f.read().splitlines()  # else it lists nothing: all stays masked
        # Each row's path; only a quoted path (one with a comma or a quote) is parsed as
        # csv: parsing every row took 0.3 s over 145 distributions' ``RECORD`` files
        # (2.2 MB), this about 0.1 s.
        paths = [line.partition(",")[0] for line in lines if not line.startswith('"')]
        with contextlib.suppress(csv.Error):
            paths += [row[0] for row in csv.reader(x for x in lines if x.startswith('"')) if row]
        # ``os.path.normpath`` only where it may change the path; none leaving ``directory``.
        normal = frozenset(
            os.path.normpath(path) if path[0] == "." or "/." in path or "//" in path else path
            for path in paths
            if path and path[0] != "/"
        )
        normal = frozenset(path for path in normal if path != "." and not path.startswith(".."))
        owners[meta] = (frozenset(path.partition("/")[0] for path in normal), normal)
    return owners


def copies(path: str) -> tuple[list[str], list[str]]:
    """Every representation of the site's code at ``path`` that exists (resolved), and
    where the interpreter would write one later (not resolved; the guest's Landlock
    ``guards``).

    A directory (a package, a media root) is itself, with everything beneath it (its
    ``__pycache__``), its mirror under a bytecode cache prefix and each sibling named
    after it (``_of_directory``: ``project.bak``, ``project-20261207``, ``old_project``)
    that other distributions did not install whole (``_directory_entries``).  A file is itself,
    each entry beside it of the same stem (``_of_stem``: the legacy ``settings.pyc``,
    ``settings.py~``, ``.settings.py.swp``; for a file that is no module, a log or a
    database, ``NAME-*``, ``<root><sep>*<ext>`` and every name holding it or its root as a
    word, ``_data_copy``: its rotations and an operator's copies), and each entry
    of the same stem in its cache directories (``_cache_dirs``:
    ``settings.cpython-311.pyc``, ``.opt-1.pyc``, ``.opt-2.pyc``, any implementation's
    tag).
    docs/decisions/0058-every-copy-of-the-sites-code-is-masked.rst"""
    directory, name = os.path.split(path)
    stem = _stem(name)
    is_dir = os.path.isdir(path)
    if is_dir:
        found = [path, *_directory_entries(directory, name)]
    else:
        found = [path, *_entries(directory, stem, data=stem == name)]
    if is_dir:
        caches = _cache_dirs(path)[1:]
        found += caches
        guards = caches
    else:
        caches = _cache_dirs(directory)
        for cache in caches:
            found += _entries(cache, stem)
        # A name no file has (``STEM.`` ends no module's copy): the cache directory is
        # then split into its entries in the guest's Landlock rules.
        guards = [os.path.join(cache, stem + ".") for cache in caches]
    real: list[str] = []
    for entry in found:
        if os.path.lexists(entry):
            resolved = os.path.realpath(entry)
            if resolved not in real and os.path.exists(resolved):
                real.append(resolved)
    return real, guards


def masks(spec: SandboxSpec) -> list[str]:
    """The paths the guest leaves out of its Landlock rules: those ``command`` masks, what
    each hollow hides (``_complement``: every entry on the host that leads to nothing the
    guest needs), and where a copy of the masked code would be written later
    (``_guards``)."""
    masked = _left_out(_layout(spec), [*_bound(spec)[1], *site_dirs()])
    return masked + [guard for guard in _guards(*_visible(spec)) if guard not in masked]


def _left_out(layout: list[tuple[str, ...]], wanted: list[str]) -> list[str]:
    """The masks of ``layout`` and what each of its hollows hides (``_complement``)."""
    masked = [entry[1] for entry in layout if entry[0] == "mask"]
    for entry in layout:
        if entry[0] == "hollow":
            masked += [path for path in _complement(entry[1], wanted) if path not in masked]
    return masked


def sources(spec: SandboxSpec) -> list[str]:
    """Every path bound into the sandbox (a root host opens each and passes the file
    descriptors: ``command``'s ``fds``)."""
    return [entry[1] for entry in _layout(spec) if entry[0] == "bind"]


def covers(paths: list[str]) -> tuple[list[str], list[str]]:
    """For an unprivileged uid that owns nothing and is in no group: the topmost directory
    on the way to each of ``paths`` that it may not search (no ``o+x``: ``/root``), and the
    paths under those directories.  ``launch`` lays a tmpfs over the first and binds the
    second back, in a mount namespace of its own, so bwrap can reach them."""
    cover: list[str] = []
    keep: list[str] = []
    for path in paths:
        parts = path.strip("/").split("/")[:-1]
        directory = ""
        for part in parts:
            directory += "/" + part
            try:
                mode = os.stat(directory).st_mode
            except OSError:
                break
            if not mode & stat.S_IXOTH:
                if directory not in cover:
                    cover.append(directory)
                keep.append(path)
                break
    return cover, keep


def command(
    spec: SandboxSpec, fds: Mapping[str, int] | None = None, tmp_from: str | None = None
) -> list[str]:
    """bwrap's command line for one plugin process.  ``fds``: a file descriptor the host
    opened for each path of ``sources`` (``--ro-bind-fd``: bwrap mounts that very inode);
    without it, the paths (``--ro-bind``).  ``tmp_from``: a tmpfs made for this process
    (``launch``: bounded in bytes and inodes) bound as its /tmp, in place of bwrap's own."""
    mounts: list[str] = []
    hollowed: list[str] = []
    for entry in _layout(spec):
        if entry[0] == "symlink":
            mounts += ["--symlink", entry[1], entry[2]]
        elif entry[0] == "hollow":
            # Read-only once what the guest needs is bound back beneath it (bwrap makes
            # each mount point there, the way to it: a directory, or an empty file).
            mounts += ["--size", "4096", "--perms", "0555", "--tmpfs", entry[1]]
            hollowed += ["--remount-ro", entry[1]]
        elif entry[0] == "mask" and os.path.isdir(entry[1]):
            mounts += ["--size", "4096", "--perms", "0555", "--tmpfs", entry[1]]
            mounts += ["--remount-ro", entry[1]]
        elif entry[0] == "mask":
            mounts += ["--ro-bind", os.devnull, entry[1]]
        elif fds is not None and entry[1] in fds:
            mounts += ["--ro-bind-fd", str(fds[entry[1]]), entry[1]]
        else:
            mounts += ["--ro-bind", entry[1], entry[1]]
    mounts += hollowed
    interpreter = interpreter_path()
    return [
        bwrap_path(),
        "--unshare-user",
        "--uid",
        str(SANDBOX_ID),
        "--gid",
        str(SANDBOX_ID),
        "--disable-userns",
        "--cap-drop",
        "ALL",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--hostname",
        "plugin",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        # The private /tmp first: a package bound below /tmp (a test's) stays visible.
        *(
            ["--bind", tmp_from, "/tmp"]
            if tmp_from
            else ["--size", str(TMP_BYTES), "--perms", "0700", "--tmpfs", "/tmp"]
        ),
        "--dir",
        spec.scratch,
        "--chdir",
        spec.scratch,
        *mounts,
        "--proc",
        "/proc",
        "--size",
        str(DEV_BYTES),
        "--tmpfs",
        "/dev",
        "--dev-bind",
        "/dev/null",
        "/dev/null",
        "--dev-bind",
        "/dev/zero",
        "/dev/zero",
        "--dev-bind",
        "/dev/urandom",
        "/dev/urandom",
        "--remount-ro",
        "/dev",
        "--remount-ro",
        "/",
        "--info-fd",
        str(spec.info_fd),
        "--seccomp",
        str(spec.seccomp_fd),
        "--",
        interpreter,
        # -I: no environment variables, no user site; -S: no site.py, so no ``.pth``
        # file of any package directory runs here.  sys.path is given explicitly: the
        # standard library only until the host's ``import``, then the site's package
        # directories, then the plugin's directory (``guest.serve``).  django_webfetch
        # is loaded from its root by location, the root never put on sys.path: where it
        # is site-packages (a regular install), it would come before the standard
        # library, and a package named ``json`` there would replace the standard
        # library's in every plugin process
        # (tests/plugins/test_guest_import_order_and_path_owners.py).
        "-I",
        "-S",
        "-B",
        "-c",
        _BOOTSTRAP,
        _package_root(),
        *site_dirs(),
        spec.plugin_path,
        str(spec.rpc_fd),
    ]


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes:
    """The allow-list filter as a BPF program (libseccomp, native architecture; other
    architectures' calls kill the process).  Raises ``OSError`` with a reason when
    libseccomp is missing."""
    try:
        import pyseccomp as sc  # type: ignore[import-untyped]
    except (ImportError, OSError) as exc:
        raise OSError(errno.ENOSYS, "libseccomp_unavailable") from exc
    rules = sc.SyscallFilter(sc.ERRNO(errno.EPERM))

    def allow(name: str, *conditions: object) -> None:
        # A name that is not a system call of this architecture is skipped.
        with contextlib.suppress(ValueError, OSError, RuntimeError):
            rules.add_rule(sc.ALLOW, name, *conditions)

    for _why, names in ALLOWED:
        for name in names:
            allow(name)
    allow("mmap", sc.Arg(3, sc.MASKED_EQ, _MAP_SHARED, 0))
    allow("mmap", sc.Arg(3, sc.MASKED_EQ, _MAP_ANONYMOUS, 0))
    allow("clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, _CLONE_THREAD))
    rules.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for command_ in FCNTL_COMMANDS:
        allow("fcntl", sc.Arg(1, sc.EQ, command_))
    no_locks = sc.ERRNO(errno.ENOSYS)
    rules.add_rule(no_locks, "flock")
    for command_ in LOCK_COMMANDS:
        rules.add_rule(no_locks, "fcntl", sc.Arg(1, sc.EQ, command_))
    for request in IOCTL_REQUESTS:
        allow("ioctl", sc.Arg(1, sc.EQ, request))
    for option in PRCTL_OPTIONS:
        allow("prctl", sc.Arg(0, sc.EQ, option))
    for option in GETSOCKOPT_OPTIONS:
        allow("getsockopt", sc.Arg(1, sc.EQ, socket.SOL_SOCKET), sc.Arg(2, sc.EQ, option))
    allow(
        "socketpair",
        sc.Arg(0, sc.EQ, socket.AF_UNIX),
        sc.Arg(1, sc.MASKED_EQ, _SOCK_TYPE_MASK, socket.SOCK_STREAM),
    )
    allow("sendto", sc.Arg(4, sc.EQ, 0), sc.Arg(3, sc.MASKED_EQ, MSG_OOB, 0))
    allow("recvfrom", sc.Arg(3, sc.MASKED_EQ, MSG_OOB, 0))
    with tempfile.TemporaryFile() as sink:
        rules.export_bpf(sink)
        sink.seek(0)
        return sink.read()


#: What the guest's second filter refuses (with ``prctl(PR_SET_SECCOMP)``).
NARROWING_REFUSED = (
    "execve",
    "execveat",
    "landlock_create_ruleset",
    "landlock_add_rule",
    "landlock_restrict_self",
    "seccomp",
)
_PR_SET_SECCOMP = 22


@functools.lru_cache(maxsize=1)
def no_exec_program() -> bytes:
    """The guest's second filter, loaded by itself once the interpreter runs, after its own
    Landlock restriction and before any plugin code does: ``execve``/``execveat`` refused
    (the allow-list lets bwrap execute the interpreter once), and so are the calls the
    guest needed to narrow itself (``landlock_*``, ``seccomp``, ``prctl(PR_SET_SECCOMP)``):
    a plugin cannot stack Landlock layers or filters, kernel memory its pooled process
    would keep.  Filters stack: the stricter answer wins."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:
        raise OSError(errno.ENOSYS, "libseccomp_unavailable") from exc
    rules = sc.SyscallFilter(sc.ALLOW)
    for name in NARROWING_REFUSED:
        rules.add_rule(sc.ERRNO(errno.EPERM), name)
    rules.add_rule(sc.ERRNO(errno.EPERM), "prctl", sc.Arg(0, sc.EQ, _PR_SET_SECCOMP))
    with tempfile.TemporaryFile() as sink:
        rules.export_bpf(sink)
        sink.seek(0)
        return sink.read()


def program_fd(program: bytes | None = None) -> int:
    """A fresh file descriptor, read from its start, holding a filter (the allow-list by
    default)."""
    program = seccomp_program() if program is None else program
    # Close-on-exec (issue 30, round 26, finding 8): ``pass_fds`` makes it inheritable
    # for bwrap alone, never for a program the site runs meanwhile.
    fd = os.memfd_create("webfetch-plugin-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


_PATTERNS = (
    # bwrap makes the mount point of a mask that is not there any more (a log rotated, a
    # file the host wrote removed, after the masks were computed), in a read-only bind:
    # the host builds the sandbox again from a new reading (``host.Worker.started``).
    ("mount_point_gone", ("can't create file at", "can't mkdir")),
    (
        "userns_unavailable",
        ("namespace", "uid map", "setting up uid", "no permission to create"),
    ),
    ("seccomp_unavailable", ("seccomp", "pr_set_seccomp")),
)


def reason_of(stderr: str) -> str:
    """A stable reason for what bwrap said when it gave up (plain substrings, any case)."""
    said = stderr.lower()
    for reason, words in _PATTERNS:
        if any(word in said for word in words):
            return reason
    return "sandbox_failed"
