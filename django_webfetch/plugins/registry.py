"""Installed plugins: the manifests behind the ``django_webfetch.plugins`` entry points.

Loaded once per process (a package upgrade needs a restart to change the code anyway) and
reloaded by ``reset()``.  The package is imported in a plugin process (``runtime``), never
here: its import-time code runs in the plugin sandbox, and the host gets the manifest as
data, each tool's handler standing for "call it in a plugin process".  Where the sandbox
cannot be built, nothing of the package is imported or executed here: the entry point is
refused with reason ``plugin_isolation_unavailable`` (check W033 and ``webfetch plugin
list`` say why), unless the operator marked an instance of that plugin ``trusted`` (an
explicit choice, warned by check W032) for the distribution that provides the entry
point now (check W034 when another does): only then is it imported here, under the audit
hook (tests/plugins/test_plugin_process_cannot_reach_the_site.py, finding 5).  A manifest that fails
validation refuses the whole plugin: none of its tools is registered and the problem is reported by
system check ``django_webfetch.E030``.

Plugin distributions are found on the site's ``sys.path`` (the site's own packages) and in
the directories of ``WEBFETCH_PLUGIN_DIRS``, which are never put on ``sys.path``: nothing
in them is reached by the site's imports, site.py or a library's entry points
(docs/decisions/0049-plugin-directories-off-the-site-path.rst).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import distributions
from typing import Any

from django_webfetch.text.patterns import compile_pattern

from . import closure, notices, provenance
from .manifest import (
    MAX_MANIFEST_BYTES,
    MAX_TOOLS,
    Manifest,
    ManifestError,
    is_plugin_name,
    parse_manifest,
)
from .manifest import REASONS as MANIFEST_REASONS
from .provenance import (
    CACHE_DIR,
    WALK_DEPTH,
    WALK_ENTRIES,
    Memo,
    Provider,
    compiled_problem,
    in_cache,
    provider_of,
    record_problem,
)
from .provenance import SETTLE_NS as _SETTLE_NS
from .provenance import file_key as _file_key
from .runtime import bubblewrap, host
from .runtime.host import (
    IsolationUnavailable,
    Origin,
    ReadDeferred,
    RuntimeFailure,
    describe,
    shutdown,
)
from .shown import shown

__all__ = [
    "ENTRY_POINT_GROUP",
    "IMPLICIT_IMPORTS",
    "InProcessHandler",
    "MAX_ENTRY_POINTS",
    "MAX_READS_PER_LOAD",
    "READ_SECONDS",
    "REFUSAL_REASONS",
    "RESERVED_NAMES",
    "Problem",
    "code_problem",
    "dependencies",
    "distribution",
    "generation",
    "get_manifest",
    "interpreter_package_dirs",
    "isolation",
    "load",
    "manifests",
    "origin",
    "pin_imports",
    "plugin_entry_points",
    "problems",
    "provider",
    "refusals",
    "reset",
    "retry_after",
    "site_package_plugins",
]

logger = logging.getLogger("django_webfetch.plugins")

ENTRY_POINT_GROUP = "django_webfetch.plugins"

#: The most entry points of the plugin group one distribution may declare: as many as one
#: manifest may have tools (``manifest.MAX_TOOLS``), generous for any real package.  A
#: distribution that declares more is refused whole (``plugin_too_many_entry_points``)
#: before any of them is read: each would be a plugin process at every load
#: (tests/plugins/test_release_during_a_call_and_registry_load_cost.py, finding 2;
#: tests/plugins/test_registry_load_bounds.py).
MAX_ENTRY_POINTS = MAX_TOOLS
#: The most plugin processes (sandboxed manifest reads) one registry load starts, all
#: distributions together; what is left is refused for this load (``plugin_read_deferred``)
#: and read by a later one (``_RETRY_SECONDS``), those deferred first.  A read answered
#: from a cache (``_described``, or a failure ``host.describe`` remembers) starts none.
MAX_READS_PER_LOAD = MAX_ENTRY_POINTS
#: How long one load's manifest reads may take together, at least: the budget is this or
#: one read's own bounds (``WEBFETCH_PLUGIN_WALL_SECONDS`` and the sandbox's start),
#: whichever is longer, so that a load always reads at least one.  No read goes on past
#: it (``host.ReadDeferred``): the registry's lock is held for manifest reads at most this
#: long per load, whatever the installed distributions do.
READ_SECONDS = 60.0
#: A load that deferred reads is done again (the names read stay cached) at the first
#: ``load()`` this long after it: the lock is never held for reads more than one budget
#: in this long.  Each further load in a row that defers again waits twice as long, at
#: most ``_RETRY_MAX_SECONDS`` (``retry_after``); a load that defers nothing starts the
#: count again: decision 0055.
_RETRY_SECONDS = 60.0
_RETRY_MAX_SECONDS = 3600.0

#: Every reason a refusal of the registry (``Problem.reason``) can carry: the manifest's
#: (``manifest.REASONS``) and the registry's own.  Each maps to one system check by this
#: code alone (``checks.problem_check``), never by the refusal's text, which quotes names a
#: distribution chose (tests/plugins/test_protocol_states_and_problem_reasons.py).
REFUSAL_REASONS = MANIFEST_REASONS | frozenset(
    {
        "entry_point_duplicate",
        "entry_point_invalid",
        "entry_point_name_invalid",
        "entry_point_reserved",
        "entry_point_site_code",
        "manifest_name_mismatch",
        "manifest_nondeterministic",
        "plugin_claimed_twice",
        "plugin_code_changed",
        "plugin_code_compiled",
        "plugin_distribution_unsafe",
        "plugin_isolation_unavailable",
        "plugin_name_refused",
        "plugin_origin_mismatch",
        "plugin_path_unsafe",
        "plugin_read_deferred",
        "plugin_too_many_entry_points",
    }
)


@dataclass(frozen=True)
class Problem:
    """One refusal of a load: ``reason`` (a code of ``REFUSAL_REASONS``), the plugin names
    it refuses (``names``: plugin names only, ``manifest.is_plugin_name``; none for a
    distribution whose entry points cannot be read or an entry point whose name is no
    plugin's) and ``message``, for people (it quotes names a distribution chose: shown
    through ``shown``, never searched)."""

    reason: str
    message: str
    names: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.message


_lock = threading.RLock()
_manifests: dict[str, Manifest] | None = None
_problems: list[Problem] = []
_origins: dict[str, Origin] = {}
#: The distribution of the entry point each name was loaded (or tried) from: trust is
#: decided from it (``provider``), never from a fresh look-up by name.
_providers: dict[str, Provider | None] = {}
_state: tuple[Any, ...] = ()
_generation = 0
_in_process: dict[Origin, dict[str, Callable[..., Any]]] = {}
#: The distribution of the entry point each origin was loaded from: its installed
#: dependencies are pinned with it and checked before a trusted import (decision 0051).
_origin_dists: dict[Origin, Any] = {}
#: The names a load deferred (``plugin_read_deferred``): read first by the next load,
#: which runs at the first ``load()`` from ``_retry_at`` (``time.monotonic()``) on.
_deferred: set[str] = set()
_retry_at = 0.0
#: Loads in a row that deferred reads (``retry_after``).
_deferrals = 0


def retry_after(deferrals: int) -> float:
    """How long after a load that deferred reads, the ``deferrals``-th load in a row to do
    so, the load is done again: ``_RETRY_SECONDS``, doubled for each further one, at most
    ``_RETRY_MAX_SECONDS``."""
    doubled: float = _RETRY_SECONDS * 2.0 ** min(max(deferrals, 1) - 1, 32)
    return min(doubled, _RETRY_MAX_SECONDS)


class InProcessHandler:
    """A tool's handler when the manifest was read in a plugin process.  The runtime runs
    the tool there; called here (a ``trusted`` instance), it imports the plugin into this
    process first (the runner's audit-hook scope is active by then)."""

    __slots__ = ("origin", "tool")

    def __init__(self, origin: Origin, tool: str) -> None:
        self.origin = origin
        self.tool = tool

    def __repr__(self) -> str:
        return f"<plugin handler {self.origin.entry} {self.tool}>"

    def __call__(self, plugin: Any, arguments: dict[str, Any]) -> Any:
        with _lock:
            handlers = _in_process.get(self.origin)
            if handlers is None:
                try:
                    handlers = _handlers(_import(self.origin))
                except ManifestError as exc:
                    logger.error("django_webfetch plugin refused (%s): %s", exc.reason, exc)
                    raise
                _in_process[self.origin] = handlers
        handler = handlers.get(self.tool)
        if handler is None:
            raise LookupError(f"the plugin has no tool {self.tool!r} any more")
        return handler(plugin, arguments)


def _resolves_to(name: str) -> str:
    """The directory the import system finds module ``name`` in now (a package's own
    directory, a module's file), or "" when it finds none; nothing of ``name`` is executed
    (a dotted name imports its parents)."""
    spec = importlib.util.find_spec(name)
    if spec is None:
        return ""
    if spec.submodule_search_locations:
        return os.path.realpath(list(spec.submodule_search_locations)[0])
    return os.path.realpath(spec.origin) if spec.origin else ""


def _mismatch(name: str, found: str, origin: Origin) -> ManifestError:
    return ManifestError(
        "plugin_origin_mismatch",
        f"the module {name!r} resolves to {found or 'nothing'!r}, not to the plugin's "
        f"files under {origin.path!r}; nothing of it was imported in this process",
    )


def _import_located(origin: Origin, module_name: str) -> Any:
    """The package (or module) of a plugin of ``WEBFETCH_PLUGIN_DIRS`` imported here by
    its location (``PathFinder`` on its own directory only, as the plugin process does):
    the directory is never put on ``sys.path``.  Refused (``plugin_origin_mismatch``)
    before anything of it runs when its top-level name is a module this process imported
    from elsewhere, or one the site's ``sys.path`` provides (the plugin would stand in for
    it); its submodules are found through its own package's ``__path__``."""
    from importlib.machinery import PathFinder

    from . import loader

    top = origin.top_level
    base = os.path.realpath(origin.path)
    own = os.path.join(base, top)

    def inside(where: str) -> bool:  # the package's directory or files, a module's file
        return where == own or where.startswith((own + os.sep, own + "."))

    loaded = sys.modules.get(top)
    if loaded is not None:
        where = os.path.realpath(str(getattr(loaded, "__file__", None) or ""))
        if not inside(where):
            raise _mismatch(top, where, origin)
    else:
        try:
            elsewhere = _resolves_to(top)
        except (ImportError, ValueError):
            elsewhere = ""
        if elsewhere and not inside(elsewhere):
            raise _mismatch(top, elsewhere, origin)
        spec = PathFinder.find_spec(top, [base])
        found = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
        if spec is None or spec.loader is None or os.path.dirname(found) not in (base, own):
            raise _mismatch(top, found, origin)
        if loader.claimed(top):  # its bytes checked against its pin as they are read
            spec = loader.pinned_spec(spec, [base])
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[top] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(top, None)
            raise
    return importlib.import_module(module_name)


def pin_imports(name: str, where: Origin, expected: str) -> bool:
    """Whether the code of plugin ``name`` at ``where`` (its distribution's packages and
    its pinned dependencies') digests to ``expected`` (the pin trust was given to) now;
    when it does, what the plugin imports in this process from then on, whatever thread
    imports it and whenever, is executed only from bytes of the files that digest was
    computed from (``loader.claim``, decision 0053), those of the files the pinned
    distributions' ``RECORD`` lists below a shared namespace (``closure.owned_files``,
    decision 0054).  A digest no pin holds for claims nothing and holds for nothing.  When
    it does not hold, the plugin's claim made for ``expected`` is released: none of its
    bytes is accepted any more (issue 30, attack 16, finding 4)."""
    from . import loader

    if _pinned_now(name, where, expected):
        return True
    if expected:
        loader.release(name, expected, "its pin no longer holds")
    return False


def _pinned_now(name: str, where: Origin, expected: str) -> bool:
    """``pin_imports`` but the release: whether the pin holds, claimed when it does."""
    from . import loader

    dist = _origin_dists.get(where)
    # Which files are the pinned distributions' is read before their bytes are: an
    # install that rewrites a RECORD after it changes the bytes the digest then finds.
    owned = closure.owned_files(dist, where.path, where.top_level) if where.path else {}
    with provenance.collected() as files:
        digest = closure.trust_digest(dist, where.path, where.top_level, where.entry)
    if not expected or digest != expected or provenance.unpinned_why(digest):
        return False
    base = os.path.realpath(where.path) if where.path else ""
    own, why = closure.own_packages(dist, base, where.top_level)
    if why or not base:
        return False
    tops: dict[str, list[str]] = {}
    for directory, top in own:
        tops.setdefault(top, []).append(directory)
    for _label, directory, top in closure.packages(dist, base):
        tops.setdefault(top, []).append(directory)
    loader.claim(name, tops, files, owned, pin=expected)
    return True


def _refuse_compiled(origin: Origin) -> None:
    """Refused (``plugin_code_compiled``) when the plugin's files hold code that is not
    their source (``provenance.compiled_problem``: an extension module, a sourceless
    module, a cached ``.pyc`` that is not its source's compilation, an entry named
    ``__pycache__`` that is not a bytecode cache).  Compiled code never stands in for the
    reviewed source (decision 0050): the plugin process compiles every module from its
    source; in this process it is refused.  Every route of ``_import`` runs it first.
    The packages of the plugin's installed dependencies (``closure.packages``, decision
    0051) are checked for what their pin leaves out: a bytecode cache whose ``.pyc`` is
    not its source's compilation, an entry named ``__pycache__`` that is not one (their
    extension and sourceless modules are in the pin); then ``_refuse_shadowed``."""
    problem = _code_problem(origin)
    if problem is not None:
        raise problem


def code_problem(name: str) -> ManifestError | None:
    """Why a trusted call of plugin ``name`` would import code in this process that its
    pin does not cover, or ``None``: the checks of a trusted import (``_refuse_compiled``)
    made again at every trusted call (``tools._trust_holds``), since the handler may import
    a module at first use, long after the plugin's import: a cached ``.pyc`` of other code
    written since (``plugin_code_compiled``), or a module of a pinned dependency's name
    that the import system would now find elsewhere (``plugin_origin_mismatch``: a stray
    module in an earlier ``sys.path`` directory, a namespace portion outside the pinned
    copy).  Each ``.pyc``'s verdict is remembered by its and its source's identity, and
    the resolution of the names by the identity of the import system's state
    (``_shadow_key``): tests/plugins/test_pin_routes_site_requirements_strays_and_pth.py, findings
    3, 4 and 7."""
    where = origin(name)
    if where is None:
        return None
    return _code_problem(where, remembered=True)


def _code_problem(origin: Origin, *, remembered: bool = False) -> ManifestError | None:
    """``_refuse_compiled``'s verdict (``remembered``: per call, each ``.pyc``'s verdict
    and the names' resolution remembered; the plugin's own top-level name checked too), for
    the plugin's package, every other top-level name its distribution installs
    (``closure.own_packages``) and its dependencies' packages."""
    base = os.path.realpath(origin.path) if origin.path else ""
    compiled = compiled_problem(base, origin.top_level, remembered=remembered) if base else ""
    if compiled:
        return ManifestError(
            "plugin_code_compiled",
            f"the plugin's files under {origin.path!r} would run code that is not their "
            f"source ({compiled}); nothing of it was imported in this process",
        )
    pinned: dict[str, list[str]] = {}
    # Every other top-level name the plugin's distribution installs (another entry point's
    # package, a module beside it): the trusted code may import it at first use, so it is
    # checked as the plugin's own package is
    # (tests/plugins/test_pin_covers_the_whole_distribution.py).  When they cannot be told, the pin
    # never holds (``closure.own_digest``): no trusted call gets here.
    dist = _origin_dists.get(origin)
    own, _why = closure.own_packages(dist, base, origin.top_level)
    # (what it is, where, its top-level name, a dependency's): checked alike, in this order.
    packages = [(f"the package {top!r} of the plugin's distribution", where, top, False)
                for where, top in own[1:]]  # fmt: skip
    packages += [(f"the plugin's dependency {label[:200]}", where, top, True)
                 for label, where, top in closure.packages(dist, base)]  # fmt: skip
    for what, where, top, dependency in packages:
        compiled = (
            compiled_problem(where, top, pinned=dependency, remembered=remembered)
            if where or dependency
            else ""
        )
        if compiled:
            return ManifestError(
                "plugin_code_compiled",
                f"{what} under {where!r} would run code that is not its source ({compiled}); "
                "nothing of the plugin was imported in this process",
            )
        pinned.setdefault(top, []).append(where)
    if remembered and base:
        pinned.setdefault(origin.top_level, []).append(base)
    shadowed = _shadow_verdict(pinned, remembered=remembered)
    if shadowed:
        return ManifestError(
            "plugin_origin_mismatch",
            f"{shadowed}; nothing of the plugin at {origin.path!r} was imported in this process",
        )
    return None


def _refuse_shadowed(pinned: dict[str, list[str]], origin: Origin) -> None:
    """Refused (``plugin_origin_mismatch``) when a top-level name of the plugin's pinned
    dependencies (``pinned``: name -> the directories of its pinned copies) would be
    imported in this process from anywhere else (``_shadow_problem``)."""
    shadowed = _shadow_problem(pinned)
    if shadowed:
        raise ManifestError(
            "plugin_origin_mismatch",
            f"{shadowed}; nothing of the plugin at {origin.path!r} was imported in this process",
        )


def _locations(top: str) -> list[str]:
    """Every place the import system would load top-level name ``top`` from now, found
    without importing anything: a module already imported (its file and each entry of its
    ``__path__``: a namespace package's portions, a path ``pkgutil.extend_path`` extended),
    else what the finders of ``sys.meta_path`` find (``importlib.util.find_spec``: a
    regular package's or module's file and directory, every portion of a namespace
    package); ``[]`` when nothing is found (nothing runs)."""
    loaded = sys.modules.get(top)
    if loaded is not None:
        spots: list[Any] = [getattr(loaded, "__file__", None)]
        with contextlib.suppress(Exception):
            spots.extend(list(getattr(loaded, "__path__", None) or ()))
    else:
        try:
            spec = _unclaimed_spec(top)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return []
        spots = [spec.origin if spec.has_location else None]
        with contextlib.suppress(Exception):
            spots.extend(list(spec.submodule_search_locations or ()))
        if not any(spots) and spec.loader is not None:
            # Found with no place on disk (a custom finder's, a zip's without a path):
            # code the pin does not cover.
            spots = [f"<{type(spec.loader).__name__} without a location>"]
    return [
        os.path.realpath(s) if os.path.isabs(s) else s for s in spots if isinstance(s, str) and s
    ]


def _unclaimed_spec(top: str) -> Any:
    """``importlib.util.find_spec(top)`` by every finder of ``sys.meta_path`` but the
    pinned one (``loader.PinnedFinder``, decision 0053): what the import system would load
    for the name without a trusted plugin's claim, so a stray copy is still reported
    before the call (the early, clear failure), though the claim would never load it."""
    from .loader import PinnedFinder

    for finder in list(sys.meta_path):
        if isinstance(finder, PinnedFinder):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(top, None)
        if spec is not None:
            return spec
    return None


def _shadow_problem(pinned: dict[str, list[str]]) -> str:
    """Why a top-level name of ``pinned`` (name -> the directories of its pinned copies)
    would be imported from anywhere but a pinned copy, or "": a stray module of that name
    in an earlier ``sys.path`` directory (the working directory of ``manage.py``), a
    portion of a namespace package of that name outside the pinned copies (every portion
    is checked: a stray ``wfns/dep.py`` in an earlier directory is found before the pinned
    ``wfns/dep.py``), or one imported already from elsewhere (``_locations``).  Found
    without importing anything (decision 0051)."""
    for top, bases in sorted(pinned.items()):
        # A name only ``top_level.txt`` gives, with nothing of it installed, runs nothing.
        roots = [os.path.realpath(b) for b in bases if _held_in(b, top)]
        if not roots:
            continue
        for where in _locations(top):
            if not any(where.startswith(root + os.sep) for root in roots):
                return (
                    f"the module {top!r} a pinned dependency or the plugin installs resolves "
                    f"to {where[:300]!r}, not to the pinned files under "
                    f"{', '.join(map(repr, roots))[:300]}"
                )
    return ""


#: ``_shadow_problem`` verdicts at every trusted call, keyed by ``_shadow_key``.
_shadow_memo: Memo[tuple[Any, ...], str] = Memo(256)


class _Same:
    """A memo key's part that is one live object: equal only to itself (``is``), and a
    strong reference, so that no other object can take its ``id()`` while the memo keeps
    the entry (a finder or module collected and another made at its address)."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _linked(where: str, top: str, keys: list[tuple[int, ...]]) -> tuple[str, ...]:
    """The entries of directory ``where`` the path finder could load for ``top`` (``top``
    itself or ``top`` with a suffix; ``top/__init__`` with one when ``top`` is a directory)
    that are symbolic links, remembered by ``where``'s and ``where/top``'s identity
    (``keys``: which entries a directory holds changes its identity; a link's target, and
    so what the finder finds, does not)."""
    memo_key = (where, top, keys[0], keys[1])
    known = _linked_memo.get(memo_key)
    if known is not None:
        return known
    found: list[str] = []
    with contextlib.suppress(OSError), os.scandir(where) as listing:
        for item in listing:
            if (item.name == top or item.name.startswith(top + ".")) and item.is_symlink():
                found.append(item.name)
    with contextlib.suppress(OSError), os.scandir(os.path.join(where, top)) as listing:
        for item in listing:
            if item.name.startswith("__init__.") and item.is_symlink():
                found.append(os.path.join(top, item.name))
    if top in found:  # a link to a directory: its ``__init__`` entries are read each time
        found.extend(os.path.join(top, "__init__" + s) for s in importlib.machinery.all_suffixes())
    if provenance.settled(keys, _SETTLE_NS):
        _linked_memo.put(memo_key, tuple(found))
    return tuple(found)


#: ``_linked``'s answers, keyed by the identity of the directories listed.
_linked_memo: Memo[tuple[Any, ...], tuple[str, ...]] = Memo(1024)


def _link_keys(where: str, names: tuple[str, ...]) -> list[tuple[int, ...]]:
    """Each of ``names`` under ``where`` read with ``lstat`` and ``stat``: a link and what
    it points to, so that a dangling link completed later, or a link whose target is
    replaced, changes the key although no directory changed
    (tests/plugins/test_pin_routes_extra_markers_and_zips.py, finding 4)."""
    keys: list[tuple[int, ...]] = []
    for name in names:
        path = os.path.join(where, name)
        try:
            info = os.lstat(path)
        except OSError as exc:
            keys.append((-(exc.errno or 1),))
            continue
        keys.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
        keys.append(_file_key(path))
    return keys


def _shadow_key(pinned: dict[str, list[str]]) -> tuple[Any, ...] | None:
    """What the resolution of ``pinned``'s names depends on: ``sys.path`` (its order and
    each entry's identity, ``file_key``: an entry added to or removed from a directory, a
    zip file rewritten), the identity of each ``sys.path`` directory's entries the path
    finder could load for each name (``_linked``, ``_link_keys``: a stray package's
    directory gaining an ``__init__.py``, a namespace portion gaining a module, a dangling
    link completed),
    of the pinned copies' directories, the finders (``sys.meta_path``, ``sys.path_hooks``,
    ``sys.path_importer_cache``'s entry of each directory) and each name's module when
    imported, each held by ``_Same`` (no ``id()`` reuse); ``None`` when a key changed
    within ``SETTLE_NS`` (read again: racily clean)."""
    tops = sorted(pinned)
    keys: list[tuple[int, ...]] = []
    entries = []
    finders = []
    for entry in list[Any](sys.path):
        if not isinstance(entry, str):  # a bytes entry (allowed, ignored by PathFinder)
            return None
        where = os.path.abspath(entry or os.curdir)
        finder = sys.path_importer_cache.get(entry)
        entries.append(where)
        finders.append(_Same(finder))
        held = _file_key(where)
        keys.append(held)
        for top in tops:
            pair = [held, _file_key(os.path.join(where, top))]
            keys.append(pair[1])
            keys.extend(_link_keys(where, _linked(where, top, pair)))
    for top in tops:
        keys.extend(_file_key(base) for base in pinned[top])
    if not provenance.settled(keys, _SETTLE_NS):
        return None
    modules = []
    for top in tops:
        loaded = sys.modules.get(top)
        path: Any = getattr(loaded, "__path__", None) if loaded is not None else None
        modules.append((_Same(loaded), getattr(loaded, "__file__", None), tuple(path or ())))
    return (
        tuple(entries),
        tuple(keys),
        tuple(sorted((top, tuple(pinned[top])) for top in tops)),
        tuple(map(_Same, sys.meta_path)),
        tuple(map(_Same, sys.path_hooks)),
        tuple(finders),
        tuple(modules),
    )


def _shadow_verdict(pinned: dict[str, list[str]], *, remembered: bool) -> str:
    """``_shadow_problem``, remembered by ``_shadow_key`` when ``remembered``."""
    if not remembered:
        return _shadow_problem(pinned)
    key = _shadow_key(pinned)
    known = _shadow_memo.get(key) if key is not None else None
    if known is not None:
        return known
    found = _shadow_problem(pinned)
    if key is not None:
        _shadow_memo.put(key, found)
    return found


def _import(origin: Origin) -> Any:
    """The entry point at ``origin`` imported in this process (a ``trusted`` instance),
    from the files under ``origin.path`` it was checked and described from.  Whatever the
    route, nothing of it runs before the compiled-code check (``_refuse_compiled``); then
    it is refused (``plugin_origin_mismatch``) before anything of it runs when its name
    resolves anywhere else on ``sys.path`` (an earlier directory, a module already
    imported).  A plugin of ``WEBFETCH_PLUGIN_DIRS`` is imported by its location
    (``_import_located``), any other from the site's ``sys.path`` (``_import_on_path``)."""
    module_name, _, attribute = origin.entry.partition(":")
    module_name = module_name.strip()
    _refuse_compiled(origin)
    route = _import_located if _in_plugin_dirs(origin.path) else _import_on_path
    target: Any = route(origin, module_name)
    for part in filter(None, attribute.strip().split(".")):
        target = getattr(target, part)
    return target() if callable(target) else target


