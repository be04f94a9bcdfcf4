"""Issue 30, round 12 (findings 4 and 6 of ``test_pin_routes_site_metadata_and_entry_objects.py``):
what the digest, the pin and the registry read stays within a bound that holds by construction, and
what an operator is shown of a plugin's own metadata cannot draw over the rows around it.

Reads: every file is read as ``provenance.read_each`` reads it: a regular file by its
opened descriptor's ``fstat`` (a device, a FIFO, a socket refused, and never waited on), at
most its ``fstat`` size + 1 bytes (a file of ``/proc`` or ``/sys`` that gives more than it
says is refused), the bytes budget counted on the bytes read; every metadata file
(``METADATA``, ``RECORD``, ``entry_points.txt``...) through ``closure.Bounded``.  The fuzzer
puts a link to a special file (or a FIFO, or a sparse file larger than any bound) where a
package file, a module, a dependency's file or a metadata file stands, runs every reader
of the registry's load, the pin and the checks in a forked child, and counts what the
child reads (``rchar`` of ``/proc/<pid>/io``, the kernel's count): it stays under a bound
that does not depend on the target.

Shown: at most ``tools.display.MAX_MARKS`` combining marks stay on one character, on every
surface (``shown``); a plugin's own METADATA ``Name`` (PEP 508) and ``Version`` (PEP 440) are
validated as a dependency's are (``closure.invalid``): an invalid one is shown as ``?``
and no pin holds for it (``plugin_metadata_invalid``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
import time
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db

#: What the child may read, whatever the links lead to: the site's metadata (each
#: distribution's METADATA, read by the closure) and the small package below.
CEILING = 96 << 20
#: Link targets: files of ``/proc`` (0 bytes by ``stat``; ``pagemap`` reads 256 GiB,
#: ``kcore`` says 128 TiB), of ``/sys`` (a page by ``stat``), devices, a FIFO, a socket and
#: a sparse regular file larger than every bound.
SPECIAL = [
    "/proc/self/pagemap",
    "/proc/self/environ",
    "/proc/self/maps",
    "/proc/self/smaps",
    "/proc/self/status",
    "/proc/self/mem",
    "/proc/kcore",
    "/sys/devices/system/cpu/online",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/dev/zero",
    "/dev/urandom",
    "/dev/null",
    "fifo",
    "socket",
    "sparse",
]
#: Where a link stands: the plugin's package (a data file, a module, nested), its
#: dependency's package, the plugin's and the dependency's metadata files.
PLACES = [
    "webfetch_t/blob",
    "webfetch_t/x.py",
    "webfetch_t/sub/deep.bin",
    "wfdep_k/blob",
    "webfetch_t-1.0.dist-info/METADATA",
    "webfetch_t-1.0.dist-info/RECORD",
    "webfetch_t-1.0.dist-info/entry_points.txt",
    "webfetch_t-1.0.dist-info/top_level.txt",
    "wfdep_k-1.0.dist-info/METADATA",
    "wfdep_k-1.0.dist-info/RECORD",
]


def _site(root: Path, target: str, place: str) -> Path:
    """A plugin ``t`` (requiring ``wfdep-k``) and its dependency in ``root/site``, with the
    file at ``place`` replaced by ``target`` (a link, or the FIFO, socket or sparse file)."""
    site = root / "site"
    meta = {"METADATA": b"Metadata-Version: 2.1\nName: webfetch-t\nVersion: 1.0\n"
            b"Requires-Dist: wfdep-k\n", "top_level.txt": b"webfetch_t\n"}  # fmt: skip
    files = {
        "webfetch_t/__init__.py": MANIFEST % "t",
        "webfetch_t/blob": "data\n",
        "webfetch_t/x.py": "X = 1\n",
        "webfetch_t/sub/deep.bin": "deep\n",
    }
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"}, files, meta)
    wheel(site, "wfdep-k", {}, {"wfdep_k/__init__.py": "ANSWER = 1\n", "wfdep_k/blob": "x\n"})
    path = site / place
    path.unlink()
    if target == "fifo":
        os.mkfifo(path)
    elif target == "socket":
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        listener.close()
    elif target == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(1 << 30)  # 1 GiB of nothing on disk
    else:
        os.symlink(target, path)
    return site


def _every_reader(site: str) -> dict[str, str]:
    """In the child: what a registry load, the pin and the per-call checks read of the
    distributions in ``site`` (each reader's outcome, an error's name when it raised)."""
    from django.conf import settings as django_settings

    from django_webfetch.plugins import closure, provenance, registry

    django_settings.WEBFETCH_PLUGIN_DIRS = [site]
    said: dict[str, str] = {}

    def run(name: str, call) -> None:
        try:
            said[name] = str(call())[:200]
        except Exception as exc:
            said[name] = f"raised {type(exc).__name__}"

    for dist in registry._all_distributions():
        where = os.path.realpath(str(getattr(dist, "_path", "")))
        if not where.startswith(os.path.realpath(site) + os.sep):
            continue
        label = os.path.basename(where)
        run(f"{label} name", lambda d=dist: closure.metadata_name(d))
        run(f"{label} metadata", lambda d=dist: dict(d.metadata))
        run(f"{label} files", lambda d=dist: list(d.files or ()))
        run(f"{label} requires", lambda d=dist: d.requires)
        run(f"{label} names", lambda d=dist: registry._installed_names(d, [site]))
        run(f"{label} record", lambda d=dist: provenance.record_problem(d))
        run(f"{label} closure", lambda d=dist: closure.dependencies(d, site))
        eps = registry.dist_plugin_entry_points(dist)
        for ep in eps if isinstance(eps, list) else ():
            run(f"{label} provider", lambda e=ep: provenance.provider_of(e))
    run("digest", lambda: provenance.unpinned_why(provenance.code_digest(site, "webfetch_t")))
    run("compiled", lambda: provenance.compiled_problem(site, "webfetch_t"))
    run("compiled dep", lambda: provenance.compiled_problem(site, "wfdep_k", pinned=True))
    return said


def _read_in_child(site: str) -> tuple[int, dict[str, str] | None]:
    """``_every_reader`` in a forked child, watched: the bytes it read (the kernel's
    ``rchar``) and what it said (``None``: stopped past ``CEILING`` or after 120 s)."""
    out, into = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 1
        try:
            os.close(out)
            with os.fdopen(into, "w") as fh:
                fh.write(json.dumps(_every_reader(site)))
            status = 0
        finally:
            os._exit(status)
    os.close(into)
    read, started, stopped = 0, time.monotonic(), False
    while True:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        try:
            with open(f"/proc/{pid}/io") as fh:
                fields = dict(line.split(": ") for line in fh.read().splitlines())
            read = max(read, int(fields["rchar"]))
        except (OSError, KeyError, ValueError):
            pass  # it ended between two looks
        if read > CEILING or time.monotonic() - started > 120:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            stopped = True
            break
        time.sleep(0.005)
    with os.fdopen(out) as fh:
        text = fh.read()
    if stopped or not text:
        return read, None
    return read, json.loads(text)


def _warm() -> None:
    """What every child would read first, read here once (the site's own metadata: the
    closure's ``site_names`` and index of ``sys.path``, kept in memos the child inherits)."""
    from django_webfetch.plugins import closure, provenance, registry  # noqa: F401

    closure.site_names()
    closure._index(closure._search_dirs())


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SPECIAL), st.sampled_from(PLACES))
@example("/proc/self/pagemap", "webfetch_t/blob")  # the attack's
@example("/proc/self/pagemap", "webfetch_t-1.0.dist-info/METADATA")
@example("/proc/self/pagemap", "wfdep_k/blob")
@example("sparse", "webfetch_t/x.py")
@example("/dev/zero", "webfetch_t-1.0.dist-info/RECORD")
@example("fifo", "webfetch_t-1.0.dist-info/entry_points.txt")
@example("socket", "webfetch_t/blob")  # cannot even be opened (ENXIO): refused too
def test_whatever_a_link_leads_to_every_reader_reads_a_bounded_amount(target, place):
    """The property: a registry load's readers, the pin and the compiled-code checks end,
    having read less than ``CEILING`` bytes, wherever a link to whatever special file
    stands; a package holding one has a digest no pin holds for."""
    if target.startswith("/") and not os.path.exists(target):
        return  # not on this host
    _warm()
    root = Path(tempfile.mkdtemp())
    try:
        site = _site(root, target, place)
        read, said = _read_in_child(str(site))
        assert said is not None, f"still reading after {read >> 20} MiB ({target} at {place})"
        assert read <= CEILING, read
        if place.startswith("webfetch_t/") and target != "/proc/kcore":
            # A special file in the plugin's package: no pin holds (``/proc/kcore`` may not
            # open here: a file that cannot be opened is digested as such, as before).
            assert said["digest"] not in ("", "raised ReadRefused"), (target, place, said)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_file_giving_more_than_its_fstat_size_is_refused(tmp_path):
    """By construction: at most ``st_size + 1`` bytes of the opened descriptor are read
    (here a file of ``/proc``, 0 bytes by ``fstat``), and a file that gives more is refused
    (``ReadRefused``), never digested; a FIFO is refused without waiting for a writer."""
    from django_webfetch.plugins import provenance

    chunks: list[bytes] = []
    with pytest.raises(provenance.ReadRefused):
        provenance.read_each("/proc/self/status", chunks.append)
    assert sum(map(len, chunks)) == 0
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(provenance.ReadRefused):
        provenance.read_bounded(str(tmp_path / "fifo"))
    (tmp_path / "big").write_bytes(b"x" * 100)
    with pytest.raises(provenance.ReadRefused):
        provenance.read_bounded(str(tmp_path / "big"), 99)
    assert provenance.read_bounded(str(tmp_path / "big"), 100) == b"x" * 100


