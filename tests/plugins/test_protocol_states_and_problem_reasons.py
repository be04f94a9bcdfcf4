"""The host takes each message only in the protocol state where no plugin code has run
yet, and every refusal of the registry is reported by the one system check its reason code
maps to, never by a substring of its text
(docs/decisions/0064-protocol-states-and-problem-reasons.rst).

Distributions are written as pip installs them (``tests/plugins/packages.py``); the
registry, the runtime and the sandbox are the real ones.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import pytest

from tests.plugins.packages import wheel

pytestmark = pytest.mark.django_db

#: What the hostile import writes on its channel in place of the guest's ``ready``: the
#: guest's own message for "this host cannot build the sandbox", with the plugin's text.
_FORGED_WHY = (
    "bwrap_missing: bubblewrap is not usable for this plugin; mark its instance trusted "
    "(admin, plugin instances) to run it"
)

#: Messages only the guest sends, and only before the plugin's import (``guest.main``).
_BEFORE_IMPORT = {
    "unavailable": {"op": "unavailable", "why": _FORGED_WHY},
    "contained": {
        "op": "contained",
        "isolation": {
            "landlock": 0,
            "landlock_network": False,
            "landlock_scoped": False,
            "landlock_refused": [],
            "landlock_refused_count": 0,
            "landlock_error": _FORGED_WHY,
        },
    },
}


def _forging(message: dict) -> str:
    """A plugin package whose import writes ``message`` on the guest's channel (its
    descriptor is the guest's last argument) framed as ``protocol.Channel`` frames."""
    return textwrap.dedent(
        f"""
        import os, struct, sys

        _fd = int(sys.argv[-1])
        _body = {json.dumps(message)!r}.encode()
        os.write(_fd, struct.pack("!I", len(_body)) + _body)
        os._exit(0)
        """
    )


def _liar(tmp_path, registry_on, op: str = "unavailable"):
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    site = tmp_path / "site"
    wheel(site, "webfetch-liar", {"liar": "webfetch_liar:manifest"},
          {"webfetch_liar/__init__.py": _forging(_BEFORE_IMPORT[op])})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    # The host builds sandboxes here: a plain plugin's read holds.
    assert host.capabilities().get("isolated") is True
    return host.Origin("webfetch_liar:manifest", str(site), "webfetch_liar")


@pytest.mark.parametrize("op", sorted(_BEFORE_IMPORT))
def test_a_message_of_before_the_import_answering_it_is_the_packages_protocol_violation(
    tmp_path, registry_on, op
):
    """After ``import`` the plugin's code has run in the process and can write on the
    channel: only ``ready`` answers it.  An ``unavailable`` (or ``contained``) then is a
    protocol violation (``plugin_protocol_error``), never this host's isolation and never
    the plugin's words as the host's; the failed read is the package's, remembered by the
    backoff and answered without a process.

    History: issue 30, round 25, finding 1 (the host read ``unavailable`` as the answer to
    ``import`` too: ``IsolationUnavailable`` with the plugin's text, never remembered)."""
    from django_webfetch.plugins.runtime import host

    origin = _liar(tmp_path, registry_on, op)
    with pytest.raises(host.RuntimeFailure) as failed:
        host.describe(origin)
    assert not isinstance(failed.value, host.IsolationUnavailable), failed.value.detail
    assert failed.value.code == "plugin_protocol_error", failed.value
    assert _FORGED_WHY not in failed.value.detail
    assert f"answered its import with {op!r}" in failed.value.detail
    # Remembered: the next read is answered without a plugin process.
    assert host.remembered_failure(origin)
    started = host.reads_started
    with pytest.raises(host.RuntimeFailure) as again:
        host.describe(origin)
    assert again.value.code == "plugin_protocol_error"
    assert host.reads_started == started


def test_a_forged_unavailable_is_refused_as_the_packages_failure_and_reported_by_e030(
    tmp_path, registry_on
):
    """The registry refuses the package for its own failure (``manifest_load``, code
    ``plugin_protocol_error``), never ``plugin_isolation_unavailable``, and check E030
    reports it on a host that builds the sandbox.

    History: issue 30, round 25, finding 1 (seen by an operator: no check reported it,
    ``webfetch plugin list`` blamed the host's sandbox in the plugin's words)."""
    from django_webfetch.checks import check_plugins
    from django_webfetch.plugins import registry

    _liar(tmp_path, registry_on)
    refused = [p for p in registry.refusals() if "liar" in p.names]
    assert [p.reason for p in refused] == ["manifest_load"], registry.problems()
    assert "plugin_protocol_error" in refused[0].message
    assert _FORGED_WHY not in refused[0].message
    said = [m for m in check_plugins() if "liar" in m.msg]
    assert said and all(m.id == "django_webfetch.E030" for m in said), said


def _entry_points(plugin: str, script: str) -> bytes:
    """An ``entry_points.txt`` declaring plugin ``plugin`` and a ``console_scripts`` entry
    point ``script`` over the site's ``django-admin`` (pip writes it into ``bin/``)."""
    return (
        f"[django_webfetch.plugins]\n{plugin} = webfetch_sly:manifest\n"
        f"[console_scripts]\n{script} = webfetch_sly:main\n"
    ).encode()


_SLY_SOURCE = (
    "def manifest():\n"
    "    return {'name': 'sly', 'version': '1.0', 'egress': [], 'tools': []}\n\n\n"
    "def main():\n"
    "    pass\n"
)


