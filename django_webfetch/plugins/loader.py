"""What a trusted plugin imports is executed only from bytes its pin holds (decision 0053).

Trust pins the code a trusted plugin runs (``closure.trust_digest``: SHA-256 over the
digest of each file of its distribution's packages and of its installed dependencies',
decisions 0050 and 0051), and the pin is compared before each trusted call.  A module the
plugin's code imports later (at first use in a handler, from a thread it started, through
``importlib.reload``) is read from disk when that import runs: a release installed in
between would run (issue 30, attack 14, finding 1).  So the check is made where the bytes
are read, not before.

``PinnedFinder``, first on ``sys.meta_path`` from the first trusted import on, claims the
modules of each trusted plugin's pin (its distribution's and its pinned dependencies'): below
each of their top-level names, every module a file their ``RECORD`` lists provides and every
module below a regular package they provide (all of a name whose distribution has no
``RECORD``); another distribution's module of a shared namespace package is left to the
import system (decision 0054).  A claimed module is found only in the pinned copies,
and its loader reads its file once (bounded, ``provenance.read_bounded``), hashes those
bytes, compares them with the pinned digest of that file, and compiles and executes exactly
those bytes (never a cached ``.pyc``, never the path read again).  The per-file digests are
the ones an aggregate equal to the recorded pin was computed from (``claim``: the aggregate
is a hash over them, so they are the pin's), remembered in this process; nothing new is
stored.  A file whose bytes differ, or that the pin does not hold (a module added by a later
release), is refused: ``PinnedCodeChanged`` (an ``ImportError``, reason
``plugin_code_changed``), logged, whatever thread imports it.  An extension module and the
pinned libraries it links (a wheel's vendored ones) are hashed through descriptors held
open and loaded through those descriptors, its libraries first, so that only bytes hashed
are ever mapped (``_PinnedExtension``, ``elf``); no library of a pinned directory is left
for the dynamic linker to load by its path, and none is loaded whose name the linker would
bind to another object loaded already; a namespace package (a directory) has no
bytes: a claimed one's portions must be in a pinned copy.

A module already in ``sys.modules`` is not imported again: it was checked at its import
(or imported by the site before any trust applied).  Only a live claim's digests are
accepted: one whose pin a trusted instance records now and that the files matched when it
was made (issue 30, attack 16, finding 4).  A claim is released when its pin stops holding
at a trusted call (``registry.pin_imports``, ``tools._trust_holds``), when no trusted
instance records its pin any more (untrusted, deleted, confirmed for another release:
``release_all_but``, on each save or delete of an instance and before each trusted call),
and when a newer claim gives one of its files another digest (a file has one content).  A
released claim's names stay claimed for the life of the process: the plugin's code stays
loaded, so its later imports stay checked, and refused until a live claim holds their
files again.  Code that loads a file by
its path with a loader of its own (``spec_from_file_location``) does not pass through the
import system's finders: the reviewed code chose that, and the pin covers what it does.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.machinery
import importlib.util
import logging
import marshal
import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any, NamedTuple

from . import elf, provenance, sandbox

__all__ = [
    "CHANGED",
    "PinnedCodeChanged",
    "PinnedFinder",
    "claim",
    "claimed",
    "held",
    "install",
    "release",
    "release_all_but",
]

logger = logging.getLogger("django_webfetch.plugins")

#: The reason code of a refused import: the bytes are not the ones trust was given to.
CHANGED = "plugin_code_changed"


class PinnedCodeChanged(ImportError):
    """A module of a trusted plugin's pin whose file is not the pinned bytes (``reason``
    ``plugin_code_changed``): nothing of it was executed."""

    reason = CHANGED
    code = CHANGED


class _Shape(NamedTuple):
    """Which modules below one claimed top-level name are the pinned distributions' (by
    the files their ``RECORD`` lists: ``closure.owned_files``, decision 0054): each module
    or package a listed file provides, each regular package (its ``__init__`` listed:
    every module below it is theirs, one a later release adds too), and each directory
    with a listed file below it (a namespace level: its other entries may be another
    distribution's)."""

    provides: frozenset[str]
    regular: frozenset[str]
    levels: frozenset[str]


#: What ``_Shape.kind`` says of a module: the pinned distributions', served only from
#: pinned bytes; a namespace level holding some of theirs.
PINNED, LEVEL = "pinned", "level"


def _kind(shape: _Shape | None, name: str) -> str | None:
    """``PINNED``, ``LEVEL`` or ``None`` (another distribution's: the import system's own
    finders serve it); ``shape`` ``None``: every module below the name is pinned."""
    if shape is None or name in shape.provides:
        return PINNED
    parts = name.split(".")
    if any(".".join(parts[:at]) in shape.regular for at in range(1, len(parts))):
        return PINNED
    return LEVEL if name in shape.levels else None


_MODULE_SUFFIXES = tuple(importlib.machinery.all_suffixes())


def _shape(top: str, roots: Iterable[str], files: Iterable[str]) -> _Shape:
    """The ``_Shape`` of ``top`` in its pinned copies ``roots`` from the resolved paths of
    the files its pinned distributions list."""
    provides: set[str] = set()
    regular: set[str] = set()
    levels: set[str] = set()
    roots = tuple(roots)
    for path in files:
        root = next((r for r in roots if path.startswith(r + os.sep)), None)
        if root is None:
            continue
        parts = path[len(root) + 1 :].split(os.sep)
        leaf = parts[-1]
        stem = leaf.partition(".")[0]
        dirs = parts[:-1]
        if (dirs[:1] or [stem]) != [top] or provenance.CACHE_DIR in dirs:
            continue
        for at in range(1, len(dirs) + 1):
            levels.add(".".join(dirs[:at]))
        if not leaf.endswith(_MODULE_SUFFIXES) or not stem.isidentifier():
            continue
        if stem == "__init__" and dirs:
            regular.add(".".join(dirs))
            provides.add(".".join(dirs))
        else:
            provides.add(".".join([*dirs, stem]))
    return _Shape(frozenset(provides), frozenset(regular), frozenset(levels))


class _Claim(NamedTuple):
    """One trusted plugin's pin as this process enforces it: each top-level name with the
    directories of its pinned copies (resolved), each pinned file's digest, for each name
    whose files its pinned distributions list which modules below it are theirs, the
    aggregate digest it was found equal to (the instance's record; "" for a claim made
    without one) and when it was made (a count)."""

    tops: Mapping[str, tuple[str, ...]]
    files: Mapping[str, str]
    shapes: Mapping[str, _Shape | None]
    pin: str = ""
    made: int = 0


class _Entry(NamedTuple):
    """A claimed top-level name, every claim merged: the directories of its pinned copies,
    the allowed digests by resolved path (of the live claims only), and its ``_Shape``
    (``None``: all of it)."""

    roots: tuple[str, ...]
    digests: Mapping[str, frozenset[str]]
    shape: _Shape | None


_lock = threading.Lock()
#: Plugin name -> its live claim: the digests of its files are accepted; replaced whole
#: (readers take the dict as it is).
_claims: dict[str, _Claim] = {}
#: Plugin name -> its released claim (``release``): its names stay claimed (their modules
#: are still found only in the pinned copies, and refused), none of its digests accepted.
_released: dict[str, _Claim] = {}
#: Top-level name -> its entry: live and released claims' names and copies, live claims'
#: digests; rebuilt when a claim changes.
_index: dict[str, _Entry] = {}
#: Resolved path -> allowed digests, of every live claim (a library an extension links).
_pinned: dict[str, frozenset[str]] = {}
#: The directories holding a pinned file (of a live claim).
_pinned_dirs: frozenset[str] = frozenset()
#: How many claims were made in this process (``_Claim.made``).
_made = 0


def claim(
    plugin: str,
    tops: Mapping[str, Iterable[str]],
    files: Mapping[str, str],
    owned: Mapping[str, Iterable[str] | None] | None = None,
    pin: str = "",
) -> None:
    """From now on, in this process, every module below a name of ``tops`` (top-level name
    -> the directories its pinned copies are in) is executed only from a file of ``files``
    (resolved path -> the SHA-256 its pin holds) whose bytes hash to that digest; replaces
    ``plugin``'s earlier claim, live or released.  ``owned`` (top-level name -> the
    resolved paths of the files the pinned distributions providing it list, or ``None``):
    below such a name only the modules those files provide, and every module below a
    regular package they provide, are claimed (a shared namespace's other portions are
    another distribution's); a name it does not give, or gives ``None``, is claimed whole.
    ``pin``: the aggregate digest ``files`` were found to make (the record trust was given
    to), which ``release`` and ``release_all_but`` compare.

    ``files`` were read from disk just now, and a file has one content: another plugin's
    live claim that gives any of them another digest is of a pin that no longer holds
    (an upgrade confirmed for this plugin only), and is released (issue 30, attack 16,
    finding 4).  So no two live claims disagree on a file, and a file's accepted digest
    is the one of the newest claim of it.  Installs the finder first on ``sys.meta_path``."""
    global _made
    owned = owned or {}
    roots_of = {top: tuple(dict.fromkeys(map(os.path.realpath, d))) for top, d in tops.items()}
    shapes: dict[str, _Shape | None] = {}
    for top, roots in roots_of.items():
        listed = owned.get(top)
        shapes[top] = None if listed is None else _shape(top, roots, listed)
    with _lock:
        _made += 1
        made = _Claim(roots_of, dict(files), shapes, pin, _made)
        _released.pop(plugin, None)
        _claims.pop(plugin, None)
        for other, each in list(_claims.items()):
            if any(made.files.get(path, digest) != digest for path, digest in each.files.items()):
                _release(other, "another trusted plugin's claim of the same file holds now")
        _claims[plugin] = made
        _rebuild()
    install()


def release(plugin: str, pin: str | None = None, why: str = "its trust stopped holding") -> bool:
    """``plugin``'s live claim (only when it was made for ``pin``, when given) is released:
    none of its digests is accepted from now on, and its names stay claimed (a module
    below them not yet imported is refused until a live claim holds its file; decision
    0053 as amended).  Whether a claim was released."""
    with _lock:
        each = _claims.get(plugin)
        if each is None or (pin is not None and each.pin != pin):
            return False
        _release(plugin, why)
        _rebuild()
        return True


def held() -> tuple[int, frozenset[tuple[str, str]]]:
    """How many claims were made so far (for ``release_all_but``), and the plugin and pin
    of each live claim made with a pin."""
    with _lock:
        return _made, frozenset((p, c.pin) for p, c in _claims.items() if c.pin)


def release_all_but(live: Iterable[tuple[str, str]], made: int) -> list[str]:
    """Every live claim with a pin made by claim number ``made`` (``held``: before the
    trusted records ``live`` were read) whose (plugin, pin) is none of ``live`` (each
    trusted instance's plugin and recorded pin) is released: the pin it was made for is
    no instance's trust now (untrusted, deleted, confirmed for another release).  The
    plugins whose claims were released, sorted."""
    live = set(live)
    with _lock:
        stale = sorted(
            p for p, c in _claims.items() if c.pin and c.made <= made and (p, c.pin) not in live
        )
        for plugin in stale:
            _release(plugin, "no trusted instance records its pin now")
        if stale:
            _rebuild()
    return stale


def _release(plugin: str, why: str) -> None:
    """(``_lock`` held) ``plugin``'s live claim moved to the released ones."""
    _released[plugin] = _claims.pop(plugin)
    logger.info(
        "django_webfetch trusted plugin %r: its claim of its pinned files is released (%s)",
        plugin,
        why,
    )


def _rebuild() -> None:
    """(``_lock`` held) ``_index`` and ``_pinned`` from the claims: the names and copies of
    live and released claims (live ones' copies first), the digests of live ones only."""
    global _index, _pinned, _pinned_dirs
    index: dict[str, tuple[tuple[str, ...], dict[str, set[str]], list[_Shape | None]]] = {}
    for live, claims in ((True, _claims), (False, _released)):
        for each in claims.values():
            for top, dirs in each.tops.items():
                roots, digests, seen = index.setdefault(top, ((), {}, []))
                roots = tuple(dict.fromkeys((*roots, *dirs)))
                for path, digest in each.files.items() if live else ():
                    if any(path.startswith(root + os.sep) for root in dirs):
                        digests.setdefault(path, set()).add(digest)
                seen.append(each.shapes.get(top))
                index[top] = (roots, digests, seen)
    _index = {
        top: _Entry(roots, {p: frozenset(d) for p, d in digests.items()}, _merged(seen))
        for top, (roots, digests, seen) in index.items()
    }
    pinned: dict[str, set[str]] = {}
    for each in _claims.values():
        for path, digest in each.files.items():
            pinned.setdefault(path, set()).add(digest)
    _pinned = {p: frozenset(d) for p, d in pinned.items()}
    _pinned_dirs = frozenset(map(os.path.dirname, _pinned))


def _merged(shapes: list[_Shape | None]) -> _Shape | None:
    """The shapes of one name in several claims as one: all of it when one claims all."""
    if any(s is None for s in shapes):
        return None
    return _Shape(*(frozenset().union(*(getattr(s, f) for s in shapes)) for f in _Shape._fields))


def claimed(name: str) -> bool:
    """Whether module ``name`` is below a claimed top-level name."""
    return name.partition(".")[0] in _index


def install() -> PinnedFinder:
    """The finder, first on ``sys.meta_path`` (moved there again if another was put
    before it since)."""
    with _lock:
        found = next((f for f in sys.meta_path if isinstance(f, PinnedFinder)), None)
        if found is None:
            found = PinnedFinder()
        if sys.meta_path and sys.meta_path[0] is found:
            return found
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(found)
        sys.meta_path.insert(0, found)
        return found


def _refuse(name: str, path: str, why: str) -> PinnedCodeChanged:
    logger.error(
        "django_webfetch trusted plugin code refused at import (%s): module %r from %r %s",
        CHANGED,
        name,
        path[-300:],
        why,
    )
    return PinnedCodeChanged(
        f"the module {name!r} is not the code trust was given to ({CHANGED}): {why}; "
        "nothing of it was executed",
        name=name,
        path=path,
    )


def _allowed(name: str, path: str) -> frozenset[str]:
    entry = _index.get(name.partition(".")[0])
    return entry.digests.get(os.path.realpath(path), frozenset()) if entry else frozenset()


def _verified(name: str, path: str, data: bytes) -> bytes:
    allowed = _allowed(name, path)
    if not allowed:
        raise _refuse(name, path, "its file is none the pin holds (added since)")
    if hashlib.sha256(data).hexdigest() not in allowed:
        raise _refuse(name, path, "its bytes are not the pinned ones (changed since)")
    return data


def _read(name: str, path: str) -> bytes:
    try:
        return provenance.read_bounded(path, provenance.DIGEST_BYTES)
    except OSError as exc:
        raise _refuse(name, path, f"its file cannot be read ({exc})") from exc


class _PinnedSource(importlib.machinery.SourceFileLoader):
    """A module's source, read once, checked against its pinned digest and compiled from
    those bytes; no bytecode cache is read or written."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        data = _verified(fullname, path, _read(fullname, path))
        return compile(data, path, "exec", dont_inherit=True)


class _PinnedSourceless(importlib.machinery.SourcelessFileLoader):
    """A sourceless module (a ``.pyc`` a pinned distribution installs, in its pin): its
    bytes read once, checked, and unmarshalled from those bytes."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        data = _verified(fullname, path, _read(fullname, path))
        if data[:4] != importlib.util.MAGIC_NUMBER or len(data) < 16:
            raise _refuse(fullname, path, "it is no bytecode of this interpreter")
        return marshal.loads(memoryview(data)[16:])


class _Object(NamedTuple):
    """A shared object of a pinned extension's load, hashed: its resolved path, the
    descriptor its pinned bytes were hashed from (held open), its dynamic section, and
    the SHA-256 of those bytes."""

    real: str
    fd: int
    dynamic: elf.Dynamic
    digest: str


#: Bounds of one extension's pinned libraries: how deep they need each other, how many.
_MAX_DEPTH, _MAX_OBJECTS = 8, 64

#: The descriptors pinned objects were loaded through, held for the life of the process:
#: the dynamic linker knows each object by the name ``/proc/self/fd/N`` (and the import
#: system its module by that path), so that number is never given to another file.
_held: list[int] = []

#: Serializes the loader's check of what is loaded already and its own loads (``_bound``).
_loading = threading.RLock()
#: The handle (``dlopen``'s: the object's link map) of each pinned library this loader
#: loaded -> the SHA-256 of the bytes it was loaded from.  The dynamic linker binds a
#: ``DT_NEEDED`` to the first object loaded with that ``DT_SONAME``; ``_bound`` asks it
#: which one that is (``RTLD_NOLOAD``) and finds its digest here.
_loaded: dict[int, str] = {}


class _PinnedExtension(importlib.machinery.ExtensionFileLoader):
    """An extension module, mapped only from bytes that were hashed, through the
    descriptors they were hashed from: its file is opened and hashed against the pin, and
    its ELF dynamic section (``elf``) read from that descriptor; each library it needs
    (``DT_NEEDED``) that the dynamic linker would find through its ``RUNPATH``/``RPATH``
    (``$ORIGIN`` its resolved directory) in a pinned file is opened, hashed and read so,
    recursively; one it would find in a claimed package's directory or a pinned library's
    directory that the pin does not hold is refused.  Then each pinned library is loaded,
    its dependencies first, through ``/proc/self/fd/N`` of its hashed descriptor, and last
    the extension the same way: the dynamic linker matches a later ``DT_NEEDED`` with an
    object already loaded by its ``DT_SONAME`` and never searches ``$ORIGIN`` (here
    ``/proc/self/fd``) for it; a pinned library whose ``DT_SONAME`` is not the name needed
    could not be matched so and is refused.  A search path entry holding a substitution
    other than ``$ORIGIN`` refuses the object; a library it needs that is not served so is
    refused when the linker, searching for it with its own ``$ORIGIN`` and working
    directory, could take it from a pinned or claimed place (``_gather``).  A pinned library
    whose ``DT_SONAME`` names an object loaded already, other than one this loader loaded
    from the same bytes, is refused: the linker would bind to that one (``_bound``).  No
    byte is mapped, and no constructor runs, before every pinned object is proved
    (decision 0054, amended)."""

    def create_module(self, spec: Any) -> Any:
        path = self.path
        real = os.path.realpath(path)
        allowed = _allowed(spec.name, path)
        if not allowed:
            raise _refuse(spec.name, path, "its file is none the pin holds (added since)")
        objects: dict[str, _Object] = {}
        try:
            _gather(spec.name, real, allowed, (), objects, set())
        except BaseException:
            for each in objects.values():
                os.close(each.fd)
            raise
        order = list(objects.values())
        # The import's own loads and look-ups, by the host's code (a plugin's scope refuses
        # a ``ctypes`` load of its own: ``sandbox``).
        with sandbox.host_io(), _loading:
            try:
                _bound(spec.name, order[:-1])
            except BaseException:
                for each in order:
                    os.close(each.fd)
                raise
            # Held from here on, whatever happens: an object loaded is known by its number.
            _held.extend(each.fd for each in order)
            try:
                for each in order[:-1]:
                    library = ctypes.CDLL(f"/proc/self/fd/{each.fd}", mode=sys.getdlopenflags())
                    _loaded.setdefault(library._handle, each.digest)
            except OSError as exc:
                raise ImportError(str(exc), name=spec.name, path=path) from exc
        where = f"/proc/self/fd/{order[-1].fd}"
        loaded = importlib.machinery.ExtensionFileLoader(spec.name, where)
        found = importlib.util.spec_from_file_location(spec.name, where, loader=loaded)
        if found is None:  # pragma: no cover - a location with a loader gives a spec
            raise _refuse(spec.name, path, "it cannot be loaded")
        module = loaded.create_module(found)
        with contextlib.suppress(AttributeError, TypeError):
            module.__file__ = path
        return module


def _bound(name: str, libraries: list[_Object]) -> None:
    """(``_loading`` held) Refused unless each of ``libraries`` (pinned, each needed by its
    ``DT_SONAME``) is what the dynamic linker will bind that name to once it is loaded:
    the linker binds a ``DT_NEEDED`` to the FIRST object loaded with that ``DT_SONAME``
    in the process, whoever loaded it and from whatever bytes (issue 30, attack 17,
    finding 2).  So an object of that name loaded already must be one this loader loaded
    from the same bytes (the same digest), and no two of ``libraries`` may share a name
    with other bytes.  Which object the linker would take is asked of the linker itself:
    ``dlopen`` of the name with ``RTLD_NOLOAD`` matches the loaded objects' names and
    ``DT_SONAME`` as a ``DT_NEEDED`` is matched, and loads nothing."""
    planned: dict[str, str] = {}
    for each in libraries:
        soname = str(each.dynamic.soname)
        if planned.setdefault(soname, each.digest) != each.digest:
            why = f"two pinned libraries it needs are both named {soname!r} (DT_SONAME)"
            raise _refuse(name, each.real, why)
        try:
            found = ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue  # none of that name is loaded: the one loaded next is bound
        if _loaded.get(found._handle) != each.digest:
            raise _refuse(
                name,
                each.real,
                f"a library of its name {soname!r} (DT_SONAME) is loaded in this process "
                "already from other bytes (another plugin's, another release's, the "
                "system's): the dynamic linker would bind the extension to that one",
            )


def _hashed(name: str, real: str, allowed: frozenset[str], what: str) -> _Object:
    """``real`` opened, hashed against ``allowed`` and its dynamic section read, through
    one descriptor (returned open)."""
    try:
        fd, info = provenance._open_regular(real, provenance.DIGEST_BYTES)
    except OSError as exc:
        raise _refuse(name, real, f"{what} cannot be read ({exc})") from exc
    try:
        digest = hashlib.sha256()
        try:
            provenance._read_fd(os.dup(fd), info.st_size, digest.update)
        except OSError as exc:
            raise _refuse(name, real, f"{what} cannot be read ({exc})") from exc
        if digest.hexdigest() not in allowed:
            raise _refuse(name, real, f"{what} is not the pinned bytes (changed since)")
        try:
            dynamic = elf.read_dynamic(lambda at, size: os.pread(fd, size, at), info.st_size)
        except (elf.ElfError, OSError) as exc:
            raise _refuse(name, real, f"{what}'s ELF dynamic section is refused: {exc}") from exc
    except BaseException:
        os.close(fd)
        raise
    return _Object(real, fd, dynamic, digest.hexdigest())


def _gather(
    name: str,
    real: str,
    allowed: frozenset[str],
    rpaths: tuple[_Place, ...],
    objects: dict[str, _Object],
    active: set[str],
) -> _Object:
    """``real`` hashed (``_hashed``), and each pinned library it needs gathered before it
    into ``objects`` (post-order: dependencies before the objects that need them; on a
    refusal, the descriptors of ``objects`` are the caller's to close); ``rpaths``: the
    ``DT_RPATH`` entries of the objects that needed it (searched when it has no
    ``RUNPATH``); ``active``: the objects being gathered (a cycle is refused).

    A library it needs that is not served from hashed bytes (none the pin holds where the
    loader looks) is searched for by the dynamic linker, by path: refused when any place
    the linker could take it from, as the linker expands the search list, is a pinned file
    or lies in a claimed or pinned directory (issue 30, attack 17, finding 1)."""
    made = _hashed(name, real, allowed, "a library it needs" if active else "its file")
    active.add(real)
    try:
        dynamic = made.dynamic
        search: tuple[_Place, ...]
        if dynamic.runpath is not None:
            search = _places(name, real, dynamic.runpath, "RUNPATH")
        else:
            own = _places(name, real, dynamic.rpath, "RPATH") if dynamic.rpath else ()
            search = (*own, *rpaths)
        cwd = os.getcwd()
        for needed in dynamic.needed:
            model, linker = _candidates(name, real, needed, search, cwd)
            found = next((os.path.realpath(c) for c in model if os.path.isfile(c)), None)
            pins = _pinned.get(found) if found is not None else None
            if not pins:
                if found is not None and _claimed_place(found):
                    why = f"a library it needs ({needed}) is none the pin holds"
                    raise _refuse(name, found, why)
                _searched(name, needed, linker)
                continue  # another distribution's or the system's: no pin covers it
            assert found is not None
            if found in active:
                raise _refuse(name, found, "pinned libraries that need each other (a cycle)")
            library = objects.get(found)
            if library is None:
                if len(active) > _MAX_DEPTH or len(objects) + len(active) >= _MAX_OBJECTS:
                    why = "its pinned libraries are nested too deep or too many"
                    raise _refuse(name, found, why)
                library = _gather(name, found, pins, search, objects, active)
            if library.dynamic.soname != needed:
                raise _refuse(
                    name,
                    found,
                    f"a pinned library it needs ({needed}) has DT_SONAME "
                    f"{library.dynamic.soname!r}: only a library known by the name needed "
                    "can be loaded from the bytes hashed (it is not loaded by its path)",
                )
    except BaseException:
        os.close(made.fd)
        raise
    active.discard(real)
    objects[real] = made
    return made


#: What ``$ORIGIN`` is to the dynamic linker in an object this loader loads: glibc takes
#: the directory of the name the object was opened by, here ``/proc/self/fd/N``.
_LINKER_ORIGIN = "/proc/self/fd"


class _Place(NamedTuple):
    """One directory of a ``RUNPATH``/``RPATH``: as the loader looks there (``$ORIGIN`` the
    object's resolved directory, where it was installed with its libraries) and as the
    dynamic linker looks there (``$ORIGIN`` ``_LINKER_ORIGIN``); relative (``""``, an
    empty entry, is the working directory to glibc) or absolute."""

    model: str
    linker: str


def _substituted(text: str, origin: str) -> str | None:
    """``text`` with each ``$ORIGIN`` and ``${ORIGIN}`` made ``origin``, read as glibc's
    ``_dl_dst_substitute`` reads them (``$ORIGIN`` followed by no ASCII letter, digit or
    ``_``: ``$ORIGINAL`` is another name); ``None`` when it holds any other ``$``:
    ``$PLATFORM``, ``$LIB`` and their braced forms, which glibc expands to values of its
    own (``AT_PLATFORM``, or a platform name it chose; its library directory's name), and
    an unknown one, which glibc keeps as it is."""
    out: list[str] = []
    at = 0
    while (dollar := text.find("$", at)) >= 0:
        out.append(text[at:dollar])
        rest = text[dollar + 1 :]
        after = rest[6:7]
        if rest.startswith("{ORIGIN}"):
            at = dollar + 9
        elif rest.startswith("ORIGIN") and not (
            after.isascii() and (after.isalnum() or after == "_")
        ):
            at = dollar + 7
        else:
            return None
        out.append(origin)
    out.append(text[at:])
    return "".join(out)


def _places(name: str, real: str, entries: str, field: str) -> tuple[_Place, ...]:
    """The directories of ``RUNPATH``/``RPATH`` ``entries`` (``:``-separated) of pinned
    object ``real``; refused when one holds a substitution other than ``$ORIGIN``: where
    the dynamic linker looks through it is not known here, so a pinned library found
    there would be loaded by its path, unhashed (fail closed)."""
    origin = os.path.dirname(real)
    places = []
    for entry in entries.split(":"):
        model, linker = _substituted(entry, origin), _substituted(entry, _LINKER_ORIGIN)
        if model is None or linker is None:
            raise _refuse(
                name,
                real,
                f"its {field} entry {entry[:200]!r} holds a substitution other than $ORIGIN "
                "($PLATFORM, $LIB): the place the dynamic linker searches is not known here",
            )
        places.append(_Place(model, linker))
    return tuple(places)


def _candidates(
    name: str, real: str, needed: str, search: tuple[_Place, ...], cwd: str
) -> tuple[list[str], list[str]]:
    """The files the loader and the dynamic linker would try, in order, for ``needed``: a
    name with a ``/`` is a path (``$ORIGIN`` substituted, relative to the working
    directory ``cwd``); any other is looked for in each directory of ``search``."""
    if "/" in needed:
        model, linker = (
            _substituted(needed, os.path.dirname(real)),
            _substituted(needed, _LINKER_ORIGIN),
        )
        if model is None or linker is None:
            why = f"a library it needs ({needed[:200]}) holds a substitution other than $ORIGIN"
            raise _refuse(name, real, why)
        return [os.path.join(cwd, model)], [os.path.join(cwd, linker)]
    return (
        [os.path.join(cwd, place.model, needed) for place in search],
        [os.path.join(cwd, place.linker, needed) for place in search],
    )


#: How deep below a search path directory the dynamic linker looks (glibc tries hardware
#: capability subdirectories first: ``glibc-hwcaps/x86-64-v3/``, ``tls/haswell/x86_64/``),
#: and how many directories below one the loader reads before it decides without them.
_SUBDIR_DEPTH, _SUBDIR_READS = 3, 256


def _searched(name: str, needed: str, linker: list[str]) -> None:
    """Refused when a file the dynamic linker could take for ``needed`` (``linker``, in
    its order: it passes over one it cannot load; for a name without ``/``, in each
    directory's hardware capability subdirectories too) is a pinned file or lies in a
    claimed or pinned directory: it would be loaded by its path, not from hashed bytes."""
    for candidate in linker:
        places: list[str] | None = [candidate]
        if "/" not in needed:
            below = _subdirectories(os.path.dirname(candidate), needed)
            places = None if below is None else [candidate, *below]
        if places is None:
            why = f"a library it needs ({needed}) could be found below {candidate[:200]!r}"
            raise _refuse(name, candidate, f"{why}, a pinned or claimed place, too deep to tell")
        for place in places:
            if not os.path.isfile(place):
                continue
            where = os.path.realpath(place)
            if where in _pinned or _claimed_place(where):
                raise _refuse(
                    name,
                    where,
                    f"the dynamic linker would load a library it needs ({needed}) by its "
                    f"path from a pinned or claimed directory (through {place[:200]!r})",
                )


def _subdirectories(directory: str, needed: str) -> list[str] | None:
    """The files named ``needed`` in the subdirectories of ``directory``, at most
    ``_SUBDIR_DEPTH`` below it (links followed); ``None`` when there are more than
    ``_SUBDIR_READS`` directories to read there and ``directory`` is, or holds, a claimed
    or pinned place (else the ones found so far: a system directory)."""
    found: list[str] = []
    stack = [(directory, 0)]
    reads = 0
    while stack:
        here, depth = stack.pop()
        reads += 1
        if reads > _SUBDIR_READS:
            real = os.path.realpath(directory)
            roots = [os.path.join(r, t) for t, e in _index.items() for r in e.roots]
            near = any(p.startswith(real + os.sep) for p in (*_pinned_dirs, *roots))
            return None if near or _claimed_place(os.path.join(real, needed)) else found
        with contextlib.suppress(OSError), os.scandir(here) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir() and entry.name not in (".", ".."):
                        if os.path.isfile(os.path.join(entry.path, needed)):
                            found.append(os.path.join(entry.path, needed))
                        if depth + 1 < _SUBDIR_DEPTH:
                            stack.append((entry.path, depth + 1))
    return found


def _claimed_place(where: str) -> bool:
    """Whether resolved path ``where`` lies in a claimed package's directory, or in a
    directory holding a pinned file (a ``<dist>.libs`` directory)."""
    if os.path.dirname(where) in _pinned_dirs:
        return True
    return any(
        where.startswith(os.path.join(root, top) + os.sep)
        for top, entry in _index.items()
        for root in entry.roots
    )


class PinnedFinder:
    """The ``sys.meta_path`` finder of trusted plugins' pinned names (``claim``)."""

    def __repr__(self) -> str:
        return "<django_webfetch PinnedFinder>"

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> Any:
        top, dot, _rest = fullname.partition(".")
        entry = _index.get(top)
        if entry is None:
            return None
        roots = entry.roots
        kind = _kind(entry.shape, fullname)
        if kind is None:
            # Below a shared namespace, a module no pinned distribution provides: another
            # distribution's, left to the import system's own finders (decision 0054).
            return None
        if not dot:
            if fullname not in sys.modules and not _on_path(roots):
                # A plugin directory is never on the site's path (decision 0049): its
                # top-level name is imported only by the registry, by its location.
                return None
        elif not _pinned_copy(sys.modules.get(top), roots):
            # Its top-level package was not imported from a pinned copy: no trusted call
            # runs while it resolves elsewhere (``registry.code_problem``), and code the
            # site imported from there is not the plugin's.
            return None
        if kind == LEVEL:
            # A namespace level the pinned distributions share: all its portions (another
            # distribution's too), each module below it decided by itself.  Served from
            # the pinned portions alone when something else stands in for it (a stray
            # module or package of that name in an earlier directory); left to the import
            # system when that is a file beside the pinned ones (another distribution's).
            anywhere = importlib.machinery.PathFinder.find_spec(fullname, path)
            if anywhere is not None and anywhere.origin is None:
                return anywhere
            if anywhere is not None and _below(str(anywhere.origin), roots):
                return None
        if not dot:
            path = list(roots)
        elif entry.shape is not None:
            # Only the pinned copies' portions of a namespace parent: a stray portion
            # before them holds no module of the pinned distributions.
            path = [p for p in (path or ()) if _below(p, roots)]
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            if entry.shape is not None and fullname in entry.shape.provides:
                raise _refuse(fullname, fullname, "its pinned file is gone (removed since)")
            return None  # not found in the pinned copies: nothing of it runs
        return pinned_spec(spec, roots)


def _below(place: str, roots: tuple[str, ...]) -> bool:
    """Whether ``place`` (resolved) lies in one of directories ``roots``."""
    try:
        where = os.path.realpath(place)
    except (TypeError, ValueError):
        return False
    return any(where.startswith(root + os.sep) for root in roots)


def pinned_spec(spec: Any, roots: Iterable[str]) -> Any:
    """``spec`` (found by ``PathFinder`` below a claimed name) with a loader that executes
    only pinned bytes; refused (``PinnedCodeChanged``) when it is none of a source, a
    sourceless module, an extension or a namespace package of the pinned copies."""
    roots = tuple(roots)
    loader = spec.loader
    name = spec.name
    if spec.origin is None or not spec.has_location:
        portions = [os.path.realpath(p) for p in (spec.submodule_search_locations or ())]
        outside = [p for p in portions if not any(p.startswith(r + os.sep) for r in roots)]
        if not portions or outside:
            where = (outside or ["?"])[0]
            raise _refuse(name, where, "it is a namespace outside the pinned copies")
        return spec
    kinds: tuple[tuple[type[Any], type[Any]], ...] = (
        (importlib.machinery.SourceFileLoader, _PinnedSource),
        (importlib.machinery.SourcelessFileLoader, _PinnedSourceless),
        (importlib.machinery.ExtensionFileLoader, _PinnedExtension),
    )
    for kind, pinned in kinds:
        if type(loader) is kind:
            spec.loader = pinned(name, spec.origin)
            return spec
    raise _refuse(name, str(spec.origin), f"its loader {type(loader).__name__} is none pinned")


def _pinned_copy(module: Any, roots: tuple[str, ...]) -> bool:
    """Whether top-level ``module`` was imported from a pinned copy (its file, or a portion
    of its path, below one of ``roots``)."""
    places = [getattr(module, "__file__", None)]
    with contextlib.suppress(Exception):
        places.extend(list(getattr(module, "__path__", None) or ()))
    for place in places:
        if isinstance(place, str) and place:
            where = os.path.realpath(place)
            if any(where.startswith(root + os.sep) for root in roots):
                return True
    return False


def _on_path(roots: tuple[str, ...]) -> bool:
    on = set()
    for entry in sys.path:
        with contextlib.suppress(Exception):
            on.add(os.path.realpath(entry or os.getcwd()))
    return any(root in on for root in roots)