# -- what is shown -------------------------------------------------------------------------

_MARKS = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)).startswith("M")]
_BASES = st.characters(categories=("Lu", "Ll", "Lo", "Nd"))


def _runs(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if unicodedata.category(char).startswith("M") else 0
        longest = max(longest, run)
    return longest


@given(
    st.text(max_size=10),
    st.lists(st.tuples(_BASES, st.lists(st.sampled_from(_MARKS), max_size=40)), max_size=6),
)
@example("1.0", [("0", ["\u0336", "\u0338", "\u0301", "\u0316", "\u030d", "\u0353"] * 15)])
def test_no_character_carries_more_than_max_marks_shown(prefix, stacks):
    """The property, on every surface (``shown`` is ``visible_text``): at most
    ``MAX_MARKS`` marks stay on one character, each further one is escaped, and a run
    within it on a letter or digit is shown as it is (Vietnamese, Indic scripts)."""
    from django_webfetch.plugins.shown import shown
    from django_webfetch.tools import display

    MAX_MARKS = getattr(display, "MAX_MARKS", 3)  # noqa: N806 - the module's bound

    text = prefix + "".join(base + "".join(marks) for base, marks in stacks)
    printed = shown(text)
    assert _runs(printed) <= MAX_MARKS, printed.encode("unicode_escape")[:200]
    for base, marks in stacks:
        shown_marks = all(display._kind(m) == display._MARK for m in marks)
        if len(marks) <= MAX_MARKS and base.isalnum() and shown_marks:
            assert shown("x " + base + "".join(marks)) == "x " + base + "".join(marks)


#: No character the e-mail parser ends a header line at (``str.splitlines``).
_ONE_LINE = st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp"))
_INVALID_VERSIONS = st.one_of(
    st.builds(
        lambda v, m: v + m,
        st.sampled_from(["1.0", "2", "0.1.dev1"]),
        st.text(alphabet=_MARKS, min_size=1, max_size=30),
    ),  # fmt: skip
    st.text(_ONE_LINE, min_size=1, max_size=40).filter(lambda v: bool(v.strip())),
    st.sampled_from(["1.0 beta", "1.0\u202e", "\u0661.\u0660", "1.0\x1b[1A", "latest", "v"]),
)
_VALID_VERSIONS = st.sampled_from(["1.0", "2.0.1", "1.0rc1", "1!2.0", "0.1.dev3", "1.0+local.7"])


def _provider(root: Path, version: str, name: str = "webfetch-t"):
    from importlib.metadata import distributions

    from django_webfetch.plugins import provenance, registry

    meta = {"METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()}
    wheel(root, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"}, meta)  # fmt: skip
    (ep,) = registry.dist_plugin_entry_points(next(iter(distributions(path=[str(root)]))))
    return provenance.provider_of(ep)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_INVALID_VERSIONS, _VALID_VERSIONS))
def test_a_plugins_own_version_is_shown_and_pinned_only_when_valid(version):
    """The plugin's own METADATA ``Version`` is held to PEP 440 as a dependency's is
    (``closure.invalid``): an invalid one (stacked marks, a bidirectional override, a
    terminal escape, words) is shown as ``?`` and its digest is one no pin holds for, with
    the stable reason ``plugin_metadata_invalid``; a valid one is shown as it is."""
    from django_webfetch.plugins import closure, provenance

    root = Path(tempfile.mkdtemp())
    try:
        found = _provider(root, version)
        assert found is not None
        wrong = closure.invalid("webfetch-t", str(version).strip())
        if wrong:
            assert (found.name, found.version) == ("webfetch-t", "?"), found
            assert "plugin_metadata_invalid" in provenance.unpinned_why(found.digest)
        else:
            assert found.version == str(version).strip()
            assert not provenance.unpinned_why(found.digest), found
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("name", ["webfetch t", "webfetch-t\u0336\u0336\u0336\u0336", "-x-"])
def test_a_plugins_own_invalid_name_is_never_shown_or_pinned(tmp_path, name):
    from django_webfetch.plugins import provenance

    found = _provider(tmp_path, "1.0", name)
    assert found is not None and found.name == "?" and found.version == "?", found
    assert "plugin_metadata_invalid" in provenance.unpinned_why(found.digest)