def _sly(tmp_path, registry_on, plugin: str, script: str = "django-admin") -> None:
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    wheel(site, "webfetch-sly", {}, {"webfetch_sly/__init__.py": _SLY_SOURCE},
          meta_extra={"entry_points.txt": _entry_points(plugin, script)})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()


def test_an_entry_point_name_that_is_no_plugin_name_is_refused_by_its_own_reason(
    tmp_path, registry_on
):
    """An entry point's name is checked (``manifest.is_plugin_name``) before anything
    quotes it: one that is no plugin's name is refused as ``entry_point_name_invalid``,
    reported by E030 by that code, and quoted escaped (a bidirectional override is
    written ``\\u202e``).

    History: issue 30, round 25, finding 2 (a name holding ``(plugin_isolation_unavailable)``
    moved every refusal of its distribution from E030 to W033, which said nothing)."""
    from django_webfetch.checks import check_plugins
    from django_webfetch.plugins import registry

    _sly(tmp_path, registry_on, "sly(plugin_isolation_unavailable)\u202e")
    refused = [p for p in registry.refusals() if p.reason == "entry_point_name_invalid"]
    assert len(refused) == 1 and refused[0].names == (), registry.problems()
    assert "\u202e" not in refused[0].message
    said = [m for m in check_plugins() if "entry_point_name_invalid" in m.msg]
    assert len(said) == 1 and said[0].id == "django_webfetch.E030", said
    assert "\u202e" not in said[0].msg and "\\u202e" in said[0].msg


def test_a_refusal_whose_text_names_the_isolation_reason_is_reported_by_e030(tmp_path, registry_on):
    """The text of a refusal quotes names a distribution chose (here its ``console_scripts``
    entry point's): the checks decide by the refusal's reason code, so the refusal
    (``plugin_distribution_unsafe``) is E030's whatever it quotes.

    History: issue 30, round 25, finding 2."""
    from django_webfetch.checks import check_plugins
    from django_webfetch.plugins import registry

    _sly(tmp_path, registry_on, "sly", "sly(plugin_isolation_unavailable)")
    refused = [p for p in registry.refusals() if "sly" in p.names]
    assert [p.reason for p in refused] == ["plugin_distribution_unsafe"], registry.problems()
    assert "(plugin_isolation_unavailable)" in refused[0].message
    said = [m for m in check_plugins() if "console_scripts" in m.msg]
    assert said and all(m.id == "django_webfetch.E030" for m in said), said


def test_a_refused_distribution_of_a_plain_name_is_reported_by_the_system_checks(
    tmp_path, registry_on
):
    """The control of the test above: a plain script name, the same check.

    History: issue 30, round 25, finding 2 (the control)."""
    from django_webfetch.checks import check_plugins

    _sly(tmp_path, registry_on, "sly")
    said = [m for m in check_plugins() if "console_scripts" in m.msg]
    assert said and all(m.id == "django_webfetch.E030" for m in said), said


def test_another_plugins_refusal_quoting_a_name_is_not_that_names_refusal(tmp_path, registry_on):
    """``services`` finds a name's refusals by the names each refuses
    (``Problem.names``), never by its quoted name in a message: a distribution refused
    for a script named ``absent`` does not make plugin ``absent`` "refused".

    History: issue 30, round 25, finding 2 (``services._manifest`` matched
    ``repr(name) in p``)."""
    from django_webfetch.plugins import registry, services

    _sly(tmp_path, registry_on, "sly", "absent")
    assert any("'absent'" in p for p in registry.problems()), registry.problems()
    with pytest.raises(services.PluginServiceError) as absent:
        services.install("absent")
    assert absent.value.code == "plugin_not_installed", absent.value
    with pytest.raises(services.PluginServiceError) as sly:
        services.install("sly")
    assert sly.value.code == "plugin_refused" and "console_scripts" in str(sly.value)


def _raised_reasons(path: Path) -> set[str]:
    """Each reason code a module raises or refuses with as a literal: the first argument
    of ``ManifestError(...)`` and ``Problem(...)``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("ManifestError", "Problem")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(node.args[0].value)
    return found


def test_every_refusal_reason_maps_to_exactly_one_check_by_its_code():
    """Every reason the registry (and the manifest it parses) can refuse with is listed in
    ``registry.REFUSAL_REASONS`` (found in their source), and each maps to exactly one
    system check id by its code (``checks.problem_check``): W033 only for the sandbox's
    reason, E030 for every other, and a reason no one listed to E030 (fail closed)."""
    from django_webfetch import checks
    from django_webfetch.plugins import manifest, registry

    raised = _raised_reasons(Path(registry.__file__)) | _raised_reasons(Path(manifest.__file__))
    assert raised, "no reason found: the scan reads nothing"
    assert raised <= registry.REFUSAL_REASONS, raised - registry.REFUSAL_REASONS
    assert manifest.REASONS <= registry.REFUSAL_REASONS
    ids = {"django_webfetch.E030", "django_webfetch.W033"}
    mapped = {reason: checks.problem_check(reason) for reason in registry.REFUSAL_REASONS}
    assert set(mapped.values()) <= ids
    assert {r for r, i in mapped.items() if i == "django_webfetch.W033"} == {
        "plugin_isolation_unavailable"
    }
    assert checks.problem_check("a_reason_no_one_listed") == "django_webfetch.E030"
