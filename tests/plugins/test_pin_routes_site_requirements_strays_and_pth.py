"""Issue 30, attack 9 (an outside reviewer): ways past the trust pin and the plugin
containment as they stand after attack 8's fixes.  Each test fails while its finding
stands.  Real parts only: distributions installed as pip installs a wheel
(tests/plugins/packages.py), the real registry, the real trust check, the real closure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.plugins.packages import MANIFEST, lazy_plugin, wheel

pytestmark = pytest.mark.django_db


def _metadata(name: str, requires: list[str]) -> dict[str, bytes]:
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    return {"METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{lines}".encode()}


def _uses(module: str) -> str:
    return f"def run(plugin, arguments):\n    import {module}\n    return {module}.ANSWER\n\n\n" + (
        MANIFEST % "t"
    ).replace(
        "'tools': []",
        "'tools': [{'name': 't_run', 'description': 'x', 'handler': run}]",
    )


def _trusted_with(site: Path, registry_on, requires: list[str], module: str, dep: str):
    """Plugin ``t`` requiring ``requires`` and importing ``module`` (installed as
    distribution ``dep``, ``ANSWER = 'reviewed'``) in its tool, put on ``sys.path`` and
    trusted by the operator."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _uses(module)},
          _metadata("webfetch-t", requires))  # fmt: skip
    wheel(site, dep, {}, {f"{module}/__init__.py": "ANSWER = 'reviewed'\n"})
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.origin("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    return instance


@pytest.mark.parametrize(
    ("requirement", "dep", "module"),
    [
        # Django requires ``tzdata; sys_platform == "win32"``: not installed on Linux,
        # never imported by the site, yet counted among the site's own names.
        ("tzdata", "tzdata", "tzdata"),
        # anyio requires ``exceptiongroup; python_version < "3.11"``: the same.
        ("exceptiongroup", "exceptiongroup", "exceptiongroup"),
    ],
)
def test_a_site_requirement_a_marker_leaves_uninstalled_escapes_the_pin(
    tmp_path, registry_on, requirement, dep, module
):
    """Finding 1: ``closure.site_names`` follows every environment marker of the site's
    requirement closure and counts a name whether or not it is installed, so a name the
    site requires only on another platform or Python (``tzdata`` on win32) is "the site's
    own" here.  A plugin requiring it has the distribution of that name installed with it
    (pip evaluates the plugin's unmarked line), imports it in the site's process under
    trust, and that dependency is in no pin: its code is rewritten and trust still holds.
    """
    from django_webfetch.plugins import closure, registry

    if module in sys.modules:  # pragma: no cover - a real one imported already
        pytest.skip(f"{module} is imported in this process")
    site = tmp_path / "site"
    instance = _trusted_with(site, registry_on, [requirement], module, dep)
    try:
        (site / module / "__init__.py").write_text("ANSWER = 'other code'\n")
        registry.reset()
        assert not instance.trust_holds(), "a rewritten dependency kept the trust"
        deps = closure.dependencies(registry.distribution("t"), str(site))
        assert [d.name for d in deps] == [dep], deps
    finally:
        for name in (module, "webfetch_t"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("requirement", "dep", "module"),
    [
        # httpx's ``socks`` extra: ``socksio==1.*; extra == 'socks'``.
        ("httpx[socks]", "socksio", "socksio"),
        # httpx's ``http2`` extra: ``h2<5,>=3; extra == 'http2'``.
        ("httpx[http2]", "h2", "h2"),
    ],
)
def test_an_extra_of_a_site_requirement_escapes_the_pin(
    tmp_path, registry_on, requirement, dep, module
):
    """Finding 2: the closure stops at a site name (``if required in site: continue``),
    extras and all, while ``site_names`` leaves every extra out.  A plugin requiring
    ``httpx[socks]`` gets ``socksio`` installed and imported in the site's process under
    trust, yet ``socksio`` is in no pin (the docs: "a plugin that requires an extra's
    distribution pins it"): its code is rewritten and trust still holds."""
    from django_webfetch.plugins import closure, registry

    if module in sys.modules:  # pragma: no cover
        pytest.skip(f"{module} is imported in this process")
    site = tmp_path / "site"
    instance = _trusted_with(site, registry_on, [requirement], module, dep)
    try:
        (site / module / "__init__.py").write_text("ANSWER = 'other code'\n")
        registry.reset()
        assert not instance.trust_holds(), "a rewritten dependency kept the trust"
        deps = closure.dependencies(registry.distribution("t"), str(site))
        assert dep in [d.name for d in deps], deps
    finally:
        for name in (module, "webfetch_t"):
            sys.modules.pop(name, None)


def test_an_extra_of_django_webfetch_itself_escapes_the_pin(tmp_path):
    """Finding 2, through the site's own distribution: ``django-webfetch[celery]`` asks for
    ``celery`` and ``redis``, which a plugin requiring ``celery`` directly pins; asked
    through the extra they are in no pin."""
    from importlib.metadata import distributions

    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"},
          _metadata("webfetch-t", ["celery"]))  # fmt: skip
    dist = next(iter(distributions(name="webfetch-t", path=[str(site)])))
    direct = {d.name.lower() for d in closure.dependencies(dist, str(site))}
    assert "celery" in direct, direct  # the documented behaviour, for contrast

    other = tmp_path / "other"
    wheel(other, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"},
          _metadata("webfetch-t", ["django-webfetch[celery]"]))  # fmt: skip
    dist = next(iter(distributions(name="webfetch-t", path=[str(other)])))
    through = {d.name.lower() for d in closure.dependencies(dist, str(other))}
    assert "celery" in through, through