def _import_on_path(origin: Origin, module_name: str) -> Any:
    """Module ``module_name`` of the plugin at ``origin`` (a ``sys.path`` directory)
    imported from the site's ``sys.path``, once it resolves to the plugin's own files."""
    parts = module_name.split(".")
    base = os.path.realpath(origin.path) if origin.path else ""
    own = os.path.realpath(os.path.join(base, parts[0]))
    try:
        modules = {  # a module ``top.py`` or an extension ``top.*.so`` of the plugin
            os.path.realpath(os.path.join(base, entry))
            for entry in os.listdir(base or ".")
            if entry.partition(".")[0] == parts[0] and entry != parts[0]
        }
    except OSError:
        modules = set()
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        try:
            found = _resolves_to(name)
        except (ImportError, ValueError):
            found = ""
        inside = bool(found) and (found == own or found.startswith(own + os.sep))
        if depth == 1 and found in modules:
            inside = True
        if not base or not inside:
            raise _mismatch(name, found, origin)
    return importlib.import_module(module_name)


def _handlers(raw: Any) -> dict[str, Callable[..., Any]]:
    tools = raw.get("tools") if isinstance(raw, dict) else None
    return {
        t["name"]: t["handler"]
        for t in tools or ()
        if isinstance(t, dict) and isinstance(t.get("name"), str) and callable(t.get("handler"))
    }


