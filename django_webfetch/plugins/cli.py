"""``manage.py webfetch plugin ...``: a thin surface over ``plugins.services``.

Every line it prints (and every error it raises) goes through ``shown.shown``: names,
versions and directories a plugin distribution controls are printed escaped, never as
terminal escapes or bidirectional overrides (tests/plugins/test_shown.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from django_webfetch.exceptions import RefusalShown
from django_webfetch.invocation import manage_command
from django_webfetch.net.errors import EgressDenied

from . import notices, services
from .shown import shown
from .tools import tool_problems

__all__ = ["add_arguments", "handle"]


def add_arguments(sub: Any) -> None:
    plugin = sub.add_parser("plugin", help="Plugin instances and their egress grants.")
    commands = plugin.add_subparsers(dest="plugin_command", required=True)
    install = commands.add_parser(
        "install", help="Create an instance granted what the plugin declares (printed)."
    )
    install.add_argument("name")
    install.add_argument("--alias", default=None, help="Default: the plugin's name.")
    bind = commands.add_parser("bind", help="Create an instance for a binding.")
    bind.add_argument("name")
    bind.add_argument("--alias", required=True)
    bind.add_argument(
        "--egress",
        choices=("declared", "none"),
        default=None,
        help="Grant what the plugin declares, or nothing.  Required when it declares any.",
    )
    upgrade = commands.add_parser(
        "upgrade", help="Move instances to the installed version; never widens silently."
    )
    upgrade.add_argument("name")
    upgrade.add_argument(
        "--confirm",
        nargs="?",
        const="",
        default=None,
        metavar="FINGERPRINT",
        help="Widen the grants by what the new version adds, as the run without --confirm "
        "showed it: the fingerprint it printed (refused when the plugin declares other "
        "destinations now).",
    )
    trust = commands.add_parser(
        "trust",
        help="Run an instance in-process, trusted for the distribution installed now "
        "(also: confirm again after the package changed, check W034).",
    )
    trust.add_argument("alias")
    trust.add_argument(
        "--confirm",
        default=None,
        metavar="FINGERPRINT",
        help="Trust the distribution the run without --confirm showed: the fingerprint it "
        "printed (refused when another distribution provides the plugin now).",
    )
    commands.add_parser("list", help="Every instance: declared, granted, effective, isolation.")
    check = commands.add_parser("check", help="What an instance's policy decides for URL.")
    check.add_argument("url")
    check.add_argument("--plugin", required=True, metavar="ALIAS")
    check.add_argument(
        "--no-resolve", action="store_true", help="Do not look the host up in DNS either."
    )


def _hosts(entries: Any) -> str:
    return ", ".join(entries) if entries else "(none)"


class _Shown:
    """The command's output, every line through ``shown`` (styled after escaping)."""

    def __init__(self, command: Any) -> None:
        self._out = command.stdout
        self.style = command.style

    def write(self, line: str, style: Callable[[str], str] | None = None) -> None:
        text = shown(line)
        self._out.write(style(text) if style is not None else text)


def _manage(*words: str) -> str:
    """What an operator types to run this command with ``words``: the prompts print it
    runnable as it is, with the prefix the operator used (``django_webfetch.invocation``)."""
    return manage_command("webfetch", "plugin", *words)


#: Where an admin enables a tool group (as ``webfetch explain``'s hint says).
_ENABLE = "admin: Web fetch > Tool groups"


def handle(command: Any, options: dict[str, Any]) -> None:
    # These commands start plugin processes (the sandbox probe, a manifest's read) but run
    # no tool: the CPU limit's notice is not theirs (``plugin list`` says it on a line).
    with notices.held():
        _handle(command, options)


def _handle(command: Any, options: dict[str, Any]) -> None:
    out = _Shown(command)
    name = options["plugin_command"]
    try:
        if name == "install":
            instance = services.install(options["name"], alias=options["alias"])
            _print_created(out, instance, "installed")
        elif name == "bind":
            instance = services.bind(
                options["name"], alias=options["alias"], egress=options["egress"]
            )
            _print_created(out, instance, "bound")
        elif name == "upgrade":
            _upgrade(out, options["name"], confirm=options["confirm"])
        elif name == "list":
            _list(out)
        elif name == "trust":
            _trust(out, options["alias"], options["confirm"])
        else:
            _check(out, options["url"], options["plugin"], resolve=not options["no_resolve"])
    except services.PluginServiceError as exc:
        raise CommandError(shown(f"{exc} ({exc.code})"), returncode=2) from exc


