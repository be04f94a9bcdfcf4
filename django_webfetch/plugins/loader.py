"""What a trusted plugin imports is executed only from bytes its pin holds (decision 0053).

Trust pins the code a trusted plugin runs (``closure.trust_digest``: SHA-256 over the
digest of each file of its distribution's packages and of its installed dependencies',
decisions 0050 and 0051), and the pin is compared before each trusted call.  A module the
plugin's code imports later (at first use in a handler, from a thread it started, through
``importlib.reload``) is read from disk when that import runs: a release installed in
between would run (issue 30, attack 14, finding 1).  So the check is made where the bytes
are read, not before.

``PinnedFinder``, first on ``sys.meta_path`` from the first trusted import on, claims every
module below the top-level names of each trusted plugin's pin (its distribution's names and
its pinned dependencies'): such a module is found only in the pinned copies' directories,
and its loader reads its file once (bounded, ``provenance.read_bounded``), hashes those
bytes, compares them with the pinned digest of that file, and compiles and executes exactly
those bytes (never a cached ``.pyc``, never the path read again).  The per-file digests are
the ones an aggregate equal to the recorded pin was computed from (``claim``: the aggregate
is a hash over them, so they are the pin's), remembered in this process; nothing new is
stored.  A file whose bytes differ, or that the pin does not hold (a module added by a later
release), is refused: ``PinnedCodeChanged`` (an ``ImportError``, reason
``plugin_code_changed``), logged, whatever thread imports it.  An extension module is hashed
through the descriptor it is then loaded from (``/proc/self/fd/N``); a namespace package
(a directory) has no bytes, and each of its portions must be in a pinned copy.

A module already in ``sys.modules`` is not imported again: it was checked at its import
(or imported by the site before any trust applied).  Claims stay for the life of the
process once made: the plugin's code stays loaded, so its later imports stay checked;
confirming trust for another release replaces the plugin's claim.  Code that loads a file by
its path with a loader of its own (``spec_from_file_location``) does not pass through the
import system's finders: the reviewed code chose that, and the pin covers what it does.
"""

from __future__ import annotations

import contextlib
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

from . import provenance

__all__ = [
    "CHANGED",
    "PinnedCodeChanged",
    "PinnedFinder",
    "claim",
    "claimed",
    "install",
]

logger = logging.getLogger("django_webfetch.plugins")

#: The reason code of a refused import: the bytes are not the ones trust was given to.
CHANGED = "plugin_code_changed"


class PinnedCodeChanged(ImportError):
    """A module of a trusted plugin's pin whose file is not the pinned bytes (``reason``
    ``plugin_code_changed``): nothing of it was executed."""

    reason = CHANGED
    code = CHANGED


class _Claim(NamedTuple):
    """One trusted plugin's pin as this process enforces it: each top-level name with the
    directories of its pinned copies (resolved), and each pinned file's digest."""

    tops: Mapping[str, tuple[str, ...]]
    files: Mapping[str, str]


_lock = threading.Lock()
#: Plugin name -> its claim; replaced whole (readers take the dict as it is).
_claims: dict[str, _Claim] = {}
#: Top-level name -> (directories of its pinned copies, allowed digests by resolved path):
#: the union of every claim, rebuilt when a claim changes.
_index: dict[str, tuple[tuple[str, ...], Mapping[str, frozenset[str]]]] = {}


def claim(plugin: str, tops: Mapping[str, Iterable[str]], files: Mapping[str, str]) -> None:
    """From now on, in this process, every module below a name of ``tops`` (top-level name
    -> the directories its pinned copies are in) is executed only from a file of ``files``
    (resolved path -> the SHA-256 its pin holds) whose bytes hash to that digest; replaces
    ``plugin``'s earlier claim.  Installs the finder first on ``sys.meta_path``."""
    global _index
    made = _Claim(
        {top: tuple(dict.fromkeys(map(os.path.realpath, d))) for top, d in tops.items()},
        dict(files),
    )
    with _lock:
        _claims[plugin] = made
        index: dict[str, tuple[tuple[str, ...], dict[str, set[str]]]] = {}
        for each in _claims.values():
            for top, dirs in each.tops.items():
                roots, digests = index.setdefault(top, ((), {}))
                roots = tuple(dict.fromkeys((*roots, *dirs)))
                for path, digest in each.files.items():
                    if any(path.startswith(root + os.sep) for root in dirs):
                        digests.setdefault(path, set()).add(digest)
                index[top] = (roots, digests)
        _index = {
            top: (roots, {p: frozenset(d) for p, d in digests.items()})
            for top, (roots, digests) in index.items()
        }
    install()


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
    return entry[1].get(os.path.realpath(path), frozenset()) if entry else frozenset()


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


class _PinnedExtension(importlib.machinery.ExtensionFileLoader):
    """An extension module: hashed through the descriptor it is then loaded from
    (``/proc/self/fd/N``, the same file whatever its path names since)."""

    def create_module(self, spec: Any) -> Any:
        path = self.path
        try:
            fd, info = provenance._open_regular(path, provenance.DIGEST_BYTES)
        except OSError as exc:
            raise _refuse(spec.name, path, f"its file cannot be read ({exc})") from exc
        try:
            digest = hashlib.sha256()
            try:
                provenance._read_fd(os.dup(fd), info.st_size, digest.update)
            except OSError as exc:
                raise _refuse(spec.name, path, f"its file cannot be read ({exc})") from exc
            allowed = _allowed(spec.name, path)
            if not allowed:
                raise _refuse(spec.name, path, "its file is none the pin holds (added since)")
            if digest.hexdigest() not in allowed:
                raise _refuse(spec.name, path, "its bytes are not the pinned ones (changed since)")
            through = f"/proc/self/fd/{fd}"
            loaded = importlib.machinery.ExtensionFileLoader(spec.name, through)
            found = importlib.util.spec_from_file_location(spec.name, through, loader=loaded)
            if found is None:  # pragma: no cover - a location with a loader gives a spec
                raise _refuse(spec.name, path, "it cannot be loaded")
            module = loaded.create_module(found)
        finally:
            os.close(fd)
        with contextlib.suppress(AttributeError, TypeError):
            module.__file__ = path
        return module


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
        roots = entry[0]
        if not dot:
            if fullname not in sys.modules and not _on_path(roots):
                # A plugin directory is never on the site's path (decision 0049): its
                # top-level name is imported only by the registry, by its location.
                return None
            path = list(roots)
        elif not _pinned_copy(sys.modules.get(top), roots):
            # Its top-level package was not imported from a pinned copy: no trusted call
            # runs while it resolves elsewhere (``registry.code_problem``), and code the
            # site imported from there is not the plugin's.
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            return None  # not found in the pinned copies: nothing of it runs
        return pinned_spec(spec, roots)


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
