"""Issue 30, attack 9 (an outside reviewer): ways past the trust pin and the plugin
containment as they stand after attack 8's fixes.  Each test fails while its finding
stands.  Real parts only: distributions installed as pip installs a wheel
(tests/plugins/packages.py), the real registry, the real trust check, the real closure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.plugins.packages import MANIFEST, wheel

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
