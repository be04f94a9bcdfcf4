"""Issue 30, round 25: an outside attack on the plugin sandbox (hostile plugins).

Each test proves one way through, against the real registry, runtime and sandbox; each
FAILS on the code it was written against (that is the proof) and passes once the route is
closed.  Distributions are written as pip installs them (``tests/plugins/packages.py``).
"""

from __future__ import annotations

import textwrap

import pytest

from tests.plugins.packages import wheel

pytestmark = pytest.mark.django_db

#: What the hostile import writes on its channel in place of the guest's ``ready``: the
#: guest's own message for "this host cannot build the sandbox", with the plugin's text.
_FORGED_WHY = (
    "bwrap_missing: bubblewrap is not usable for this plugin; mark its instance trusted "
    "(admin, plugin instances) to run it"
)

_FORGES_UNAVAILABLE = textwrap.dedent(
    f"""
    import json, os, struct, sys

    # The guest's channel is its last argument (``guest.main``): the plugin's import runs
    # in the same process and writes on it, framed as ``protocol.Channel`` frames.
    _fd = int(sys.argv[-1])
    _body = json.dumps({{"op": "unavailable", "why": {_FORGED_WHY!r}}}).encode()
    os.write(_fd, struct.pack("!I", len(_body)) + _body)
    os._exit(0)
    """
)


def test_a_plugins_import_cannot_say_that_this_host_cannot_build_the_sandbox(tmp_path, registry_on):
    """Severity: Low-Medium.

    Route: the guest sends ``unavailable`` only before any plugin code runs (a sandbox step
    that failed), but the host reads that op as an answer to ``import`` too
    (``host.Worker._start``: ``if message["op"] == "unavailable": raise
    IsolationUnavailable(why)``), i.e. after the plugin's import ran in the process and can
    write on the channel (its descriptor is ``sys.argv[-1]``).  ``_checked_ready`` says
    nothing the guest says of its sandbox after the import is read: this message is.

    What the attacker gains: (1) the hostile import is never remembered as the package's
    failure (``describe`` re-raises ``IsolationUnavailable`` unremembered, "this host, not
    the package"): every registry load starts its sandbox and runs the import again, the
    backoff of ``host._Failures`` never applies; (2) the operator is told, in ``webfetch
    plugin list`` and the registry's problems, that *this host* cannot build the plugin
    sandbox, in the plugin's own words (here: "mark its instance trusted"), an invitation
    to run it in the web process; (3) on a host that does isolate, check E030 drops the
    refusal (it names ``plugin_isolation_unavailable``) and W033 says nothing (the host's
    probe is isolated): the refusal is shown by no system check.

    Suggested fix: take ``unavailable`` only as the answer to ``setup`` (before
    ``contained``); after ``import`` it is a protocol violation (``plugin_crashed``),
    remembered like any failed read.
    """
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site"
    wheel(site, "webfetch-liar", {"liar": "webfetch_liar:manifest"},
          {"webfetch_liar/__init__.py": _FORGES_UNAVAILABLE})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    origin = host.Origin("webfetch_liar:manifest", str(site), "webfetch_liar")
    # The host builds sandboxes here: a plain plugin's read holds.
    assert host.capabilities().get("isolated") is True

    with pytest.raises(host.RuntimeFailure) as failed:
        host.describe(origin)
    # What the plugin's process said after its import is not this host's isolation.
    assert not isinstance(failed.value, host.IsolationUnavailable), failed.value.detail
    assert _FORGED_WHY not in failed.value.detail
    # And the failed read is the package's: remembered, answered without a process.
    assert host.remembered_failure(origin)


