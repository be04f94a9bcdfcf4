"""Issue 30, attack 8 finding 3: trust pins the closure of the plugin's installed
requirements (decision 0051).  Real files installed as pip installs a wheel
(tests/plugins/packages.py), the real registry, the real trust check and the real
in-process (trusted) call.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db


def _metadata(name: str, requires: list[str], version: str = "1.0") -> dict[str, bytes]:
    lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
    text = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{lines}"
    return {"METADATA": text.encode()}


def _plugin(site: Path, requires: list[str], source: str | None = None) -> Path:
    return wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
                 {"webfetch_t/__init__.py": source or MANIFEST % "t"},
                 _metadata("webfetch-t", requires))  # fmt: skip


def _dist(site: Path) -> object:
    from importlib.metadata import distributions

    return next(iter(distributions(name="webfetch-t", path=[str(site)])))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.integers(min_value=1, max_value=6).flatmap(
        lambda n: st.tuples(
            st.just(n),
            # Edges among n nodes (cycles and self-loops included), the plugin's own
            # requirements, and the nodes that are not installed (missing).
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=12),
            st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True),
            st.sets(st.integers(0, n - 1), max_size=n),
            st.integers(0, n - 1),
        )
    )
)
def test_the_pin_covers_exactly_the_installed_closure(tmp_path_factory, graph):
    """For any dependency graph (cycles, self-requirements, missing distributions): the
    closure is every distribution reachable from the plugin's requirements, each once
    (a missing one without a version, its requirements unknown); a byte changed in any
    reachable installed distribution changes the pin, and one in an unreachable one
    does not; site requirements (``django``, ``httpx``) are never in it."""
    from django_webfetch.plugins import closure, provenance

    n, edges, roots, missing, touched = graph
    site = tmp_path_factory.mktemp("deps")
    name = [f"wfprop-n{i}" for i in range(n)]
    requires: dict[int, set[int]] = {i: set() for i in range(n)}
    for a, b in edges:
        requires[a].add(b)
    for i in range(n):
        if i in missing:
            continue
        wheel(site, name[i], {}, {f"wfprop_n{i}/__init__.py": f"N = {i}\n"},
              _metadata(name[i], [name[j] for j in sorted(requires[i])] + ["django"]))  # fmt: skip
    _plugin(site, [name[r] for r in roots] + ["httpx>=0.27", "Django ; python_version>'3'"])
    reachable: set[int] = set()
    frontier = list(roots)
    while frontier:
        node = frontier.pop()
        if node in reachable:
            continue
        reachable.add(node)
        if node not in missing:
            frontier.extend(requires[node])
    dist = _dist(site)
    deps = closure.dependencies(dist, str(site))
    assert sorted(d.name for d in deps) == sorted(name[i] for i in reachable), deps
    assert {d.name for d in deps if not d.version} == {name[i] for i in reachable & missing}
    assert not any(d.problem for d in deps), deps
    pin = closure.trust_digest(dist, str(site), "webfetch_t")
    assert pin != provenance.code_digest(str(site), "webfetch_t")
    assert pin == closure.trust_digest(dist, str(site), "webfetch_t")
    if touched in missing:
        return
    module = site / f"wfprop_n{touched}" / "__init__.py"
    module.write_text(f"N = {touched}  # changed\n")
    after = closure.trust_digest(dist, str(site), "webfetch_t")
    assert (after != pin) == (touched in reachable), (touched, reachable)


def test_site_requirements_leave_the_pin_as_it_was(tmp_path):
    """A plugin that requires only distributions of the site's own set (django-webfetch's
    requirement closure) has the pin of decision 0050: what it runs alone (its code, and
    since attack 12 its entry point and metadata: ``closure.own_digest``)."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    _plugin(site, ["django>=5", "httpx", "django-webfetch", "dnspython"])
    dist = _dist(site)
    assert {"django", "httpx", "dnspython"} <= closure.site_names()
    assert closure.dependencies(dist, str(site)) == ()
    assert closure.trust_digest(dist, str(site), "webfetch_t") == closure.own_digest(
        dist, str(site), "webfetch_t"
    )
    # An extra of a site distribution is not the site's: what it brings is pinned
    # (attack 9, finding 2): ``dnspython[doh]`` asks for ``h2``.
    other = tmp_path / "other"
    _plugin(other, ["dnspython[doh]"])
    pinned = {d.name: d.version for d in closure.dependencies(_dist(other), str(other))}
    assert "h2" in pinned, pinned
    assert "dnspython" not in pinned, pinned