def _print_created(out: Any, instance: Any, verb: str) -> None:
    out.write(f"{verb} {instance.plugin} {instance.version} as {instance.alias!r}")
    out.write(f"  declared destinations: {_hosts(instance.declared_egress)}")
    out.write(f"  granted:               {_hosts(instance.egress_hosts)}")
    hosts, off = services.effective_now(instance)
    out.write(f"  effective:             {_hosts(hosts)}" + (f": {off}" if off else ""))
    groups = instance.tool_groups()
    enabled = services.enabled_groups(groups)
    if not enabled and len(groups) == 1:
        label, note = "tool group: ", f"enable it to offer the tools: {_ENABLE}"
    elif not enabled:
        label, note = "tool groups:", f"enable each to offer its tools: {_ENABLE}"
    else:
        # Said as it is: a group enabled already offers the tools now (an earlier install).
        label = "tool group: " if len(groups) == 1 else "tool groups:"
        note = f"ENABLED already: {', '.join(enabled)}; its tools are offered now"
    out.write(f"  {label}           {', '.join(groups)} ({note})")
    for problem in tool_problems(instance.plugin):
        out.write(f"  NOT served: {problem}")


def _upgrade(out: _Shown, name: str, *, confirm: str | None) -> None:
    reports = services.upgrade(name, confirm=confirm or "")
    if not reports:
        out.write(f"no instance of {name!r}")
        return
    pending = False
    for report in reports:
        out.write(f"{report.alias}: {report.old_version} -> {report.new_version}")
        for entry in report.added:
            covered = " (already covered by the grant)" if entry in report.covered else ""
            out.write(f"  + declares {entry}{covered}")
        if report.changed:
            out.write("  grant widened" if report.widened else "  grant unchanged")
        else:
            pending = True
            out.write("  NOT upgraded: the new version declares more; nothing was widened")
    if pending:
        fingerprint = reports[0].fingerprint
        out.write(
            f"to grant what is shown above: {_manage('upgrade', name, '--confirm', fingerprint)}"
        )
        if confirm == "":
            raise CommandError(
                "--confirm takes the fingerprint printed above: what is granted is what was "
                "shown (confirm_fingerprint_required)",
                returncode=2,
            )
        raise CommandError(
            "the new version declares more destinations; review them, then rerun with "
            f"--confirm {fingerprint} to grant them",
            returncode=3,
        )


def _trust(out: _Shown, alias: str, confirm: str | None) -> None:
    """Without ``confirm``: show the distribution that would be trusted and its
    fingerprint, and trust nothing (exit status 3).  With it: trust that distribution,
    only if it is still the one that provides the plugin."""
    if confirm:
        instance = services.confirm_trust(alias, shown=confirm)
        out.write(
            f"{instance.alias!r} trusted for {instance.trusted_for()}: its code runs in "
            "the site's processes (check W032)"
        )
        return
    from .registry import origin

    instance, found, fingerprint = services.trust_preview(alias)
    if found is None:
        raise services.PluginServiceError(
            "plugin_not_installed",
            f"no single installed distribution provides plugin {instance.plugin!r}; "
            "nothing was trusted",
        )
    where = origin(instance.plugin)
    out.write(f"{instance.alias!r} (plugin {instance.plugin}) would run in the site's processes")
    out.write(f"  distribution:  {found}")
    out.write(f"  code sha256:   {found.digest or '(none)'}")
    out.write(f"  code under:    {where.path if where is not None else '(not loaded)'}")
    from .provenance import installed_dependencies

    deps = installed_dependencies(instance.plugin)
    if not deps:
        out.write("  dependencies:  none outside the site's own (pinned with it: none)")
    for dep in deps:
        # Each installed distribution it requires runs in the site's process with it, and
        # is pinned with it (decision 0051).
        pinned = f"sha256 {dep.digest}, under {dep.where}" if dep.version else "not installed"
        if dep.problem:
            pinned = f"CANNOT be pinned: {dep.problem}"
        out.write(f"  dependency:    {dep} ({pinned})")
    from .runtime.host import capabilities

    if capabilities().get("isolated"):
        # Trust is for hosts without the sandbox (README, docs/plugins.rst): here it only
        # moves the plugin's code into the site's processes.
        out.write(
            "this host runs untrusted plugins in their sandbox: the plugin runs without "
            "trust; trust moves its code into the site's processes (check W032)"
        )
    out.write(
        "to trust what is shown above: "
        + _manage("trust", instance.alias, "--confirm", fingerprint)
    )
    raise CommandError(
        "nothing was trusted; review the distribution, then rerun with "
        f"--confirm {fingerprint} (trust_confirmation_required)",
        returncode=3,
    )