def _names(value: str) -> tuple[str, list[str]]:
    """The module and attribute parts of an entry point's ``module:attribute`` value."""
    module, _, attribute = value.partition(":")
    parts = [p.strip() for p in attribute.strip().split(".")] if attribute.strip() else []
    return module.strip(), parts


#: Top-level names a plugin's entry point may not use: the standard library's and those of
#: the modules the plugin process itself imports (django_webfetch and its dependencies;
#: tests/plugins/test_guest_import_order_and_path_owners.py checks the list against what a guest
#: imports).  The plugin process finds the standard library first and its site directories before
#: the plugin's directory anyway (runtime/bubblewrap.py); this refusal says so at load time.
RESERVED_NAMES = frozenset(sys.stdlib_module_names) | {
    "__main__",
    "anyio",
    "asgiref",
    "attr",
    "attrs",
    "certifi",
    "click",
    "django",
    "django_webfetch",
    "dns",
    "h11",
    "html5lib",
    "httpcore",
    "httpx",
    "httpx2",
    "idna",
    "jsonschema",
    "jsonschema_specifications",
    "pygments",
    "pyseccomp",
    "re2",
    "referencing",
    "rich",
    "rpds",
    "seccomp",
    "six",
    "sniffio",
    "typing_extensions",
    "webencodings",
}


#: Top-level names the site's own interpreter tries to import and, where nothing of that
#: name is installed, does not find: the standard library's own tries (``copy`` and
#: ``pickle`` try ``org``, a Jython remnant; Windows modules; ``StringIO``), and the
#: optional imports of the site's libraries at ``django.setup()`` and of django_webfetch
#: (httpx: ``brotli``, ``brotlicffi``, ``zstandard``, ``h2``, ``socksio``; jsonschema's
#: format checkers; Django's...).  A package of such a name wherever the site imports
#: from runs in the site's processes as they start, before any check can run (issue 30,
#: round 25, finding 3): no plugin's entry point may use one (``entry_point_reserved``).
#: Measured by tests/plugins/test_implicit_imports_of_the_site.py (an audit hook logging
#: every name tried, over an import of every standard module, ``django.setup()`` and the
#: plugin client and guest), which fails when the interpreter tries a name not here.
#: Django's own code tries more names later, lazily: its serializers ``yaml``
#: (``dumpdata``, ``loaddata``, the test runner), the password hashers ``argon2`` and
#: ``bcrypt``, ``manage.py shell`` ``IPython`` then ``bpython``, the test runner ``tblib``
#: and ``ipdb``, the database backends ``MySQLdb``, ``oracledb``, ``cx_Oracle``,
#: ``psycopg``, ``psycopg2``, the cache backends ``redis``, ``pylibmc``, ``pymemcache``
#: (and what they try), ``PIL``, ``geoip2``, ``jinja2``, ``selenium`` (issue 30, round 26,
#: finding 4): the same test records them with a ``sys.meta_path`` finder (which sees
#: ``importlib.import_module`` too) over every Django module and those lazy calls.  (It
#: finds setuptools' ``distutils`` trying ``_distutils_system_mod`` as well.)
IMPLICIT_IMPORTS = frozenset(
    {
        "IPython",
        "MySQLdb",
        "PIL",
        "StringIO",
        "_distutils_system_mod",
        "a2wsgi",
        "argon2",
        "backports",
        "bcrypt",
        "blinker",
        "bpython",
        "brotli",
        "brotlicffi",
        "chardet",
        "colorama",
        "ctags",
        "cx_Oracle",
        "docutils",
        "fqdn",
        "geoip2",
        "griffecli",
        "h2",
        "hiredis",
        "ipdb",
        "isoduration",
        "jinja2",
        "jsonpointer",
        "linkify_it",
        "logfire",
        "markdown",
        "numpy",
        "olefile",
        "opentelemetry",
        "oracledb",
        "org",
        "prune_source",
        "psycopg",
        "psycopg2",
        "psycopg_binary",
        "psycopg_c",
        "pylibmc",
        "pymemcache",
        "pywatchman",
        "redis",
        "rfc3339_validator",
        "rfc3986_validator",
        "rfc3987",
        "rfc3987_syntax",
        "rnc2rng",
        "selenium",
        "setproctitle",
        "simplejson",
        "snappy",
        "socks",
        "socksio",
        "softhyphen",
        "tblib",
        "trio",
        "uri_template",
        "watchfiles",
        "webcolors",
        "win32api",
        "xxhash",
        "yaml",
        "zstandard",
    }
)


def site_package_plugins() -> list[tuple[str, str]]:
    """(distribution name, directory) of each plugin distribution (a
    ``django_webfetch.plugins`` entry point) in the interpreter's own package directories
    (``interpreter_package_dirs``) on ``sys.path``: the site's own packages, whose code the
    site's interpreter imports whenever it tries their names, whatever their instances'
    trust (check ``django_webfetch.W036``, ``webfetch plugin list``; decision 0065)."""
    found: list[tuple[str, str]] = []
    own = interpreter_package_dirs()
    seen: set[str] = set()
    for entry in sys.path:
        path = os.path.realpath(entry or os.getcwd())
        if path not in own or path in seen or not os.path.isdir(path):
            continue
        seen.add(path)
        for dist in map(closure.bounded, distributions(path=[path])):
            if dist_plugin_entry_points(dist):
                name = ""
                with contextlib.suppress(Exception):
                    name = str(dist.metadata["Name"] or "")
                found.append(((name or "?")[:100], path))
    return sorted(set(found))


def interpreter_package_dirs() -> set[str]:
    """The interpreter's own package directories (``site-packages``/``dist-packages`` of
    its prefixes and the user's), resolved: where pip installs the site's packages."""
    import site
    import sysconfig

    found = list(site.getsitepackages())
    with contextlib.suppress(Exception):
        found.append(site.getusersitepackages())
    paths = sysconfig.get_paths()
    found += [paths.get("purelib", ""), paths.get("platlib", "")]
    return {
        os.path.realpath(d)
        for d in found
        if d and os.path.basename(os.path.normpath(d)) in ("site-packages", "dist-packages")
    }


def site_top_levels() -> set[str]:
    """The top-level names of the site's own code, which no plugin's entry point may use:
    those of ``DJANGO_SETTINGS_MODULE`` and ``ROOT_URLCONF`` (what the sandbox masks:
    ``bubblewrap.site_names``) and of every ``INSTALLED_APPS`` entry (run in the site's
    processes, never a plugin's)."""
    tops = set(bubblewrap.site_names())
    if "django.conf" in sys.modules:
        from django.conf import settings

        if settings.configured:
            for app in getattr(settings, "INSTALLED_APPS", None) or ():
                if isinstance(app, str):
                    tops.add(app.partition(".")[0])
    return tops


def _origin_of(ep: Any) -> Origin:
    """Where the entry point's code is, found without importing it.  Its value must be
    dotted Python names: anything else (``/abs/dir:manifest``) is refused, reason
    ``entry_point_invalid``, before its path is used for anything (the sandbox binds
    ``<path>/<top-level name>``)."""
    bad = _entry_point_problem(ep)
    if bad is not None:
        raise bad
    module, _attribute = _names(str(ep.value))
    top = module.split(".")[0]
    dist = getattr(ep, "dist", None)
    path = ""
    if dist is not None:
        try:
            path = os.fspath(dist.locate_file(""))
        except (AttributeError, NotImplementedError, TypeError):
            path = ""
    here = bool(path) and any(os.path.exists(os.path.join(path, top + x)) for x in ("", ".py"))
    if not here and _in_plugin_dirs(path):
        # A distribution of ``WEBFETCH_PLUGIN_DIRS`` provides its package from its own
        # directory or not at all: never whatever the site's ``sys.path`` holds of that name.
        return Origin(str(ep.value).strip(), os.path.abspath(path), top)
    if not here:
        spec = importlib.util.find_spec(top)  # a top-level name: nothing is executed
        location: str | None = None
        if spec is not None and spec.submodule_search_locations:
            location = list(spec.submodule_search_locations)[0]
        if location is None and spec is not None:
            location = spec.origin
        path = os.path.dirname(location) if location else ""
    return Origin(str(ep.value).strip(), os.path.abspath(path) if path else "", top)


