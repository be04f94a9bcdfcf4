"""``manage.py webfetch plugin install|bind|upgrade|list|check``: output and effect."""

from __future__ import annotations

import io
import os
import sys

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from django_webfetch.invocation import ENV_VAR
from django_webfetch.models import PluginInstance, ToolGroup
from django_webfetch.plugins import services
from django_webfetch.plugins.runtime.host import isolation_label

pytestmark = pytest.mark.django_db

#: Where an admin enables a tool group, as ``webfetch explain`` says it.
ENABLE = "admin: Web fetch > Tool groups"
DECLARED = (
    "granted.lab.example, *.api.lab.example, intranet.lab.example, metadata.lab.example, "
    "redirector.lab.example, mixed.lab.example"
)


@pytest.fixture(autouse=True)
def _no_wrapper_hint(monkeypatch):
    """The printed commands are those of a plain ``manage.py`` unless a test sets a hint."""
    monkeypatch.delenv(ENV_VAR, raising=False)


def webfetch(*args):
    out = io.StringIO()
    call_command("webfetch", "plugin", *args, stdout=out)
    return out.getvalue()


def test_install_prints_the_declaration_and_writes_the_grant(example):
    output = webfetch("install", "example")
    assert output.splitlines() == [
        "installed example 1.0 as 'example'",
        f"  declared destinations: {DECLARED}",
        f"  granted:               {DECLARED}",
        "  effective:             (none): group 'example' is disabled: an admin enables it "
        f"({ENABLE})",
        f"  tool group:            example (enable it to offer the tools: {ENABLE})",
    ]
    instance = PluginInstance.objects.get()
    assert instance.egress_hosts == DECLARED.split(", ")
    assert instance.config == {"page_size": 20}
    group = ToolGroup.objects.get(slug="example")
    assert (group.enabled, group.scope) == (False, "external_filtered")


def test_install_with_alias_and_taken_alias(example):
    webfetch("install", "example", "--alias", "crm")
    assert PluginInstance.objects.get().alias == "crm"
    with pytest.raises(CommandError, match="alias_taken"):
        webfetch("install", "example", "--alias", "crm")


def test_install_unknown_plugin(example):
    with pytest.raises(CommandError, match="plugin_not_installed"):
        webfetch("install", "nope")


def test_bind_requires_a_choice_for_a_non_empty_declaration(example):
    with pytest.raises(CommandError, match="egress_choice_required"):
        webfetch("bind", "example", "--alias", "b")
    assert not PluginInstance.objects.exists()


def test_bind_none_and_declared(example):
    output = webfetch("bind", "example", "--alias", "b1", "--egress", "none")
    assert "  granted:               (none)" in output
    assert "  effective:             (none)" in output
    assert PluginInstance.objects.get(alias="b1").egress_hosts == []
    webfetch("bind", "example", "--alias", "b2", "--egress", "declared")
    assert PluginInstance.objects.get(alias="b2").egress_hosts == DECLARED.split(", ")


def test_upgrade_that_declares_more_widens_nothing_without_confirm(example):
    from django_webfetch.plugins import registry

    webfetch("install", "example")
    example.set_state(version="2.0", extra_egress=["extra.lab.example", "deep.api.lab.example"])
    registry.reset()
    fingerprint = services.declaration_fingerprint(registry.get_manifest("example"))
    out = io.StringIO()
    with pytest.raises(CommandError, match="--confirm") as caught:
        call_command("webfetch", "plugin", "upgrade", "example", stdout=out)
    assert caught.value.returncode == 3
    assert out.getvalue().splitlines() == [
        "example: 1.0 -> 2.0",
        # deep.api.lab.example is within the old *.api.lab.example: nothing new.
        "  + declares extra.lab.example",
        "  NOT upgraded: the new version declares more; nothing was widened",
        "to grant what is shown above: python manage.py webfetch plugin upgrade example "
        f"--confirm {fingerprint}",
    ]
    instance = PluginInstance.objects.get()
    assert instance.version == "1.0"
    assert "extra.lab.example" not in instance.egress_hosts
    assert "extra.lab.example" not in instance.effective()

    output = webfetch("upgrade", "example", "--confirm", fingerprint)
    assert "  grant widened" in output
    instance.refresh_from_db()
    assert instance.version == "2.0"
    assert "extra.lab.example" in instance.egress_hosts
    assert "extra.lab.example" in instance.effective()