def _list(out: _Shown) -> None:
    from .registry import manifests, refusals, site_package_plugins
    from .runtime.host import isolation_label

    # What this host does with an untrusted plugin, whatever is installed.
    out.write(f"this host: {isolation_label(False)}")
    if not notices.cpu_limit_available():
        out.write(f"this host: {notices.WITHOUT_CPU_LIMIT}")
    for name, directory in site_package_plugins():
        out.write(
            f"site package: {name} in {directory}: its code can run in the site's processes "
            "whatever its trust (check W036); install it into a WEBFETCH_PLUGIN_DIRS "
            "directory instead"
        )
    summaries = services.list_instances()
    refused = refusals()
    have = {s.plugin for s in summaries}
    for manifest in manifests():
        if manifest.name not in have:
            install = _manage("install", manifest.name)
            out.write(f"available: {manifest.name} {manifest.version} ({install})")
    for problem in refused:
        out.write(f"refused: {problem.message}")
    for contest in tool_problems():
        out.write(f"refused: {contest}")
    if not summaries:
        out.write("no plugin instances")
        return
    for s in summaries:
        # The instance's own switch; its tool group's is said on the "effective" line.
        state = "instance enabled" if s.enabled else "instance disabled"
        installed = ""
        if not s.installed:
            mine = [p for p in refused if s.plugin in p.names]
            installed = ", package refused (see above)" if mine else ", package NOT installed"
        out.write(f"{s.alias} ({s.plugin} {s.version}, {state}{installed})")
        out.write(f"  declared:  {_hosts(s.declared)}")
        out.write(f"  granted:   {_hosts(s.granted)}")
        out.write(
            f"  effective: {_hosts(s.effective)}" + (f": {s.no_egress}" if s.no_egress else "")
        )
        if s.allow_private:
            out.write(f"  private addresses allowed for: {_hosts(s.allow_private)}")
        if s.has_secrets:
            out.write("  secrets: set (never shown)")
        out.write(f"  isolation: {s.isolation}")
        if s.trust and s.installed:
            out.write(f"  NOT trusted now: {s.trust} ({_manage('trust', s.alias)})")
        elif s.trust:
            # Nothing to confirm: the problem names the fix (WEBFETCH_PLUGIN_DIRS).
            out.write(f"  NOT trusted now: {s.trust}")


def _check(out: _Shown, url: str, alias: str, *, resolve: bool) -> None:
    policy, verdict = services.check(url, alias=alias, resolve=resolve)
    out.write(f"plugin     {alias}")
    if policy is not None:
        out.write(f"effective  {_hosts(policy.allowlist)}")
    if isinstance(verdict, EgressDenied):
        out.write(f"policy     fail  {verdict.reason}: {verdict.detail}")
        out.write(f"DENIED ({verdict.reason})", out.style.ERROR)
        raise RefusalShown(f"denied: {verdict.reason}", returncode=1)
    for step in verdict.steps:
        name, detail = step.name, step.detail
        if name == "allowlist":
            # The instance's policy narrows to its grant: said as a grant, not a list an
            # admin keeps (the guard's rule and reason codes stay the allowlist's).
            name = "grant"
            if detail.startswith("listed as "):
                detail = "granted as " + detail.removeprefix("listed as ")
        out.write(f"{name:<10} {step.verdict:<5} {detail}".rstrip())
    if verdict.allowed:
        out.write(verdict.verdict, out.style.SUCCESS)
    else:
        out.write(f"DENIED ({verdict.reason})", out.style.ERROR)
        raise RefusalShown(f"denied: {verdict.reason}", returncode=1)
