"""Which installed distribution provides a plugin's entry point, and which code it is,
found without importing anything of it (for the entry point the registry loaded:
``registry.provider``).

A ``trusted`` instance records the distribution it was trusted for (name, version and a
digest of the code that runs: every file of every top-level package or module its
distribution installs on disk, each as ``code_digest`` digests it, with the entry point's
value and the distribution's ``entry_points.txt`` and ``METADATA``: ``closure.own_digest``)
when the operator turns trust on; trust holds only while the
distribution providing the entry point is that one with that code (docs/plugins.rst,
"Trusted instances"; check W034; decision 0050).  Never a digest of ``RECORD``: a
``RECORD`` is a list the wheel's author wrote, and an installer copies its rows without
checking the files against them (tests/plugins/test_hostile_plugin_distributions.py).

Compiled code never stands in for the reviewed source: ``compiled_problem`` says why a
plugin's files hold code that is not its source's (checked before a trusted import), and
``record_problem`` why its installed files are not the ones its ``RECORD`` lists.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import errno
import hashlib
import importlib.util
import marshal
import os
import stat
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar

__all__ = [
    "CACHE_DIR",
    "DIGEST_BYTES",
    "ENTRY_POINT_GROUP",
    "METADATA_MAX_BYTES",
    "WALK_DEPTH",
    "WALK_ENTRIES",
    "Provider",
    "ReadRefused",
    "cache_problem",
    "code_digest",
    "collected",
    "code_tree",
    "compiled_problem",
    "in_cache",
    "installed_dependencies",
    "installed_provider",
    "provider_of",
    "read_bounded",
    "read_each",
    "real_path",
    "record_paths",
    "record_problem",
    "text_bytes",
]

ENTRY_POINT_GROUP = "django_webfetch.plugins"


class Provider(NamedTuple):
    """An installed distribution: its name, version and the digest of the code of the
    plugin it provides (``trust_digest``: ``closure.own_digest``, SHA-256 over the entry
    point's value, every file of every top-level package or module the distribution
    installs and its ``entry_points.txt`` and ``METADATA``, and the digest of each
    installed distribution it requires outside the site's own set, decision 0051)."""

    name: str
    version: str
    digest: str

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def provider_of(ep: Any) -> Provider | None:
    """The distribution of entry point ``ep`` and the digest of its plugin's code and of
    its installed dependencies (``trust_digest``; ``None`` when it has no distribution, or
    its value names no module: nothing to trust)."""
    dist = getattr(ep, "dist", None)
    locate = origin_of
    pin = trust_digest
    if dist is None or locate is None or pin is None:
        return None
    try:
        name = str(dist.metadata["Name"] or "")
        version = str(dist.version or "")
        origin = locate(ep)
    except Exception:  # unreadable metadata, an invalid entry point: nothing to trust
        return None
    if not name:
        return None
    bad = metadata_invalid(name, version, BAD_METADATA) if metadata_invalid else ""
    if bad:
        # As a dependency's (``closure.invalid``): what it says is not shown, and no pin
        # holds (tests/plugins/test_bounded_reads_and_shown_metadata.py).
        shown = "?" if "Name" in bad else name[:200]
        return Provider(shown, "?", _unpinned(bad))
    try:
        digest = pin(dist, origin.path, origin.top_level, origin.entry)
    except Exception as exc:  # whatever the pin raises, its code cannot be told
        digest = _unpinned(f"its code could not be told ({type(exc).__name__})")
    return Provider(name[:200], version[:100], digest)


#: Why a plugin distribution's own METADATA ``Name`` (PEP 508) or ``Version`` (PEP 440)
#: is not valid: never shown, never trusted.
BAD_METADATA = "plugin_metadata_invalid"
#: ``closure.invalid`` (set by ``closure``): why a METADATA ``Name`` or ``Version`` is not
#: valid, with a reason code ("" when both are).
metadata_invalid: Callable[[str, str, str], str] | None = None


#: The registry's ``_origin_of`` (set by the registry: it imports this module): where the
#: code of an entry point is (its directory and top-level name), found without importing it.
origin_of: Callable[[Any], Any] | None = None
#: A file changed this recently (ns) is not trusted to change its key at its next change
#: (racily clean, as git's index says: within one tick of the coarse clock file times are
#: stamped with, a file may change again with its key unchanged).
SETTLE_NS = 2_000_000_000


def settled(
    keys: Iterable[tuple[int, ...]], window: int = SETTLE_NS, *, now: int | None = None
) -> bool:
    """Whether every ``file_key`` of ``keys`` is older than ``window`` ns (an error key is
    settled): what a memo keyed by them may keep.  One changed more recently is racily
    clean and is read again until it has settled.

    A write stamps both times with the kernel's clock, so a file being written has a
    recent change time whatever else it says.  A modification time in the future is no
    write's (``utime``, a tar archive's member): it is its author's to set and would never
    settle, so the change time alone, which the kernel sets when that time is set, decides
    for such a file (issue 30, attack 16, finding 2; decision 0057).  ``now``: the clock
    (``time.time_ns()``) as given, so that the rule is tested without waiting."""
    now = time.time_ns() if now is None else now
    recent = now - window
    return all(len(k) != 5 or (k[4] <= recent and (k[3] <= recent or k[3] > now)) for k in keys)


def file_key(path: str) -> tuple[int, ...]:
    """The identity of the file at ``path``: device, inode, size, modification and change
    times (an installer or an editor changes at least the change time, which no user can
    set), or the error that ``stat`` raised."""
    try:
        info = os.stat(path)
    except OSError as exc:
        return (-(exc.errno or 1),)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def text_bytes(text: str) -> bytes:
    """``text`` as the bytes a digest covers: UTF-8 with every lone surrogate kept
    (``surrogatepass``), so it never raises and two texts never give the same bytes.  A
    file name that is not UTF-8 comes from ``os.listdir`` as surrogate escapes
    (``__pycache__/<0xff>.pyc``): strict UTF-8 raised inside a digest, and the registry
    loaded again at every look-up (issue 30, attack 16, finding 1)."""
    return text.encode("utf-8", "surrogatepass")


K = TypeVar("K")
V = TypeVar("V")


class Memo(OrderedDict[K, V]):
    """A memo of at most ``size`` entries that forgets the least recently used first (a
    memo that was emptied at its size forgot, at a random moment, what a load had just
    read: the next load read it again).  ``get`` marks an entry used; ``put`` adds one."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        try:
            value = self[key]
            self.move_to_end(key)
        except KeyError:  # absent, or forgotten by another thread meanwhile
            return default
        return value

    def put(self, key: K, value: V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            try:
                self.popitem(last=False)
            except KeyError:  # pragma: no cover - emptied by another thread meanwhile
                break


#: The walk limit: at most this many files and directories of one plugin's package are
#: walked, by every walk over it (its digest here, the registry's checks
#: ``registry._PathCheck``, the stamp a read's outcome is remembered by ``host.stamp``); a
#: package with more is refused (``plugin_path_unsafe``) before anything of it is read.
#: One limit for every walk: no package the registry accepts is one a walk gives up on
#: (decision 0055, tests/plugins/test_registry_failure_memory.py).
WALK_ENTRIES = 20000
#: At most this many bytes of one plugin's files are read for its digest, and for the
#: check of its ``RECORD`` hashes (``record_problem``), counted on the bytes read: more
#: (a sparse file unpacked from a tarball, a link to ``/proc/kcore``) is a package no pin
#: holds for (tests/plugins/test_bounded_reads_and_shown_metadata.py).
DIGEST_BYTES = 512 << 20
#: At most this many directories nested below a plugin's package are walked, here and by the
#: registry's checks (``registry._PathCheck``) and ``host.stamp``: every walk over a
#: plugin's files keeps its own stack, and a deeper package is refused
#: (``plugin_path_unsafe``), never walked by recursion (a chain deeper than the
#: interpreter's recursion limit raised ``RecursionError`` out of ``registry.load``:
#: tests/plugins/test_deep_trees_signal_snapshot_uids_and_dependencies.py).
WALK_DEPTH = 64


def real_path(path: str) -> str:
    """``os.path.realpath(path)`` as the kernel resolves it (at most 40 links, no
    recursion here: Python 3.11's ``realpath`` recurses per nested link); ``path`` made
    absolute when it cannot be opened."""
    flags = getattr(os, "O_PATH", 0)
    if flags:
        try:
            fd = os.open(path, flags | os.O_CLOEXEC)
        except OSError:
            return os.path.abspath(path)
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
        finally:
            os.close(fd)
    try:
        return os.path.realpath(path)
    except (OSError, RecursionError):
        return os.path.abspath(path)


#: SHA-256 of a file's bytes, keyed by its path and identity (``file_key``); a file changed
#: within the last ``SETTLE_NS`` is read again (as for ``registry._names_memo``).
_hashes: Memo[tuple[str, tuple[int, ...]], str] = Memo(65536)


#: The name of the directory the import system caches a source's bytecode in (PEP 3147).
CACHE_DIR = "__pycache__"


def cache_problem(full: str) -> str:
    """Why the entry at ``full`` (named ``__pycache__``) is not a bytecode cache, or "": a
    bytecode cache is a directory that holds nothing but ``*.pyc`` files, directly (no
    subdirectory, no source, no ``__init__``).  ``__pycache__`` is also a valid package or
    module name: anything else of that name may be code the import system runs, and is
    never left out of what is checked
    (tests/plugins/test_plugin_dirs_pyc_and_pin_memo_routes.py)."""
    try:
        with os.scandir(full) as listing:
            # ``is_file`` follows a link: a link to a directory, or a dangling one, is no
            # ``.pyc`` file.
            wrong = sorted(e.name for e in listing if not (e.name.endswith(".pyc") and e.is_file()))
    except NotADirectoryError:
        return "is not a directory"
    except OSError as exc:
        return f"cannot be listed ({exc.strerror})"
    if wrong:
        return f"holds {wrong[0][:100]!r}, not a .pyc file"
    return ""


def in_cache(parts: list[str]) -> bool:
    """Whether a path (its parts) names a ``.pyc`` file directly in a ``__pycache__``
    directory: the only entries a bytecode cache may hold (``cache_problem``)."""
    return len(parts) >= 2 and parts[-2] == CACHE_DIR and parts[-1].endswith(".pyc")


def _own_entries(path: str, top: str) -> list[str]:
    """The entries of directory ``path`` that are plugin ``top``'s own: its package, its
    module, an extension or a sourceless module of that name (as ``registry._path_problem``
    checks them), never the directory's ``__pycache__``."""
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return sorted(n for n in names if n == top or n.partition(".")[0] == top)


def _files(path: str, top: str, *, cache: bool = False) -> list[tuple[str, str]] | str:
    """Every file of plugin ``top`` under directory ``path`` as (path relative to ``path``,
    absolute path), sorted; symbolic links followed (as ``registry._path_problem`` checks
    them: a linked directory is walked once).  The ``.pyc`` files of a bytecode cache
    (``cache_problem``) are left out unless ``cache``, nothing else: a string says why the
    files cannot be listed, or that an entry named ``__pycache__`` at any depth is not a
    bytecode cache (then no pin holds and the plugin is refused).  Walked with a stack of
    its own, never by recursion, and bounded by construction: at most ``WALK_DEPTH``
    directories nested below the package and ``WALK_ENTRIES`` entries (files and
    directories); past either a string says so (tests/plugins/test_bounded_package_walks.py)."""
    found: list[tuple[str, str]] = []
    walked: set[tuple[int, int]] = set()
    # (relative path, is a directory), taken from the end: depth first, in sorted order.
    todo = [(entry, os.path.isdir(os.path.join(path, entry))) for entry in _own_entries(path, top)]
    # The entries below the top-level names are counted, as the registry's check counts
    # them (``registry._PathCheck.tree``): a package it accepts is one walked here too.
    entries = -len(todo)
    todo.reverse()
    while todo:
        relative, directory = todo.pop()
        entries += 1
        if entries > WALK_ENTRIES:
            return f"more than {WALK_ENTRIES} files and directories"
        full = os.path.join(path, relative)
        if os.path.basename(relative) == CACHE_DIR:
            problem = cache_problem(full)
            if problem:
                return f"{relative[:200]!r} is named as a bytecode cache but {problem}"
            if not cache:
                continue
        if not directory:
            found.append((relative, full))
            continue
        if relative.count(os.sep) > WALK_DEPTH:
            return f"{relative[:200]!r}... is nested deeper than {WALK_DEPTH} directories"
        try:
            info = os.stat(full)
            if (info.st_dev, info.st_ino) in walked:
                continue
            walked.add((info.st_dev, info.st_ino))
            with os.scandir(full) as listing:  # ``is_dir`` from the listing: no ``stat``
                names = sorted((e.name, e.is_dir()) for e in listing)
        except OSError as exc:
            return f"{relative[:200]!r} cannot be listed ({exc.strerror})"
        todo.extend((os.path.join(relative, name), is_dir) for name, is_dir in reversed(names))
    return sorted(found)


#: ``rehashed()`` is in force in this thread: the memo is written, never read.
_rehashing = threading.local()


@contextmanager
def rehashed() -> Iterator[None]:
    """Every file digested inside is read again, whatever its memo says (the registry
    does so once per generation, at each ``load``): a write that keeps the file's times,
    through a shared writable ``mmap`` whose page was dirtied earlier, is seen there
    (tests/plugins/test_plugin_dirs_pyc_and_pin_memo_routes.py); between two loads the memo
    stands."""
    depth = getattr(_rehashing, "depth", 0)
    _rehashing.depth = depth + 1
    try:
        yield
    finally:
        _rehashing.depth = depth


class ReadRefused(OSError):
    """A file that is not read (``read_each``): no regular file by its opened descriptor's
    ``fstat`` (a device, a FIFO, a socket, whatever a link leads to), a file of ``/proc``
    or ``/sys`` (its ``fstat`` says 0 bytes or a page and it reads as many as it likes:
    ``/proc/self/pagemap`` hundreds of GiB), more bytes than the bound, or other than its
    ``fstat`` size (it changed while read, or is no file on disk)."""


#: At most this many bytes of one metadata file (``METADATA``, ``RECORD``,
#: ``entry_points.txt``...) are read (``closure.Bounded``); a larger one is unreadable.
METADATA_MAX_BYTES = 32 << 20
_CHUNK = 1 << 20


def _open_regular(full: str, limit: int | None) -> tuple[int, os.stat_result]:
    """``full`` opened for reading and its descriptor's ``fstat``: ``OSError`` when it
    cannot be opened, ``ReadRefused`` for no regular file or one larger than ``limit``."""
    # What the path names is told from a descriptor that opens nothing (``O_PATH``: no
    # driver runs, a FIFO's writer is not let through); only a regular file is then opened
    # for reading, through that descriptor (the same file, whatever the path names since).
    cloexec = getattr(os, "O_CLOEXEC", 0)
    where = os.open(full, getattr(os, "O_PATH", 0) | cloexec)
    try:
        mode = os.fstat(where).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", full)
        if not stat.S_ISREG(mode):
            raise ReadRefused(f"is not a regular file (mode {stat.S_IFMT(mode):o})")
        flags = os.O_RDONLY | os.O_NONBLOCK | cloexec | getattr(os, "O_NOCTTY", 0)
        try:
            fd = os.open(f"/proc/self/fd/{where}", flags)
        except FileNotFoundError:  # no /proc here: by the path (its fstat is checked below)
            fd = os.open(full, flags)
    finally:
        os.close(where)
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", full)
        if not stat.S_ISREG(info.st_mode):
            raise ReadRefused(f"is not a regular file (mode {stat.S_IFMT(info.st_mode):o})")
        if info.st_dev in _pseudo_devices():
            raise ReadRefused("is a file of /proc or /sys, not of a package")
        if limit is not None and info.st_size > limit:
            raise ReadRefused(f"holds more than {limit} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


_pseudo: set[int] | None = None


def _pseudo_devices() -> set[int]:
    """The devices of ``/proc`` and ``/sys`` (each when it is a mount of its own): their
    files are no package's, say 0 bytes or a page, and read as many as they like."""
    global _pseudo
    if _pseudo is None:
        found: set[int] = set()
        with contextlib.suppress(OSError):
            root = os.stat("/").st_dev
            for mount in ("/proc", "/sys"):
                with contextlib.suppress(OSError):
                    device = os.stat(mount).st_dev
                    if device != root:
                        found.add(device)
        _pseudo = found
    return _pseudo


def _read_fd(fd: int, size: int, use: Callable[[bytes], object]) -> int:
    """At most ``size`` + 1 bytes of ``fd`` to ``use``, how many were read (``size``: a
    file giving more or fewer bytes than its ``fstat`` size changed while read, or is no
    file on disk: ``ReadRefused``); closes ``fd``."""
    try:
        left = size + 1  # one more: a file that gives it holds more than it says
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            left -= len(chunk)
            if left <= 0:
                break
            use(chunk)
    finally:
        os.close(fd)
    if left != 1:
        raise ReadRefused(
            f"gives {'more' if left < 1 else 'fewer'} than the {size} bytes its fstat says "
            "(it changed while read, or is no file on disk)"
        )
    return size


def read_each(
    full: str, use: Callable[[bytes], object], limit: int | None = None
) -> os.stat_result:
    """Pass the bytes of regular file ``full`` to ``use``, chunk by chunk, and return the
    opened descriptor's ``fstat``.  Bounded by construction: at most ``st_size + 1`` bytes
    are read, ``st_size`` from the descriptor's ``fstat`` (never a path's ``stat``, which
    a link or a rename may answer for another file), and never more than ``limit`` + 1;
    raises ``ReadRefused`` for no regular file, a file of ``/proc`` or ``/sys``, a file
    larger than ``limit`` or one that gives more or fewer bytes than its size (changed
    while read), ``OSError`` when it cannot be opened or read.  Never blocks
    on a FIFO (its name may stand where a file was listed): opened non-blocking, refused
    by its ``fstat`` (tests/plugins/test_bounded_reads_and_shown_metadata.py)."""
    fd, info = _open_regular(full, limit)
    _read_fd(fd, info.st_size, use)
    return info


def read_bounded(full: str, limit: int = METADATA_MAX_BYTES) -> bytes:
    """The bytes of regular file ``full``, read as ``read_each`` reads (at most its size
    and ``limit``); raises ``OSError`` (``ReadRefused``) as it does."""
    chunks: list[bytes] = []
    read_each(full, chunks.append, limit)
    return b"".join(chunks)


def file_sha256(full: str, key: tuple[int, ...] | None = None, limit: int | None = None) -> str:
    """SHA-256 (hex) of the bytes of regular file ``full`` ("" when it cannot be opened),
    memoized by the file's identity (read again inside ``rehashed()``); ``key`` is its
    ``file_key`` when the caller just took it.  Read as ``read_each`` reads (at most its
    size, and ``limit``): raises ``ReadRefused`` for no regular file, one larger than
    ``limit`` or one giving more bytes than it holds, ``OSError`` for a failed read."""
    return _sha256_read(full, key, limit)[0]


#: ``collected()`` is in force in this thread: each file digested is noted here.
_collecting = threading.local()


@contextmanager
def collected() -> Iterator[dict[str, str]]:
    """Each file digested inside, in this thread, as its resolved path -> the SHA-256 (hex)
    of its bytes (read now, or remembered by its identity): the per-file digests an
    aggregate digest computed inside covers.  Where that aggregate is a pin, these are the
    pin's digests of each file (``loader``: what a trusted plugin imports is executed only
    from bytes that match them, decision 0053)."""
    outer = getattr(_collecting, "files", None)
    files: dict[str, str] = {}
    _collecting.files = files
    try:
        yield files
    finally:
        _collecting.files = outer
        if outer is not None:
            outer.update(files)


def _note(full: str, digest: str) -> str:
    files = getattr(_collecting, "files", None)
    if files is not None and digest:
        files[os.path.realpath(full)] = digest
    return digest


def _sha256_read(full: str, key: tuple[int, ...] | None, limit: int | None) -> tuple[str, int]:
    """``file_sha256`` and the number of bytes it covers (read now, or when memoized);
    noted for ``collected()``."""
    found, read = _sha256_read_now(full, key, limit)
    _note(full, found)
    return found, read


def _sha256_read_now(full: str, key: tuple[int, ...] | None, limit: int | None) -> tuple[str, int]:
    key = file_key(full) if key is None else key
    if len(key) != 5:
        return "", 0
    memo = (full, key)
    found = None if getattr(_rehashing, "depth", 0) else _hashes.get(memo)
    if found is not None:
        if limit is not None and key[2] > limit:
            raise ReadRefused(f"holds more than {limit} bytes")
        return found, key[2]
    try:
        fd, info = _open_regular(full, limit)
    except ReadRefused:
        raise
    except OSError:
        return "", 0
    digest = hashlib.sha256()
    read = _read_fd(fd, info.st_size, digest.update)
    found = digest.hexdigest()
    opened = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    if opened == key and read == key[2] and settled((key,)):  # the file the key was taken of
        _hashes.put(memo, found)
    return found, read


def code_tree(
    path: str, top: str, *, max_files: int | None = None, max_bytes: int | None = None
) -> tuple[str, int, int] | str:
    """``code_digest`` of plugin ``top`` in directory ``path`` with the number of files and
    bytes it covers, or why its files cannot be listed (``_files``), or that they are more
    than ``max_files`` files or ``max_bytes`` bytes (decided from each file's ``stat``
    before any is read, and counted on the bytes read: each file is read as ``read_each``
    reads, at most its ``fstat`` size and the bytes left), or why a file cannot be
    digested (no regular file, or one giving more bytes than it holds: ``ReadRefused``)."""
    try:
        files = _files(path, top)
        if isinstance(files, str):
            return files
        if max_files is not None and len(files) > max_files:
            return f"more than {max_files} files"
        keys = [file_key(full) for _relative, full in files]
        size = sum(key[2] for key in keys if len(key) == 5)
        if max_bytes is not None and size > max_bytes:
            return f"more than {max_bytes} bytes"
        total = hashlib.sha256()
        size = 0  # counted again on the bytes read
        for (relative, full), key in zip(files, keys, strict=True):
            left = None if max_bytes is None else max_bytes - size
            try:
                digest, read = _sha256_read(full, key, left)
            except ReadRefused as exc:
                if left is not None and str(exc).startswith("holds more than"):
                    return f"more than {max_bytes} bytes"
                return f"{relative[:200]!r} {exc}"
            size += read
            total.update(text_bytes(f"{relative}\0{digest or 'unreadable'}\n"))
    except Exception as exc:  # a file that fails mid-way: the code cannot be told
        return f"its files could not be read ({type(exc).__name__})"
    return total.hexdigest(), len(files), size


def code_digest(path: str, top: str) -> str:
    """SHA-256 (hex) over every file of plugin ``top`` in directory ``path``: each file's
    path relative to ``path`` and the SHA-256 of its bytes, in sorted order; only the
    ``.pyc`` files of a bytecode cache left out (compiled code never stands in for the
    source: ``compiled_problem`` and the plugin process's source-only import).  Any byte of
    any other file, a file added, removed or renamed changes it; a package that cannot be
    listed, or holds an entry named ``__pycache__`` that is not a bytecode cache
    (``cache_problem``), gets a digest no pin holds for."""
    if not path:
        return ""
    try:
        tree = code_tree(path, top, max_bytes=DIGEST_BYTES)
    except Exception as exc:  # a file that fails to read mid-way: no pin holds either
        return _unpinned(type(exc).__name__)
    if isinstance(tree, str):
        return _unpinned(tree)
    return tree[0]


#: ``closure.trust_digest`` (set by ``closure``, which the registry imports): the digest
#: trust pins, the plugin's code (every top-level name its distribution installs, its entry
#: point and metadata: ``closure.own_digest``) and its installed dependencies (decision 0051).
trust_digest: Callable[[Any, str, str, str], str] | None = None


#: The digests ``_unpinned`` gave, with why (a registry load compares why, not them).
_unpinned_why: Memo[str, str] = Memo(4096)


#: The first hex digits of every digest ``_unpinned`` gives (a SHA-256 starts so once in
#: 2**64): such a digest is told by its form, whether or not the memo still holds why.
UNPINNED_PREFIX = "0" * 16


def _unpinned(why: str) -> str:
    """A digest no pin holds for (a new one at each call): the code cannot be told."""
    tail = hashlib.sha256(text_bytes(f"unlisted {why} {time.time_ns()}")).hexdigest()
    digest = UNPINNED_PREFIX + tail[len(UNPINNED_PREFIX) :]
    _unpinned_why.put(digest, why)
    return digest


def unpinned_why(digest: str) -> str:
    """Why ``digest`` is one no pin holds for (``code_digest`` could not tell the code), or
    "": what ``registry.provider`` compares between two looks, so that a package that stays
    unlistable does not make every look-up load the registry again, and what refuses a
    trust recorded with such a digest (its form says so even after the memo forgot why)."""
    why = _unpinned_why.get(digest)
    if why:
        return why
    if digest.startswith(UNPINNED_PREFIX):
        return "its code could not be told"
    return ""


#: Suffixes of compiled code the import system loads in place of a module's source.
_COMPILED = (".so", ".pyd", ".pyc", ".pyo")


def _pyc_problem(source: str, relative: str) -> str:
    """Why the cached bytecode the import system would load for ``source`` is not the
    compilation of that source, or "" (no cache file, or one the import system would not
    use: another magic number, flags it rejects, a stale timestamp or source hash)."""
    try:
        cached = importlib.util.cache_from_source(source)
        data = read_bounded(cached, 64 << 20)  # regular files only, never past their size
        code = read_bounded(source, 64 << 20)
        info = os.stat(source)
    except (OSError, NotImplementedError, ValueError):
        return ""
    if len(data) < 16 or data[:4] != importlib.util.MAGIC_NUMBER:
        return ""
    flags = int.from_bytes(data[4:8], "little")
    if flags & ~0b11:
        return ""
    if flags & 0b1:
        if flags & 0b10 and data[8:16] != importlib.util.source_hash(code):
            return ""  # a checked hash that does not match: compiled again from the source
    elif data[8:12] != (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") or data[12:16] != (
        info.st_size & 0xFFFFFFFF
    ).to_bytes(4, "little"):
        return ""  # a stale timestamp: compiled again from the source
    try:
        same = marshal.loads(data[16:]) == compile(code, source, "exec", dont_inherit=True)
    except Exception:  # undecodable bytecode, a source that does not compile
        same = False
    if same:
        return ""
    return (
        f"{os.path.relpath(cached, os.path.dirname(source))!r} beside {relative!r} is loaded "
        "in place of that source and is not its compilation"
    )


#: ``_pyc_problem`` verdicts, keyed by the source's and its cached ``.pyc``'s identity.
_pyc_verdicts: Memo[tuple[Any, ...], str] = Memo(65536)


def _pyc_verdict(source: str, relative: str) -> str:
    """``_pyc_problem``, remembered by the identity of the source and of its cached
    ``.pyc`` (read again when either changed within ``SETTLE_NS``, or in ``rehashed()``)."""
    try:
        cached = importlib.util.cache_from_source(source)
    except (NotImplementedError, ValueError):
        return ""
    keys = (file_key(source), file_key(cached))
    memo = (source, relative, *keys)
    kept = settled(keys)
    if kept and not getattr(_rehashing, "depth", 0):
        known = _pyc_verdicts.get(memo)
        if known is not None:
            return str(known)
    found = _pyc_problem(source, relative)
    if kept:
        _pyc_verdicts.put(memo, found)
    return found


#: ``compiled_problem`` verdicts at every trusted call (``remembered``), by package: the
#: identity of each directory holding its files and of each cached ``.pyc``, and the verdict.
_package_verdicts: Memo[tuple[str, str, bool], tuple[tuple[Any, ...], str]] = Memo(4096)


def _package_keys(known: tuple[Any, ...]) -> tuple[Any, ...]:
    """``(directories, .pyc files, their keys)`` with the keys taken now."""
    dirs, pycs, _keys = known
    return (dirs, pycs, tuple(file_key(p) for p in (*dirs, *pycs)))


def _cached(source: str) -> str:
    """The ``.pyc`` file the import system reads for ``source`` ("" when it reads none)."""
    try:
        return importlib.util.cache_from_source(source)
    except (NotImplementedError, ValueError):
        return ""


def compiled_problem(path: str, top: str, *, pinned: bool = False, remembered: bool = False) -> str:
    """Why plugin ``top`` in directory ``path`` would run code that is not its source, or
    "": an entry named ``__pycache__`` at any depth that is not a bytecode cache
    (``cache_problem``), a sourceless module (``.pyc`` outside a bytecode cache), an
    extension module (``.so``, ``.pyd``), or a cached ``.pyc`` the import system would load
    for a source at any depth that is not that source's compilation (a hash-based ``.pyc``
    of other code, PEP 552).  ``pinned`` (a dependency's package, decision 0051): its
    sourceless and extension modules are in its digest, so only what the digest leaves out
    (a bytecode cache) is checked.  ``remembered`` (the check at every trusted call, made
    once the pin held: the sources are the pinned ones): the package's verdict is
    remembered by the identity of every directory holding its files (a file or a cache
    added, removed or renamed), of every bytecode cache a source's ``.pyc`` is read from
    (the directory's own ``__pycache__`` for a module, an empty or missing one: a ``.pyc``
    written there) and of every cached ``.pyc`` it would read, existing or not (one
    rewritten in place), and
    each ``.pyc``'s verdict by its and its source's identity (``_pyc_verdict``)."""
    memo = (path, top, pinned)
    # Caches elsewhere (``sys.pycache_prefix``) are not among the package's files: no memo.
    remembered = remembered and sys.pycache_prefix is None
    if remembered and not getattr(_rehashing, "depth", 0):
        known = _package_verdicts.get(memo)
        if known is not None and _package_keys(known[0]) == known[0]:
            return known[1]
    files = _files(path, top, cache=True)
    if isinstance(files, str):
        return files
    verdict = ""
    for relative, full in files:
        if in_cache(relative.split(os.sep)):
            continue  # a bytecode cache's (``_files``): read below, for its source
        if relative.endswith(_COMPILED) and not pinned:
            verdict = f"it holds compiled code without reviewable source: {relative!r}"
            break
        if relative.endswith(".py"):
            # A dependency's verdict is remembered (a closure may hold thousands of modules);
            # a plugin's own files are compared at each trusted import, as before.
            remember = pinned or remembered
            verdict = _pyc_verdict(full, relative) if remember else _pyc_problem(full, relative)
            if verdict:
                break
    if remembered:
        # Every directory holding its files, and every bytecode cache the import system
        # would read a source's ``.pyc`` from, existing or not, empty or not: a ``.pyc``
        # written there changes its key (tests/plugins/test_pin_routes_pth_platlib_and_eggs.py).
        cached = {_cached(full) for _r, full in files if full.endswith(".py")} - {""}
        caches = {os.path.dirname(pyc) for pyc in cached}
        dirs = tuple(sorted({path, *(os.path.dirname(full) for _r, full in files), *caches}))
        pycs = tuple(
            sorted({full for relative, full in files if in_cache(relative.split(os.sep))} | cached)
        )
        keys = _package_keys((dirs, pycs, ()))
        if settled(k for k in keys[2] if len(k) == 5):
            _package_verdicts.put(memo, (keys, verdict))
    return verdict


def record_paths(text: str) -> list[str]:
    """The path of each row of ``RECORD`` text, read as ``importlib.metadata`` (and pip,
    which writes it with ``csv.writer``) reads it: with the ``csv`` module, so a quoted
    path holding a comma is one path (tests/plugins/test_pin_routes_pth_platlib_and_eggs.py).  The
    one reader of ``RECORD`` rows for the registry (``registry._file_list``) and the dependency pin
    (``closure._tops``); raises ``csv.Error`` on text the ``csv`` module cannot read."""
    return [row[0] for row in csv.reader(text.splitlines()) if row]


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def record_problem(dist: Any) -> str:
    """Why the installed files of ``dist`` are not the ones its ``RECORD`` lists (a file
    whose bytes do not match its row's hash, or a listed file that is missing), or "".
    Only the rows of ``.pyc`` files directly in a bytecode cache (``cache_problem``) are
    left out: compiled code never stands in for the source."""
    try:
        files = list(dist.files or ())
    except Exception:
        return ""
    caches: dict[str, bool] = {}
    left = DIGEST_BYTES  # counted on the bytes read
    for file in files:
        found = getattr(file, "hash", None)
        if found is None:
            continue
        try:
            full = os.fspath(file.locate())
        except Exception:
            continue
        if in_cache(str(file).replace("\\", "/").split("/")):
            directory = os.path.dirname(full)
            if directory not in caches:  # gone: nothing in it is loaded
                caches[directory] = not os.path.lexists(directory) or not cache_problem(directory)
            if caches[directory]:
                continue
        mode = str(found.mode).lower()
        if not os.path.exists(full):
            return f"{str(file)[:200]!r}, listed in its RECORD, is missing"
        if mode not in hashlib.algorithms_guaranteed:
            return f"{str(file)[:200]!r} has a RECORD hash of unknown kind {mode[:20]!r}"
        try:  # as ``read_each`` reads: regular files only, at most their size and ``left``
            if mode == "sha256":
                hexed, read = _sha256_read(full, None, left)
                actual = _b64(bytes.fromhex(hexed)) if hexed else ""
            else:
                other = hashlib.new(mode)
                read = read_each(full, other.update, left).st_size
                actual = _b64(other.digest())
            left -= read
        except ReadRefused as exc:
            if str(exc).startswith("holds more than"):
                return f"the files its RECORD lists hold more than {DIGEST_BYTES} bytes"
            actual = ""
        except OSError:
            actual = ""
        if actual != found.value:
            return (
                f"{str(file)[:200]!r} is not the file its RECORD lists (its bytes changed "
                "after install, or the wheel's RECORD was not its own)"
            )
    return ""


#: The registry's ``provider`` (set by ``apps.py``: the registry imports this module).
provider_lookup: Callable[[str], Provider | None] | None = None


def installed_provider(plugin: str) -> Provider | None:
    """The distribution of the entry point the registry serves plugin ``plugin`` from
    (``registry.provider``: the very entry point whose manifest and code it loaded, read
    one distribution at a time); ``None`` when no entry point may serve that name (or the
    app is not ready).  Never a fresh ``entry_points()`` look-up by name: that is another
    entry point than the one served when a manifest names another plugin, and one
    undecodable ``entry_points.txt`` makes it raise
    (tests/plugins/test_name_and_trust_of_one_entry_point.py)."""
    lookup = provider_lookup
    return lookup(plugin) if lookup is not None else None


#: The registry's ``dependencies`` (set by ``apps.py``): the installed dependencies of the
#: plugin a name is served from, pinned with its code (``closure``, decision 0051).
dependencies_lookup: Callable[[str], tuple[Any, ...]] | None = None


def installed_dependencies(plugin: str) -> tuple[Any, ...]:
    """The installed dependencies of plugin ``plugin`` outside the site's own set, as its
    trust pins them (``closure.Dependency`` rows; ``()`` when it has none, is not served, or
    the app is not ready)."""
    lookup = dependencies_lookup
    return lookup(plugin) if lookup is not None else ()
