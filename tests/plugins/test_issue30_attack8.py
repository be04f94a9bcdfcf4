"""Issue 30, attack round 8 (outside review of the round-6/7 fixes): findings, each a test
that fails while the finding stands.  Real parts only: real files installed as pip installs
a wheel (tests/plugins/packages.py), the real registry, the real trust check and the real
in-process (trusted) call.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db


def test_a_deep_package_tree_breaks_the_registry_for_every_plugin(tmp_path, registry_on):
    """Severity: Medium.  Route: ``provenance._files`` walks a plugin's package by
    recursion (``walk`` calls itself per directory level), bounded in files
    (``_DIGEST_FILES``) but not in depth.  A package ``webfetch_d`` with a directory chain
    deeper than the interpreter's recursion limit (a wheel may hold ``webfetch_d/a/a/.../
    x.py``: 1100 levels is a 2.2 kB path) makes ``code_digest`` / ``compiled_problem``
    raise ``RecursionError`` instead of returning a problem.  ``registry.load`` calls
    ``provider_of(ep)`` (-> ``code_digest``) inside the per-entry-point ``try`` that only
    catches ``ManifestError``: the ``RecursionError`` escapes ``load`` itself, so one
    installed distribution takes every plugin of the site away (``registry.origin("t")``
    of an unrelated, trusted plugin raises; so does every ``plugin_tools()``).  Expected:
    the deep plugin is refused with a stable reason (``plugin_path_unsafe`` or the like);
    plugin ``t`` installed beside it still loads and its trust still holds."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    wheel(site, "webfetch-d", {"d": "webfetch_d:manifest"},
          {"webfetch_d/__init__.py": "def manifest():\n    return {}\n"})  # fmt: skip
    # The chain made one level at a time (``pathlib`` and ``os.makedirs`` recurse too).
    where = str(site / "webfetch_d")
    for _ in range(sys.getrecursionlimit() + 100):
        where = os.path.join(where, "a")
        os.mkdir(where)
    with open(os.path.join(where, "x.py"), "w") as fh:
        fh.write("")
    registry_on.syspath_prepend(str(site))
    registry.reset()
    outcome = {}
    try:
        outcome["digest"] = provenance.code_digest(str(site), "webfetch_d")
    except RecursionError:
        outcome["digest"] = "RecursionError"
    try:
        outcome["load"] = registry.origin("t") is not None
        outcome["trust"] = PluginInstance.objects.create(
            plugin="t", alias="t", trusted=True
        ).trust_holds()
    except RecursionError:
        outcome["load"] = "RecursionError"
    assert outcome == {"digest": outcome["digest"], "load": True, "trust": True}, outcome
    assert outcome["digest"] != "RecursionError", outcome