def test_upgrade_that_declares_nothing_new(example):
    from django_webfetch.plugins import registry

    webfetch("install", "example")
    example.set_state(version="1.1")
    registry.reset()
    assert webfetch("upgrade", "example").splitlines() == [
        "example: 1.0 -> 1.1",
        "  grant unchanged",
    ]
    assert PluginInstance.objects.get().version == "1.1"


def test_upgrade_keeps_a_narrowed_grant_narrow(example):
    from django_webfetch.plugins import registry

    webfetch("bind", "example", "--alias", "b", "--egress", "none")
    example.set_state(version="1.1")
    registry.reset()
    webfetch("upgrade", "example")
    assert PluginInstance.objects.get().egress_hosts == []


def test_list_shows_declared_granted_effective(example):
    from django_webfetch.plugins.registry import get_manifest

    version = get_manifest("example").version
    # Before any instance: what this host does with untrusted plugins, what is installed.
    from django_webfetch.plugins import notices

    # Where the kernel refuses the host a plugin process's CPU limit, a line says so.
    cpu = [] if notices.cpu_limit_available() else [f"this host: {notices.WITHOUT_CPU_LIMIT}"]
    assert webfetch("list").splitlines() == [
        f"this host: {isolation_label(False)}",
        *cpu,
        f"available: example {version} (python manage.py webfetch plugin install example)",
        "no plugin instances",
    ]
    webfetch("install", "example")
    bound = PluginInstance.objects.create(
        plugin="example",
        alias="other",
        egress_hosts=["granted.lab.example", "ungranted.lab.example"],
        secret_config={"token": "s3cret-value"},
    )
    bound.egress_allow_private = ["granted.lab.example"]
    bound.save()
    ToolGroup.objects.filter(slug="example").update(enabled=True)
    output = webfetch("list")
    assert "s3cret" not in output
    assert output.splitlines()[-7:] == [
        "other (example , instance enabled)",
        f"  declared:  {DECLARED}",
        "  granted:   granted.lab.example, ungranted.lab.example",
        "  effective: granted.lab.example",
        "  private addresses allowed for: granted.lab.example",
        "  secrets: set (never shown)",
        f"  isolation: {isolation_label(False)}",
    ]


def test_list_shows_each_instances_isolation(example):
    """Each instance as its plugin's own process ran (what the guest enforced of Landlock,
    ``registry.isolation``; tests/plugins/test_landlock_partial_rules.py shows one that
    enforced less than this host has), or trusted."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime.host import capabilities

    webfetch("install", "example")
    PluginInstance.objects.create(plugin="example", alias="inproc", trusted=True)
    lines = [line for line in webfetch("list").splitlines() if "isolation:" in line]
    found = registry.isolation("example") or capabilities()
    if found.get("isolated"):
        assert found.get("landlock_refused_count") == 0, found
        landlock = (
            f"Landlock ABI {found['landlock']}"
            if found.get("landlock")
            else f"no Landlock ({found['landlock_error']})"
        )
        cgroup = ", ".join(sorted(found.get("cgroup") or {}))
        limits = f"; cgroup: {cgroup}" if cgroup else ""
        untrusted = (
            "  isolation: sandboxed process (bubblewrap: user, pid, net, ipc, uts, mount "
            f"namespaces; seccomp allow-list; {landlock}{limits})"
        )
        assert lines[0] == untrusted  # "example" sorts first
    else:
        assert lines[0].startswith("  isolation: none: untrusted plugins do not run here")
    assert lines[1] == "  isolation: trusted: in this process, audit hook only (check W032)"


def test_list_flags_an_instance_whose_package_is_gone(example):
    PluginInstance.objects.create(plugin="gone", alias="gone", egress_hosts=["a.example.org"])
    output = webfetch("list")
    assert "gone (gone , instance enabled, package NOT installed)" in output
    assert (
        "  effective: (none): plugin 'gone' is not installed here (is its directory in "
        "WEBFETCH_PLUGIN_DIRS of this process?)"
    ) in output


def test_check_explains_the_instance_policy(plugin_lab):
    webfetch("install", "example")
    output = webfetch("check", "http://granted.lab.example/x", "--plugin", "example")
    assert output.splitlines()[0] == "plugin     example"
    # The instance's policy narrows to its grant: the step says so.
    assert "grant      pass  granted as granted.lab.example" in output
    assert "allowlist" not in output
    assert output.rstrip().endswith("ALLOWED")
    out = io.StringIO()
    with pytest.raises(CommandError, match="not_allowlisted"):
        call_command(
            "webfetch",
            "plugin",
            "check",
            "http://ungranted.lab.example/",
            "--plugin",
            "example",
            stdout=out,
        )
    assert "DENIED (not_allowlisted)" in out.getvalue()
    # Never connects.
    assert plugin_lab.accepts() == []


def test_check_without_grant(example):
    webfetch("bind", "example", "--alias", "b", "--egress", "none")
    out = io.StringIO()
    with pytest.raises(CommandError, match="egress_not_granted"):
        call_command(
            "webfetch", "plugin", "check", "http://a.example/", "--plugin", "b", stdout=out
        )
    assert "DENIED (egress_not_granted)" in out.getvalue()


def test_check_unknown_alias(example):
    with pytest.raises(CommandError, match="no_such_instance"):
        webfetch("check", "http://a.example/", "--plugin", "zzz")


_MANAGE = """
import django
django.setup()
from django.core.management import execute_from_command_line
from tests import dbshare
# The run's migrated copy (cli_settings adds a plugin directory to tests.settings: the same
# schema and rows), so the migrate below runs as manage.py runs it and finds nothing to do.
dbshare.migrate(like="tests.settings")
for argv in (["migrate", "-v", "0"], ["check"], ["webfetch", "plugin", "list"]):
    print("==>", " ".join(argv), flush=True)
    execute_from_command_line(["manage.py", *argv])
