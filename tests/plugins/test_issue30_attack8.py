"""Issue 30, attack round 8 (outside review of the round-6/7 fixes): findings, each a test
that fails while the finding stands.  Real parts only: real files installed as pip installs
a wheel (tests/plugins/packages.py), the real registry, the real trust check and the real
in-process (trusted) call.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys

import pytest

from tests.plugins.packages import wheel

pytestmark = pytest.mark.django_db


#: Plugin ``t``: its tool answers ``ANSWER`` of a helper module of the same distribution,
#: a top-level module of its own (``webfetch_t_helper``), imported at first use.
_WITH_HELPER = """\
def run(plugin, arguments):
    import webfetch_t_helper
    return webfetch_t_helper.ANSWER


def manifest():
    return {'name': 't', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 't_run', 'description': 'x', 'handler': run}]}
"""


def _call(instance, name):
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    tool = next(t for t in plugin_tools() if t.name == name)
    return tool.execute({}, ToolContext(approved=True, call_id=name, plugin_instance=instance))


def _unchecked_pyc(source, text):
    """A PEP 552 UNCHECKED_HASH ``.pyc`` of ``text`` where the import system looks for the
    cached bytecode of ``source`` (the import system loads it whatever the source says)."""
    code = compile(text, str(source), "exec", dont_inherit=True)
    flags = (0b01).to_bytes(4, "little")  # hash-based, unchecked
    data = importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(b"x") + marshal.dumps(code)
    cached = importlib.util.cache_from_source(str(source))
    os.makedirs(os.path.dirname(cached), mode=0o755, exist_ok=True)
    with open(cached, "wb") as fh:
        fh.write(data)
    return cached


def test_a_trusted_plugins_sibling_module_runs_unchecked_compiled_code_in_the_site(
    tmp_path, registry_on
):
    """Severity: Critical.  Route: distribution ``webfetch-t`` ships its plugin package
    ``webfetch_t`` and a second top-level module ``webfetch_t_helper.py`` (one wheel, two
    top-level names, as many distributions do); the handler imports the helper.  The
    operator reviews both sources and trusts the instance.  A second ``webfetch-t 1.0``
    wheel (a mirror, a rebuilt wheelhouse, ``pip --no-compile``) adds
    ``__pycache__/webfetch_t_helper.cpython-3XX.pyc``, a PEP 552 UNCHECKED_HASH ``.pyc``
    of other code.  ``provenance.code_digest`` (the pin, compared at every call by
    ``tools._pin_holds``) and ``provenance.compiled_problem`` (``registry._refuse_compiled``)
    only walk the entries named like the plugin's own top-level name
    (``provenance._own_entries``), and ``record_problem`` leaves a bytecode cache's
    ``.pyc`` out: trust holds, nothing is refused, and the trusted call imports the helper
    in the site's process from that ``.pyc`` -- code nobody reviewed, the exact class the
    round-7 fix (test_issue30_attack7.py, first test) closed for the package itself.
    Expected: the pin or the compiled-code check covers every module of the distribution
    the plugin's code can import (or the trusted call is refused)."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    helper = "ANSWER = 'reviewed helper'\n"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _WITH_HELPER, "webfetch_t_helper.py": helper})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.origin("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()
    pin = instance.trusted_record
    try:
        _unchecked_pyc(site / "webfetch_t_helper.py", "ANSWER = 'HIDDEN CODE RAN IN THE SITE'\n")
        registry.reset()
        # What the reviewer's fixes look at: all silent about the helper's compiled code.
        digest = provenance.code_digest(str(site), "webfetch_t")
        compiled = provenance.compiled_problem(str(site), "webfetch_t")
        result = _call(instance, "t_run")
        ran_hidden = result.ok and "HIDDEN" in str(result.content)
        assert not ran_hidden, (
            f"unreviewed compiled code of the distribution ran in the site's process "
            f"(pin unchanged: {digest == pin}; compiled_problem: {compiled!r}; "
            f"trust holds: {instance.trust_holds()})"
        )
    finally:
        sys.modules.pop("webfetch_t_helper", None)
        sys.modules.pop("webfetch_t", None)


def test_a_trusted_plugins_sibling_module_changes_under_an_unchanged_pin(tmp_path, registry_on):
    """Severity: High.  Route: as above (``webfetch_t`` imports ``webfetch_t_helper`` of
    the same distribution), but the second ``webfetch-t 1.0`` wheel changes the helper's
    source (a truthful ``RECORD``: pip writes it).  The trust fingerprint is (name,
    version, ``code_digest`` of ``webfetch_t`` alone): none changes, so trust holds and
    ``tools._pin_holds`` holds at every call; the trusted call runs the new helper in the
    site's process.  Decision 0050 / docs/plugins.rst say trust holds "only while the
    distribution providing the entry point is that one with that code"."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    files = {"webfetch_t/__init__.py": _WITH_HELPER, "webfetch_t_helper.py": "ANSWER = 'ok'\n"}
    info = wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"}, files)
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()
    try:
        # The second wheel, as pip installs it over the first (new files, new RECORD).
        import shutil

        shutil.rmtree(info)
        (site / "webfetch_t_helper.py").unlink()
        files["webfetch_t_helper.py"] = "ANSWER = 'OTHER CODE'\n"
        wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"}, files)
        registry.reset()
        result = _call(instance, "t_run")
        in_site = "webfetch_t_helper" in sys.modules
        assert not (in_site and result.ok and "OTHER CODE" in str(result.content)), (
            f"changed code of the trusted distribution ran in the site's process "
            f"(trust holds: {instance.trust_holds()})"
        )
    finally:
        sys.modules.pop("webfetch_t_helper", None)
        sys.modules.pop("webfetch_t", None)


def test_a_deep_package_tree_breaks_the_registry_for_every_plugin(tmp_path, registry_on):
    """Severity: Medium.  Route: ``provenance._files`` walks a plugin's package by
    recursion (``walk`` calls itself per directory level), bounded in files
    (``_DIGEST_FILES``) but not in depth.  A package ``webfetch_d`` with a directory chain
    deeper than the interpreter's recursion limit (a wheel may hold ``webfetch_d/a/a/.../
    x.py``: 1100 levels is a 2.2 kB path) makes ``code_digest`` / ``compiled_problem``
    raise ``RecursionError`` instead of returning a problem.  Expected: the deep plugin is
    refused with a stable reason; another plugin ``t`` installed beside it still loads and
    its trust still holds."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _WITH_HELPER, "webfetch_t_helper.py": "ANSWER = 'ok'\n"})  # fmt: skip
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
