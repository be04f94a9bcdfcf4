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