def _call(instance, name):
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    tool = next(t for t in plugin_tools() if t.name == name)
    context = ToolContext(approved=True, call_id=name, plugin_instance=instance)
    return tool.execute({}, context)


_LAZY_DEP = lazy_plugin("t", "import wfdep_s", "wfdep_s.ANSWER")


def test_a_stray_module_that_appears_after_the_trusted_import_runs_in_the_site(
    tmp_path, registry_on
):
    """Finding 3: ``registry._refuse_shadowed`` looks for a stray module shadowing a
    pinned dependency only when the plugin is imported (``registry._import``); the per-call
    pin (``tools._pin_holds``) digests the pinned copies only.  A trusted tool that
    imports its dependency at first use imports whatever the earlier ``sys.path``
    directory (the working directory ``manage.py`` runs from) holds by then: a module
    written there after the first trusted call runs in the site's process under trust."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _LAZY_DEP}, _metadata("webfetch-t", ["wfdep-s"]))  # fmt: skip
    wheel(site, "wfdep-s", {}, {"wfdep_s/__init__.py": "ANSWER = 'reviewed'\n"})
    registry_on.syspath_prepend(str(site))
    registry_on.syspath_prepend(str(cwd))  # sys.path[0], as manage.py's directory is
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    try:
        assert instance.trust_holds(), instance.trust_problem()
        first = _call(instance, "t_plain")  # trusted: imported in the site, checks pass
        assert first.ok and "plain" in first.content, first
        assert "webfetch_t" in sys.modules and "wfdep_s" not in sys.modules
        (cwd / "wfdep_s").mkdir()
        (cwd / "wfdep_s" / "__init__.py").write_text("ANSWER = 'STRAY CODE'\n")
        later = _call(instance, "t_lazy")
        loaded = sys.modules.get("wfdep_s")
        where = str(getattr(loaded, "__file__", "")) if loaded else ""
        assert not where.startswith(str(cwd)), (
            f"the stray module ran in the site's process under trust: {later}"
        )
    finally:
        for name in ("wfdep_s", "webfetch_t"):
            sys.modules.pop(name, None)


def test_a_stray_portion_of_a_namespace_dependency_is_not_refused(tmp_path, registry_on):
    """Finding 4: ``registry._refuse_shadowed`` skips a pinned top-level name whose spec
    has no origin ("a namespace package's portion").  A dependency installed as a
    namespace package (``wfns/dep.py``, no ``__init__``) is shadowed by a stray portion in
    an earlier ``sys.path`` directory (``wfns/dep.py`` in the working directory): the
    trusted import is not refused and ``import wfns.dep`` runs the stray file."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.manifest import ManifestError
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"},
          _metadata("webfetch-t", ["wfns-dep"]))  # fmt: skip
    wheel(site, "wfns-dep", {}, {"wfns/dep.py": "ANSWER = 'reviewed'\n"})
    stray = tmp_path / "cwd"
    (stray / "wfns").mkdir(parents=True)
    (stray / "wfns" / "dep.py").write_text("ANSWER = 'STRAY'\n")
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    try:
        assert instance.trust_holds(), instance.trust_problem()
        registry._refuse_compiled(registry.origin("t"))  # nothing shadows it yet
        registry_on.syspath_prepend(str(stray))
        import importlib.util

        found = importlib.util.find_spec("wfns.dep")
        assert found is not None and str(found.origin).startswith(str(stray))  # premise
        with pytest.raises(ManifestError) as refused:
            registry._refuse_compiled(registry.origin("t"))
        assert refused.value.reason == "plugin_origin_mismatch"
    finally:
        for name in ("wfns.dep", "wfns", "webfetch_t"):
            sys.modules.pop(name, None)


