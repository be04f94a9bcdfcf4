"""Issue 28/30: a registry load reads a distribution's ``RECORD`` again only when it changed.

``registry._names_memo`` keeps what a distribution's files say about the top-level names it
installs (its ``RECORD`` parsed, each file resolved), keyed by the identity (device, inode,
size, modification and change times) of its metadata directory and of each file read, never
by the ``sys.path`` directories; a file changed within ``provenance.SETTLE_NS`` is read
again.  Proved here with real distributions in a temporary site: a rewrite of any kind (same
size and modification time, a rename over it, the whole metadata directory swapped) is read
at the next look-up, and a load with nothing changed reads no ``RECORD`` of the site's
distributions, whichever new directory is on ``sys.path``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from importlib.metadata import PathDistribution
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .packages import write_installed

_opened: list[str] | None = None


def _audit(event: str, args: tuple) -> None:
    name = args[0] if event == "open" and args else None
    if _opened is not None and isinstance(name, str) and os.path.basename(name) == "RECORD":
        _opened.append(os.path.realpath(name))


sys.addaudithook(_audit)  # inert unless a test sets ``_opened``


def _records_read(action) -> list[str]:
    global _opened
    _opened = []
    try:
        action()
        return _opened
    finally:
        _opened = None


def _settle() -> None:
    from django_webfetch.plugins import registry

    time.sleep(registry._SETTLE_NS / 1e9 + 0.2)  # the memo keeps only settled files


def _library(site: Path, slot: int) -> Path:
    """Distribution ``lib<slot>`` installing package ``pa<slot>xx`` (RECORD truthful)."""
    info = site / f"lib{slot}-1.0.dist-info"
    info.mkdir(parents=True)
    write_installed(site, info, {
        f"pa{slot:02d}xx/__init__.py": b"",
        f"{info.name}/METADATA": f"Metadata-Version: 2.1\nName: lib{slot}\nVersion: 1.0\n".encode(),
    })  # fmt: skip
    return info


def _names(info: Path, site: Path) -> frozenset[str]:
    from django_webfetch.plugins import closure, registry

    dist = closure.bounded(PathDistribution(info))  # a new object, as each load makes
    return registry._names_of(dist, [str(site)])[1]


def _rewrite(info: Path, old: str, new: str, how: str) -> None:
    """``info``'s RECORD made to list package ``new`` instead of ``old`` (same length)."""
    record = info / "RECORD"
    text = record.read_text().replace(old, new)
    before = os.stat(record)
    if how == "in_place":  # same size, same inode, modification time put back
        with open(record, "r+") as f:
            f.write(text)
        os.utime(record, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif how == "renamed":  # a new file renamed over it, its times those of the old
        fresh = info / "RECORD.new"
        fresh.write_text(text)
        os.utime(fresh, ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(fresh, record)
    else:  # the whole metadata directory swapped for a copy, every time put back
        copy = info.with_name(info.name + ".new")
        shutil.copytree(info, copy)
        (copy / "RECORD").write_text(text)
        for src in [info / n for n in os.listdir(info)] + [info]:
            st = os.stat(src)
            dst = copy / src.name if src != info else copy
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.rename(info, info.with_name(info.name + ".old"))
        os.rename(copy, info)


_SLOTS = 12


@settings(max_examples=_SLOTS, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    how=st.sampled_from(["in_place", "renamed", "dist_info_swapped"]),
    new=st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=2).filter(lambda s: s != "xx"),
)
def _rewritten_is_read_again(state, how, new) -> None:
    site, slot = state["site"], state["next"]
    state["next"] += 1
    assert slot < _SLOTS
    info = site / f"lib{slot}-1.0.dist-info"
    old_name, new_name = f"pa{slot:02d}xx", f"pa{slot:02d}{new}"
    assert old_name in _names(info, site)
    # Settled and unchanged: kept, no RECORD read.
    assert _records_read(lambda: _names(info, site)) == []
    before = (os.stat(info / "RECORD"), os.stat(info))
    _rewrite(info, old_name, new_name, how)
    after = (os.stat(info / "RECORD"), os.stat(info))
    # What proves the file changed: its change time (no user can set it) or its inode.
    pairs = zip(before, after, strict=True)
    assert any((b.st_ino, b.st_ctime_ns) != (a.st_ino, a.st_ctime_ns) for b, a in pairs)
    names: list[frozenset[str]] = []
    read = _records_read(lambda: names.append(_names(info, site)))
    assert str((info / "RECORD").resolve()) in read
    assert new_name in names[0] and old_name not in names[0]


def test_a_record_or_dist_info_rewritten_in_any_way_is_read_again(tmp_path, registry_on):
    """Property: a RECORD rewritten in place with its size and modification time kept, a
    RECORD renamed over, or the whole ``.dist-info`` swapped (every time put back with
    ``os.utime``) is read again at the next look-up, and the names follow it."""
    site = tmp_path / "site"
    for slot in range(_SLOTS):
        _library(site, slot)
    registry_on.syspath_prepend(str(site))
    _settle()
    _rewritten_is_read_again({"site": site, "next": 0})


def test_a_second_load_with_nothing_changed_reads_no_record(tmp_path, registry_on):
    """Two loads (``reset`` between them) with the example plugin installed in a new
    ``sys.path`` directory: the first reads the file list of every installed distribution
    (the memo cleared), the second none but the plugin's own, which the distribution check
    reads at each load to verify its files' hashes (``provenance.record_problem``).  A new
    directory on ``sys.path`` does not make the others be read again."""
    from django_webfetch.plugins import registry

    source = Path(__file__).parent / "site"
    site = tmp_path / "site"
    shutil.copytree(source, site, ignore=shutil.ignore_patterns("state.json", "__pycache__"))
    own = str((site / "webfetch_example_plugin-1.0.dist-info" / "RECORD").resolve())
    registry_on.syspath_prepend(str(site))
    _settle()
    registry._names_memo.clear()
    registry.reset()
    first = _records_read(registry.load)
    assert "example" in registry.load(), registry.problems()
    others = [p for p in first if p != own]
    assert len(set(others)) > 10, first  # the venv's distributions, each read

    registry.reset()
    second = _records_read(registry.load)
    assert "example" in registry.load(), registry.problems()
    assert [p for p in second if p != own] == []

    # Another new directory on sys.path: the site's distributions are not read again.
    other = tmp_path / "other"
    other.mkdir()
    registry_on.syspath_prepend(str(other))
    registry.reset()
    third = _records_read(registry.load)
    assert [p for p in third if p != own] == []
