"""``manage.py webfetch``: operator commands.

- ``webfetch explain URL [--group web] [--no-resolve]``: every guard step of the group's
  live policy for URL, with its verdict.  Looks up DNS, never connects.
- ``webfetch fetch URL [--group web]``: fetch URL through the group's live policy (as an
  operator: no approval) and print the fenced page text; every hop is an EgressEvent.
- ``webfetch prune_events [--days N] [--call-days M]``: apply the whole retention policy
  (``django_webfetch.retention``) to the end: delete EgressEvents older than N days
  (default ``WEBFETCH_EVENT_RETENTION_DAYS``), drop the content of ToolCalls that finished
  more than M days ago and of conversations idle that long (default
  ``WEBFETCH_CALL_RETENTION_DAYS``), keeping their audit metadata, and delete stored page
  texts past their time.
- ``webfetch plugin install|bind|upgrade|list|check``: plugin instances and their egress
  grants (DESIGN.md §8; docs/plugin_grants.rst).
- ``webfetch mcp``: serve MCP on stdin/stdout for the user of the personal access token in
  ``WEBFETCH_MCP_TOKEN`` (docs/mcp.rst).
- ``webfetch token create|revoke|list``: personal access tokens (MCP clients).

Exit status (``explain``, ``fetch``): 0 allowed / fetched, 1 refused by the guard, 2 failed
or a usage error (no such group, bad arguments).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from django_webfetch.egress import policy_for
from django_webfetch.exceptions import RefusalShown, WebFetchImproperlyInstalled
from django_webfetch.models import AccessToken
from django_webfetch.net.errors import EgressDenied


class Command(BaseCommand):
    help = "django_webfetch operator commands: explain a URL, apply the retention policy."
    # The operator's tools run whatever the system checks say: ``plugin list`` is how an
    # operator finds out why a check failed.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True)
        explain = sub.add_parser("explain", help="Show every guard step for URL; no connection.")
        explain.add_argument("url")
        explain.add_argument("--group", default="web", help="Tool group slug (default: web).")
        explain.add_argument(
            "--no-resolve", action="store_true", help="Do not look the host up in DNS either."
        )
        fetch = sub.add_parser("fetch", help="Fetch URL through the group's live policy.")
        fetch.add_argument("url")
        fetch.add_argument("--group", default="web", help="Tool group slug (default: web).")
        prune = sub.add_parser(
            "prune_events",
            help="Apply the retention policy (events, call and conversation content, texts).",
        )
        prune.add_argument(
            "--days",
            type=int,
            default=None,
            help="Age in days (default: WEBFETCH_EVENT_RETENTION_DAYS).",
        )
        prune.add_argument(
            "--call-days",
            type=int,
            default=None,
            help="Drop the content of calls finished longer ago "
            "(default: WEBFETCH_CALL_RETENTION_DAYS).",
        )
        prune.add_argument("--dry-run", action="store_true")
        from django_webfetch.plugins.cli import add_arguments as add_plugin_arguments

        add_plugin_arguments(sub)
        sub.add_parser(
            "mcp",
            help="Serve MCP on stdio for the user of the token in WEBFETCH_MCP_TOKEN.",
        )
        from django_webfetch.management.tokens import add_arguments as add_token_arguments

        add_token_arguments(sub)

    def execute(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute(*args, **options)
        except RefusalShown as exc:
            # Printed once already (``DENIED (reason)``): Django would print it again as
            # ``CommandError: denied: reason`` (tests/django/test_commands.py).
            if getattr(self, "_called_from_command_line", False) and not options.get("traceback"):
                sys.exit(exc.returncode)
            raise

    def handle(self, *args: Any, **options: Any) -> None:
        if options["subcommand"] == "explain":
            self.explain(options["url"], options["group"], resolve=not options["no_resolve"])
        elif options["subcommand"] == "fetch":
            self.fetch(options["url"], options["group"])
        elif options["subcommand"] == "plugin":
            from django_webfetch.plugins.cli import handle as handle_plugin

            handle_plugin(self, options)
        elif options["subcommand"] == "mcp":
            self.mcp()
        elif options["subcommand"] == "token":
            from django_webfetch.management.tokens import handle as handle_token

            handle_token(self, options)
        else:
            self.prune(options["days"], options["call_days"], dry_run=options["dry_run"])

    def mcp(self) -> None:
        secret = os.environ.get("WEBFETCH_MCP_TOKEN", "")
        if not secret:
            raise CommandError("set WEBFETCH_MCP_TOKEN to a personal access token")
        if AccessToken.objects.authenticate(secret) is None:
            raise CommandError("the token in WEBFETCH_MCP_TOKEN is unknown or revoked")
        try:
            from django_webfetch.mcp.stdio import serve
        except ImportError as exc:
            raise CommandError(str(WebFetchImproperlyInstalled("mcp", "mcp"))) from exc
        serve(secret)

    def explain(self, url: str, group: str, *, resolve: bool) -> None:
        from django_webfetch.egress.preflight import live_verdict

        if not _group_exists(group):
            raise CommandError(f"no such group: {_printable(group)[:64]!r}", returncode=2)
        try:
            policy, explanation = live_verdict(url, group, resolve=resolve)
        except EgressDenied as exc:
            self.stdout.write(f"policy     fail  {exc.reason}")
            self.stdout.write(f"DENIED ({exc.reason})")
            raise CommandError("no policy for this group", returncode=2) from exc
        self.stdout.write(f"group      {group} ({_group_state(group, policy.scope.value)})")
        for step in explanation.steps:
            line = f"{step.name:<10} {step.verdict:<5} {step.detail}".rstrip()
            self.stdout.write(_printable(line))
        if explanation.allowed:
            self.stdout.write(self.style.SUCCESS(explanation.verdict))
        elif explanation.reason == "dns_error":
            # Not a refusal: the lookup failed, nothing was decided.
            self.stdout.write(self.style.ERROR(f"FAILED ({explanation.reason})"))
            raise CommandError(f"failed: {explanation.reason}", returncode=2)
        else:
            self.stdout.write(self.style.ERROR(f"DENIED ({explanation.reason})"))
            hint = _scope_hint(group) if explanation.reason == "scope" else ""
            if hint:
                self.stdout.write(hint)
            raise RefusalShown(f"denied: {explanation.reason}", returncode=1)

    def fetch(self, url: str, group: str) -> None:
        from django_webfetch.egress import EgressRecorder
        from django_webfetch.net import WebFetchError, fetch
        from django_webfetch.text import extract_text, fence, render_status

        if not _group_exists(group):
            raise CommandError(f"no such group: {_printable(group)[:64]!r}", returncode=2)
        recorder = EgressRecorder(tool="manage.py webfetch fetch", group=group)
        try:
            with recorder.guarded():
                result = fetch(url, policy=policy_for(group), observer=recorder)
        except EgressDenied as exc:
            raise CommandError(f"denied: {exc.reason}", returncode=1) from exc
        except WebFetchError as exc:
            # What failed, in our words (never the library's text: that is in the audit log).
            failure = f" ({exc.failure}): {exc}" if exc.failure else ""
            raise CommandError(f"failed: {exc.code}{failure}", returncode=2) from exc
        status_line = render_status(result.status)
        if not 200 <= result.status < 300:
            raise CommandError(f"{status_line}: no content shown", returncode=2)
        text = extract_text(
            result.body,
            media_type=result.media_type,
            charset=result.charset,
            url=result.final_url,
        )
        self.stdout.write(fence(text, source_url=url, status_line=status_line))
        self.stderr.write(
            f"fetched {len(result.body)} bytes in {_duration(result.elapsed)}"
            f" ({len(result.hops)} hop(s))"
        )

    def prune(self, days: int | None, call_days: int | None, *, dry_run: bool) -> None:
        """Every rule of the retention policy, to the end (the sweep does the same in
        bounded batches): ``django_webfetch.retention``."""
        from django_webfetch import retention

        if days is not None and days < 0:
            raise CommandError("--days must be zero or positive")
        if call_days is not None and call_days < 0:
            raise CommandError("--call-days must be zero or positive", returncode=2)
        try:
            report = retention.prune(content_days=call_days, event_days=days, dry_run=dry_run)
        except retention.RetentionError as exc:
            raise CommandError(f"{exc.code}: {exc}", returncode=2) from exc
        days, call_days = report.event_days, report.content_days
        if dry_run:
            self.stdout.write(
                f"{report['egress_events']} egress event(s) older than {days} day(s)."
            )
            self.stdout.write(
                f"{report['calls']} tool call(s) finished more than {call_days} day(s) ago."
            )
            self.stdout.write(f"{report['stored_texts']} stored page text(s) past their time.")
            self.stdout.write(f"{report['token_events']} token event(s) older than {days} day(s).")
            self.stdout.write(
                f"{report['conversations']} conversation(s) idle for more than {call_days} day(s)."
            )
            return
        self.stdout.write(
            f"Deleted {report['egress_events']} egress event(s) older than {days} day(s)."
        )
        self.stdout.write(
            f"Deleted {report['token_events']} token event(s) older than {days} day(s)."
        )
        self.stdout.write(
            f"Dropped the content of {report['calls']} tool call(s) older than {call_days} day(s)."
        )
        self.stdout.write(f"Deleted {report['stored_texts']} stored page text(s) past their time.")
        self.stdout.write(
            f"Dropped the content of {report['conversations']} conversation(s) idle for more "
            f"than {call_days} day(s)."
        )


def _duration(seconds: float) -> str:
    """A duration for people: "850 ms", "1.2 s"."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"


def _group_exists(slug: str) -> bool:
    from django_webfetch.models import ToolGroup

    return ToolGroup.objects.filter(slug=slug).exists()


def _group_state(slug: str, scope: str) -> str:
    """``disabled`` for a disabled group (its live scope is ``none`` then), else its scope."""
    from django_webfetch.models import ToolGroup

    if not ToolGroup.objects.filter(slug=slug, enabled=True).exists():
        return "disabled"
    return f"scope {scope}"


def _scope_hint(slug: str) -> str:
    """Why a group's policy reaches no network, in words an operator acts on."""
    from django_webfetch.models import ToolGroup

    if not ToolGroup.objects.filter(slug=slug, enabled=True).exists():
        return (
            f"hint       group {slug} is disabled: an admin enables it "
            "(admin: Web fetch > Tool groups)"
        )
    return f"hint       group {slug} reaches no network (its scope is none)"


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text)