"""


@pytest.mark.parametrize("why", ["bwrap_missing", "site_code_unmaskable"])
def test_without_a_sandbox_every_command_runs_and_plugin_list_says_why(tmp_path, why):
    """A host that cannot build the sandbox, with a plugin package installed (in
    ``WEBFETCH_PLUGIN_DIRS``, as docs/plugins.rst says): the refusal is check W033's (a
    warning naming the plugin and the reason), never an error that stops ``migrate``,
    ``check`` or the operator's own ``webfetch plugin list``, which names the reason.  Two
    hosts: one without bubblewrap, one whose ``WEBFETCH_PLUGIN_HIDDEN_PATHS`` names what
    every plugin process needs (the standard library: it cannot be masked, decision 0058).
    The commands run as ``manage.py`` runs them (system checks included), in one process."""
    import os
    import subprocess
    import sys

    import django_webfetch
    from django_webfetch.plugins.runtime.bubblewrap import REASONS

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    site = os.path.join(os.path.dirname(__file__), "site")
    extra = ""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([root, str(tmp_path)]),
        "DJANGO_SETTINGS_MODULE": "cli_settings",
    }
    if why == "bwrap_missing":
        env["WEBFETCH_PLUGIN_BWRAP"] = "/nonexistent/bwrap"
    else:
        from django_webfetch.plugins.runtime.host import capabilities

        if not capabilities().get("isolated"):
            pytest.skip("this host cannot build the plugin sandbox at all")
        stdlib = os.path.dirname(os.path.realpath(os.__file__))
        extra = f"WEBFETCH_PLUGIN_HIDDEN_PATHS = [{stdlib!r}]\n"
    (tmp_path / "cli_settings.py").write_text(
        f"from tests.settings import *  # noqa: F403\nWEBFETCH_PLUGIN_DIRS = [{site!r}]\n{extra}"
    )
    done = subprocess.run(
        [sys.executable, "-c", _MANAGE],
        capture_output=True, text=True, timeout=300, cwd=root, env=env, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "django_webfetch.W033" in output and "Not run: example" in output
    assert f"({why}: {REASONS[why]})" in " ".join(output.split()), output[-4000:]
    assert "django_webfetch.E030" not in output
    listed = done.stdout.split("==> webfetch plugin list\n", 1)[1].splitlines()
    assert listed[0].startswith(f"this host: none: untrusted plugins do not run here ({why}")
    assert any(
        line.startswith(
            "refused: plugin entry point 'example' refused (plugin_isolation_unavailable)"
        )
        for line in listed
    ), listed


def test_a_plugin_check_refusal_is_printed_once(example, capsys):
    """``plugin check`` from a terminal: the refusal is printed once (``DENIED (reason)``)
    and the exit status is 1; stderr does not repeat it."""
    from django.core.management import ManagementUtility

    webfetch("bind", "example", "--alias", "b", "--egress", "none")
    capsys.readouterr()
    argv = ["manage.py", "webfetch", "plugin", "check", "http://a.example/", "--plugin", "b"]
    with pytest.raises(SystemExit) as exited:
        ManagementUtility(argv).execute()
    out, err = capsys.readouterr()
    assert exited.value.code == 1
    assert out.count("DENIED (") == 1 and "DENIED (egress_not_granted)" in out, out
    assert "denied" not in err.lower(), err


def test_list_and_check_agree_on_what_is_effective(plugin_lab):
    """``effective`` is what ``check`` decides from: while the plugin's group is disabled
    (as ``install`` leaves it) or the instance is, ``list`` says no host is effective and
    why, and ``check`` refuses ``egress_not_granted``; once an admin enables the group both
    show the grant."""
    webfetch("install", "example")
    ToolGroup.objects.filter(slug="example").update(enabled=False)

    def effective():
        return [line for line in webfetch("list").splitlines() if "effective:" in line]

    def check():
        out = io.StringIO()
        try:
            call_command("webfetch", "plugin", "check", "http://granted.lab.example/x",
                         "--plugin", "example", stdout=out)  # fmt: skip
        except CommandError as exc:
            return str(exc)
        return out.getvalue().splitlines()[-1]

    assert effective() == [
        f"  effective: (none): group 'example' is disabled: an admin enables it ({ENABLE})"
    ]
    assert check() == "denied: egress_not_granted"
    ToolGroup.objects.filter(slug="example").delete()
    assert effective() == ["  effective: (none): group 'example' does not exist"]
    assert check() == "denied: egress_not_granted"
    ToolGroup.objects.create(slug="example", scope="none", enabled=True)
    assert effective() == ["  effective: (none): group 'example' has no network scope"]
    assert check() == "denied: egress_not_granted"
    ToolGroup.objects.filter(slug="example").update(scope="external_filtered")
    assert effective() == [f"  effective: {DECLARED}"]
    assert check().endswith("ALLOWED")
    PluginInstance.objects.filter(alias="example").update(enabled=False)
    assert effective() == ["  effective: (none): the instance is disabled"]
    assert check() == "denied: egress_not_granted"


# -- a new user's trial of the README (issue 30, round 9) ---------------------------------


def test_check_help_says_what_no_resolve_does(capsys):
    """``plugin check --help`` describes ``--no-resolve`` as ``webfetch explain`` does."""
    with pytest.raises(SystemExit):
        call_command("webfetch", "plugin", "check", "--help")
    printed = " ".join(capsys.readouterr().out.split())
    assert "--no-resolve Do not look the host up in DNS either." in printed


def _python_on_path(tmp_path, monkeypatch):
    """This process runs as ``python`` found first on the ``PATH`` (an activated venv)."""
    bin_dir = tmp_path / "venv-bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_trust_prompts_a_runnable_command_and_a_wrong_fingerprint_says_so(
    example, tmp_path, monkeypatch
):
    """The prompt is a command the operator can paste (``python manage.py ...``, as they
    started it); a mistyped ``--confirm`` says the fingerprint is not the one shown (not
    that the package changed) and how to see it again; nothing is trusted."""
    _python_on_path(tmp_path, monkeypatch)
    monkeypatch.setattr(sys, "argv", ["manage.py", "webfetch", "plugin", "trust", "demo"])
    PluginInstance.objects.create(plugin="example", alias="demo")
    out = io.StringIO()
    with pytest.raises(CommandError, match="trust_confirmation_required"):
        call_command("webfetch", "plugin", "trust", "demo", stdout=out)
    last = out.getvalue().splitlines()[-1]
    fingerprint = last.rsplit(" ", 1)[1]
    assert last == (
        "to trust what is shown above: python manage.py webfetch plugin trust demo "
        f"--confirm {fingerprint}"
    )
    with pytest.raises(CommandError) as caught:
        webfetch("trust", "demo", "--confirm", "0123abcd")
    assert str(caught.value) == (
        "fingerprint '0123abcd' is not the one shown for webfetch-example-plugin 1.0 "
        f"(fingerprint {fingerprint}); nothing was trusted: run `python manage.py webfetch "
        "plugin trust demo` and confirm what it shows (trust_not_shown)"
    )
    assert caught.value.returncode == 2
    assert not PluginInstance.objects.get(alias="demo").trusted
    assert "'demo' trusted for webfetch-example-plugin 1.0" in webfetch(
        "trust", "demo", "--confirm", fingerprint
    )


def _trust_prompt(alias):
    out = io.StringIO()
    with pytest.raises(CommandError, match="trust_confirmation_required"):
        call_command("webfetch", "plugin", "trust", alias, stdout=out)
    return out.getvalue().splitlines()[-1]


def test_the_printed_commands_start_as_the_operator_started_the_cli(example, tmp_path, monkeypatch):
    """From the checkout, ``python manage.py`` finds no manage.py and ``python`` is not the
    venv's: every command the CLI prints starts the way the operator reached it."""
    PluginInstance.objects.create(plugin="example", alias="demo")
    # Through the example's run.sh (which sets the hint): its own command.
    monkeypatch.setenv(ENV_VAR, "sh example_project/run.sh manage")
    line = _trust_prompt("demo")
    fingerprint = line.rsplit(" ", 1)[1]
    assert line == (
        "to trust what is shown above: sh example_project/run.sh manage webfetch plugin "
        f"trust demo --confirm {fingerprint}"
    )
    with pytest.raises(CommandError) as caught:
        webfetch("trust", "demo", "--confirm", "0123abcd")
    assert "run `sh example_project/run.sh manage webfetch plugin trust demo`" in str(caught.value)
    with pytest.raises(CommandError, match="upgrade_not_shown") as caught:
        webfetch("upgrade", "example", "--confirm", "0123abcd")
    assert "run 'sh example_project/run.sh manage webfetch plugin upgrade example' again" in (
        str(caught.value)
    )
    # Straight through manage.py with the venv's interpreter not on the PATH: its path,
    # relative to where the operator stands, and the script as it was typed.
    monkeypatch.delenv(ENV_VAR)
    monkeypatch.setenv("PATH", f"/usr/bin{os.pathsep}/bin")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(tmp_path / ".venv" / "bin" / "python"))
    monkeypatch.setattr(sys, "argv", ["example_project/manage.py", "webfetch", "plugin"])
    assert _trust_prompt("demo") == (
        "to trust what is shown above: .venv/bin/python example_project/manage.py webfetch "
        f"plugin trust demo --confirm {fingerprint}"
    )
    # With that interpreter first on the PATH (an activated venv): ``python``.
    _python_on_path(tmp_path, monkeypatch)
    assert _trust_prompt("demo").startswith(
        "to trust what is shown above: python example_project/manage.py webfetch plugin trust"
    )


