"""Issue 30, attack 15, finding 2 (decision 0055): what a registry load remembers of a
manifest read is keyed by one stamp (``host.stamp``) that every package the registry accepts
has, and what it cannot remember it refuses before any plugin process.

One walk limit (``provenance.WALK_ENTRIES``, ``provenance.WALK_DEPTH``) bounds every walk over
a package: the registry's check, the digest, the stamp.  A package past it is refused
(``plugin_path_unsafe``, a stable reason) with no process started; a read that failed (a
crash, a timeout) is answered without a process for ``host.backoff`` of its failures in a
row; a verdict (a bad manifest) is kept until the files change.  Distributions are written
as pip installs them (``tests/plugins/packages.py``); the registry, the runtime and the
sandbox are the real ones, and plugin processes are counted as they start
(``host.reads_started``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import wheel

pytestmark = pytest.mark.django_db

_KINDS = {
    # Its import ends its process at once (a crash): ``RuntimeFailure``, remembered.
    "crash": "import os\nos._exit(3)\n",
    # Its import sleeps past the wall time: ``plugin_timeout``, remembered.
    "hang": "import time\ntime.sleep(3600)\n",
    # It imports, and its manifest is not one: a verdict (``manifest_invalid``...), kept.
    "bad manifest": "def manifest():\n    return {'name': 'x'}\n",
}


def _package(
    site: Path, label: str, kind: str, entries: int, linked: bool, files: _Files | None = None
) -> str:
    """Distribution ``webfetch-<label>`` in ``site`` whose package holds ``entries`` files
    and directories below its top-level name, as the registry's check counts them (half of
    its data behind a link to a directory outside the package when ``linked``).  Its empty
    data files are made here, or moved in from ``files`` (``files.put_back`` takes them
    back).  Returns the entry point's name."""
    name = f"s{label}"
    wheel(site, f"webfetch-{name}", {name: f"webfetch_{name}:manifest"},
          {f"webfetch_{name}/__init__.py": _KINDS[kind]})  # fmt: skip
    package = site / f"webfetch_{name}"
    count = entries - 2  # ``__init__.py`` and ``data``
    outside, half = None, 0
    if linked:
        outside = site / f"outside_{name}"
        count -= 1  # the link
        half = count // 2
        count -= half
    if files is not None:
        files.lend(package / "data", count, outside, half)
    else:
        _fill(package / "data", "f", 0, count)
        if outside is not None:
            _fill(outside, "g", 0, half)
    if outside is not None:
        os.symlink(outside, package / "more")
    return name