_USES = """\
def run(plugin, arguments):
    import wfdep_a
    return wfdep_a.ANSWER


def manifest():
    return {'name': 't', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 't_run', 'description': 'x', 'handler': run}]}
"""


def _trusted(site: Path, registry_on, extra: dict[str, str] | None = None):
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    _plugin(site, ["wfdep-a"], _USES)
    wheel(site, "wfdep-a", {}, {"wfdep_a/__init__.py": "ANSWER = 'a'\n", **(extra or {})},
          _metadata("wfdep-a", ["wfdep-b"]))  # fmt: skip
    wheel(site, "wfdep-b", {}, {"wfdep_b.py": "B = 1\n"})
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.origin("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    return instance


def test_a_changed_transitive_dependency_voids_trust_and_says_which(tmp_path, registry_on):
    """``wfdep-b`` (required by ``wfdep-a``, required by the plugin) rewritten: trust no
    longer holds, W034's text names the dependency (``plugin_dependency_changed``), and the
    instance records both dependencies it was trusted with."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    instance = _trusted(site, registry_on)
    try:
        assert instance.trust_holds(), instance.trust_problem()
        assert [row[:2] for row in instance.trusted_dependencies] == [
            ["wfdep-a", "1.0"],
            ["wfdep-b", "1.0"],
        ]
        (site / "wfdep_b.py").write_text("B = 2\n")
        registry.reset()
        assert not instance.trust_holds()
        problem = instance.trust_problem()
        assert "plugin_dependency_changed" in problem, problem
        assert "wfdep-b 1.0 is now wfdep-b 1.0 with other code" in problem, problem
        assert "wfdep-a" not in problem, problem
    finally:
        for name in ("wfdep_a", "wfdep_b", "webfetch_t"):
            sys.modules.pop(name, None)


def test_a_dependency_installed_later_voids_trust(tmp_path, registry_on):
    """A requirement that was not installed when trust was given (pinned as missing) and
    is installed later voids trust: its code was never shown."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    _plugin(site, ["wfdep-late"])
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()
    assert instance.trusted_dependencies == [["wfdep-late", "", ""]]
    wheel(site, "wfdep-late", {}, {"wfdep_late.py": "X = 1\n"})
    registry.reset()
    problem = instance.trust_problem()
    assert "plugin_dependency_changed" in problem, problem
    assert "wfdep-late (not installed) is now wfdep-late 1.0" in problem, problem


def test_the_per_call_pin_covers_the_dependencies(tmp_path, registry_on):
    """Between registry loads, a trusted call compares the pin with the dependencies'
    code too (``tools._pin_holds``): a dependency rewritten under a running process makes
    the next call run as an untrusted instance's, and the registry loads again."""
    from django_webfetch.plugins import registry, tools

    site = tmp_path / "site"
    instance = _trusted(site, registry_on)
    try:
        assert tools._trust_holds(instance)
        assert tools._pin_holds(instance)
        generation = registry.generation()
        (site / "wfdep_a" / "extra.py").write_text("X = 1\n")  # a file added, RECORD kept
        assert not tools._pin_holds(instance)
        assert not tools._trust_holds(instance)
        assert registry.generation() > generation
    finally:
        for name in ("wfdep_a", "wfdep_b", "webfetch_t"):
            sys.modules.pop(name, None)


def test_a_dependencys_cached_pyc_of_other_code_is_refused_before_a_trusted_import(
    tmp_path, registry_on
):
    """A dependency's ``__pycache__`` holding an unchecked-hash ``.pyc`` of other code
    (outside the pin, as a plugin's own, decision 0050): the trusted import is refused
    (``plugin_code_compiled``, naming the dependency) and nothing of it runs here."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.manifest import ManifestError
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "site"
    instance = _trusted(site, registry_on)
    source = site / "wfdep_a" / "__init__.py"
    other = tmp_path / "other.py"
    other.write_text("ANSWER = 'NOT THE SOURCE'\n")
    cached = importlib.util.cache_from_source(str(source))
    os.makedirs(os.path.dirname(cached), exist_ok=True)
    py_compile.compile(
        str(other),
        cfile=cached,
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    try:
        assert instance.trust_holds(), instance.trust_problem()  # the cache is outside the pin
        with pytest.raises(ManifestError) as refused:
            registry._refuse_compiled(registry.origin("t"))
        assert refused.value.reason == "plugin_code_compiled"
        assert "wfdep-a 1.0" in str(refused.value)
        tool = next(t for t in plugin_tools() if t.name == "t_run")
        result = tool.execute({}, ToolContext(approved=True, call_id="c", plugin_instance=instance))
        assert "NOT THE SOURCE" not in str(result.content)
        assert getattr(sys.modules.get("wfdep_a"), "ANSWER", None) != "NOT THE SOURCE"
    finally:
        for name in ("wfdep_a", "wfdep_b", "webfetch_t"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("files", "more than 2 files"),
        ("bytes", "or 10 bytes"),
        ("editable", "installed in editable mode"),
    ],
)
def test_a_dependency_that_cannot_be_pinned_is_never_trusted(
    tmp_path, registry_on, monkeypatch, case, said
):
    """Past the bound on files (``closure.MAX_FILES``) or bytes (``MAX_BYTES``, decided
    before any file is read), or installed in editable mode (its code is not in its
    directory): ``trust`` shows why and ``--confirm`` refuses
    (``plugin_dependency_unpinnable``); trust turned on through the ORM never holds."""
    from django_webfetch.plugins import closure, services

    site = tmp_path / "site"
    if case == "files":
        monkeypatch.setattr(closure, "MAX_FILES", 2)
    if case == "bytes":
        monkeypatch.setattr(closure, "MAX_BYTES", 10)
    instance = _trusted(site, registry_on, {"wfdep_a/x.py": "", "wfdep_a/y.py": ""})
    if case == "editable":
        # Reinstalled editable (``pip install -e``): its metadata says where its code is.
        (site / "wfdep_a-1.0.dist-info" / "direct_url.json").write_text(
            '{"url": "file:///src/wfdep-a", "dir_info": {"editable": true}}'
        )
        from django_webfetch.plugins import registry

        registry.reset()
    assert not instance.trust_holds()
    _instance, found, shown = services.trust_preview("t")
    assert found is not None
    with pytest.raises(services.PluginServiceError) as refused:
        services.confirm_trust("t", shown=shown)
    assert refused.value.code == "plugin_dependency_unpinnable"
    assert said in str(refused.value), str(refused.value)
    problem = instance.trust_problem()
    assert "cannot be pinned" in problem, problem


def test_trust_shows_the_dependencies_it_pins(tmp_path, registry_on):
    """``webfetch plugin trust ALIAS`` lists each installed dependency with its digest and
    directory; the fingerprint covers them (a dependency changed after it was shown makes
    ``--confirm`` refuse, ``trust_not_shown``)."""
    from io import StringIO

    from django.core.management import CommandError, call_command

    from django_webfetch.plugins import registry, services

    site = tmp_path / "site"
    instance = _trusted(site, registry_on)
    instance.trusted = False
    instance.save()
    out = StringIO()
    with pytest.raises(CommandError) as shown:
        call_command("webfetch", "plugin", "trust", "t", stdout=out)
    text = out.getvalue()
    assert "dependency:    wfdep-a 1.0 (sha256 " in text, text
    assert "dependency:    wfdep-b 1.0 (sha256 " in text, text
    fingerprint = str(shown.value).split("--confirm ")[1].split()[0]
    (site / "wfdep_b.py").write_text("B = 3\n")
    registry.reset()
    with pytest.raises(services.PluginServiceError) as refused:
        services.confirm_trust("t", shown=fingerprint)
    assert refused.value.code == "trust_not_shown"


def test_extras_are_followed_where_asked(tmp_path):
    """A dependency's lines for an extra are followed only when a requirement asks for that
    extra (``wfx-a[fast]``); the plugin's own extras are all followed (which it was
    installed with is not recorded: fail closed); other markers never leave a line out."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    wheel(site, "wfx-a", {}, {"wfx_a.py": ""},
          _metadata("wfx-a", ['wfx-b ; extra == "fast"', "wfx-c ; extra == 'slow'",
                              "wfx-d ; python_version < '3'"]))  # fmt: skip
    for name in ("wfx-b", "wfx-c", "wfx-d", "wfx-e"):
        wheel(site, name, {}, {f"{name.replace('-', '_')}.py": ""}, _metadata(name, []))
    _plugin(site, ["wfx-a[fast]", 'wfx-e ; extra == "own"'])
    deps = closure.dependencies(_dist(site), str(site))
    assert [d.name for d in deps] == ["wfx-a", "wfx-b", "wfx-d", "wfx-e"], deps


