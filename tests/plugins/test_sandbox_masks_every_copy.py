"""Issue 30, round 18, finding 1 fixed: every copy of the site's code the sandbox masks is
masked with it (docs/decisions/0058-every-copy-of-the-sites-code-is-masked.rst).

A site module masked in the sandbox (the top-level module or package of
``DJANGO_SETTINGS_MODULE``/``ROOT_URLCONF``, a path of ``WEBFETCH_PLUGIN_HIDDEN_PATHS``) has
other files holding its bytes: its bytecode in ``__pycache__`` (any implementation's tag, any
optimisation level), a legacy sourceless ``.pyc`` beside it, its mirror under a bytecode cache
prefix, an editor's backup.  The properties below generate such layouts and look for the
site's secret in every one of them: through ``bubblewrap.copies`` (many layouts), and from
inside the real sandbox, reading every file of the package directory (a few).
"""

from __future__ import annotations

import itertools
import json
import os
import py_compile
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap
from django_webfetch.plugins.runtime.host import capabilities

pytestmark = pytest.mark.django_db

_SECRET = "fix18a-the-sites-secret"
_NEIGHBOUR = "fix18a-a-neighbours-constant"
_names = itertools.count()


@dataclass(frozen=True)
class Layout:
    """A masked site module (or package) and its copies in a package directory."""

    package: bool
    named_by: str
    source: bool
    tags: tuple[str, ...]
    opt: tuple[str, ...]
    legacy: bool
    prefix: bool
    backups: tuple[str, ...]


_LAYOUTS = st.builds(
    Layout,
    package=st.booleans(),
    named_by=st.sampled_from(["DJANGO_SETTINGS_MODULE", "WEBFETCH_PLUGIN_HIDDEN_PATHS"]),
    source=st.booleans(),
    tags=st.lists(
        st.sampled_from(["cpython-311", "cpython-312", "cpython-39", "pypy39", "graalpy231"]),
        min_size=1,
        max_size=3,
        unique=True,
    ).map(tuple),
    opt=st.lists(st.sampled_from(["", ".opt-1", ".opt-2"]), min_size=1, unique=True).map(tuple),
    legacy=st.booleans(),
    prefix=st.booleans(),
    backups=st.lists(
        st.sampled_from(["{n}.py~", "{n}.py.orig", "{n}.py.bak", ".{n}.py.swp", "#{n}.py#"]),
        max_size=3,
        unique=True,
    ).map(tuple),
)


def _build(root: Path, layout: Layout) -> tuple[Path, str, str, list[Path], list[Path]]:
    """Writes ``layout`` under ``root``: (the package directory, the module's name, what
    names it, every file holding the secret, every neighbour's file)."""
    packages = root / f"l{next(_names)}" / "lib" / "site-packages"
    packages.mkdir(parents=True)
    name = f"fix18a_site_{next(_names)}"
    text = f"SECRET_KEY = {_SECRET!r}\n"
    holders: list[Path] = []
    prefix = packages / "pycache-prefix"
    if layout.package:
        directory = packages / name
        directory.mkdir()
        stem = "__init__"
        named = str(directory)
    else:
        directory = packages
        stem = name
        named = str(directory / f"{name}.py")
    source = directory / f"{stem}.py"
    source.write_text(text)
    compiled = directory / "__pycache__" / f"{stem}.{layout.tags[0]}.pyc"
    py_compile.compile(str(source), cfile=str(compiled), doraise=True)
    caches = [directory / "__pycache__"]
    if layout.prefix:
        caches.append(prefix / str(directory).lstrip("/"))
    for cache in caches:
        cache.mkdir(parents=True, exist_ok=True)
        for tag in layout.tags:
            for opt in layout.opt:
                copy = cache / f"{stem}.{tag}{opt}.pyc"
                if copy != compiled:
                    shutil.copyfile(compiled, copy)
                holders.append(copy)
    if compiled not in holders:
        compiled.unlink()
    if layout.legacy or not layout.source:
        legacy = directory / f"{stem}.pyc"
        shutil.copyfile(holders[0], legacy)
        holders.append(legacy)
    for pattern in layout.backups:
        backup = directory / pattern.format(n=stem)
        backup.write_text(text)
        holders.append(backup)
    if layout.source:
        holders.append(source)
    else:
        source.unlink()
        if not layout.package:
            named = str(directory / f"{name}.pyc")
    # Neighbours: a module whose name starts with the masked one's, and its bytecode.  A
    # package's siblings named after it as a word are its copies (``name_x.py``: decision
    # 0058, amended in round 26), so beside a package the neighbour runs on without one.
    neighbours: list[Path] = []
    first = f"{name}x.py" if layout.package else f"{name}_x.py"
    for neighbour in (packages / first, packages / f"x{name}.py"):
        neighbour.write_text(f"VALUE = {_NEIGHBOUR!r}\n")
        cfile = packages / "__pycache__" / f"{neighbour.stem}.cpython-311.pyc"
        py_compile.compile(str(neighbour), cfile=str(cfile), doraise=True)
        neighbours += [neighbour, cfile]
    for path in [root, *sorted(root.rglob("*"))]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return packages, name, named, holders, neighbours