def _fill(directory: Path, prefix: str, have: int, want: int) -> None:
    """``directory`` (made if missing) holding the empty files ``<prefix>0.txt`` ...
    ``<prefix>{have - 1}.txt``: made to hold exactly ``want`` of them."""
    directory.mkdir(exist_ok=True)
    for i in range(have, want):
        os.close(os.open(directory / f"{prefix}{i}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    for i in range(want, have):
        os.unlink(directory / f"{prefix}{i}.txt")


#: The pooled files are lent in directories of this many (a directory and its files are
#: ``CHUNK + 1`` entries of the walk), and the rest one by one.
CHUNK = 1000


class _Files:
    """The property's empty data files, made once for the examples of a test process and
    lent to each example's package (renames: no file made or removed for it), then taken
    back: a package of 20 001 entries cost about 1.5 CPU seconds to write and 0.3 to remove,
    and an example of another size made or removed the difference, thousands of files.
    Each example's ``data`` (and the directory outside the package behind its link) holds
    whole directories of ``CHUNK`` empty files, lent by renaming each, and fewer than
    ``CHUNK + 1`` loose files made or removed for the rest: the same number of entries
    under the package, in a new site directory, whatever the size before."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loose = {"f": 0, "g": 0}
        self.chunks = {"f": 0, "g": 0}
        self.lent: list[tuple[Path, Path]] = []

    def _chunk(self, prefix: str, index: int) -> Path:
        """The pooled directory ``index`` of ``prefix`` (made full on first use)."""
        chunk = self.root / f"{prefix}chunks" / f"c{index}"
        if index >= self.chunks[prefix]:
            chunk.parent.mkdir(exist_ok=True)
            _fill(chunk, f"{prefix}c{index}_", 0, CHUNK)
            self.chunks[prefix] = index + 1
        return chunk

    def lend(self, data: Path, count: int, outside: Path | None, half: int) -> None:
        for prefix, target, want in (("f", data, count), ("g", outside, half)):
            if target is None:
                continue
            whole, rest = divmod(want, CHUNK + 1)
            pool = self.root / prefix
            _fill(pool, prefix, self.loose[prefix], rest)
            self.loose[prefix] = rest
            os.rename(pool, target)
            self.lent.append((target, pool))
            for index in range(whole):
                chunk = self._chunk(prefix, index)
                os.rename(chunk, target / chunk.name)
                self.lent.append((target / chunk.name, chunk))

    def put_back(self) -> None:
        while self.lent:
            target, pool = self.lent.pop()
            try:
                os.rename(target, pool)
            except OSError:  # the example removed or replaced it: made again next time
                shutil.rmtree(pool, ignore_errors=True)
                if pool.parent == self.root:
                    self.loose[pool.name] = 0
                else:  # a chunk: the pool's chunks from it on are made again
                    prefix = pool.parent.name[0]
                    self.chunks[prefix] = min(self.chunks[prefix], int(pool.name[1:]))


@pytest.fixture(scope="module")
def data_files() -> Iterator[_Files]:
    root = Path(tempfile.mkdtemp(prefix="webfetch-stamps-files-"))
    try:
        yield _Files(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _reads_allowed(elapsed: float) -> int:
    """How many further reads of a package whose reads keep failing ``host.backoff`` lets
    start within ``elapsed`` seconds of its first failure."""
    from django_webfetch.plugins.runtime import host

    reads, waited = 0, 0.0
    while True:
        waited += host.backoff(reads + 1)
        if waited > elapsed:
            return reads
        reads += 1


def _reasons(name: str) -> list[str]:
    from django_webfetch.plugins import registry

    return [p for p in registry.problems() if f"entry point {name!r} " in p]


#: Package sizes (entries below the top-level name) around every limit a stamp had
#: (``registry._stamp``: 5 000 files, ``host._stamp``: 10 000 entries) and around the walk
#: limit every walk now shares (``provenance.WALK_ENTRIES``: 20 000).
_SIZES = [3, 5_000, 5_002, 10_000, 10_002, 19_999, 20_000, 20_001]


@pytest.mark.long  # tens of seconds of plugin processes: started first (tests/conftest.py)
@given(
    size=st.sampled_from(_SIZES),
    kind=st.sampled_from(sorted(_KINDS)),
    linked=st.booleans(),
)
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_package_makes_every_load_start_a_plugin_process(
    registry_on, settings, data_files, size, kind, linked
):
    """Property: a package of any size around every limit, whose read crashes, hangs or
    gives no valid manifest: the first load starts at most one plugin process (none for a
    package past the walk limit, refused ``plugin_path_unsafe``); the next loads (each a
    new generation, ``registry.reset()``) start at most what ``host.backoff`` lets start
    in the time they took (none within its first window), and give the same reason."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.runtime import host

    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 1  # a hang ends at its wall time, soon
    site = Path(tempfile.mkdtemp(prefix="webfetch-stamps-"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            label = f"{size}{kind[0]}{int(linked)}"
            name = _package(site, label, kind, size, linked, data_files)
            patch.syspath_prepend(str(site))
            origin = host.Origin(f"webfetch_{name}:manifest", str(site), f"webfetch_{name}")
            over = size > provenance.WALK_ENTRIES
            # The check and the stamp agree: a package the registry accepts has a stamp.
            assert (registry._path_problem(origin) != "") == over
            if over:
                with pytest.raises(host.RuntimeFailure) as refused:
                    host.stamp(origin)
                assert refused.value.code == host.PATH_UNSAFE
            else:
                assert host.stamp(origin) == host.stamp(origin)
            registry.reset()
            before = host.reads_started
            registry.load()
            first = host.reads_started - before
            started = time.monotonic()
            reasons = _reasons(name)
            assert registry.get_manifest(name) is None and len(reasons) == 1, reasons
            assert first == (0 if over else 1)
            if over:
                assert "(plugin_path_unsafe)" in reasons[0]
            again = 0
            for _load in range(2):
                registry.reset()
                before = host.reads_started
                registry.load()
                again += host.reads_started - before
                assert _reasons(name) == reasons
            allowed = (
                0 if over or kind == "bad manifest" else _reads_allowed(time.monotonic() - started)
            )
            assert again <= allowed, (size, kind, linked, first, again)
            registry.reset()
    finally:
        data_files.put_back()
        shutil.rmtree(site, ignore_errors=True)
        registry.reset()


def test_a_changed_package_is_read_again_and_its_back_off_starts_over(tmp_path, registry_on):
    """The stamp keys what is remembered: a file changed behind a link to a directory
    outside the package (which the stamps before decision 0055 did not follow) is another
    stamp, and the failed read is tried again at the next load, once."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site"
    name = _package(site, "changed", "crash", 8, linked=True)
    registry_on.syspath_prepend(str(site))
    origin = host.Origin(f"webfetch_{name}:manifest", str(site), f"webfetch_{name}")
    before_stamp = host.stamp(origin)
    registry.reset()
    before = host.reads_started
    registry.load()
    registry.reset()
    registry.load()
    assert host.reads_started - before == 1
    (site / f"outside_{name}" / "g0.txt").write_bytes(b"changed")
    assert host.stamp(origin) != before_stamp
    registry.reset()
    registry.load()
    registry.reset()
    registry.load()
    assert host.reads_started - before == 2


def test_the_back_off_of_a_failed_read():
    """``host._Failures`` at given moments (no waiting): a failure is answered without a
    process for ``_REMEMBER_SECONDS``, then read again; each further failure of the same
    files doubles the time, up to ``_REMEMBER_MAX_SECONDS``; other files (another stamp)
    start from the first; a read that succeeds forgets the count."""
    from django_webfetch.plugins.runtime import host

    failures = host._Failures(8)
    key, other = ("origin", "limits", "a" * 64), ("origin", "limits", "b" * 64)
    failure = host.RuntimeFailure("plugin_timeout", "the wall time")
    now, windows = 0.0, []
    for _ in range(8):
        assert failures.remembered(key, now) is None  # read (again)
        window = failures.failed(key, failure, now)
        windows.append(window)
        assert failures.remembered(key, now + window - 1).code == "plugin_timeout"
        now += window
    base, cap = host._REMEMBER_SECONDS, host._REMEMBER_MAX_SECONDS
    assert windows == [min(base * 2**i, cap) for i in range(8)]
    assert windows[-1] == cap and windows[0] == base == 600
    assert failures.remembered(other, 0.0) is None
    assert failures.failed(other, failure, 0.0) == base
    failures.succeeded(key)
    assert failures.failed(key, failure, now) == base
    assert [host.backoff(n) for n in (0, 1, 2, 3, 100)] == [base, base, 2 * base, 4 * base, cap]


def test_the_back_off_of_a_load_that_keeps_deferring():
    """``registry.retry_after``: a load that deferred reads is done again after
    ``_RETRY_SECONDS``; each further load in a row that defers waits twice as long, at most
    ``_RETRY_MAX_SECONDS``."""
    from django_webfetch.plugins import registry

    base, cap = registry._RETRY_SECONDS, registry._RETRY_MAX_SECONDS
    assert [registry.retry_after(n) for n in (1, 2, 3, 4)] == [base, 2 * base, 4 * base, 8 * base]
    assert registry.retry_after(64) == cap == 3600