def test_list_of_a_trusted_instance_whose_package_is_not_on_the_path(
    example, example_site, monkeypatch
):
    """Confirming cannot help while the plugin is not installed: ``list`` points to
    WEBFETCH_PLUGIN_DIRS, says it runs nowhere, and prints no trust command."""
    from django_webfetch.plugins import registry

    PluginInstance.objects.create(plugin="example", alias="demo", trusted=True)
    sys.path.remove(example_site)  # the package is off this process's path
    registry.reset()
    output = webfetch("list")
    assert (
        "  NOT trusted now: trusted for webfetch-example-plugin 1.0, installed is none: the "
        "plugin is not installed here, or was refused (is its directory in "
        "WEBFETCH_PLUGIN_DIRS of this process?)"
    ) in output.splitlines()
    assert "  isolation: none (not installed)" in output.splitlines()
    assert "confirm again" not in output and "plugin trust" not in output
    from django_webfetch import checks

    [w034] = [
        m for m in checks.check_plugin_instances(databases=["default"])
        if m.id == "django_webfetch.W034"
    ]  # fmt: skip
    assert w034.hint.startswith("Is its directory in WEBFETCH_PLUGIN_DIRS of this process?")
    assert "plugin trust" not in w034.hint


def test_check_names_the_exact_cause_when_the_group_is_disabled(example):
    """``plugin check`` says why the instance reaches nothing as ``plugin list`` does
    (``services.why_no_egress``), and where an admin enables the group."""
    webfetch("install", "example")
    out = io.StringIO()
    with pytest.raises(CommandError, match="egress_not_granted"):
        call_command("webfetch", "plugin", "check", "http://granted.lab.example/",
                     "--plugin", "example", "--no-resolve", stdout=out)  # fmt: skip
    assert (
        "policy     fail  egress_not_granted: group 'example' is disabled: an admin enables "
        f"it ({ENABLE})"
    ) in out.getvalue().splitlines()
    assert "missing, disabled or has no egress" not in out.getvalue()
    # An instance whose plugin is not installed: said as such, not "no effective grant".
    PluginInstance.objects.create(plugin="gone", alias="gone", egress_hosts=["a.example.org"])
    out = io.StringIO()
    with pytest.raises(CommandError, match="egress_not_granted"):
        call_command("webfetch", "plugin", "check", "http://a.example.org/",
                     "--plugin", "gone", "--no-resolve", stdout=out)  # fmt: skip
    assert "plugin 'gone' is not installed here" in out.getvalue()