def _name_it(monkeypatch, settings, layout: Layout, name: str, named: str) -> None:
    if layout.named_by == "DJANGO_SETTINGS_MODULE":
        monkeypatch.setenv("DJANGO_SETTINGS_MODULE", name)
        settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    else:
        settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = [named]


@hypothesis_settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(layout=_LAYOUTS)
def test_every_copy_of_a_masked_module_is_among_its_copies(tmp_path, monkeypatch, settings, layout):
    """Over generated layouts (module or package; sourceless or not; implementation tags,
    optimisation levels, a legacy ``.pyc``, a bytecode cache prefix, editors' backups):
    every file holding the module's bytes is masked in the sandbox's layout, and no
    neighbour's file is (a module whose name starts with the masked one's)."""
    packages, name, named, holders, neighbours = _build(tmp_path, layout)
    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(packages))
        patch.setenv("PYTHONPYCACHEPREFIX", str(packages / "pycache-prefix"))
        _name_it(patch, settings, layout, name, named)
        spec = bubblewrap.SandboxSpec("/nonexistent", "nothing", 3, 4, 5, "/tmp/fix18a")
        masked = [entry[1] for entry in bubblewrap._layout(spec) if entry[0] == "mask"]
        hidden = bubblewrap.masks(spec)

    def covered(path: Path, by: list[str]) -> bool:
        real = os.path.realpath(path)
        return any(real == m or real.startswith(m + "/") for m in by)

    assert masked, layout
    for holder in holders:
        assert covered(holder, masked), (layout, holder, masked)
        assert covered(holder, hidden), (layout, holder, hidden)
    for neighbour in neighbours:
        assert not covered(neighbour, hidden), (layout, neighbour, hidden)


#: Reads every file under a directory from inside the sandbox: which held the secret, and
#: how many held the neighbour's constant (the control: the directory was bound).
_READ_ALL = """\
import json, os
leaked, neighbours = [], 0
for top, dirs, files in os.walk(%r):
    for name in files:
        path = os.path.join(top, name)
        try:
            with open(path, 'rb') as fh:
                data = fh.read()
        except OSError:
            continue
        if %r in data:
            leaked.append(path)
        if %r in data:
            neighbours += 1
result = json.dumps({'leaked': leaked, 'neighbours': neighbours})
"""


@hypothesis_settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(layout=_LAYOUTS)
@example(
    layout=Layout(
        False,
        "DJANGO_SETTINGS_MODULE",
        True,
        ("cpython-311", "pypy39"),
        ("", ".opt-1", ".opt-2"),
        True,
        True,
        ("{n}.py~", ".{n}.py.swp"),
    )  # fmt: skip
)
@example(
    layout=Layout(
        True,
        "WEBFETCH_PLUGIN_HIDDEN_PATHS",
        True,
        ("cpython-311",),
        ("", ".opt-2"),
        False,
        True,
        (),
    )  # fmt: skip
)
@example(
    layout=Layout(
        False,
        "WEBFETCH_PLUGIN_HIDDEN_PATHS",
        False,
        ("cpython-312",),
        (".opt-1",),
        True,
        False,
        ("{n}.py.orig",),
    )  # fmt: skip
)
def test_no_copy_of_a_masked_module_is_readable_in_the_sandbox(
    probe, tmp_path, monkeypatch, settings, layout
):
    """The same layouts in the real sandbox: a plugin reading every file of the package
    directory finds the site's secret in none, and the neighbours' files as they are."""
    from django_webfetch.plugins.runtime.host import shutdown

    packages, name, named, _holders, neighbours = _build(tmp_path, layout)
    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(packages))
        patch.setenv("PYTHONPYCACHEPREFIX", str(packages / "pycache-prefix"))
        _name_it(patch, settings, layout, name, named)
        assert os.path.realpath(packages) in bubblewrap.site_dirs()
        try:
            outcome = probe(_READ_ALL % (str(packages), _SECRET.encode(), _NEIGHBOUR.encode()))
        finally:
            shutdown()
    assert outcome.kind == "json", outcome
    seen = json.loads(json.loads(outcome.text)["result"])
    assert seen["leaked"] == [], (layout, seen)
    assert seen["neighbours"] == len(neighbours), (layout, seen)


