"""The installed dependencies a trusted plugin's code imports, pinned with it (decision
0051).

A ``trusted`` instance runs its plugin in the site's process, and with it every installed
distribution the plugin requires (``Requires-Dist``, transitively): replacing one of them
ran other code under the same trust (issue 30, attack 8).  Trust is therefore given to the
plugin's code and to the closure of its installed requirements: each distribution's name,
version and a digest of its code (every file of every top-level package or module its
``RECORD`` installs, as ``provenance.code_digest`` digests a plugin's, and its ``METADATA``
file, which names its own requirements).

Left out: the distributions of the site's own requirement set (``django-webfetch`` and the
closure of its requirements, extras left out, each line whose environment marker holds here
and whose distribution is installed): the site imports them itself, whoever trusts what, so
a plugin's trust adds nothing to them.  A site distribution asked with an extra
(``httpx[socks]``) is followed for that extra's lines.  Requirements are found by the
METADATA ``Name`` pip goes by (attack 9), read as pip reads it (``metadata_name``, shared
with the registry), in every ``sys.path`` entry ``importlib.metadata`` reads: one found in
an entry that is no directory (a zip) cannot be pinned (attack 10); metadata directories
are found as ``importlib.metadata`` finds them (any case, an egg's ``EGG-INFO``, which
cannot be pinned), ``RECORD`` is read with ``csv`` (``provenance.record_paths``) and a
module it installs outside the dependency's directory makes it unpinnable (attack 11).
A site name counts only at its one copy (attack 12: a dependency shipped a copy of the
site's metadata requiring itself), a dependency writing into a metadata directory not its
own cannot be pinned, and every other file its ``RECORD`` lists (a shared library in
``<prefix>/lib``, its own ``entry_points.txt``) is pinned by its bytes (``_scan``).
A requirement line is left out only when its parsed marker holds for no extra asked
(``for_other_extras``).

The plugin's own part of the pin (``own_digest``, attack 12) is what its distribution runs:
every top-level name it installs (``own_names``: another plugin's package of the same
distribution may be imported by the trusted one), the entry point's value and its
``entry_points.txt`` and ``METADATA``.

Bounded by construction: at most ``MAX_DISTRIBUTIONS`` names looked up (installed or not),
``MAX_REQUIREMENTS`` lines read per metadata file, ``MAX_FILES`` files and ``MAX_BYTES``
bytes in one closure; a larger one cannot be pinned (no pin holds, and
``webfetch plugin trust`` refuses it with ``plugin_dependency_unpinnable``).  Which
distributions a closure holds is remembered by the identity of every directory it was
searched in and of every metadata file it read, so a trusted call re-reads no metadata;
each file's hash is remembered by the file's identity (``provenance.file_sha256``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.metadata
import json
import os
import sys
import textwrap
from collections.abc import Iterable
from email.parser import HeaderParser
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Any, NamedTuple

from django_webfetch.text.patterns import compile_pattern

from . import provenance
from .provenance import CACHE_DIR, Memo, file_key

#: ``packaging``'s ``Marker`` and ``Requirement`` (requirement markers: ``site_names``,
#: ``for_other_extras``), imported at first use (``_packaging``): a plugin process imports
#: this module and never needs them.  ``None`` when ``packaging`` is not installed: then a
#: marked site requirement is not the site's, and no marked line is skipped.
_UNLOADED: Any = object()
_Marker: Any = _UNLOADED
_Requirement: Any = _UNLOADED


def _packaging() -> None:
    global _Marker, _Requirement
    if _Marker is not _UNLOADED and _Requirement is not _UNLOADED:
        return
    try:
        from packaging.markers import Marker
        from packaging.requirements import Requirement
    except ImportError:  # pragma: no cover - packaging is a declared dependency
        Marker = Requirement = None  # type: ignore[assignment,misc]
    if _Marker is _UNLOADED:
        _Marker = Marker
    if _Requirement is _UNLOADED:
        _Requirement = Requirement


__all__ = [
    "ARCHIVE",
    "BAD_METADATA",
    "Bounded",
    "Dependency",
    "EGG",
    "FOREIGN_METADATA",
    "MAX_BYTES",
    "MAX_DISTRIBUTIONS",
    "MAX_FILES",
    "MAX_OWN_NAMES",
    "MAX_REQUIREMENTS",
    "NAME_MISMATCH",
    "OUTSIDE",
    "OWN_METADATA",
    "PATH_FILE",
    "SITE_DISTRIBUTION",
    "TOO_MANY",
    "TooMany",
    "bounded",
    "changed",
    "closure_of",
    "dependencies",
    "for_other_extras",
    "found",
    "invalid",
    "metadata_name",
    "normalized",
    "own_digest",
    "own_names",
    "own_packages",
    "owned_files",
    "packages",
    "pinned_digest",
    "requirement_names",
    "requirements",
    "site_names",
    "trust_digest",
    "unpinnable",
]

#: The distribution whose requirement closure is the site's own (never pinned per plugin).
SITE_DISTRIBUTION = "django-webfetch"
#: At most this many distributions in one plugin's closure.
MAX_DISTRIBUTIONS = 200
#: At most this many files, and bytes, digested for one plugin's dependencies.
MAX_FILES = 50_000
MAX_BYTES = 512 << 20
#: At most this many requirement lines in one distribution's metadata; more cannot be pinned.
MAX_REQUIREMENTS = 500

#: Why a dependency cannot be pinned, each with a stable reason code (``Dependency.problem``
#: ends with it, in parentheses).
TOO_MANY = "plugin_dependency_closure_too_large"
BAD_METADATA = "plugin_dependency_metadata_invalid"
NAME_MISMATCH = "plugin_dependency_name_mismatch"
PATH_FILE = "plugin_dependency_path_file"
ARCHIVE = "plugin_dependency_not_in_directory"
EGG = "plugin_dependency_egg_directory"
OUTSIDE = "plugin_dependency_outside_directory"
FOREIGN_METADATA = "plugin_dependency_foreign_metadata"

#: Every pattern here reads a distribution author's metadata: each is on RE2 (linear in the
#: text).  ``_SPACE`` is what Python's ``\s`` matches in text (``str.isspace``: RE2's ``\s``
#: is ASCII only), so the patterns read a line as the ``re`` patterns they replace did
#: (``tests/plugins/test_closure_patterns.py`` compares them on every code point).
_SPACE = r"[\t-\r\x{1c}-\x{1f}\x{85}\p{Z}]"
#: A distribution name as PEP 508 allows it.
_NAME_TEXT = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
#: The name a requirement line starts with.
_NAME = compile_pattern(_SPACE + "*(" + _NAME_TEXT + ")")
_VALID_NAME = compile_pattern(_NAME_TEXT)
#: A version as PEP 440 allows it (its appendix's pattern, case-insensitive).
#: On RE2 (linear in the text, which is a distribution author's): its optional parts
#: would let a backtracking engine try each split of a long run of digits.
_VALID_VERSION = compile_pattern(
    r"""(?i)v?(?:(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*"""
    r"""(?:[-_.]?(?:alpha|a|beta|b|preview|pre|c|rc)[-_.]?[0-9]*)?"""
    r"""(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?"""
    r"""(?:[-_.]?dev[-_.]?[0-9]*)?)(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?"""
)


def invalid(name: str, version: str, code: str = BAD_METADATA) -> str:
    """Why a distribution's METADATA ``Name`` (PEP 508) or ``Version`` (PEP 440) is not
    valid ("" when both are), with reason ``code``: pip installs no such distribution, and
    neither is shown (a dependency's here, the plugin's own in ``provenance.provider_of``)."""
    if not _VALID_NAME.fullmatch(name):
        return f"its METADATA Name is not a valid distribution name ({code})"
    if not _VALID_VERSION.fullmatch(version):
        return f"its METADATA Version is not a valid version ({code})"
    return ""


provenance.metadata_invalid = invalid  # what ``provenance.provider_of`` checks


class Dependency(NamedTuple):
    """One installed distribution of a plugin's requirement closure (``version`` "" when
    no distribution of that name is installed), the digest of its code and the directory
    it is installed in; ``problem`` says why it cannot be pinned ("" when it can)."""

    name: str
    version: str
    digest: str
    where: str
    problem: str = ""

    def __str__(self) -> str:
        if not self.version:
            return f"{self.name} (not installed)"
        return f"{self.name} {self.version}"


class Bounded(PathDistribution):
    """A distribution whose metadata files are read bounded: each a regular file (by its
    opened descriptor's ``fstat``), at most its size and ``provenance.METADATA_MAX_BYTES``
    (``provenance.read_bounded``), decoded as ``PathDistribution.read_text`` decodes it
    (UTF-8, universal newlines).  A ``METADATA``, ``RECORD`` or ``entry_points.txt`` linked
    to ``/dev/zero`` or a file of ``/proc`` raises ``OSError`` (unreadable metadata: fail
    closed), where ``PathDistribution`` read it to its end, if it had one
    (tests/plugins/test_bounded_reads_and_shown_metadata.py).  Every distribution the registry, the
    closure and the checks read is one (``bounded``)."""

    def read_text(self, filename: str | os.PathLike[str]) -> str | None:
        path: Any = self._path.joinpath(filename)
        try:
            if isinstance(path, Path):
                data = provenance.read_bounded(os.fspath(path), provenance.METADATA_MAX_BYTES)
            else:  # a zip's entry (``zipfile.Path``): its decompressed bytes, bounded too
                with path.open("rb") as fh:
                    data = fh.read(provenance.METADATA_MAX_BYTES + 1)
                if len(data) > provenance.METADATA_MAX_BYTES:
                    raise provenance.ReadRefused(
                        f"holds more than {provenance.METADATA_MAX_BYTES} bytes"
                    )
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None
        except KeyError:  # pragma: no cover - a zip's missing entry, as importlib suppresses it
            return None  # as ``PathDistribution.read_text``: no such file
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def bounded(dist: Any) -> Any:
    """``dist`` read as ``Bounded`` when it is a ``PathDistribution`` (what
    ``importlib.metadata.distributions()`` finds in a directory or a zip); any other
    (a custom finder's) as it is."""
    if type(dist) is PathDistribution:
        return Bounded(dist._path)
    return dist


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return str(_SEPARATORS.sub("-", name)).lower()


_SEPARATORS = compile_pattern(r"[-_.]+")
#: The extras a requirement line asks (the text between its brackets).
_EXTRAS = compile_pattern(_SPACE + r"*[A-Za-z0-9._-]+" + _SPACE + r"*\[([^\]]*)\]")


def _never(markers: Any, extras: set[str]) -> bool:
    """Parsed marker ``markers`` (``Marker._markers``: clauses, ``"and"``, ``"or"`` and
    groups, ``and`` binding tighter) holds in no environment for any of ``extras``: each of
    its ``or`` terms has a clause ``extra == "X"`` (or ``"X" == extra``, or a group) that
    never holds, X normalized and neither asked nor ``""``.  Anything else may hold."""
    if not isinstance(markers, list) or not markers:
        return False
    terms: list[list[Any]] = [[]]
    for at, item in enumerate(markers):
        if at % 2 == 0:
            terms[-1].append(item)
        elif item == "or":
            terms.append([])
        elif item != "and":
            return False
    return all(any(_never_clause(item, extras) for item in term) for term in terms)


def _never_clause(item: Any, extras: set[str]) -> bool:
    if isinstance(item, list):
        return _never(item, extras)
    if not (isinstance(item, tuple) and len(item) == 3 and str(item[1]) == "=="):
        return False
    kinds = tuple(type(x).__name__ for x in (item[0], item[2]))
    if kinds == ("Variable", "Value") and item[0].value == "extra":
        value = item[2].value
    elif kinds == ("Value", "Variable") and item[2].value == "extra":
        value = item[0].value
    else:
        return False
    return isinstance(value, str) and normalized(value) not in extras | {""}


def for_other_extras(marker: str, extras: set[str]) -> bool:
    """Marker ``marker`` (the text after a requirement's ``;``) holds for none of
    ``extras`` (normalized) in any environment (``_never``: parsed by ``packaging``, each
    of its ``or`` terms needs an extra neither asked nor ``""``, which holds when no extra
    is asked).  Every other marker may hold, and so may every marker when ``packaging`` is
    not installed or cannot parse it (fail closed)."""
    _packaging()
    if _Marker is None:  # pragma: no cover - without packaging no marked line is skipped
        return False
    try:
        return _never(_Marker(marker)._markers, extras)
    except Exception:
        return False


def requirements(dist: Any, extras: Iterable[str] | None = ()) -> dict[str, frozenset[str]]:
    """What ``dist`` requires (``Requires-Dist``, or an egg's ``requires.txt``): each name,
    normalized, with the extras asked of it.  Every line whatever its environment marker
    (fail closed: an installed distribution a marker would leave out is pinned too), but a
    line only for extras not in ``extras`` (``for_other_extras``; ``None``: every extra,
    for the plugin itself: which extras it was installed with is not recorded).
    Raises when the metadata cannot be read, holds a line that names no distribution, or
    holds more than ``MAX_REQUIREMENTS`` lines (``TooMany``)."""
    wanted = None if extras is None else {normalized(e) for e in extras}
    found: dict[str, set[str]] = {}
    lines = list(dist.requires or ())
    if len(lines) > MAX_REQUIREMENTS:
        raise TooMany(f"more than {MAX_REQUIREMENTS} requirements ({TOO_MANY})")
    for line in lines:
        match = _NAME.match(line)
        if not match:
            raise ValueError(f"a requirement names no distribution: {line[:80]!r}")
        head, marked, marker = line.partition(";")
        if marked and wanted is not None and for_other_extras(marker, wanted):
            continue
        asked = _EXTRAS.match(head)
        more = {e.strip() for e in asked.group(1).split(",") if e.strip()} if asked else set()
        found.setdefault(normalized(match.group(1)), set()).update(more)
    return {name: frozenset(more) for name, more in sorted(found.items())}


class TooMany(ValueError):
    """A distribution's metadata holds more requirement lines than are read."""


def requirement_names(dist: Any, *, extras: bool = True) -> list[str]:
    """The names ``dist`` requires (``requirements``: every extra, or without ``extras``
    none), normalized and sorted."""
    return sorted(requirements(dist, None if extras else ()))


def _recent(keys: Iterable[tuple[int, ...]]) -> bool:
    """A key changed within ``SETTLE_NS`` (racily clean: it may change again unseen)."""
    return not provenance.settled(keys)


def _meta_path(dist: Any) -> str:
    raw = getattr(dist, "_path", None)
    try:
        return os.path.realpath(os.fspath(raw)) if raw is not None else ""
    except TypeError:
        return ""


_META_FILES = ("METADATA", "PKG-INFO", "RECORD", "requires.txt", "direct_url.json")


def _meta_keys_at(path: str) -> tuple[Any, ...]:
    """What a distribution's requirements and files were read from: its metadata
    directory's identity and each metadata file's (``("?",)`` when it has none)."""
    if not path:
        return ("?",)
    return (path, file_key(path), *(file_key(os.path.join(path, n)) for n in _META_FILES))


def _meta_keys(dist: Any) -> tuple[Any, ...]:
    return _meta_keys_at(_meta_path(dist))


def _search_dirs(extra: Iterable[str] = ()) -> list[tuple[str, tuple[int, ...]]]:
    """The entries a requirement is looked for in (``extra``, then ``sys.path``): each
    directory, and each file (a zip ``importlib.metadata`` reads distributions from), with
    its identity (``file_key``, links followed: a link pointed elsewhere, an entry added to
    or removed from the directory, or a file rewritten, changes it)."""
    found: list[tuple[str, tuple[int, ...]]] = []
    seen: set[str] = set()
    for entry in [*extra, *sys.path]:
        path = os.path.abspath(entry or os.curdir)
        if path in seen:
            continue
        seen.add(path)
        key = file_key(path)
        if len(key) == 5:
            found.append((path, key))
    return found


class _Entry(NamedTuple):
    """A metadata directory (or an egg's ``.egg-info`` file) in a search directory, or a
    distribution in a search entry that is no directory (``archive``): its path, its
    METADATA ``Name`` and the name its own name is for, both normalized ("" for a ``Name``
    that cannot be read)."""

    meta: str
    name: str
    label: str
    archive: bool = False
    egg: bool = False


def metadata_name(dist: Any) -> str:
    """``dist.metadata["Name"]`` as pip and ``importlib.metadata`` read it (the same files,
    in the same order, the same ``email`` parser), from the headers alone: the long
    description after them is not parsed (a third of a registry load's time).  Raises as
    ``importlib.metadata`` does when the metadata cannot be read or decoded."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or dist.read_text("") or ""
    # Every "\n\n" (after "\r\n" is made "\n") is a blank line, where the parser ends the
    # headers too.
    head = text.replace("\r\n", "\n").split("\n\n", 1)[0]
    name = str(HeaderParser().parsestr(head)["Name"] or "")
    # ``importlib.metadata`` dedents a folded value as RFC 822 indents it.
    return textwrap.dedent(" " * 8 + name) if "\n" in name else name


def _stamp(meta: str) -> tuple[tuple[int, ...], ...]:
    """The identity of what ``metadata_name`` reads for metadata directory ``meta``."""
    return (file_key(meta), *(file_key(os.path.join(meta, n)) for n in ("METADATA", "PKG-INFO")))


def _read_name(dist: Any) -> str:
    try:
        return normalized(metadata_name(dist))
    except Exception:  # unreadable: found by its directory's name only, never pinned
        return ""


#: Each search entry's metadata entries, by its identity, with each one's ``_stamp``.
_Found = tuple[tuple[_Entry, tuple[tuple[int, ...], ...]], ...]
_entries_memo: Memo[tuple[str, tuple[int, ...]], _Found] = Memo(256)


def _entries(path: str, key: tuple[int, ...]) -> list[_Entry]:
    """Every metadata directory in search entry ``path`` (identity ``key``), with the
    ``Name`` its METADATA gives: read again when the entry or a metadata file changed.  In
    an entry that is no directory, every distribution ``importlib.metadata`` finds there."""
    known = _entries_memo.get((path, key))
    if known is not None and all(e.archive or _stamp(e.meta) == k for e, k in known):
        return [e for e, _ in known]
    found: list[tuple[_Entry, tuple[tuple[int, ...], ...]]] = []
    if not os.path.isdir(path):
        for dist in map(bounded, importlib.metadata.distributions(path=[path])):
            where = str(getattr(getattr(dist, "_path", None), "name", "") or "?")
            label = normalized(where.rpartition(".")[0].partition("-")[0])
            entry = _Entry(os.path.join(path, where), _read_name(dist), label, True)
            found.append((entry, ()))
    else:
        try:
            listed = sorted(os.listdir(path))
        except OSError:
            return []
        # As ``importlib.metadata``'s ``Lookup`` finds them: names compared lower-cased, and
        # an egg directory's ``EGG-INFO`` (named for the egg)
        # (test_pin_routes_pth_platlib_and_eggs.py).
        base = os.path.basename(path).lower()
        for name in listed:
            low = name.lower()
            egg = base.endswith(".egg") and low == "egg-info"
            if low.endswith((".dist-info", ".egg-info")):
                label = normalized(low.rpartition(".")[0].partition("-")[0])
            elif egg:
                label = normalized(base.rpartition(".")[0].partition("-")[0])
            else:
                continue
            meta = os.path.join(path, name)
            stamp = _stamp(meta)
            read = _read_name(Bounded(Path(meta)))
            found.append((_Entry(meta, read, label, egg=egg), stamp))
    if provenance.settled([key, *(k for _, ks in found for k in ks)]):
        _entries_memo.put((path, key), tuple(found))
    return [e for e, _ in found]


def _index(searched: list[tuple[str, tuple[int, ...]]]) -> dict[str, list[_Entry]]:
    """The metadata entries of ``searched``, in search order, by the normalized name of
    their METADATA ``Name`` (what pip goes by) and by the name their directory is for."""
    index: dict[str, list[_Entry]] = {}
    for path, key in searched:
        for entry in _entries(path, key):
            keys = {entry.name, entry.label} - {""}
            if not entry.name or not _named_for(entry.label, entry.name):
                # Named for no distribution its ``Name`` gives: found for every name its
                # directory's name begins with (pip's rule), and pinned for none.
                parts = entry.label.split("-")
                keys |= {"-".join(parts[:n]) for n in range(1, len(parts))}
            for name in sorted(keys):
                index.setdefault(name, []).append(entry)
    return index


def _named_for(label: str, name: str) -> bool:
    """A metadata directory named for ``label`` may be distribution ``name``'s (pip
    accepts a wheel's whose normalized name begins with the distribution's)."""
    return label == name or label.startswith(name + "-")


def _installed(name: str, index: dict[str, list[_Entry]]) -> list[tuple[Any, str]]:
    """Every distribution of the normalized ``name`` in ``index`` (each metadata directory
    once): those whose METADATA ``Name`` is ``name``, and those whose directory is named
    for it, each with why it cannot be pinned ("" when it can): a directory named for one
    distribution whose METADATA names another (pip knows it by its ``Name``, the import
    system by its files), or named for none that the ``Name`` begins (pip accepts a
    wheel's metadata directory whose normalized name begins with the distribution's)."""
    seen: set[str] = set()
    found: list[tuple[Any, str]] = []
    for entry in index.get(name, ()):
        real = os.path.realpath(entry.meta)
        if real in seen:
            continue
        seen.add(real)
        where = os.path.basename(entry.meta)
        problem = ""
        if entry.archive:
            problem = (
                f"it is installed in {os.path.basename(os.path.dirname(entry.meta))!r}, "
                f"not in a directory: its code is not pinned ({ARCHIVE})"
            )
        elif entry.egg:
            egg = os.path.basename(os.path.dirname(entry.meta))
            problem = (
                f"it is installed as the egg directory {egg!r}, which has no RECORD: "
                f"which files are its code cannot be told ({EGG})"
            )
        elif not entry.name:
            problem = f"the METADATA Name of {where!r} cannot be read ({NAME_MISMATCH})"
        elif not _VALID_NAME.fullmatch(entry.name):
            problem = f"its METADATA Name is not a valid distribution name ({BAD_METADATA})"
        elif entry.name != name:
            problem = f"its metadata directory {where!r} is not named for its METADATA Name"
        elif not _named_for(entry.label, name):
            problem = f"its metadata directory {where!r} is named for another distribution"
        if problem and not problem.endswith(")"):
            problem = f"{problem} ({NAME_MISMATCH})"
        found.append((Bounded(Path(entry.meta)), problem))
    return found


#: ``_site_requirement`` remembered by line: what it decides is the line's and this
#: interpreter's alone (a marker's environment, no extra), and parsing it was a third of a
#: ``site_names`` read.
_requirements_memo: Memo[str, str] = Memo(8192)


def _site_requirement(line: str) -> str:
    known = _requirements_memo.get(line)
    if known is None:
        known = _read_requirement(line)
        _requirements_memo.put(line, known)
    return known


#: ``dist.requires`` of a site distribution, keyed by ``_meta_keys`` (its metadata
#: directory's and files' identities), kept once they have settled (``provenance.settled``).
_requires_memo: Memo[tuple[Any, ...], tuple[str, ...]] = Memo(1024)


def _site_requires(dist: Any, keys: tuple[Any, ...]) -> tuple[str, ...]:
    """``dist.requires`` (its METADATA parsed in full: the other third of a ``site_names``
    read), remembered by ``keys`` while no file of it changed."""
    known = _requires_memo.get(keys)
    if known is None:
        known = tuple(dist.requires or ())
        if len(keys) > 1 and not _recent(keys[1:]):
            _requires_memo.put(keys, known)
    return known


def _read_requirement(line: str) -> str:
    """The normalized name a line of a site distribution's metadata requires in this
    environment, or "": a line whose environment marker is false here for no extra, or one
    that cannot be read (or, without ``packaging``, any marked line: not the site's, so a
    plugin requiring it pins it; fail closed)."""
    _packaging()
    if _Requirement is None:  # without packaging: no marker is evaluated
        match = None if ";" in line else _NAME.match(line)
        return normalized(match.group(1)) if match else ""
    try:
        required = _Requirement(line)
        if required.marker is not None and not required.marker.evaluate({"extra": ""}):
            return ""
    except Exception:
        return ""
    return normalized(required.name)


#: ``site_names`` remembered: the directories' identities -> names.
_site_memo: dict[Any, frozenset[str]] = {}


def site_names() -> frozenset[str]:
    """The site's own requirement set: ``django-webfetch`` and the closure of its
    requirements as installed on ``sys.path``, by METADATA ``Name``: each line whose
    environment marker holds here (no extra: an extra's distributions, ``celery`` or
    ``django-cms``, need not be the site's, and a plugin that requires one pins it) and
    whose distribution is installed (``tzdata`` for Django on win32 is not the site's on
    Linux), once: a name installed more than once on ``sys.path`` is not the site's, nor
    what its copies require.  Empty when ``django-webfetch`` is not installed as a
    distribution, or is more than once (then every requirement of a plugin is pinned)."""
    searched = _search_dirs()
    dir_keys = tuple(searched)
    known = _site_memo.get(dir_keys)
    if known is not None:
        return known
    index = _index(searched)
    names: set[str] = set()
    looked: set[str] = set()
    metas: list[tuple[str, tuple[Any, ...]]] = []
    queue = [normalized(SITE_DISTRIBUTION)]
    while queue and len(names) < 10 * MAX_DISTRIBUTIONS:
        name = queue.pop()
        if name in looked:
            continue
        looked.add(name)
        copies = _installed(name, index)
        if len(copies) != 1 or copies[0][1]:
            # Not installed here; or several copies, of which one is what the site
            # installed and the others anyone's (a dependency's wheel may ship a copy of a
            # site distribution's metadata in ``.data/purelib``:
            # test_pin_routes_site_metadata_and_entry_objects.py), which cannot be told apart: none
            # is followed (fail closed: a plugin requiring the name pins every copy); or a copy that
            # cannot be pinned.  A single copy is the one ``importlib.metadata`` resolves
            # (``_index`` finds a superset of the directories its ``Lookup`` matches).
            continue
        names.add(name)
        for dist in [copies[0][0]]:
            keys = _meta_keys(dist)
            metas.append((_meta_path(dist), keys))
            with contextlib.suppress(Exception):
                lines = list(_site_requires(dist, keys))
                if len(lines) <= MAX_REQUIREMENTS:
                    required = {_site_requirement(line) for line in lines} - {""}
                    queue.extend(sorted(required - looked))
    result = frozenset(names)
    # Remembered by the identity of the directories searched: installing, upgrading or
    # removing a distribution there adds or removes its metadata directory (a metadata
    # file edited in place is the site's own code changed, which no plugin pin guards).
    if not _recent([k for _, k in dir_keys]) and not any(
        _recent(k[1:]) for _, k in metas if len(k) > 1
    ):
        _site_memo.clear()
        _site_memo[dir_keys] = result
    return result


#: The suffixes of a file the import system loads as a module (source, bytecode,
#: extension; ``importlib.machinery.all_suffixes`` and the legacy ones), lower-cased.
_CODE_SUFFIXES = tuple(
    {s.lower() for s in importlib.machinery.all_suffixes()} | {".py", ".pyc", ".pyo", ".pyd", ".so"}
)


class _Node(NamedTuple):
    """A distribution of a closure as found (its files' digests are computed at each use);
    ``files``: the files its ``RECORD`` lists that are in none of ``tops`` (``_scan``), as
    (the row, relative to ``base``, the absolute path)."""

    name: str
    version: str
    base: str
    tops: tuple[str, ...]
    meta: str
    problem: str
    files: tuple[tuple[str, str], ...] = ()


#: What an installer writes into a metadata directory about the install, not from the
#: wheel (the tool, whether it was asked for, where from: ``direct_url.json`` is read for
#: an editable install, which cannot be pinned), and ``RECORD`` (the list whose files are
#: pinned; ``METADATA`` is pinned by itself): left out of a dependency's pinned files.
_INSTALLER_FILES = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "METADATA"})


def _is_meta_dir(parts: list[str], at: int) -> bool:
    """Path part ``at`` of ``parts`` names a metadata directory (``importlib.metadata``
    finds ``*.dist-info``, ``*.egg-info`` and an egg's ``EGG-INFO``, in any case)."""
    low = parts[at].lower()
    egg = at > 0 and low == "egg-info" and parts[at - 1].lower().endswith(".egg")
    return low.endswith((".dist-info", ".egg-info")) or egg


def _tops(dist: Any, base: str) -> tuple[tuple[str, ...], str]:
    """The top-level names ``dist`` installs under ``base`` (``_scan``), or why its code
    cannot be told apart."""
    tops, _files, why = _scan(dist, base)
    return tops, why


def _scan(dist: Any, base: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...], str]:
    """The top-level names ``dist`` installs under ``base`` (from its ``RECORD``, and its
    ``top_level.txt``) and every other file its ``RECORD`` lists that is pinned by its
    bytes (a file outside ``base``: a shared library ``libx.so.1`` in ``<prefix>/lib``,
    a script, a data file; a file of its own metadata directory but ``_INSTALLER_FILES``;
    a top-level file named for no module), or why its code cannot be told apart: no
    ``RECORD``, an editable install whose code is elsewhere, a path configuration file, a
    module outside ``base`` (the import system may load it from another ``sys.path``
    entry, beside files no ``RECORD`` lists), or a file written into a metadata directory
    not its own (another distribution's metadata, or a copy of it: which distributions
    are installed, and the site's own, are read from them;
    test_pin_routes_site_metadata_and_entry_objects.py)."""
    with contextlib.suppress(Exception):
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        if isinstance(direct, dict) and (direct.get("dir_info") or {}).get("editable"):
            return (), (), "installed in editable mode: its code is not in its directory"
    try:
        record = dist.read_text("RECORD")
    except Exception as exc:
        return (), (), f"its RECORD cannot be read ({type(exc).__name__})"
    if record is None:
        return (), (), "it has no RECORD: which files are its code cannot be told"
    try:
        rows = provenance.record_paths(record)  # as pip writes and importlib reads it
    except Exception as exc:
        return (), (), f"its RECORD cannot be read ({type(exc).__name__})"
    own = _meta_path(dist)
    names: set[str] = set()
    files: dict[str, str] = {}
    root = base.rstrip(os.sep) + os.sep
    for raw in rows:
        row = raw.replace("\\", "/")
        if row.rpartition("/")[2].lower().endswith(".pth"):
            # site.py adds the directories a path configuration file names to ``sys.path``
            # and runs its ``import`` lines: code outside the distribution's directory.
            why = f"it installs a path configuration file ({row[-80:]!r})"
            return (), (), f"{why}: code it puts on sys.path is not in its directory ({PATH_FILE})"
        target = os.path.normpath(os.path.join(base, row))
        inside = target.startswith(root)
        parts = target[len(root) :].split(os.sep) if inside else target.split(os.sep)
        # A metadata directory at the top of its directory (a nested one is in a package,
        # pinned with it), or anywhere outside it.
        meta_at = next((n for n, p in enumerate(parts[:-1]) if _is_meta_dir(parts, n)), -1)
        if (meta_at == 0 and os.path.join(base, parts[0]) != own) or (meta_at > 0 and not inside):
            why = f"it writes into a metadata directory not its own ({row[-80:]!r})"
            return (), (), f"{why}: it makes another distribution's metadata ({FOREIGN_METADATA})"
        if not inside:
            if row.lower().endswith(_CODE_SUFFIXES):
                # A module outside its directory (a ``.data/platlib`` package installed
                # into ``lib64`` beside ``lib``): code it imports that no pin covers.
                why = f"it installs code outside its directory ({row[-80:]!r})"
                return (), (), f"{why}: its pin cannot cover it ({OUTSIDE})"
            # A shared library (``libx.so.1``, loaded by ``ctypes`` or an extension's
            # ``RPATH``), a script or a data file: pinned by its bytes.
            files[os.path.relpath(target, base)] = target
            continue
        head = parts[0]
        if len(parts) == 1 and _is_meta_dir(parts, 0):
            continue  # a row naming a metadata directory itself
        if meta_at == 0:  # its own
            if len(parts) > 2 or parts[1] not in _INSTALLER_FILES:
                files[os.path.relpath(target, base)] = target
            continue
        if len(parts) == 1 or (head == CACHE_DIR and len(parts) == 2):
            head = parts[-1].partition(".")[0]
        if head:
            names.add(head)
        else:  # a top-level file no module is named for (``.libx.so.1``)
            files[os.path.relpath(target, base)] = target
    with contextlib.suppress(Exception):
        for line in (dist.read_text("top_level.txt") or "").splitlines():
            top = line.strip().replace("\\", "/").split("/")[0].split(".")[0]
            if top:
                names.add(top)
    return tuple(sorted(names)), tuple(sorted(files.items())), ""


#: Closures remembered: (plugin metadata path, directory keys) -> (metadata keys, nodes).
_closures: Memo[tuple[Any, ...], tuple[tuple[Any, ...], tuple[_Node, ...]]] = Memo(256)


def _nodes(dist: Any, extra_dirs: list[str]) -> tuple[_Node, ...]:
    """The distributions of ``dist``'s requirement closure outside the site's own set
    (``site_names``), found by METADATA ``Name`` in ``extra_dirs`` (the plugin's own
    directory) and on ``sys.path`` (every copy of a name), breadth first, each name once (a
    cycle ends there; a name asked again with another extra is read again for that extra's
    lines); a name no directory holds is a node without a version.  A site name asked with
    an extra (``httpx[socks]``) is not pinned, but the lines of that extra are followed.
    At most ``MAX_DISTRIBUTIONS`` names are looked up, installed or not.  Remembered by the
    identity of the directories searched and of every metadata file read."""
    searched = _search_dirs(extra_dirs)
    memo_key = (_meta_path(dist), tuple(searched))
    known = _closures.get(memo_key)
    if known is not None and all(_meta_keys_at(k[0]) == k for k in known[0]):
        return known[1]
    site = site_names()
    index = _index(searched)
    metas: list[tuple[Any, ...]] = [_meta_keys(dist)]
    try:
        first = requirements(dist, None)
    except Exception as exc:
        return (_Node("?", "", "", (), "", _unreadable(exc)),)
    asked: dict[str, set[str]] = {}
    queue: list[str] = []

    def ask(required: str, more: Iterable[str]) -> None:
        more = set(more)
        if required in site and not more:
            return  # the site's own, as the site installs it
        if required not in asked:
            asked[required] = more
            queue.append(required)
        elif not more <= asked[required]:
            asked[required] |= more
            queue.append(required)

    for required, more in first.items():
        ask(required, more)
    expanded: dict[str, set[str]] = {}
    #: Each name looked up: its copies, each a node (``None`` for a site name's copy, read
    #: for an extra's lines only) and the distribution (``None`` when not installed).
    found: dict[str, list[tuple[_Node | None, Any]]] = {}
    count = 0
    while queue:
        name = queue.pop(0)
        extras = set(asked[name])
        if name in expanded and extras <= expanded[name]:
            continue
        if name not in found:
            copies = _installed(name, index)
            if count + max(1, len(copies)) > MAX_DISTRIBUTIONS:
                over = f"more than {MAX_DISTRIBUTIONS} dependencies ({TOO_MANY})"
                found[name] = [(_Node(name, "", "", (), "", over), None)]
                break
            count += max(1, len(copies))
            found[name] = [_node(name, copy, problem, name in site) for copy, problem in copies]
            metas.extend(_meta_keys(copy) for copy, _ in copies)
            if not found[name]:
                found[name].append((_Node(name, "", "", (), "", ""), None))
        expanded[name] = extras
        for at, (node, copy) in enumerate(found[name]):
            if copy is None or (node is not None and node.problem):
                continue
            try:
                wanted = requirements(copy, extras)
            except Exception as exc:
                mark = node or _Node(name, "?", "", (), _meta_path(copy), "")
                found[name][at] = (mark._replace(problem=_unreadable(exc)), copy)
                continue
            for required, more in wanted.items():
                ask(required, more)
    result = tuple(node for copies in found.values() for node, _ in copies if node is not None)
    if not _recent(k for _, k in searched) and not any(_recent(m[1:]) for m in metas):
        _closures.put(memo_key, (tuple(metas), result))
    return result


def found(dist: Any, path: str) -> tuple[_Node, ...]:
    """The distributions of plugin distribution ``dist``'s requirement closure (its code in
    directory ``path``) as found (``_nodes``: remembered, no code file read): each one's
    name, version, directory, top-level names, metadata directory, why it cannot be pinned
    and its other files; what a manifest read's outcome is remembered by
    (``registry._inputs_stamp``)."""
    if dist is None:
        return ()
    return _nodes(dist, [os.path.realpath(path)] if path else [])


def _unreadable(exc: Exception) -> str:
    if isinstance(exc, TooMany):
        return str(exc)
    return f"its requirements cannot be read ({type(exc).__name__})"


def _node(name: str, copy: Any, problem: str, site: bool) -> tuple[_Node | None, Any]:
    """Installed distribution ``copy`` of the normalized ``name`` as a node (``None`` for
    a copy of a site name that can be pinned: it is the site's own)."""
    if site and not problem:
        return None, copy
    try:
        label = str(copy.metadata["Name"] or "")
        version = str(copy.metadata["Version"] or "")
        base = os.path.realpath(os.fspath(copy.locate_file("")))
        tops, files, why = _scan(copy, base)
    except Exception as exc:
        label, version, base, tops, files = name, "?", "", (), ()
        why = f"its metadata cannot be read ({type(exc).__name__})"
    bad = invalid(label, version)
    if bad:  # what it says is neither shown nor compared
        label, version = name, "?"
    problem = problem or bad or why
    return _Node(label, version, base, tops, _meta_path(copy), problem, files), copy


def _file_sha256(full: str, key: tuple[int, ...]) -> str:
    """SHA-256 of the bytes of file ``full`` (``key``: its ``file_key``), or "" when it is
    not a regular file, cannot be read, or reads otherwise than its size (a ``/proc`` file
    says 0 bytes, a ``/sys`` one 4096): read as ``provenance.read_each`` reads (at most
    its size and one byte, decided on the opened descriptor), so the bound of
    ``MAX_BYTES``, decided from sizes before any file is read, holds by construction.
    Remembered by the file's identity (``provenance.file_sha256``)."""
    if len(key) != 5:
        return ""
    try:
        return provenance.file_sha256(full, key)
    except OSError:  # ReadRefused among them
        return ""


def dependencies(dist: Any, path: str) -> tuple[Dependency, ...]:
    """The requirement closure of plugin distribution ``dist`` (its code in directory
    ``path``), outside the site's own set: each installed distribution with the digest of
    its code (each top-level name it installs, as ``provenance.code_digest`` digests a
    plugin's, its ``METADATA`` and every other file its ``RECORD`` lists: ``_scan``),
    sorted by name and directory; bounded in
    distributions, files and bytes (past a bound, one entry says so and no pin holds)."""
    if dist is None:
        return ()
    extra = [os.path.realpath(path)] if path else []
    files = size = 0
    found: list[Dependency] = []
    for node in _nodes(dist, extra):
        if not node.version or node.problem:
            found.append(Dependency(node.name, node.version, "", node.base, node.problem))
            continue
        total = hashlib.sha256()
        problem = ""
        over = False
        for top in node.tops:
            # The budget left is checked from each file's ``stat`` before any is read.
            tree = provenance.code_tree(
                node.base, top, max_files=MAX_FILES - files, max_bytes=MAX_BYTES - size
            )
            if isinstance(tree, str):
                over = tree.startswith("more than ")
                problem = (
                    f"the dependencies hold more than {MAX_FILES} files or {MAX_BYTES} bytes"
                    if over
                    else f"its package {top!r}: {tree}"
                )
                break
            digest, count, bytes_ = tree
            files += count
            size += bytes_
            total.update(provenance.text_bytes(f"{top}\0{digest}\n"))
        if node.files and not problem:
            # Each other file its RECORD lists (``_scan``), its size counted before any is
            # read; one that is no regular file, or reads otherwise than its size, cannot
            # be pinned.
            keys = [provenance.file_key(full) for _row, full in node.files]
            bytes_ = sum(k[2] for k in keys if len(k) == 5)
            if files + len(keys) > MAX_FILES or size + bytes_ > MAX_BYTES:
                over = True
                problem = f"the dependencies hold more than {MAX_FILES} files or {MAX_BYTES} bytes"
            files += len(keys)
            size += bytes_
            for (row, full), key in zip(node.files, keys, strict=True):
                if over:
                    break
                sha = _file_sha256(full, key) if len(key) == 5 else "missing"
                if not sha:
                    problem = f"its file {row[-80:]!r} is no regular file of a stable size"
                    break
                total.update(provenance.text_bytes(f"file\0{row}\0{sha}\n"))
        try:
            meta = provenance.file_sha256(os.path.join(node.meta, "METADATA")) if node.meta else ""
        except OSError as exc:  # no regular file, or one giving more than it holds
            meta, problem = "", problem or f"its METADATA cannot be read ({exc})"
        total.update(provenance.text_bytes(f"METADATA\0{meta or 'unreadable'}\n"))
        found.append(Dependency(node.name, node.version, total.hexdigest(), node.base, problem))
        if over:
            break
    return tuple(sorted(found, key=lambda d: (normalized(d.name), d.where, d.version)))


def packages(dist: Any, path: str) -> list[tuple[str, str, str]]:
    """Every top-level package or module of ``dist``'s dependency closure (``_nodes``) as
    (the distribution, its directory, the name), for the compiled-code check."""
    if dist is None:
        return []
    extra = [os.path.realpath(path)] if path else []
    return [
        (f"{node.name} {node.version}", node.base, top)
        for node in _nodes(dist, extra)
        if node.version and not node.problem
        for top in node.tops
    ]


#: ``record_files`` remembered by the identity of the ``RECORD`` read.
_record_memo: Memo[tuple[Any, ...], frozenset[str]] = Memo(256)


def record_files(meta: str, base: str) -> frozenset[str] | None:
    """The resolved path of each file the ``RECORD`` of metadata directory ``meta`` lists
    (its rows are relative to ``base``), or ``None`` when it has none or it cannot be read;
    remembered by the ``RECORD``'s identity."""
    if not meta or not base:
        return None
    record = os.path.join(meta, "RECORD")
    key = file_key(record)
    if len(key) != 5:
        return None
    memo_key = (record, base, key)
    known = _record_memo.get(memo_key)
    if known is not None:
        return known
    try:
        text = provenance.read_bounded(record, provenance.METADATA_MAX_BYTES).decode("utf-8")
        rows = provenance.record_paths(text.replace("\r\n", "\n").replace("\r", "\n"))
    except Exception:
        return None
    found = frozenset(
        os.path.realpath(os.path.join(base, row.replace("\\", "/"))) for row in rows if row
    )
    if provenance.settled([key]):
        _record_memo.put(memo_key, found)
    return found


def owned_files(dist: Any, path: str, top: str) -> dict[str, frozenset[str] | None]:
    """Each top-level name plugin ``top`` of ``dist`` (in ``path``) imports pinned code
    from (``own_packages`` and ``packages``) -> the resolved path of each file that a
    pinned distribution providing that name lists in its ``RECORD``, or ``None`` when one
    of them lists none (a directory put on ``sys.path`` by hand, a plugin directory's
    package): every file below that name is then its own.  What ``loader.claim`` serves
    only from pinned bytes (decision 0054): a namespace package's directory is shared by
    distributions, and the files of one no pin covers are not the plugin's."""
    owned: dict[str, frozenset[str] | None] = {}

    def add(name: str, files: frozenset[str] | None) -> None:
        if name in owned and owned[name] is None:
            return
        owned[name] = None if files is None else (owned.get(name) or frozenset()) | files

    found = _own(dist) if dist is not None else _NONE
    own, why = _placed(found, os.path.realpath(path) if path else "", top)
    mine = record_files(found.meta, found.base) if not why else None
    for directory, name in own:
        # The entry point's package is imported from ``path``: its RECORD rows name files
        # of the distribution's own directory, so they say what it holds only when both
        # are the same directory.
        add(name, mine if os.path.realpath(directory) == found.base else None)
    if dist is not None:
        extra = [os.path.realpath(path)] if path else []
        for node in _nodes(dist, extra):
            if node.version and not node.problem:
                listed = record_files(node.meta, node.base)
                for name in node.tops:
                    add(name, listed)
    return owned


def pinned_digest(code: str, deps: Iterable[Dependency]) -> str:
    """The digest trust pins: the plugin's code digest alone when it has no dependency
    outside the site's set (a pin recorded before decision 0051 still holds), else SHA-256
    over it and each dependency's name, version and digest (a missing one as such).  A
    dependency that cannot be pinned makes a digest no pin holds for."""
    deps = list(deps)
    if not deps:
        return code
    # No pin holds: a new digest at each call, registered with why (``provenance._unpinned``)
    # so that a registry load compares why, not it (or every look-up would load again).
    why = unpinnable(deps) or provenance.unpinned_why(code)
    if why:
        return provenance._unpinned(f"dependencies: {why}")
    total = hashlib.sha256(provenance.text_bytes(f"code\0{code}\n"))
    for dep in deps:
        total.update(
            provenance.text_bytes(f"dep\0{normalized(dep.name)}\0{dep.version}\0{dep.digest}\n")
        )
    return total.hexdigest()


#: At most this many top-level names of a plugin's own distribution are pinned; a
#: distribution that installs (or lists) more cannot be (``own_names``).
MAX_OWN_NAMES = 256
#: The files of a plugin distribution's metadata directory that decide what runs, pinned
#: with its code: which object each entry point loads (``entry_points.txt``) and what it
#: requires (``METADATA``, as a dependency's).
OWN_METADATA = ("entry_points.txt", "METADATA")


class _Own(NamedTuple):
    """What ``own_names`` found for a distribution: its metadata directory and the
    directory it installs its files in (both resolved), its names and why they cannot be
    told ("" when they can)."""

    meta: str
    base: str
    names: tuple[str, ...]
    problem: str


#: ``_own`` remembered by the identity of every file and directory it was read from.
_own_memo: Memo[tuple[Any, ...], _Own] = Memo(1024)


def _dist_base(dist: Any) -> str:
    """The directory ``dist`` installs its files in (``RECORD`` rows are relative to it)."""
    try:
        return str(os.path.realpath(os.fspath(dist.locate_file(""))))
    except Exception:
        return ""


def own_names(dist: Any) -> tuple[tuple[str, ...], str]:
    """Every top-level name plugin distribution ``dist`` installs in its directory, sorted,
    or why they cannot be told: the top-level name of each of its entry points (of every
    group), of each row of its ``RECORD`` and each line of its ``top_level.txt`` (what the
    registry credits it with, ``registry._installed_names``); without ``RECORD`` (a
    directory put on ``sys.path`` by hand), every top-level entry of its directory (as the
    registry credits it).  A trusted plugin may import any of them at first use: each is
    pinned with its code (``own_digest``) and checked at every trusted call
    (``registry.code_problem``; tests/plugins/test_pin_covers_the_whole_distribution.py).  A
    ``RECORD`` row outside its directory or of a path configuration file, or more than
    ``MAX_OWN_NAMES`` names, cannot be pinned (the registry refuses such a distribution
    anyway)."""
    if dist is None:
        return (), ""
    found = _own(dist)
    return found.names, found.problem


def _own(dist: Any) -> _Own:
    """``own_names`` with the directories, remembered by the identity of the metadata
    directory and the files read from it and, without ``RECORD``, of the directory (and
    its ``__pycache__``) named from."""
    raw = getattr(dist, "_path", None)
    try:
        where = os.path.abspath(os.fspath(raw)) if raw is not None else ""
    except TypeError:
        where = ""
    memo_key: tuple[Any, ...] | None = None
    if where:
        keys = [file_key(os.path.join(where, n)) for n in ("RECORD", "top_level.txt")]
        keys += [file_key(where), file_key(os.path.join(where, "entry_points.txt"))]
        if len(keys[0]) != 5:  # no RECORD: named from its directory's entries
            parent = os.path.dirname(where)
            keys += [file_key(parent), file_key(os.path.join(parent, CACHE_DIR))]
        if provenance.settled(keys):
            memo_key = (where, tuple(keys))
            known = _own_memo.get(memo_key)
            if known is not None:
                return known
    base = _dist_base(dist)
    found = _Own(_meta_path(dist), base, *_own_names(dist, base))
    if memo_key is not None:
        _own_memo.put(memo_key, found)
    return found


def _own_names(dist: Any, base: str) -> tuple[tuple[str, ...], str]:
    names: set[str] = set()
    try:
        for ep in dist.entry_points:
            top = str(ep.value).partition(":")[0].strip().split(".")[0]
            if top.isidentifier():
                names.add(top)
        record = dist.read_text("RECORD")
        declared = dist.read_text("top_level.txt")
    except Exception as exc:
        return (), f"its metadata cannot be read ({type(exc).__name__})"
    if record is None:
        try:
            entries = os.listdir(base) if base else []
        except OSError as exc:
            return (), f"its directory cannot be listed ({exc.strerror})"
        rows = [e for e in entries if e != CACHE_DIR]
        rows += [f"{CACHE_DIR}/{e}" for e in _listing(os.path.join(base, CACHE_DIR))]
    else:
        try:
            rows = provenance.record_paths(record)
        except Exception as exc:
            return (), f"its RECORD cannot be read ({type(exc).__name__})"
    root = base.rstrip(os.sep) + os.sep
    for raw in rows:
        row = raw.replace("\\", "/")
        if row.rpartition("/")[2].lower().endswith(".pth"):
            return (), f"it installs a path configuration file ({row[-80:]!r})"
        target = os.path.normpath(os.path.join(base, row))
        if not target.startswith(root):
            return (), f"it installs {row[-80:]!r} outside its directory"
        parts = target[len(root) :].split(os.sep)
        if parts[0].lower().endswith((".dist-info", ".egg-info")):
            continue
        if len(parts) == 1 or (parts[0] == CACHE_DIR and len(parts) == 2):
            names.add(parts[-1].partition(".")[0])  # a module, its extension, its .pyc
        else:
            names.add(parts[0])
    for line in (declared or "").splitlines():
        names.add(line.strip().replace("\\", "/").split("/")[0].split(".")[0])
    names.discard("")
    if len(names) > MAX_OWN_NAMES:
        return (), f"it installs more than {MAX_OWN_NAMES} top-level names"
    return tuple(sorted(names)), ""


def _listing(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def own_packages(dist: Any, path: str, top: str) -> tuple[list[tuple[str, str]], str]:
    """Where each top-level name of plugin ``top``'s distribution is imported from, as
    (directory, name), or why they cannot be told (``own_names``): ``top`` in ``path``
    (where the registry imports the entry point's code from), every other name in the
    distribution's own directory."""
    return _placed(_own(dist) if dist is not None else _NONE, path, top)


_NONE = _Own("", "", (), "")


def _placed(found: _Own, path: str, top: str) -> tuple[list[tuple[str, str]], str]:
    if found.problem:
        return [], found.problem
    others = [name for name in found.names if name != top]
    if others and not found.base:
        return [], "its directory cannot be told"
    return [(path, top), *((found.base, name) for name in others)], ""


def own_digest(dist: Any, path: str, top: str, entry: str = "") -> str:
    """SHA-256 (hex) of what plugin ``top`` of distribution ``dist`` runs in the site's
    process, its dependencies left out: the entry point's value (``entry``, the
    ``module:attribute`` the registry loads), the files of every top-level name its
    distribution installs (``own_packages``: each as ``provenance.code_digest`` digests a
    package) and its ``OWN_METADATA`` files (which object each entry point loads, what it
    requires).  A digest no pin holds for when any of them cannot be told, or its files
    are more than ``provenance.WALK_ENTRIES`` (decided from each file's ``stat`` before
    any is read): issue 30, attack 12, findings 2 and 3."""
    if not path:
        return ""
    found = _own(dist) if dist is not None else _NONE
    packages, why = _placed(found, path, top)
    if why:
        return provenance._unpinned(f"its distribution: {why}")
    total = hashlib.sha256(provenance.text_bytes(f"entry\0{entry}\n"))
    files = size = 0
    for where, name in packages:
        try:
            tree = provenance.code_tree(
                where,
                name,
                max_files=provenance.WALK_ENTRIES - files,
                max_bytes=provenance.DIGEST_BYTES - size,
            )
        except Exception as exc:
            tree = f"its files could not be read ({type(exc).__name__})"
        if isinstance(tree, str):
            return provenance._unpinned(f"its package {name!r}: {tree}")
        files += tree[1]
        size += tree[2]
        total.update(provenance.text_bytes(f"code\0{name}\0{tree[0]}\n"))
    for name in OWN_METADATA if dist is not None else ():
        if found.meta:
            try:
                digest = provenance.file_sha256(
                    os.path.join(found.meta, name), limit=provenance.METADATA_MAX_BYTES
                )
            except OSError as exc:  # no regular file, or one giving more than it holds
                return provenance._unpinned(f"its {name} cannot be read ({exc})")
        else:  # not in a directory: read through its distribution
            try:
                text = dist.read_text(name)
            except Exception:
                text = None
            digest = (
                hashlib.sha256(provenance.text_bytes(text)).hexdigest() if text is not None else ""
            )
        total.update(provenance.text_bytes(f"meta\0{name}\0{digest or 'missing'}\n"))
    return total.hexdigest()


def trust_digest(dist: Any, path: str, top: str, entry: str = "") -> str:
    """The digest trust pins for plugin ``top`` of distribution ``dist`` in directory
    ``path`` (its entry point's value ``entry``): what it runs (``own_digest``: every
    top-level name its distribution installs, the entry point, its metadata) and the
    closure of its installed requirements outside the site's own set
    (``dependencies``); the own digest alone when there is no such dependency."""
    return pinned_digest(own_digest(dist, path, top, entry), closure_of(dist, path))


provenance.trust_digest = trust_digest  # what ``provenance.provider_of`` pins


def changed(recorded: Any, deps: Iterable[Dependency]) -> list[str]:
    """What differs between the dependencies recorded at trust (``as_record``) and
    ``deps``: each added, removed or changed distribution, said in words."""
    before: dict[str, list[str]] = {}
    for row in recorded if isinstance(recorded, list) else []:
        if isinstance(row, list) and len(row) == 3:
            before[normalized(str(row[0]))] = [str(x) for x in row]
    now = {normalized(d.name): d for d in deps}
    said = []
    for name in sorted(set(before) | set(now)):
        was, dep = before.get(name), now.get(name)
        if dep is not None and dep.problem:
            said.append(f"{dep} cannot be pinned ({dep.problem})")
        elif was is None and dep is not None:
            said.append(f"{dep} added")
        elif was is not None and dep is None:
            said.append(f"{was[0]} {was[1]} no longer required")
        elif was is not None and dep is not None and [dep.name, dep.version, dep.digest] != was:
            now_is = f"{dep}" if dep.version != was[1] else f"{dep} with other code"
            said.append(f"{was[0]} {was[1] or '(not installed)'} is now {now_is}")
    return said


def unpinnable(deps: Iterable[Dependency]) -> str:
    """Why ``deps`` cannot be pinned ("" when they can)."""
    for dep in deps:
        if dep.problem:
            return f"{dep}: {dep.problem}"
    return ""


def closure_of(dist: Any, path: str) -> tuple[Dependency, ...]:
    """``dependencies`` or, on any error reading the environment, one entry that cannot be
    pinned (fail closed)."""
    try:
        return dependencies(dist, path)
    except Exception as exc:  # an unreadable environment: no pin holds
        return (Dependency("?", "", "", "", f"unreadable ({type(exc).__name__})"),)