def test_a_stray_module_shadowing_a_pinned_dependency_is_refused(tmp_path, registry_on):
    """A module named like a pinned dependency's package in an earlier ``sys.path``
    directory (the working directory of ``manage.py``) would be imported in its place: the
    trusted import is refused (``plugin_origin_mismatch``) before anything runs."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.manifest import ManifestError

    site = tmp_path / "site"
    instance = _trusted(site, registry_on)
    stray = tmp_path / "cwd"
    (stray / "wfdep_a").mkdir(parents=True)
    (stray / "wfdep_a" / "__init__.py").write_text("ANSWER = 'STRAY'\n")
    try:
        assert instance.trust_holds(), instance.trust_problem()
        registry._refuse_compiled(registry.origin("t"))  # nothing shadows it yet
        registry_on.syspath_prepend(str(stray))
        with pytest.raises(ManifestError) as refused:
            registry._refuse_compiled(registry.origin("t"))
        assert refused.value.reason == "plugin_origin_mismatch"
        assert "wfdep_a" in str(refused.value)
        assert "wfdep_a" not in sys.modules
    finally:
        for name in ("wfdep_a", "wfdep_b", "webfetch_t"):
            sys.modules.pop(name, None)


def test_the_admin_confirmation_lists_and_reconfirms_the_dependencies(tmp_path, registry_on,
                                                                       admin_client):  # fmt: skip
    """The admin's "Confirm trust" page lists each pinned dependency with its digest, and
    confirming from it trusts the dependencies it showed: after ``wfdep-b`` changed, the
    instance is not trusted, the page shows the new ``wfdep-b``, and its confirmation
    restores trust with the new dependency recorded."""
    import re

    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    instance = _trusted(site, registry_on)
    old = {row[0]: row[2] for row in instance.trusted_dependencies}
    (site / "wfdep_b.py").write_text("B = 4\n")
    registry.reset()
    assert not instance.trust_holds()
    selected = {"action": "confirm_trust", "_selected_action": [instance.pk]}
    text = admin_client.post("/admin/django_webfetch/plugininstance/", selected).content.decode()
    assert "wfdep-a 1.0" in text and "wfdep-b 1.0" in text, text
    assert old["wfdep-a"] in text and old["wfdep-b"] not in text
    shown = re.search(rf'name="shown_{instance.pk}" value="([0-9a-f]+)"', text)[1]
    admin_client.post(
        "/admin/django_webfetch/plugininstance/",
        {**selected, "post": "yes", f"shown_{instance.pk}": shown},
    )
    instance.refresh_from_db()
    assert instance.trust_holds(), instance.trust_problem()
    now = {row[0]: row[2] for row in instance.trusted_dependencies}
    assert now["wfdep-a"] == old["wfdep-a"] and now["wfdep-b"] != old["wfdep-b"]