#: Reads the module's compiled copies in a pooled process (the first call leaves a mark in
#: its process, the second finds it: the same process).
_READ_LATER = """\
import json, sys
seen = {'same_process': '__fix18a__' in sys.modules}
sys.modules.setdefault('__fix18a__', sys)
for path in %r:
    try:
        with open(path, 'rb') as fh:
            seen[path] = %r in fh.read()
    except OSError as exc:
        seen[path] = type(exc).__name__
result = json.dumps(seen)
"""

#: Waits (a condition, with a far safety net) until every path of the first list exists,
#: then reads as ``_READ_LATER``.
_WAIT_THEN_READ = (
    """\
import os, time
for _ in range(1500):
    if all(os.path.lexists(path) for path in %r):
        break
    time.sleep(0.01)
"""
    + _READ_LATER
)


@pytest.mark.skipif(
    not capabilities().get("isolated") or not capabilities().get("landlock"),
    reason="a host that builds the plugin sandbox on a kernel with Landlock",
)
@pytest.mark.parametrize("at_start", ["no copy", "a copy"])
def test_a_copy_written_after_the_process_started_is_unreadable_with_landlock(
    probe, tmp_path, monkeypatch, settings, at_start
):
    """A plugin process outlives its masks' enumeration while its call runs (pooled, until a
    directory whose listing decided them changes, round 26): the host may compile the
    module later (its first import where it may write; a new optimisation level), or
    replace its ``.pyc`` by renaming over it (which lifts a mask in another mount
    namespace).  No such copy is readable in a process that started before, whether the
    cache directory held a copy of the module then or not: the guest splits it into one
    Landlock rule per entry it had then (``bubblewrap._guards``; with a copy there, the
    copy's own exclusion splits it too)."""
    from django_webfetch.plugins.runtime import host
    from django_webfetch.plugins.runtime.host import shutdown

    layout = Layout(
        False, "DJANGO_SETTINGS_MODULE", True, ("cpython-311",), ("",), False, False, ()
    )
    packages, name, _named, holders, _neighbours = _build(tmp_path, layout)
    (compiled,) = [path for path in holders if path.suffix == ".pyc"]
    later = compiled.with_name(f"{name}.cpython-311.opt-1.pyc")
    kept = tmp_path / "kept.pyc"
    shutil.copyfile(compiled, kept)
    if at_start == "no copy":
        compiled.unlink()
    monkeypatch.syspath_prepend(str(packages))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", name)
    paths = [str(compiled), str(later)]
    # Changed a minute ago: a fingerprint younger than ``bubblewrap.RECENT_NS`` matches
    # nothing, and the pooled process would not be handed the second call.
    for path in [tmp_path, *tmp_path.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            os.utime(path, (time.time() - 60, time.time() - 60))
    done = threading.Event()

    def write_once_taken() -> None:
        # Once the pooled process is taken for the second call (no idle one left): a
        # change made while it is idle ends it at checkout (round 26, finding 2), so the
        # copies are written while its call runs, and the call reads them then.
        while host.idle_processes() and not done.wait(0.01):
            pass
        if done.is_set():
            return
        for path in (compiled, later):
            # As the interpreter writes a ``.pyc``: a new file renamed into place.
            replacement = path.with_name("replacement.tmp")
            shutil.copyfile(kept, replacement)
            os.chmod(replacement, 0o644)
            os.replace(replacement, path)

    try:
        before = json.loads(
            json.loads(probe(_READ_LATER % (paths, _SECRET.encode())).text)["result"]
        )
        assert host.idle_processes() == 1
        writer = threading.Thread(target=write_once_taken)
        writer.start()
        try:
            code = _WAIT_THEN_READ % (paths, paths, _SECRET.encode())
            after = json.loads(json.loads(probe(code).text)["result"])
        finally:
            done.set()
            writer.join()
    finally:
        shutdown()
    assert before["same_process"] is False and after["same_process"] is True, (before, after)
    read = [seen[path] for seen in (before, after) for path in paths]
    assert True not in read, (before, after)