def test_a_plugins_forged_unavailable_is_shown_as_its_own_failure_by_the_checks(
    tmp_path, registry_on
):
    """Severity: Low-Medium (the same route as above, seen by an operator).

    Route: the registry turns the forged ``unavailable`` into ``plugin_isolation_unavailable``
    with the plugin's text as this host's reason; ``checks.check_plugins`` leaves every
    problem naming that reason out of E030 and hands it to W033, which says nothing on a
    host that isolates.

    What the attacker gains: an installed hostile distribution is refused by no system
    check the operator runs (``manage.py check`` is silent), while ``webfetch plugin
    list`` blames the host's sandbox with the plugin's words.

    Suggested fix: as above (a protocol violation after ``import``); the registry's
    message then names ``manifest_load`` and E030 reports it.
    """
    from django_webfetch.checks import check_plugins
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site"
    wheel(site, "webfetch-liar", {"liar": "webfetch_liar:manifest"},
          {"webfetch_liar/__init__.py": _FORGES_UNAVAILABLE})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert host.capabilities().get("isolated") is True

    refused = [p for p in registry.problems() if "'liar'" in p]
    assert refused, registry.problems()
    # A system check names the refused plugin.
    said = [m.msg for m in check_plugins() if "liar" in m.msg]
    assert said, [m.msg for m in check_plugins()]
    # The plugin's words are not given as this host's reason.
    assert not any(_FORGED_WHY in p for p in refused), refused
    assert not any("plugin_isolation_unavailable" in p for p in refused), refused


def _entry_points_with_a_script(name: str) -> bytes:
    """An ``entry_points.txt`` declaring plugin ``name`` and a ``console_scripts`` entry
    point over the site's ``django-admin`` (pip writes that script into ``bin/`` at
    install, whatever the registry decides later: the refusal is the operator's notice)."""
    return (
        f"[django_webfetch.plugins]\n{name} = webfetch_sly:manifest\n"
        "[console_scripts]\ndjango-admin = webfetch_sly:main\n"
    ).encode()


_SLY_SOURCE = (
    "def manifest():\n"
    "    return {'name': 'sly', 'version': '1.0', 'egress': [], 'tools': []}\n\n\n"
    "def main():\n"
    "    pass\n"
)


def test_a_refused_distribution_cannot_hide_its_refusal_from_the_system_checks(
    tmp_path, registry_on
):
    """Severity: Low-Medium.

    Route: ``checks.check_plugins`` decides which refusals E030 reports by a substring of
    the refusal's text (``_NO_SANDBOX = "(plugin_isolation_unavailable)" not in problem``),
    and the text quotes names the distribution chose: the entry point's name (never
    validated before it is quoted: ``plugin entry point {ep.name!r} refused (...)``).  A
    distribution whose entry point's name holds ``(plugin_isolation_unavailable)``
    has every refusal of it (here: a ``console_scripts`` entry point over ``django-admin``;
    equally a ``.pth`` file, a tampered RECORD, a shared package) routed to W033, which
    says nothing on a host that builds the sandbox (and on one that does not, only "not
    run", never the reason).

    What the attacker gains: ``manage.py check`` (and CI that runs it) is silent about an
    installed distribution the registry refused as unsafe, the operator's only notice that
    its install wrote a script over the site's command or a ``.pth`` that runs in every
    interpreter of the environment.

    Suggested fix: classify refusals by their reason (``ManifestError.reason`` kept with
    each problem, or a separate list of ``plugin_isolation_unavailable`` refusals), never
    by a substring of a message that quotes names; and refuse entry point names that are
    not plugin names (``manifest._NAME_RE``) before quoting them.
    """
    from django_webfetch.checks import check_plugins
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site"
    hiding = "sly(plugin_isolation_unavailable)"
    wheel(site, "webfetch-sly", {}, {"webfetch_sly/__init__.py": _SLY_SOURCE},
          meta_extra={"entry_points.txt": _entry_points_with_a_script(hiding)})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert host.capabilities().get("isolated") is True

    refused = [p for p in registry.problems() if "sly" in p]
    # The registry refuses the distribution for its script, and says so.
    assert any("console_scripts" in p for p in refused), registry.problems()
    # A system check reports that refusal.
    said = [m.msg for m in check_plugins() if "console_scripts" in m.msg]
    assert said, [m.msg for m in check_plugins()]


def test_a_refused_distribution_of_a_plain_name_is_reported_by_the_system_checks(
    tmp_path, registry_on
):
    """The control of the test above (passes today): the same distribution under a plain
    name is reported by E030, so the check's silence above is the name's doing."""
    from django_webfetch.checks import check_plugins
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    wheel(site, "webfetch-sly", {}, {"webfetch_sly/__init__.py": _SLY_SOURCE},
          meta_extra={"entry_points.txt": _entry_points_with_a_script("sly")})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    said = [m for m in check_plugins() if "console_scripts" in m.msg]
    assert said and all(m.id == "django_webfetch.E030" for m in said), said