def _wheel_as(site: Path, info_name: str, dist: str, files: dict[str, str]) -> None:
    """Distribution ``dist`` 1.0 installed as pip installs a wheel whose ``.dist-info``
    directory is ``info_name`` (pip only checks that its canonical form starts with the
    wheel's name: ``wfdep_x_build-1.0.dist-info`` passes for ``wfdep_x-1.0-...whl``, and
    the resolver checks the METADATA ``Name``, which is ``dist``)."""
    from tests.plugins.packages import record_hash

    info = site / info_name
    info.mkdir(parents=True)
    every = {k: v.encode() for k, v in files.items()}
    every[f"{info_name}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode()
    lines = []
    for name, data in every.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(data)
        lines.append(f"{name},{record_hash(data)},{len(data)}\n")
    lines.append(f"{info_name}/RECORD,,\n")
    (info / "RECORD").write_text("".join(lines))


def test_a_dependency_whose_metadata_directory_is_named_otherwise_is_pinned_as_missing(
    tmp_path, registry_on
):
    """Finding 5: the closure finds a requirement by the name of its metadata directory
    (``importlib.metadata.distributions(name=...)``), pip by its METADATA ``Name``.  A
    dependency ``wfdep-x`` whose wheel holds ``wfdep_x_build-1.0.dist-info`` (accepted by
    pip: the directory's canonical name starts with the wheel's) is installed and imported,
    yet pinned "not installed": its code is rewritten later and trust still holds."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _uses("wfdep_x")},
          _metadata("webfetch-t", ["wfdep-x"]))  # fmt: skip
    _wheel_as(site, "wfdep_x_build-1.0.dist-info", "wfdep-x",
              {"wfdep_x/__init__.py": "ANSWER = 'reviewed'\n"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    try:
        assert instance.trust_holds(), instance.trust_problem()
        (site / "wfdep_x" / "__init__.py").write_text("ANSWER = 'other code'\n")
        registry.reset()
        assert not instance.trust_holds(), (
            f"a rewritten dependency kept the trust: {instance.trusted_dependencies}"
        )
    finally:
        for name in ("wfdep_x", "webfetch_t"):
            sys.modules.pop(name, None)


def test_requirements_that_are_not_installed_count_towards_the_closure_bound(tmp_path):
    """Finding 6 (Low): ``MAX_DISTRIBUTIONS`` counts installed copies only; a name that
    is not installed is a node of its own, unbounded.  A ``METADATA`` of 1,000
    ``Requires-Dist`` lines of names no one installs makes a closure of 1,000 entries
    (every look-up scans every search directory once per name: about 1 s for 10,000 on
    this machine, at every provider look-up, ``trust``, ``list`` and ``W034``), pinned,
    stored in ``trusted_dependencies`` and listed on the admin's confirmation page."""
    from importlib.metadata import distributions

    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    names = [f"wfmiss-{i}" for i in range(1000)]
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"}, _metadata("webfetch-t", names))  # fmt: skip
    dist = next(iter(distributions(name="webfetch-t", path=[str(site)])))
    deps = closure.dependencies(dist, str(site))
    assert len(deps) <= closure.MAX_DISTRIBUTIONS + 1 and closure.unpinnable(deps), len(deps)


_LAZY_OWN = lazy_plugin("t", "from webfetch_t import impl", "impl.ANSWER")


@pytest.mark.parametrize("where", ["plugin", "dependency"])
def test_a_cached_pyc_written_after_the_trusted_import_runs_at_first_use(
    tmp_path, registry_on, where
):
    """Finding 7: the compiled-code check (``registry._refuse_compiled``) runs when the
    plugin is imported; the per-call pin (``tools._pin_holds``) leaves every ``.pyc`` of a
    bytecode cache out.  A second wheel of the same sources that ships an
    ``UNCHECKED_HASH`` ``.pyc`` of other code for a module the handler imports at first
    use (the plugin's ``impl``, or its dependency), installed under a running process
    after the first trusted call, keeps the pin, and the next call loads that ``.pyc``
    in the site's process: compiled code stands in for the reviewed source."""
    import importlib.util
    import py_compile

    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    if where == "plugin":
        files = {"webfetch_t/__init__.py": _LAZY_OWN, "webfetch_t/impl.py": "ANSWER = 'reviewed'\n"}
        requires: list[str] = []
        module, source = "webfetch_t.impl", site / "webfetch_t" / "impl.py"
    else:
        files = {"webfetch_t/__init__.py": _LAZY_DEP}
        requires = ["wfdep-s"]
        module, source = "wfdep_s", site / "wfdep_s" / "__init__.py"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"}, files,
          _metadata("webfetch-t", requires))  # fmt: skip
    if where == "dependency":
        wheel(site, "wfdep-s", {}, {"wfdep_s/__init__.py": "ANSWER = 'reviewed'\n"})
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    try:
        assert instance.trust_holds(), instance.trust_problem()
        first = _call(instance, "t_plain")
        assert first.ok and "plain" in first.content, first
        assert module not in sys.modules
        other = tmp_path / "other.py"
        other.write_text("ANSWER = 'COMPILED OTHER CODE'\n")
        py_compile.compile(
            str(other),
            cfile=importlib.util.cache_from_source(str(source)),
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
            doraise=True,
        )
        later = _call(instance, "t_lazy")
        assert "COMPILED OTHER CODE" not in (later.content or ""), later
        assert getattr(sys.modules.get(module), "ANSWER", "") != "COMPILED OTHER CODE"
    finally:
        for name in ("webfetch_t.impl", "wfdep_s", "webfetch_t"):
            sys.modules.pop(name, None)


