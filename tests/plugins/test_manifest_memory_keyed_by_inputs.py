"""Issue 30, round 17, finding 3 (decision 0055, amended): what a registry load remembers of
a manifest read (a failure, ``host._Failures``; a verdict, ``registry._described``) is keyed
by every input of the read the plugin process could import: the plugin's own package
(``host.stamp``), its requirement closure (``closure.found``, each distribution's files
stamped: ``host.stamp_trees``) and the site's package directories the plugin process sees
(``host.site_stamp``).  A fix in a dependency is taken at the next load; an unchanged
failing plugin still answers from memory, with no plugin process.

Distributions are written as pip installs them (``tests/plugins/packages.py``); the
registry, the runtime and the sandbox are the real ones, and plugin processes are counted
as they start (``host.reads_started``), as tests/plugins/test_registry_failure_memory.py counts
them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import requires_metadata, wheel

_count = itertools.count()

_PLUGIN = """\
import {dep}


def manifest():
    return {{'name': {name!r}, 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': []}}
"""


def _plugin(site: Path, dep: str, declared: bool) -> str:
    """A plugin distribution in ``site`` whose import imports module ``dep`` (a requirement
    when ``declared``); its entry point's name."""
    k = next(_count)
    name = f"m17{k}"
    meta = requires_metadata(f"webfetch-{name}", [dep]) if declared else None
    wheel(site, f"webfetch-{name}", {name: f"webfetch_{name}:manifest"},
          {f"webfetch_{name}/__init__.py": _PLUGIN.format(dep=dep, name=name)}, meta)  # fmt: skip
    return name


def _load(name: str) -> tuple[bool, int]:
    """A new generation loaded: whether ``name`` is served, and how many plugin processes
    the load started."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    registry.reset()
    before = host.reads_started
    registry.load()
    return registry.origin(name) is not None, host.reads_started - before


@pytest.mark.django_db
def test_a_dependency_fixed_in_place_is_read_again_at_the_next_load(tmp_path, registry_on):
    """A dependency whose import crashes the plugin process: the failure is answered from
    memory (no process) while nothing changes, whatever the loads; the dependency's file
    rewritten in place (no install: the site directory itself is unchanged, so only the
    closure's stamp sees it) is another key, and the next load reads the plugin, once."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site-packages"  # a package directory the plugin process sees
    dep = f"wfm17dep{next(_count)}"
    wheel(site, dep, {}, {f"{dep}/__init__.py": "import os\nos._exit(3)\n"})
    name = _plugin(site, dep, declared=True)
    registry_on.syspath_prepend(str(site))
    assert _load(name) == (False, 1), registry.problems()
    assert "plugin_crashed" in str(registry.problems())
    for _again in range(3):  # the same inputs: from memory, no process
        assert _load(name) == (False, 0)
    before = host.site_stamp()
    (site / dep / "__init__.py").write_text("ANSWER = 1\n")  # the same inode, other bytes
    assert host.site_stamp() == before  # no entry of the site directory changed
    assert _load(name) == (True, 1), registry.problems()
    assert _load(name) == (True, 0)  # the verdict kept: the same inputs


@pytest.mark.django_db
def test_a_module_installed_for_an_undeclared_import_is_read_again(tmp_path, registry_on):
    """A plugin that imports a module it does not declare (no closure names it): its read
    fails (``ModuleNotFoundError``, a verdict kept); installing a distribution that
    provides the module into a site directory the plugin process sees changes that
    directory's stamp, and the next load reads the plugin again."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site-packages"
    site.mkdir()
    dep = f"wfm17und{next(_count)}"
    name = _plugin(site, dep, declared=False)
    registry_on.syspath_prepend(str(site))
    served, started = _load(name)
    assert not served and started == 1
    assert "ModuleNotFoundError" in str(registry.problems()), registry.problems()
    assert _load(name) == (False, 0)
    wheel(site, dep, {}, {f"{dep}/__init__.py": "ANSWER = 1\n"})
    assert _load(name) == (True, 1), registry.problems()


@pytest.mark.django_db
def test_a_dependency_reinstalled_as_before_keeps_nothing_stale(tmp_path, registry_on):
    """The finding's route with a release that crashes replaced by one that crashes too:
    another key (read once more, refused again), then answered from memory again."""
    site = tmp_path / "site-packages"
    dep = f"wfm17re{next(_count)}"
    crash = {f"{dep}/__init__.py": "import os\nos._exit(3)\n"}
    wheel(site, dep, {}, crash)
    name = _plugin(site, dep, declared=True)
    registry_on.syspath_prepend(str(site))
    assert _load(name) == (False, 1)
    shutil.rmtree(site / f"{dep}-1.0.dist-info")
    shutil.rmtree(site / dep)
    wheel(site, dep, {}, crash)
    assert _load(name) == (False, 1)
    assert _load(name) == (False, 0)


_CHANGES = ["none", "write", "add", "remove", "rename", "metadata"]


@given(
    files=st.lists(st.sampled_from(["a.py", "b.py", "sub/c.py", "sub/d.txt"]), min_size=1,
                   unique=True),
    change=st.sampled_from(_CHANGES),
)  # fmt: skip
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_inputs_stamp_changes_exactly_when_a_dependency_does(files, change):
    """Property (no process): ``host.stamp_trees`` of a dependency's package and metadata
    directory is the same while nothing changes, and another after any file of either is
    written, added, removed or renamed."""
    from django_webfetch.plugins.runtime import host

    base = Path(tempfile.mkdtemp(prefix="webfetch-fix17-"))
    try:
        package, meta = base / "dep", base / "dep-1.0.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text("Name: dep\n")
        for file in files:
            (package / file).parent.mkdir(parents=True, exist_ok=True)
            (package / file).write_text("x = 1\n")

        def stamped() -> str:
            return host.stamp_trees([(str(base), "dep")], [str(meta)])

        before = stamped()
        assert stamped() == before
        target = package / files[0]
        if change == "write":
            with open(target, "a") as fh:
                fh.write("y = 2\n")
        elif change == "add":
            (package / "new.py").write_text("")
        elif change == "remove":
            target.unlink()
        elif change == "rename":
            target.rename(target.with_name("renamed.py"))
        elif change == "metadata":
            (meta / "METADATA").write_text("Name: dep\nVersion: 2\n")
        assert (stamped() != before) == (change != "none"), change
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_inputs_stamp_is_bounded_by_the_walk_limit(tmp_path):
    """``host.stamp_trees`` walks at most its limit of entries over every tree together
    (``provenance.WALK_ENTRIES`` by default): past it, ``PATH_UNSAFE``; the registry then
    counts the closure as unknown and the site directories' stamp stands for it."""
    from django_webfetch.plugins import provenance
    from django_webfetch.plugins.runtime import host

    for top in ("one", "two"):
        (tmp_path / top).mkdir()
        for i in range(3):
            (tmp_path / top / f"f{i}").write_text("")
    tops = [(str(tmp_path), "one"), (str(tmp_path), "two")]
    assert host.stamp_trees(tops, [], limit=6) == host.stamp_trees(tops, [])
    with pytest.raises(host.RuntimeFailure) as over:
        host.stamp_trees(tops, [], limit=5)
    assert over.value.code == host.PATH_UNSAFE
    assert host.stamp_trees.__defaults__ == (provenance.WALK_ENTRIES,)


def test_a_stable_message_is_matched_on_re2_and_keeps_what_is_no_utf8():
    """``registry._stable_message`` leaves out an object's address on RE2 (DESIGN.md §1:
    the text holds names a distribution chose), and keeps text that is no UTF-8 (a file
    name's surrogate escapes, a lone surrogate) as it is."""
    from django_webfetch.plugins import registry
    from django_webfetch.text.patterns import is_linear

    assert is_linear(registry._ADDRESS)
    said = registry._stable_message(OSError("<object at 0x7fAB12> in \udcff\ud800 né 0x1"))
    assert said == "<object at 0x?> in \udcff\ud800 né 0x?"
    assert len(registry._stable_message(OSError("0x1 " * 100))) == 200
    assert "re" not in vars(registry)  # no pattern of the module on ``re``


def test_the_site_stamp_follows_an_install_into_a_site_directory(tmp_path, monkeypatch):
    """``host.site_stamp``: the package directories the plugin process imports from, each
    by its own ``lstat``; a distribution installed there changes it."""
    from django_webfetch.plugins.runtime import bubblewrap, host

    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    before = host.site_stamp()
    assert host.site_stamp() == before
    wheel(site, "wfm17site", {}, {"wfm17site/__init__.py": ""})
    assert host.site_stamp() != before
    assert os.path.realpath(site) in bubblewrap.site_dirs()