provenance.origin_of = _origin_of  # where ``provider_of`` finds the code it digests


#: Modules site.py imports at every interpreter start: no plugin distribution installs one.
_STARTUP_NAMES = {"sitecustomize", "usercustomize"}


def _normalized(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(".", "-")


def _dist_key(dist: Any, parents: dict[str, str] | None = None) -> str:
    """One installed distribution: its metadata directory (two copies of a distribution in
    two ``sys.path`` directories are two), or its name when it has none.  ``parents``: the
    real paths of the directories that hold metadata directories, taken once for a look
    over every distribution (``_real``)."""
    path = getattr(dist, "_path", None)
    if path is not None:
        with contextlib.suppress(Exception):
            return _real(os.fspath(path), parents)
    with contextlib.suppress(Exception):
        return "name:" + _normalized(str(dist.metadata["Name"] or ""))
    return f"id:{id(dist)}"


def _real(path: str, parents: dict[str, str] | None) -> str:
    """``os.path.realpath(path)``; with ``parents`` (a look's own, never kept past it), its
    directory's real path taken once for every entry of that directory: the entry itself
    is resolved as ``realpath`` resolves it, its directory's real path joined to its name
    unless it is a link (then resolved in full).  A registry load looked at every
    installed distribution's every directory above it, a ``stat`` each, at every look."""
    head, tail = os.path.split(path)
    if parents is None or not head or tail in ("", ".", "..") or os.path.islink(path):
        return str(os.path.realpath(path))
    real = parents.get(head)
    if real is None:
        real = parents[head] = os.path.realpath(head)
    return str(os.path.join(real, tail))


def _state_key(dist: Any) -> str:
    """``_dist_key`` as what a load decided from (``_installed``): the same for the same
    files at every look-up.  A distribution with neither a directory nor a readable name
    is told apart from others by its object within one load, but that object is new at
    each look-up: its ``id()`` in the state made every look-up a change (issue 30,
    attack 16, finding 1)."""
    return _state_of(_dist_key(dist), dist)


def _state_of(key: str, dist: Any) -> str:
    """``_state_key`` of ``dist`` from its ``_dist_key`` ``key``, taken once."""
    if key.startswith("id:"):
        return f"unreadable:{type(dist).__module__}.{type(dist).__qualname__}"
    return key


def _meta_name(dist: Any) -> str:
    """``dist.metadata["Name"]`` from the metadata's headers alone, read as the closure reads
    it (``closure.metadata_name``: one reader for both); raises as ``importlib.metadata``
    does when the metadata cannot be read or decoded."""
    return closure.metadata_name(dist)


def _dist_label(dist: Any) -> str:
    with contextlib.suppress(Exception):
        name = _meta_name(dist)
        if name:
            return name[:100]
    path = getattr(dist, "_path", None)
    return os.path.basename(os.fspath(path))[:100] if path is not None else "?"


def plugin_dirs() -> list[str]:
    """The directories of ``WEBFETCH_PLUGIN_DIRS``, absolute and normalised, each once
    (none while the setting cannot be read: check E001 says why).  Never put on
    ``sys.path``: the registry reads their distributions' metadata, a plugin process gets
    its plugin's own directory, and a trusted plugin is imported from it by location
    (``_import``)."""
    try:
        from django_webfetch.conf import conf

        configured = conf.WEBFETCH_PLUGIN_DIRS
    except Exception:  # unreadable (E001), or no settings: no plugin directories
        return []
    found: list[str] = []
    for entry in configured:
        path = os.path.normpath(os.path.abspath(entry))
        if path not in found:
            found.append(path)
    return found


def _in_plugin_dirs(path: str) -> bool:
    """``path`` (a distribution's directory) is one of ``WEBFETCH_PLUGIN_DIRS``."""
    if not path:
        return False
    real = os.path.realpath(path)
    return any(real == os.path.realpath(d) for d in plugin_dirs())


def _all_distributions(keys: list[str] | None = None) -> list[Any]:
    """Every installed distribution, each metadata directory once: the site's (those of
    ``sys.path``, in its order, as ``importlib.metadata.distributions()``), then those of
    ``WEBFETCH_PLUGIN_DIRS`` (``distributions(path=...)``: found there, never imported
    from ``sys.path``).  ``keys`` gets each one's ``_dist_key``."""
    found: list[Any] = []
    seen: set[str] = set()
    dirs = plugin_dirs()
    parents: dict[str, str] = {}
    for found_dist in [*distributions(), *(distributions(path=dirs) if dirs else ())]:
        dist = closure.bounded(found_dist)  # its metadata files read bounded
        key = _dist_key(dist, parents)
        if key in seen:
            continue
        seen.add(key)
        if keys is not None:
            keys.append(_state_of(key, dist))  # the key above: one ``realpath`` a look
        found.append(dist)
    return found


def _roots() -> list[str]:
    """The directories of ``sys.path`` (where a top-level name is imported from), then
    those of ``WEBFETCH_PLUGIN_DIRS`` (where a plugin process imports its plugin from)."""
    found = []
    for entry in [*sys.path, *plugin_dirs()]:
        with contextlib.suppress(Exception):
            root = os.path.realpath(entry or os.getcwd())
            if root not in found:
                found.append(root)
    return found


def _top_name(relative: list[str]) -> str:
    """The top-level name a file at ``relative`` (path parts under a ``sys.path``
    directory) belongs to: a package's, a module's (``m.py``, ``m.cpython-311.so``,
    ``__pycache__/m.cpython-311.pyc``), or a metadata directory's full name."""
    head = relative[0]
    if head.endswith((".dist-info", ".egg-info")):
        return head
    if len(relative) == 1 or (head == "__pycache__" and len(relative) == 2):
        return relative[-1].partition(".")[0]
    return head


class _Listed:
    """What a distribution's files say about the top-level names it installs, before they
    are placed under ``sys.path``'s directories: its label, the names it is credited with
    wherever it lies (``fixed``: its ``top_level.txt``, its directory's entries, its entry
    points), each file its ``RECORD`` lists as an absolute normalised path (``targets``),
    and why the names may be incomplete ("").  Read once per change of its files
    (``_names_memo``); placed per set of ``sys.path`` directories (``placed``)."""

    __slots__ = ("_ancestors", "_placed", "base", "fixed", "label", "problem", "targets")

    def __init__(
        self,
        label: str,
        base: str,
        fixed: frozenset[str],
        targets: tuple[str, ...],
        problem: str,
    ) -> None:
        self.label = label
        self.base = base
        self.fixed = fixed
        self.targets = targets
        self.problem = problem
        self._ancestors: frozenset[str] | None = None
        self._placed: Memo[tuple[str, ...], frozenset[str]] = Memo(8)

    def prefixes(self, roots: list[str]) -> tuple[str, ...]:
        """The prefixes (``base`` then ``roots``, each ending in a separator) a file of
        ``targets`` lies under: the only ``sys.path`` directories its names depend on."""
        if self._ancestors is None:
            found: set[str] = set()
            for target in self.targets:
                at = target.rfind(os.sep)
                while at >= 0:
                    head = target[: at + 1]
                    if head in found:
                        break
                    found.add(head)
                    at = target.rfind(os.sep, 0, at)
            self._ancestors = frozenset(found)
        every = dict.fromkeys(root.rstrip(os.sep) + os.sep for root in [self.base, *roots])
        return tuple(prefix for prefix in every if prefix in self._ancestors)

    def placed(self, roots: list[str]) -> frozenset[str]:
        """Every top-level name: ``fixed`` and each listed file's, under whichever of
        ``base`` and ``roots`` it lands in (the same for the same matching prefixes)."""
        prefixes = self.prefixes(roots)
        found = self._placed.get(prefixes)
        if found is None:
            names = set(self.fixed)
            for target in self.targets:
                for prefix in prefixes:
                    if target.startswith(prefix):
                        names.add(_top_name(target[len(prefix) :].split(os.sep)))
            found = frozenset(names)
            self._placed.put(prefixes, found)
        return found


def _dist_base(dist: Any, bases: dict[str, str] | None = None) -> str:
    """The directory ``dist``'s ``RECORD`` rows are relative to, resolved (each directory
    once per ``bases``: one load's); raises as ``dist.locate_file`` does."""
    where = str(dist.locate_file(""))
    if bases is None:
        return os.path.realpath(where)
    found = bases.get(where)
    if found is None:
        found = bases[where] = os.path.realpath(where)
    return found


def _read_names(dist: Any, bases: dict[str, str] | None = None) -> _Listed:
    """What ``dist``'s files say about the top-level names it installs (``_Listed``).
    From its file list (``RECORD``: written by the installer, truthfully, each path resolved
    against its directory, placed by ``_Listed.placed`` under whichever ``sys.path``
    directory it lands in) united with its ``top_level.txt`` (a file of the wheel, as its
    author wrote it: added to, never instead of, the file list).  A distribution without
    ``RECORD`` (a directory put on ``sys.path`` by hand) adds its ``top_level.txt`` and
    plugin entry points' names.  Incomplete: its metadata, ``RECORD`` or ``top_level.txt``
    cannot be read or decoded."""
    names: set[str] = set()
    targets: list[str] = []
    problems: list[str] = []
    base = ""
    files = None
    try:
        _meta_name(dist)
        files = _file_list(dist)
    except Exception as exc:
        problems.append(f"metadata or RECORD unreadable: {type(exc).__name__}")
    if files is not None and not problems and not _installer_list(dist):
        # No installer's file list (a ``.dist-info`` without ``RECORD``, an ``.egg-info``
        # whose list is its author's ``SOURCES.txt``): a directory put on ``sys.path`` by
        # hand, credited with every top-level entry in it
        # (tests/plugins/test_name_and_trust_of_one_entry_point.py).
        names |= _directory_names(dist)
    elif files is not None:
        base = _dist_base(dist, bases)
        for file in files:
            targets.append(os.path.normpath(os.path.join(base, file.replace("\\", "/"))))
    elif not problems:
        names |= _directory_names(dist)
        with contextlib.suppress(Exception):
            for ep in dist.entry_points:
                if ep.group == ENTRY_POINT_GROUP:
                    names.add(_names(str(ep.value))[0].split(".")[0])
    try:
        declared = dist.read_text("top_level.txt")
    except Exception as exc:
        problems.append(f"top_level.txt unreadable: {type(exc).__name__}")
        declared = None
    for line in (declared or "").splitlines():
        top = line.strip().replace("\\", "/").split("/")[0].split(".")[0]
        if top:
            names.add(top)
    label = _dist_label(dist)
    found = tuple(dict.fromkeys(targets))
    return _Listed(label, base, frozenset(names), found, "; ".join(problems))


def _installed_names(dist: Any, roots: list[str]) -> tuple[set[str], str]:
    """Every top-level name ``dist`` installs with ``roots`` on ``sys.path``, and why that
    set may be incomplete (or ""): ``_read_names`` placed (``_Listed.placed``)."""
    listed = _read_names(dist)
    return set(listed.placed(roots)), listed.problem


def _file_list(dist: Any) -> list[str] | None:
    """``dist.files`` as strings, read from ``RECORD`` with the ``csv`` module as
    ``importlib.metadata`` reads it, without a ``PackagePath`` per row (a third of a load's
    time); ``dist.files`` itself when there is no ``RECORD`` (its other file lists)."""
    text = dist.read_text("RECORD")
    if text is not None:
        return provenance.record_paths(text)
    found = dist.files
    return None if found is None else [str(file) for file in found]


def _installer_list(dist: Any) -> bool:
    """``dist`` has a file list an installer wrote (``RECORD``, or a legacy
    ``installed-files.txt``), not only its author's ``SOURCES.txt``."""
    for name in ("RECORD", "installed-files.txt"):
        with contextlib.suppress(Exception):
            if dist.read_text(name) is not None:
                return True
    return False


def _directory_names(dist: Any) -> set[str]:
    """Every top-level name in the directory ``dist`` is imported from (its packages,
    modules, extensions and ``__pycache__`` entries; other metadata directories excepted):
    what a distribution without an installer's file list may have put there."""
    names: set[str] = set()
    try:
        base = os.fspath(dist.locate_file(""))
        entries = os.listdir(base)
    except (OSError, TypeError, AttributeError, NotImplementedError):
        return names
    for entry in entries:
        if entry.lower().endswith((".dist-info", ".egg-info")):
            continue  # any case, as importlib.metadata finds metadata directories
        if entry == "__pycache__":
            with contextlib.suppress(OSError):
                names.update(e.partition(".")[0] for e in os.listdir(os.path.join(base, entry)))
            continue
        top = entry.partition(".")[0]
        if top:
            names.add(top)
    return names


#: What ``_read_names`` found for a distribution (its ``RECORD`` parsed, each file resolved;
#: its label), keyed by the identity of every file it read (device, inode, size,
#: modification and change times: an installer or an editor changes at least the change
#: time, which no user can set; a file replaced by a rename has another inode) and of its
#: metadata directory, never by the ``sys.path`` directories (``_Listed.placed`` places the
#: files per set of them): a load reads only the distributions that changed since the last
#: (the whole environment's file lists took ~1 s per load), and a test's new directory on
#: ``sys.path`` no longer made every distribution's file list read again.
_names_memo: Memo[tuple[Any, ...], _Listed] = Memo(4096)
_NAME_FILES = (
    "RECORD",
    "installed-files.txt",
    "top_level.txt",
    "METADATA",
    "PKG-INFO",
    "entry_points.txt",
)


def _memo_key(
    dist: Any, bases: dict[str, str] | None = None, parents: dict[str, str] | None = None
) -> tuple[Any, ...] | None:
    """What ``dist``'s names were read from, or ``None`` when that cannot be told (a
    distribution not in a directory: a zip file's, a custom finder's) or it changed within
    ``SETTLE_NS`` (read again).  ``parents``: one look's real paths of the directories
    holding metadata directories (``_real``)."""
    raw = getattr(dist, "_path", None)
    try:
        path = os.fspath(raw) if raw is not None else None
    except TypeError:
        return None
    if not isinstance(path, str) or not os.path.isdir(path):
        return None
    files = tuple(_file_key(os.path.join(path, name)) for name in _NAME_FILES)
    base = os.path.dirname(os.path.abspath(path))
    listing: tuple[Any, ...] = ()
    if files[0][0] < 0 and files[1][0] < 0:
        # No installer's file list: named from its directory's entries.
        listing = (_file_key(base), _file_key(os.path.join(base, "__pycache__")))
    try:
        where = _dist_base(dist, bases)
    except Exception:  # read (and raising) as it did unmemoized
        return None
    key = (_real(path, parents), _file_key(path), files, listing, where)
    # Racily clean (as git's index says): a file changed within the last seconds may change
    # again inside one tick of the coarse clock file times are stamped with, its key
    # unchanged: such a distribution is read again at each load until it has settled.
    if not provenance.settled((key[1], *files, *listing), _SETTLE_NS):
        return None
    return key


def _names_of(
    dist: Any,
    roots: list[str],
    bases: dict[str, str] | None = None,
    parents: dict[str, str] | None = None,
) -> tuple[str, frozenset[str], str]:
    """``dist``'s label, top-level names under ``roots`` and why they may be incomplete
    (memoized: ``_names_memo``; ``bases``: ``_dist_base``'s, ``parents``: ``_real``'s, one
    load's)."""
    key = _memo_key(dist, bases, parents)
    found = _names_memo.get(key) if key is not None else None
    if found is None:
        found = _read_names(dist, bases)
        if key is not None:
            _names_memo.put(key, found)
    return found.label, found.placed(roots), found.problem


class _Providers:
    """Which installed distributions install each top-level name, built by the registry
    from every distribution on ``sys.path`` (shadowed copies included) at most once per
    registry load (it reads every distribution's file list: about 0.4 s in a site's
    environment, so one read per entry point made a load quadratic).  Never
    ``importlib.metadata.packages_distributions()``: it believes a wheel's
    ``top_level.txt`` over its RECORD, and one undecodable file makes it raise for every
    distribution (tests/plugins/test_what_a_distribution_may_install.py).  A distribution whose file
    list or metadata cannot be read is kept aside, with its directory: the check refuses a
    plugin whose name that directory holds, rather than skipping it."""

    def __init__(self) -> None:
        self._built = False
        self.providers: dict[str, set[str]] = {}
        self.labels: dict[str, str] = {}
        self.names: dict[str, frozenset[str]] = {}
        self.unreadable: dict[str, tuple[str, str]] = {}  # key: (label, directory)

    def build(self) -> _Providers:
        if self._built:
            return self
        roots = _roots()
        bases: dict[str, str] = {}
        parents: dict[str, str] = {}  # this build's own (``_real``): never kept past it
        for dist in _all_distributions():
            key = _dist_key(dist, parents)
            self.labels[key], names, problem = _names_of(dist, roots, bases, parents)
            if problem:
                directory = ""
                with contextlib.suppress(Exception):
                    directory = os.path.realpath(str(dist.locate_file("")))
                self.unreadable[key] = (f"{self.labels[key]} ({problem})", directory)
            self.names[key] = names
            for name in names:
                self.providers.setdefault(name, set()).add(key)
        self._built = True
        return self


def _held_in(directory: str, top: str) -> bool:
    """``directory`` holds an entry for top-level name ``top`` (or cannot be listed)."""
    try:
        entries = os.listdir(directory)
    except OSError:
        return True
    return any(e == top or e.partition(".")[0] == top for e in entries)


def _shared_packages(dist: Any, tops: set[str], providers: _Providers | None = None) -> str:
    """Why a top-level name ``dist`` installs is not its own, or "": another installed
    distribution (a plugin or any package of the site) installs the same name, so
    installing either changed the other's code (a plugin named like a module the site
    imports, or a second distribution writing into a trusted plugin's package); or a
    distribution whose file list cannot be read may (fail closed)."""
    found = (providers or _Providers()).build()
    own = _dist_key(dist)
    if own in found.unreadable:
        return f"its own metadata cannot be read: {found.unreadable[own][0]}"
    for top in sorted(tops | found.names.get(own, set())):
        others = sorted({found.labels[k] for k in found.providers.get(top, ()) if k != own})
        if others:
            return (
                f"its package {top!r} is also installed by {', '.join(others)}: either "
                "could change the other's code"
            )
        for key, (label, directory) in sorted(found.unreadable.items()):
            if key != own and (not directory or _held_in(directory, top)):
                return (
                    f"the distribution {label} beside its package {top!r} cannot be read, "
                    "so it cannot be shown not to install that package"
                )
    return ""


def _entry_point_problem(ep: Any) -> ManifestError | None:
    """Why entry point ``ep`` cannot name a plugin, decided from its value alone: not
    dotted Python names (``entry_point_invalid``), a top-level name of the site's own code
    (``entry_point_site_code``: ``site_top_levels``), or a reserved top-level name
    (``entry_point_reserved``); a name that is no plugin's (``entry_point_name_invalid``:
    ``manifest.is_plugin_name``) first, before anything quotes it."""
    if not is_plugin_name(ep.name):
        return ManifestError("entry_point_name_invalid", _name_invalid(ep))
    module, attribute = _names(str(ep.value))
    if not all(part.isidentifier() for part in [*module.split("."), *attribute]):
        return ManifestError(
            "entry_point_invalid",
            f"entry point {ep.name!r} does not name a Python module and attribute "
            f"({str(ep.value)[:200]!r})",
        )
    top = module.split(".")[0]
    if top in RESERVED_NAMES:
        # Decided before anything is looked up: ``find_spec("json")`` is the standard
        # library's, and a plugin's ``json`` would stand in for it wherever it came first.
        return ManifestError(
            "entry_point_reserved",
            f"entry point {ep.name!r} names the module {top!r}, a name of the standard "
            "library or of a module the plugin process imports; nothing of it was imported",
        )
    if top in IMPLICIT_IMPORTS:
        # The site's interpreter tries this name as it starts (``copy`` tries ``org``):
        # a package of it where the site imports from runs there, whoever it belongs to.
        return ManifestError(
            "entry_point_reserved",
            f"entry point {ep.name!r} names the module {top!r}, a name the site's "
            "interpreter tries to import as it starts (the standard library or one of the "
            "site's libraries, when it is installed); nothing of it was imported",
        )
    if top in site_top_levels():
        # The site's own package, with a plugin's module copied into it: its sandbox would
        # bind the site's package whole as the plugin's, settings and all (issue 30,
        # round 19, finding 3: tests/plugins/test_sites_code_hidden_from_the_sandbox.py).
        return ManifestError(
            "entry_point_site_code",
            f"entry point {ep.name!r} names the module {top!r}, a top-level name of the "
            "site's own code (DJANGO_SETTINGS_MODULE, ROOT_URLCONF, INSTALLED_APPS); "
            "nothing of it was imported",
        )
    return None


def _quoted_name(name: object) -> str:
    """An entry point's name as a message quotes it: ``repr`` of a plugin name, or, for
    any other, ``repr`` of its first 60 characters, escaped (``shown``)."""
    if is_plugin_name(name):
        return repr(name)
    return shown(repr(str(name)[:60]))


def _name_invalid(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    label = repr(_dist_label(dist)) if dist is not None else "?"
    return (
        f"a plugin entry point of distribution {label} refused (entry_point_name_invalid): "
        f"its name {_quoted_name(getattr(ep, 'name', '?'))} is not a plugin name "
        "([a-z0-9][a-z0-9_-]{0,39}); nothing of it was imported"
    )


#: Entry-point groups whose scripts an installer writes into the environment's ``bin/``,
#: over whatever command is there.
_SCRIPT_GROUPS = ("console_scripts", "gui_scripts")


def _own_info(dist: Any) -> str:
    """The name of ``dist``'s own metadata directory (``<name>-<version>.dist-info``)."""
    path = getattr(dist, "_path", None)
    with contextlib.suppress(Exception):
        return os.path.basename(os.fspath(path)) if path is not None else ""
    return ""


def _distribution_problem(ep: Any, providers: _Providers | None = None) -> str:
    """Why the distribution of ``ep`` may not be loaded as a plugin, or "".  From its
    metadata and ``RECORD`` (``importlib.metadata``), before anything of it is imported:
    every plugin entry point valid and not reserved (one bad entry point refuses them
    all), no entry point of any other group (``console_scripts``/``gui_scripts``, a
    library's: tests/plugins/test_hostile_plugin_distributions.py), no file outside its
    directory (a ``..`` or absolute path: a script over the site's own command), metadata
    only in its own ``.dist-info``, no ``.pth`` file (site.py runs its ``import`` lines in every
    interpreter of the environment), no ``sitecustomize``/``usercustomize``, no
    top-level module or package besides its entry points' own, no top-level name it
    installs installed by any other distribution (``_shared_packages``), and every file
    its ``RECORD`` lists with a hash as that hash says (``provenance.record_problem``).
    A distribution without ``RECORD`` (a directory put on ``sys.path`` by hand) is held to
    its directory: no ``.pth``, ``sitecustomize`` or ``usercustomize`` in it."""
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ""
    tops = set()
    try:
        points = list(getattr(dist, "entry_points", ()))
    except Exception as exc:
        return f"its entry points cannot be read ({type(exc).__name__})"
    for other in points:
        if other.group in _SCRIPT_GROUPS:
            return (
                f"it declares the {other.group} entry point {other.name!r}: an installer "
                "writes it into the environment's scripts, over any command of that name"
            )
        if other.group != ENTRY_POINT_GROUP:
            # Whoever loads that group (kombu's serializers, Celery's backends and
            # commands, the site's own ``django_webfetch.tools``) imports it in the site's
            # processes, outside any sandbox, wherever the distribution's directory is
            # reachable from.
            return (
                f"it declares the entry point {other.name[:100]!r} of group "
                f"{other.group[:100]!r}: only {ENTRY_POINT_GROUP!r} entry points are loaded "
                "from a plugin, any other group is a library's, loaded in the site's processes"
            )
        bad = _entry_point_problem(other)
        if bad is not None:
            return (
                f"its entry point {_quoted_name(other.name)} is refused as {bad.reason}, so all "
                "its entry points are"
            )
        tops.add(_names(str(other.value))[0].split(".")[0])
    files = None
    with contextlib.suppress(Exception):
        files = dist.files
    if files is None:
        try:
            names = os.listdir(os.fspath(dist.locate_file("")))
        except (OSError, TypeError, AttributeError, NotImplementedError):
            return ""
        for name in sorted(names):
            stem = name.partition(".")[0]
            if name.endswith(".pth") or stem in _STARTUP_NAMES:
                return f"its directory holds {name!r}, which runs at every interpreter start"
        return _shared_packages(dist, tops, providers)
    info = _own_info(dist)
    for file in files:
        text = str(file).replace("\\", "/")
        parts = [p for p in text.split("/") if p not in ("", ".")]
        if not parts:
            continue
        if text.startswith("/") or ".." in parts or ":" in parts[0]:
            return f"it installs {str(file)!r} outside its directory"
        name = parts[-1]
        stem = name.partition(".")[0]
        head = parts[0]
        top = stem if len(parts) == 1 else head.partition(".")[0]
        if name.endswith(".pth") or top in _STARTUP_NAMES:
            return f"it installs {str(file)!r}, which runs at every interpreter start"
        if head.endswith((".dist-info", ".egg-info")):
            if head == info and len(parts) > 1:
                continue
            return f"it installs {str(file)!r} into metadata that is not its own"
        if CACHE_DIR in parts and (not in_cache(parts) or CACHE_DIR in parts[:-2]):
            # ``__pycache__`` is a valid package name: only a bytecode cache's ``.pyc``
            # files are left out of what is checked (``provenance.cache_problem``).
            return (
                f"it installs {str(file)!r} in a directory named {CACHE_DIR!r} that is not a "
                "bytecode cache (nothing but .pyc files, directly)"
            )
        if head == CACHE_DIR and len(parts) == 2 and stem in tops and name.endswith(".pyc"):
            continue  # its module's compiled code (``m.cpython-311.pyc``), nothing else
        if head in tops if len(parts) > 1 else stem in tops and name.endswith((".py", ".so")):
            continue
        return f"it installs {str(file)!r} outside its entry points' packages"
    # Then its files as installed: tampering after install is visible (decision 0050).
    return _shared_packages(dist, tops, providers) or record_problem(dist)


class _Read:
    """What one manifest read in a plugin process decided, as the registry keeps it: the
    verdict (the parsed ``manifest``, or the ``refusal``'s reason and detail), never the
    data the plugin process sent
    (tests/plugins/test_release_during_a_call_and_registry_load_cost.py, finding 3).
    ``violations`` (at most 100, cut by ``host``) and ``isolation`` are what the host
    reports of the read."""

    __slots__ = ("isolation", "manifest", "refusal", "violations")

    def __init__(
        self,
        manifest: Manifest | None,
        refusal: tuple[str, str] | None,
        violations: list[tuple[str, str, int | None]],
        isolation: dict[str, Any],
    ) -> None:
        self.manifest = manifest
        self.refusal = refusal
        self.violations = violations
        self.isolation = isolation


#: At most this many manifest reads' verdicts are kept, the least recently used forgotten
#: first (read again at the next load that needs them).
MAX_DESCRIBED = 4 * MAX_READS_PER_LOAD
#: Manifest reads' verdicts, by origin, with the stamp of the package's files they were
#: read from (``host.stamp``, which every package the registry accepts has) and the groups
#: the manifest was checked against: ``reset()`` reads again only a package whose files
#: changed.
_described: Memo[Origin, tuple[tuple[Any, ...], _Read]] = Memo(MAX_DESCRIBED)


class _Budget:
    """What one registry load may spend on manifest reads: ``MAX_READS_PER_LOAD`` plugin
    processes and ``seconds`` (``READ_SECONDS``, or one read's own bounds when longer)."""

    def __init__(self) -> None:
        try:
            wall = host.Limits.from_settings().wall_seconds
        except Exception:  # unreadable settings (E001): the read fails on its own
            wall = 0.0
        self.seconds = max(READ_SECONDS, wall + host.STARTUP_SECONDS)
        self.deadline = time.monotonic() + self.seconds
        self.reads = 0

    def take(self, origin: Origin, stamped: str) -> bool:
        """One read of ``origin`` (its files' ``host.stamp``: ``stamped``) may start
        (counted), or the budget is spent."""
        if host.remembered_failure(origin, stamped):
            return True  # answered without a plugin process
        if self.reads >= MAX_READS_PER_LOAD or time.monotonic() >= self.deadline:
            return False
        self.reads += 1
        return True


def _deferred_error(name: str, budget: _Budget) -> ManifestError:
    return ManifestError(
        "plugin_read_deferred",
        f"entry point {name!r} not read in this load: a load reads at most "
        f"{MAX_READS_PER_LOAD} manifests in plugin processes, in at most "
        f"{budget.seconds:g} s together; it is read by a later load",
    )


def _verdict(origin: Origin, found: dict[str, Any]) -> _Read:
    """What a manifest read (``host.describe``) decides, before anything of it is kept."""
    violations = list(found["violations"])
    isolation = copy.deepcopy(found.get("isolation") or {})
    raw = found["manifest"]
    refusal: tuple[str, str] | None = None
    manifest = None
    if found["problem"] == "ManifestNondeterministic":
        refusal = ("manifest_nondeterministic", "")
    elif found.get("too_large"):
        refusal = (
            "manifest_too_large",
            f"the manifest is {found['too_large']} bytes; at most {MAX_MANIFEST_BYTES} are "
            "accepted",
        )
    elif found["problem"] or not isinstance(raw, dict):
        refusal = ("manifest_load", found["problem"] or "no manifest")
    else:
        for tool in raw.get("tools") or ():
            if isinstance(tool, dict):
                named = tool.get("handler") is True and isinstance(tool.get("name"), str)
                tool["handler"] = InProcessHandler(origin, tool["name"]) if named else None
        try:
            manifest = parse_manifest(raw)
        except ManifestError as exc:
            refusal = (exc.reason, str(exc)[:2000])
    return _Read(manifest, refusal, violations, isolation)


def _inputs_stamp(origin: Origin, dist: Any) -> str:
    """What a manifest read of the plugin at ``origin`` could import besides its own
    package, as it is now: the site's package directories the plugin process imports from
    (``host.site_stamp``: an install, upgrade or removal there), and the distributions of
    its requirement closure (``closure.found``: each one's name, version, directory and
    problem, and ``host.stamp_trees`` of its top-level names, its metadata directory and
    the other files its ``RECORD`` lists, at most ``provenance.WALK_ENTRIES`` entries in
    all).  A closure that cannot be told (unreadable metadata, past the walk limit) counts
    as such, and the site's directories' stamp stands for it."""
    found = hashlib.sha256(f"site\0{host.site_stamp()}\n".encode())
    try:
        nodes = closure.found(dist, origin.path)
        for node in nodes:
            said = (node.name, node.version, node.base, node.meta, node.problem)
            found.update(f"node\0{said!r}\n".encode("utf-8", "surrogatepass"))
        tops = [(node.base, top) for node in nodes if node.base for top in node.tops]
        paths = [node.meta for node in nodes if node.meta]
        paths += [full for node in nodes for _row, full in node.files]
        found.update(f"files\0{host.stamp_trees(tops, paths)}\n".encode())
    except Exception as exc:  # the closure cannot be told: the site's directories' stamp
        found.update(f"closure unknown\0{type(exc).__name__}\n".encode())
    return found.hexdigest()


def _verdict_key(origin: Origin, dist: Any) -> tuple[Any, ...]:
    """What a kept verdict (and a remembered failure, ``host._Failures``) holds for: every
    input of the read: the package's files (``host.stamp``; raises ``RuntimeFailure``,
    ``host.PATH_UNSAFE``, for a package past the walk limits) and what else it could import
    (``_inputs_stamp``), in one digest; and the groups its tools were checked against
    (``manifest.tool_group``): decision 0055, amended
    (tests/plugins/test_manifest_memory_keyed_by_inputs.py)."""
    from django_webfetch.models.builtin import builtin_group_slugs

    own = host.stamp(origin)
    stamped = hashlib.sha256(f"{own}\0{_inputs_stamp(origin, dist)}".encode()).hexdigest()
    return (stamped, builtin_group_slugs())


def _described_manifest(origin: Origin, budget: _Budget, name: str, dist: Any = None) -> _Read:
    """The verdict on the manifest at ``origin`` (of distribution ``dist``): kept from an
    earlier read of the same inputs (``_verdict_key``), else read in a plugin process within
    this load's ``budget`` (``plugin_read_deferred`` past it)."""
    key = _verdict_key(origin, dist)
    cached = _described.get(origin)
    if cached is not None and cached[0] == key:
        return cached[1]
    if not budget.take(origin, key[0]):
        raise _deferred_error(name, budget)
    try:
        found = describe(origin, budget.deadline, key[0])
    except ReadDeferred as exc:
        raise _deferred_error(name, budget) from exc
    verdict = _verdict(origin, found)
    del found
    _described.pop(origin, None)
    _described[origin] = (key, verdict)
    while len(_described) > MAX_DESCRIBED:
        _described.pop(next(iter(_described)))
    return verdict


#: At most this many files and directories of one plugin's package are checked: the walk
#: limit every walk over a package shares (``provenance.WALK_ENTRIES``).
_CHECK_ENTRIES = WALK_ENTRIES


class _PathCheck:
    """Who may change the code of a plugin, as sshd's ``StrictModes`` asks it: the package
    (or module), each file and directory in it, the directory it is imported from and every
    directory above, through symbolic links, are owned by root or the site's uid, and none
    is writable by group or others.  A directory above the plugin's directory may be a
    sticky one writable by others (``/tmp``, mode 1777): another user cannot remove or
    rename what is in it, and the next component below it must be owned by root or the
    site's uid anyway."""

    def __init__(self) -> None:
        self.trusted = {0, os.geteuid()}
        self.checked: dict[tuple[str, bool], str] = {}
        self.entries = 0
        self.walked: set[str] = set()

    def entry(self, path: str, info: os.stat_result, *, sticky_ok: bool) -> str:
        if info.st_uid not in self.trusted:
            return f"{path!r} is owned by uid {info.st_uid}, not by root or the site's uid"
        if stat.S_ISLNK(info.st_mode) or not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return ""
        if sticky_ok and stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_ISVTX:
            return ""
        return f"{path!r} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o})"

    def chain(self, path: str, *, last_sticky_ok: bool = False, depth: int = 0) -> str:
        """``path`` (absolute) and each directory above it, following symbolic links (at
        most 40 levels of them, as the kernel).  Iterative over the directories above:
        a path of thousands of components is checked without recursion."""
        key = (path, last_sticky_ok)
        if key in self.checked:
            return self.checked[key]
        if depth > 40:
            return f"{path[:300]!r}: too many levels of symbolic links"
        above: list[str] = []  # the directories above ``path`` not checked yet, nearest first
        current, parent = path, os.path.dirname(path)
        while parent != current and (parent, True) not in self.checked:
            above.append(parent)
            current, parent = parent, os.path.dirname(parent)
        for directory in reversed(above):
            self._one(directory, True, depth)
        return self._one(path, last_sticky_ok, depth)

    def _one(self, path: str, sticky_ok: bool, depth: int) -> str:
        """``path`` itself, once the directory above it is checked (``chain``)."""
        key = (path, sticky_ok)
        if key in self.checked:
            return self.checked[key]
        parent = os.path.dirname(path)
        problem = self.checked.get((parent, True), "") if parent != path else ""
        if not problem:
            try:
                info = os.lstat(path)
                link = os.readlink(path) if stat.S_ISLNK(info.st_mode) else None
            except OSError as exc:
                problem = f"{path[:300]!r} cannot be examined ({exc.strerror})"
            else:
                problem = self.entry(path, info, sticky_ok=sticky_ok)
                if not problem and link is not None:
                    # Not normalised: ``..`` after a link is resolved as the kernel does.
                    target = os.path.join(parent, link)
                    problem = self.chain(target, last_sticky_ok=sticky_ok, depth=depth + 1)
        self.checked[key] = problem
        return problem

    def tree(self, top: str) -> str:
        """``top`` and everything in it (not writable by group or others even if sticky),
        a linked directory walked once, with a stack of its own: at most ``WALK_DEPTH``
        directories deep (counting through links) and ``_CHECK_ENTRIES`` entries, past
        either the package is refused
        (tests/plugins/test_deep_trees_signal_snapshot_uids_and_dependencies.py)."""
        problem = self.chain(top)
        real = _real_path(top)
        if problem or not os.path.isdir(real) or real in self.walked:
            return problem
        self.walked.add(real)
        todo = [(top, 0)]
        while todo:
            directory, depth = todo.pop()
            if depth > WALK_DEPTH:
                return f"{directory[:300]!r}... is nested deeper than {WALK_DEPTH} directories"
            try:
                with os.scandir(directory) as listing:
                    entries = sorted(listing, key=lambda e: e.name)
            except OSError as exc:
                return f"{directory[:300]!r} cannot be listed ({exc.strerror})"
            below: list[str] = []
            for entry in entries:
                self.entries += 1
                if self.entries > _CHECK_ENTRIES:
                    return f"{top!r} holds more than {_CHECK_ENTRIES} files to check"
                path = os.path.join(directory, entry.name)
                problem = self.chain(path)
                if problem:
                    return problem
                try:
                    linked = entry.is_symlink() and entry.is_dir()
                    plain = not linked and entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue  # gone since the listing: nothing of it is imported
                if linked:
                    real = _real_path(path)
                    problem = self.chain(real)  # what the link leads to, and above it
                    if problem:
                        return problem
                    if real not in self.walked and os.path.isdir(real):
                        self.walked.add(real)
                        below.append(real)
                elif plain:
                    below.append(path)
            todo.extend((path, depth + 1) for path in reversed(below))
        return ""


_real_path = provenance.real_path


def _path_problem(origin: Origin) -> str:
    """Why another local user could change the code of the plugin at ``origin``, or ""."""
    if not origin.path:
        return ""
    check = _PathCheck()
    problem = check.chain(origin.path)
    if problem:
        return problem
    try:
        names = os.listdir(origin.path)
    except OSError as exc:
        return f"{origin.path!r} cannot be listed ({exc.strerror})"
    for name in sorted(names):
        if name.partition(".")[0] == origin.top_level:  # the package, a module, an extension
            problem = check.tree(os.path.join(origin.path, name))
            if problem:
                return problem
    if "__pycache__" in names:
        # Where a module's compiled code is imported from in place of its source: the
        # directory (a file can be added to it) and the top-level name's files in it.
        cache = os.path.join(origin.path, "__pycache__")
        problem = check.chain(cache)
        if problem:
            return problem
        try:
            cached = os.listdir(cache)
        except OSError as exc:
            return f"{cache!r} cannot be listed ({exc.strerror})"
        for name in sorted(cached):
            if name.partition(".")[0] == origin.top_level:
                problem = check.chain(os.path.join(cache, name))
                if problem:
                    return problem
    return ""


def _load_entry_point(ep: Any, budget: _Budget) -> tuple[Manifest, Origin]:
    origin = _origin_of(ep)
    _origin_dists[origin] = getattr(ep, "dist", None)
    unsafe = _path_problem(origin)
    if unsafe:
        raise ManifestError(
            "plugin_path_unsafe",
            f"entry point {ep.name!r} not loaded: another local user could change its code "
            f"({unsafe}); nothing of it was imported",
        )
    try:
        found = _described_manifest(origin, budget, ep.name, getattr(ep, "dist", None))
    except IsolationUnavailable as exc:
        if _trusted_here(ep):
            return _load_here(ep, origin), origin
        raise ManifestError(
            "plugin_isolation_unavailable",
            f"entry point {ep.name!r} not read: this host cannot build the plugin sandbox "
            f"({exc.detail or exc.code}); nothing of the package was imported",
        ) from exc
    except RuntimeFailure as exc:
        if exc.code == "manifest_too_large":  # refused from the length of the answer
            raise ManifestError("manifest_too_large", exc.detail) from exc
        if exc.code == host.PATH_UNSAFE:  # past the walk limits since the check: no read
            raise ManifestError(
                "plugin_path_unsafe",
                f"entry point {ep.name!r} not loaded: {exc.detail}; nothing of it was imported",
            ) from exc
        raise ManifestError(
            "manifest_load", f"entry point {ep.name!r} could not be loaded ({exc.code})"
        ) from exc
    for event, target, _port in found.violations:
        logger.warning(
            "django_webfetch plugin entry point %r tried at import: %r %r", ep.name, event, target
        )
    if found.refusal is not None:
        reason, detail = found.refusal
        if reason == "manifest_nondeterministic":
            raise _nondeterministic(ep.name)
        if reason == "manifest_load":
            raise ManifestError(
                "manifest_load", f"entry point {ep.name!r} could not be loaded ({detail})"
            )
        raise ManifestError(reason, detail)
    assert found.manifest is not None
    return copy.deepcopy(found.manifest), origin


def _trusted_here(ep: Any) -> bool:
    """An instance of plugin ``ep.name`` is marked trusted (in-process) by the operator
    for the distribution that provides ``ep`` now (name, version, digest of the plugin's
    code: ``provenance.code_digest``): trust is given to a distribution's code, never to an
    entry point's name."""
    installed = provider_of(ep)
    if installed is None:
        return False
    try:
        from .models import PluginInstance

        rows = PluginInstance.objects.filter(plugin=ep.name, trusted=True)
        return any(row.trusted_for() == installed for row in rows[:50])
    except Exception:  # no database yet (migrations, checks before migrate): not trusted
        return False


def _nondeterministic(name: str) -> ManifestError:
    return ManifestError(
        "manifest_nondeterministic",
        f"entry point {name!r} not loaded: two reads of its manifest in one process differ "
        "(its code computes it anew at each read): what the operator is shown would not be "
        "what is served",
    )


def _same_reads(first: Any, second: Any) -> bool:
    """Two manifest reads are the same data (each callable, a handler, counted as one)."""

    def plain(value: Any) -> str:
        return "<callable>" if callable(value) else f"<{type(value).__name__}>"

    try:
        dumped = [json.dumps(r, sort_keys=True, default=plain) for r in (first, second)]
    except (TypeError, ValueError, RecursionError):
        return False
    return dumped[0] == dumped[1]


def _load_here(ep: Any, origin: Origin) -> Manifest:
    """No sandbox on this host, and the operator trusts the plugin: import here, under the
    audit hook (docs/plugins.rst), from the files at ``origin`` only (``_import``).  Read
    twice, as in a plugin process (``manifest_nondeterministic``)."""
    from .sandbox import plugin_scope

    installed = provider_of(ep)
    if installed is None or not pin_imports(ep.name, origin, installed.digest):
        raise ManifestError(
            "plugin_code_changed",
            f"entry point {ep.name!r} not imported: its code is not the code trust was "
            "given to; nothing of it was imported in this process",
        )
    with plugin_scope(f"import:{ep.name}"):
        try:
            loaded = _import(origin)
            if not _same_reads(loaded, _import(origin)):
                raise _nondeterministic(ep.name)
        except ManifestError:
            raise
        except Exception as exc:
            raise ManifestError(
                "manifest_load",
                f"entry point {ep.name!r} could not be loaded ({type(exc).__name__})",
            ) from exc
        return parse_manifest(loaded)


def _where(ep: Any) -> str:
    """The directory ``ep``'s distribution is installed in (two of one name are told
    apart by it), or "?"."""
    with contextlib.suppress(Exception):
        return repr(os.fspath(ep.dist.locate_file("")))[:300]
    return "?"


def _origin(ep: Any) -> str:
    """``<distribution>:<entry point>``; "?" for a distribution whose name cannot be read."""
    package = "?"
    with contextlib.suppress(Exception):
        package = str(getattr(getattr(ep, "dist", None), "name", None) or "?")[:100]
    return f"{package}:{ep.name}"


def plugin_entry_points(keys: list[str] | None = None) -> tuple[list[Any], list[Problem]]:
    """The plugin entry points of every installed distribution (``_all_distributions``:
    the site's and those of ``WEBFETCH_PLUGIN_DIRS``), each metadata directory once: two
    distributions of one name in two directories are two, so a name both claim is refused
    for both (``entry_point_duplicate``), never served by whichever comes first
    (tests/plugins/test_hostile_plugin_distributions.py).  Read one distribution at a time: a
    distribution whose ``entry_points.txt`` cannot be read or decoded would make
    ``entry_points()`` raise for every plugin.  Its own plugins are not loaded, and when
    its file names the plugin group (or cannot be read at all) a problem says so."""
    eps: list[Any] = []
    problems: list[Problem] = []
    for dist in _all_distributions(keys):
        found = dist_plugin_entry_points(dist)
        if isinstance(found, list):
            eps.extend(found)
        elif found:
            problems.append(
                Problem(
                    "plugin_distribution_unsafe",
                    f"plugin distribution {_dist_label(dist)!r} refused "
                    f"(plugin_distribution_unsafe): its entry points cannot be read "
                    f"({found}); nothing of it was imported",
                )
            )
    return eps, problems


def dist_plugin_entry_points(dist: Any) -> list[Any] | str:
    """The plugin entry points of distribution ``dist``, or, when its ``entry_points.txt``
    cannot be read or decoded, the error's name when the file's bytes name the plugin group
    or cannot be read at all (fail closed: a plugin distribution), else ""."""
    try:
        return [ep for ep in dist.entry_points if ep.group == ENTRY_POINT_GROUP]
    except Exception as exc:
        raw = b""
        with contextlib.suppress(Exception):
            path: Any = getattr(dist, "_path", "")
            raw = provenance.read_bounded(os.path.join(os.fspath(path), "entry_points.txt"))
        if not raw or ENTRY_POINT_GROUP.encode() in raw:
            return type(exc).__name__ or "unreadable"
        return ""


def _installed() -> tuple[list[Any], list[Problem], tuple[Any, ...]]:
    """The plugin entry points and unreadable distributions (``plugin_entry_points``),
    and what a load decided from: every installed distribution's metadata directory, and
    each plugin entry point's name, value and distribution (name, version, code digest)."""
    keys: list[str] = []
    eps, unreadable = plugin_entry_points(keys)
    points = sorted(_point(ep) for ep in eps)
    said = tuple(p.message for p in unreadable)
    return eps, unreadable, (tuple(sorted(keys)), tuple(points), said)


def _point(ep: Any) -> tuple[str, ...]:
    """What a load decides from for entry point ``ep``: its name, value, distribution and
    that distribution's provider (name, version, code digest); never raises (a failure is
    the entry point's own: ``load`` refuses it, every other plugin loads)."""
    try:
        found = provider_of(ep)
        if found is not None and provenance.unpinned_why(found.digest):
            # Its code cannot be told (no pin holds for it): the same reason is the same
            # state, or every ``provider`` look-up would load again (and end idle processes).
            found = found._replace(digest="unpinned: " + provenance.unpinned_why(found.digest))
        return (
            str(ep.name),
            str(ep.value),
            _state_key(getattr(ep, "dist", None)),
            *(found or ()),
        )
    except Exception as exc:
        # The same failure is the same state: keyed by what it says, never by when (a time
        # in the key made every ``provider`` look-up load the registry again and end every
        # idle plugin process: issue 30, attack 16, finding 1).
        name = str(getattr(ep, "name", "?"))
        return (name, "unreadable", type(exc).__name__, _stable_message(exc))


#: An object's address in an exception's text (``at 0x7f...``).  On RE2 (DESIGN.md §1): the
#: text can hold names a distribution chose (its files, its metadata).  Matched on the
#: text's bytes (``surrogatepass``: a file name that is no UTF-8 is text RE2 cannot take).
_ADDRESS = compile_pattern(rb"0x[0-9a-fA-F]+")


def _stable_message(exc: BaseException) -> str:
    """What ``exc`` says, the same for the same failure: an object's address (``at
    0x7f...``), which differs between two look-ups, left out; cut to 200 characters."""
    with contextlib.suppress(Exception):
        raw = str(exc).encode("utf-8", "surrogatepass")
        return bytes(_ADDRESS.sub(b"0x?", raw)).decode("utf-8", "surrogatepass")[:200]
    return "?"


def _too_many(eps: list[Any]) -> dict[str, str]:
    """The distributions (``_dist_key``) that declare more than ``MAX_ENTRY_POINTS`` plugin
    entry points, each with its label: decided from the entry points alone."""
    counts: dict[str, int] = {}
    dists = [dist for dist in (getattr(ep, "dist", None) for ep in eps) if dist is not None]
    for dist in dists:
        key = _dist_key(dist)
        counts[key] = counts.get(key, 0) + 1
    return {
        key: f"{_dist_label(dist)!r} declares {counts[key]}"
        for dist in dists
        if counts[key := _dist_key(dist)] > MAX_ENTRY_POINTS
    }


def load() -> dict[str, Manifest]:
    # Reading a manifest starts a plugin process but runs no tool: the host's notice that
    # processes run without a per-call CPU limit waits for a call (``notices``).
    with notices.held():
        return _load()


def _load() -> dict[str, Manifest]:
    global _manifests, _state, _retry_at, _deferrals
    with _lock:
        if _manifests is not None and _deferred and time.monotonic() >= _retry_at:
            # Reads a load deferred: this load reads them (first), the rest is cached.
            _manifests = None
        if _manifests is None:
            claims: dict[str, list[tuple[str, Manifest]]] = {}
            found_origins: dict[str, Origin] = {}
            _problems.clear()
            with provenance.rehashed():  # each generation reads the code in full again
                eps, unreadable, _state = _installed()
            for problem in unreadable:
                _refuse(problem)
            # Names a refused entry point claims (with why): served by no one in this load.
            refused: dict[str, set[str]] = {}
            named: dict[str, list[str]] = {}
            for ep in eps:
                named.setdefault(ep.name, []).append(f"{_origin(ep)} in {_where(ep)}")
            providers = _Providers()
            verdicts: dict[int, str] = {}  # one verdict per distribution (eps share it)
            crowded = _too_many(eps)
            budget = _Budget()
            # What the last load deferred is read first (a stable sort: the order is kept
            # otherwise), so every entry point is read after a bounded number of loads.
            eps.sort(key=lambda ep: ep.name not in _deferred)
            deferred: set[str] = set()
            for ep in eps:
                if not is_plugin_name(ep.name):
                    # Refused before anything quotes its name (a message says it escaped):
                    # no plugin can be served by it, and no other refusal names it.
                    _refuse(Problem("entry_point_name_invalid", _name_invalid(ep)))
                    continue
                if len(named[ep.name]) > 1:
                    # Decided before anything is imported or read: trust (a ``trusted``
                    # instance, where no sandbox can be built) follows the entry point's
                    # name, so a second distribution claiming it is refused with the first.
                    message = (
                        f"plugin entry point {ep.name!r} refused (entry_point_duplicate): "
                        f"it is claimed by more than one entry point "
                        f"({', '.join(sorted(named[ep.name]))}); all are refused"
                    )
                    _refuse(Problem("entry_point_duplicate", message, (ep.name,)))
                    refused.setdefault(ep.name, set()).add("entry_point_duplicate")
                    continue
                also: tuple[str, ...] = ()  # a name its manifest claims besides its own
                try:
                    bad = _entry_point_problem(ep)  # its own reason, before its distribution's
                    if bad is not None:
                        raise bad
                    dist = getattr(ep, "dist", None)
                    many = crowded.get(_dist_key(dist)) if dist is not None else None
                    if many is not None:
                        # Decided from its entry points alone, before anything of it is
                        # read: each would start a plugin process at every load.
                        raise ManifestError(
                            "plugin_too_many_entry_points",
                            f"its distribution {many} entry points of group "
                            f"{ENTRY_POINT_GROUP!r}; at most {MAX_ENTRY_POINTS} are read from "
                            "one distribution, so none of them is; nothing of it was imported",
                        )
                    if dist is None:
                        unsafe = _distribution_problem(ep, providers)
                    elif id(dist) in verdicts:
                        unsafe = verdicts[id(dist)]
                    else:
                        unsafe = verdicts[id(dist)] = _distribution_problem(ep, providers)
                    if unsafe:
                        raise ManifestError(
                            "plugin_distribution_unsafe",
                            f"its distribution is not loaded as a plugin: {unsafe}; "
                            "nothing of it was imported",
                        )
                    # The one entry point that may serve this name: trust is decided from
                    # its distribution (``provider``), the one whose code is loaded.
                    _providers[ep.name] = provider_of(ep)
                    manifest, found_origins[ep.name] = _load_entry_point(ep, budget)
                    if manifest.name != ep.name:
                        also = (manifest.name,)
                        refused.setdefault(manifest.name, set()).add("manifest_name_mismatch")
                        raise ManifestError(
                            "manifest_name_mismatch",
                            f"its manifest names the plugin {manifest.name[:100]!r}: a plugin's "
                            "name is its entry point's; both names are refused",
                        )
                except ManifestError as exc:
                    message = f"plugin entry point {ep.name!r} refused ({exc.reason}): {exc}"
                    _refuse(Problem(exc.reason, message, (ep.name, *also)))
                    refused.setdefault(ep.name, set()).add(exc.reason)
                    if exc.reason == "plugin_read_deferred":
                        deferred.add(ep.name)
                    continue
                except Exception as exc:  # one plugin's failure, never every plugin's
                    message = (
                        f"plugin entry point {ep.name!r} refused (manifest_load): "
                        f"its manifest could not be read ({type(exc).__name__})"
                    )
                    _refuse(Problem("manifest_load", message, (ep.name,)))
                    refused.setdefault(ep.name, set()).add("manifest_load")
                    continue
                claims.setdefault(manifest.name, []).append((_origin(ep), manifest))
            found: dict[str, Manifest] = {}
            for name, claimed in claims.items():
                if len(claimed) > 1:
                    # The instances of a name (its grant, its secrets) belong to no package
                    # when two claim it: which one the import system finds first is no
                    # decision (a dependency could take over an operator's plugin).
                    origins = ", ".join(sorted(origin for origin, _ in claimed))
                    message = (
                        f"plugin {name!r} is claimed by more than one entry point ({origins}); "
                        "all are refused"
                    )
                    _refuse(Problem("plugin_claimed_twice", message, (name,)))
                    refused.setdefault(name, set()).add("plugin_claimed_twice")
                    continue
                if name in refused:
                    message = (
                        f"plugin {name!r} refused (plugin_name_refused): it is claimed by more "
                        f"than one entry point ({claimed[0][0]} and a refused one: "
                        f"{', '.join(sorted(refused[name]))}); no entry point serves it"
                    )
                    _refuse(Problem("plugin_name_refused", message, (name,)))
                    continue
                found[name] = claimed[0][1]
                _origins[name] = found_origins[name]
            for name, why in refused.items():
                # An entry point not loaded only because no sandbox can be built keeps its
                # distribution (trust can be turned on for it); a name refused for any
                # other reason has none.
                if why != {"plugin_isolation_unavailable"}:
                    _providers.pop(name, None)
            for stale in [name for name in _origins if name not in found]:
                _origins.pop(stale, None)  # a load done again: what it no longer serves
            _deferred.clear()
            _deferred.update(deferred)
            _deferrals = _deferrals + 1 if deferred else 0
            _retry_at = time.monotonic() + retry_after(_deferrals)
            _manifests = found
        return _manifests


def manifests() -> list[Manifest]:
    return sorted(load().values(), key=lambda m: m.name)


def get_manifest(name: str) -> Manifest | None:
    return load().get(name)


def _refuse(problem: Problem) -> None:
    """``problem`` logged (escaped: ``shown``) and kept for this load, once."""
    if problem not in _problems:
        logger.error("django_webfetch %s", shown(problem.message))
        _problems.append(problem)


def problems() -> list[str]:
    """What this load refused, for people (``refusals`` for each one's reason)."""
    load()
    return [p.message for p in _problems]


def refusals() -> list[Problem]:
    """What this load refused, each with its reason and the plugin names it refuses: what
    the system checks, ``webfetch plugin list`` and the services decide from."""
    load()
    return list(_problems)


def provider(name: str) -> Provider | None:
    """The distribution of the entry point the registry serves plugin ``name`` from (or,
    where no sandbox can be built, would import it from once trusted): ``None`` when no
    entry point may serve that name.  Trust is compared with this, never with a fresh
    look-up of an entry point by name (tests/plugins/test_name_and_trust_of_one_entry_point.py)."""
    load()
    if _installed()[2] != _state:
        # Installed plugins changed since the load (an upgrade, a second distribution):
        # the registry loads again, and trust is decided from what it serves then.
        reset()
        load()
    with _lock:
        return _providers.get(name)


def origin(name: str) -> Origin | None:
    """Where the code of plugin ``name`` is (for the runtime)."""
    load()
    return _origins.get(name)


def isolation(name: str) -> dict[str, Any] | None:
    """What the plugin process that read plugin ``name``'s manifest ran in
    (``host.Worker.isolation``: its Landlock as its guest enforced it); ``None`` where no
    plugin process read it (not installed, or read in this process: trusted)."""
    load()
    found = _origins.get(name)
    described = _described.get(found) if found is not None else None
    if described is None:
        return None
    return copy.deepcopy(described[1].isolation)


def distribution(name: str) -> Any:
    """The distribution of the entry point plugin ``name`` is served from (``None`` when
    none is): its dependencies are pinned with the plugin's code (decision 0051)."""
    load()
    found = _origins.get(name)
    return _origin_dists.get(found) if found is not None else None


def dependencies(name: str) -> tuple[closure.Dependency, ...]:
    """The installed dependencies of the distribution plugin ``name`` is served from,
    outside the site's own set, as trust pins them (``closure.dependencies``); ``()`` when
    it has none or no entry point serves the name."""
    where = origin(name)
    dist = distribution(name)
    if where is None or dist is None:
        return ()
    return closure.closure_of(dist, where.path)


def generation() -> int:
    """Counts ``reset()``s: a plugin process started before one runs the old code."""
    return _generation


def reset() -> None:
    global _manifests, _generation
    with _lock:
        _manifests = None
        _generation += 1
        _problems.clear()
        _origins.clear()
        _providers.clear()
        _in_process.clear()
        _origin_dists.clear()
        _deferred.clear()
    shutdown()  # idle plugin processes run the code as it was