def test_trust_prints_no_control_character_a_dependencys_metadata_holds(tmp_path, registry_on):
    """Finding 8: ``webfetch plugin trust ALIAS`` prints each dependency's METADATA
    ``Name`` and ``Version`` as they are (``Dependency.__str__``); a ``Version`` holding
    terminal escapes (``ESC [1A ESC [2K``: cursor up, erase the line) rewrites what the
    operator is shown: here the dependency's own line is erased and "dependencies: none
    outside the site's own" printed in its place, while the fingerprint the operator
    copies trusts the hidden dependency.  Bidi overrides (U+202E) spoof a name the same
    way on the terminal and on the admin's confirmation page."""
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    own = _metadata("webfetch-t", ["wfdep-h"])
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"}, own)  # fmt: skip
    none = "  dependencies:  none outside the site's own (pinned with it: none)"
    hide = f"1.0\x1b[1A\x1b[2K\r{none}\x1b[8m"
    meta = f"Metadata-Version: 2.1\nName: wfdep-\u202eh\nVersion: {hide}\n".encode()
    wheel(site, "wfdep-h", {}, {"wfdep_h/__init__.py": "X = 1\n"}, {"METADATA": meta})
    registry_on.syspath_prepend(str(site))
    registry.reset()
    PluginInstance.objects.create(plugin="t", alias="t")
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("webfetch", "plugin", "trust", "t", stdout=out)
    printed = out.getvalue()
    assert "wfdep" in printed, printed  # the dependency is listed
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    controls = sorted(
        {c for c in printed if (ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0 or c in bidi}
    )
    assert not controls, [hex(ord(c)) for c in controls]


def test_a_dependency_whose_code_a_pth_file_puts_on_the_path_is_not_pinned(tmp_path, registry_on):
    """Finding 9: ``closure._tops`` skips a dependency's ``.pth`` rows and digests the
    top-level names its ``RECORD`` lists; a dependency that installs only a ``.pth``
    naming a source directory (what setuptools' editable "compat" mode and any
    path-configuration wheel do; no ``direct_url.json``, so not seen as editable) has
    nothing of its code pinned: site.py puts the directory on ``sys.path``, the plugin
    imports the dependency's module from there under trust, and a rewrite of that module
    keeps the trust.  (Such a dependency should be unpinnable, as an editable one is.)"""
    import site as site_module

    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    source = tmp_path / "wfdep-p-src"
    (source / "wfdep_p").mkdir(parents=True)
    (source / "wfdep_p" / "__init__.py").write_text("ANSWER = 'reviewed'\n")
    own = _metadata("webfetch-t", ["wfdep-p"])
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _uses("wfdep_p")}, own)  # fmt: skip
    wheel(site, "wfdep-p", {}, {"wfdep_p.pth": f"{source}\n"})
    registry_on.syspath_prepend(str(site))  # saves sys.path: undone after the test
    site_module.addsitedir(str(site))  # site.py's own processing of the .pth
    assert str(source) in sys.path
    registry.reset()
    assert registry.origin("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    try:
        # Fixed: such a dependency cannot be pinned, so trust turned on never holds.
        assert not instance.trust_holds()
        assert "path configuration file" in instance.trust_problem(), instance.trust_problem()
        (source / "wfdep_p" / "__init__.py").write_text("ANSWER = 'other code'\n")
        registry.reset()
        assert not instance.trust_holds(), (
            f"the dependency's code changed and trust held: {instance.trusted_dependencies}"
        )
    finally:
        for name in ("wfdep_p", "webfetch_t"):
            sys.modules.pop(name, None)


def test_a_plugin_with_an_unpinnable_dependency_makes_every_trust_look_up_load_again(
    tmp_path, registry_on
):
    """Finding 10: ``closure.pinned_digest`` makes a new digest at each call for a closure
    with a dependency that cannot be pinned (``time.time_ns()``), and, unlike
    ``provenance._unpinned``, does not register it with ``unpinned_why``; so
    ``registry._point`` of that entry point differs at every look, and every
    ``registry.provider`` look-up (each trust check: ``trust_holds``, a trusted call's
    first look in a generation, W034, ``plugin list``) finds "installed plugins changed",
    resets the registry and ends every idle plugin process of every plugin.  Any plugin
    distribution merely present (never installed as an instance) that requires one
    installed in editable mode does it; the same state as attack 8's deep package,
    which ``_point`` already compares by why."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    own = _metadata("webfetch-u", ["wfdep-edit"])
    wheel(site, "webfetch-u", {"u": "webfetch_u:manifest"},
          {"webfetch_u/__init__.py": MANIFEST % "u"}, own)  # fmt: skip
    editable = b'{"url": "file:///srv/src/wfdep-edit", "dir_info": {"editable": true}}'
    wheel(site, "wfdep-edit", {}, {"wfdep_edit.py": "X = 1\n"},
          {"direct_url.json": editable})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert registry.origin("t") is not None, registry.problems()
    before = registry.generation()
    assert instance.trust_holds() and registry.provider("t") is not None
    assert registry.provider("t") is not None
    assert registry.generation() == before, "each trust look-up loaded the registry again"
