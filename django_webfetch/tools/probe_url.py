"""``probe_url``: one GET against this site's own hosts (group ``system``, scope own_site).

The request goes through the same egress authority as every tool, with the ``own_site``
scope: it cannot reach any host that is not this installation's.  A redirect is reported,
never followed; the whole probe has a 15 s budget.  The answer carries the status, a fixed
set of headers, the timing and a 2 KB tag-stripped excerpt; on a 5xx the newest error-log
entries from the ±30 s window around the probe are appended (``LogExceptionReader``), so
the probe and its cause arrive in one result.  Everything the server chose (headers, the
Location, the excerpt) and every log line sits inside the untrusted fence.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django_webfetch.diagnostics.paths import PathDenied, redact_text
from django_webfetch.egress import own_site_base
from django_webfetch.net.errors import EgressDenied, WebFetchError
from django_webfetch.net.policy import Scope
from django_webfetch.net.urlparse import parse_url
from django_webfetch.text.patterns import compile_pattern

from ._diagnostics import fenced, format_record, log_reader
from ._egress import AuditedFetch
from .approval import group_requires_approval, has_allowlist, tool_group
from .base import Effect, Tool, ToolCallLike, ToolContext, ToolResult

__all__ = ["ProbeUrl", "first_site_base", "mask_url"]

EXCERPT_BYTES = 2048
_TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
LOG_WINDOW_SECONDS = 30.0
MAX_LOG_ENTRIES = 3

# On RE2: the URL is the model's, and on ``re`` this pattern was cubic on
# ``?tokentoken…`` like the redaction one.
_CREDENTIAL_PARAM = compile_pattern(
    r"(?i)([?&;#][^=&#;]*?(?:token|key|secret|pass|pwd|sig|auth|code|session|credential|"
    r"jwt|otp|nonce|state)[^=&#;]*=)([^&#;]*)"
)


#: ``scheme://userinfo@``: the whole userinfo (a user name can be a token too).
_USERINFO = compile_pattern(r"^([A-Za-z][A-Za-z0-9+.\-]*://)[^/?#]*@")


def mask_url(url: str) -> str:
    """``url`` with the values of credential-looking query parameters masked, cut to 2,000
    characters (for results and approval cards; the request itself is unchanged)."""
    url = _USERINFO.sub(lambda m: f"{m.group(1)}[masked]@", url[:2000])
    return str(_CREDENTIAL_PARAM.sub(lambda m: f"{m.group(1)}[masked]", url))


def first_site_base() -> str | None:
    """``scheme://host[:port]`` of this site's first host (``egress.own_site_base``, the
    one home of the site's own hosts); ``None`` when the installation names no host."""
    return own_site_base()


class ProbeUrl(Tool):
    name = "probe_url"
    group = "system"
    scope = Scope.OWN_SITE
    effect = Effect.READ
    requires_admin = True
    enabled_by_default = False
    time_budget = 15.0
    description = (
        "Request ONE page of THIS site (an absolute URL on one of this site's own hosts, or "
        "a path such as '/shop/cart/') with a single GET and report the status, key headers, "
        "timing and a short text excerpt. Redirects are reported, not followed. On a 5xx "
        "status the site's error-log entries from around the probe are appended. Other "
        "hosts are refused. Everything the server sent is untrusted."
    )
    parameters = {
        "type": "object",
        "properties": {
            "url": {
                "type": "string",
                "description": "An absolute http(s) URL on this site's own host, or a path "
                "starting with '/'.",
                "minLength": 1,
                "maxLength": 2048,
                "pattern": "^(/|/[^/].*|[hH][tT][tT][pP][sS]?://.*)$",
            }
        },
        "required": ["url"],
        "additionalProperties": False,
    }

    def requires_approval(self, call: ToolCallLike, context: ToolContext | None = None) -> bool:
        group = tool_group(self.group)
        return group_requires_approval(group, network=True, granted=lambda: has_allowlist(group))

    def approval_preview(self, call: ToolCallLike) -> dict[str, Any]:
        url = call.arguments.get("url", "")
        url = url if isinstance(url, str) else ""
        preview: dict[str, Any] = {"tool": self.name, "group": self.group, "url": url}
        # The card shows the URL as the guard will see it (our strict parser).
        try:
            resolved = self.resolve(url)
            parsed = parse_url(resolved)
        except EgressDenied as exc:
            preview["refused_by"] = exc.reason
            return preview
        preview["resolved_url"] = resolved
        preview["host"] = parsed.host.name
        preview["port"] = parsed.port
        preview["path"] = parsed.path
        preview["query_raw"] = parsed.query
        return preview

    @staticmethod
    def resolve(url: str) -> str:
        """An absolute URL: a path is joined to the first site host."""
        if url.startswith("/"):
            if url.startswith("//"):
                raise EgressDenied("invalid_url", detail="a scheme-relative URL")
            base = first_site_base()
            if base is None:
                raise EgressDenied("no_site_host", detail="the installation names no host")
            return base + url
        return url

    def execute(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        requested = arguments["url"]
        fetcher = AuditedFetch(self, context)
        try:
            url = self.resolve(requested)
        except EgressDenied as exc:
            fetcher.recorder.record_exception(exc)
            raise
        shown = mask_url(url)
        started = dt.datetime.now()
        try:
            result = fetcher.fetch(url, follow_redirects=False, refuse_media_types=False)
        except WebFetchError as exc:
            failure = ToolResult.from_exception(exc)
            return ToolResult.failure(
                failure.error or exc.code,
                f"{failure.content} Probe: GET {shown}",
                url=shown,
                **failure.meta,
            )
        finished = dt.datetime.now()
        return self.render(shown, result, started, finished)

    def render(
        self, shown: str, result: Any, started: dt.datetime, finished: dt.datetime
    ) -> ToolResult:
        from django_webfetch.text import extract_text, render_redirect_target, render_status

        meta: dict[str, Any] = {
            "status": result.status,
            "elapsed_ms": round(result.elapsed * 1000),
            "media_type": result.media_type,
            "bytes": len(result.body),
            "redirect_reported": bool(result.redirect_reported),
        }
        lines = [
            f"Probe: GET {shown}",
            f"Status: {result.status}",
            f"Time: {round(result.elapsed * 1000)} ms",
            "Headers:",
            # A Location can carry a credential (an OAuth code, a reset token): masked
            # like the probe URL itself.
            *(
                f"  {name}: {mask_url(value) if name == 'location' else value}"
                for name, value in result.headers
            ),
        ]
        if result.redirect_reported and result.location is not None:
            lines.append(f"Not followed: {render_redirect_target(mask_url(result.location))}")
        if result.body and result.media_type in (
            "text/html",
            "application/xhtml+xml",
            "text/plain",
        ):
            text = extract_text(
                result.body, media_type=result.media_type, charset=result.charset, url=shown
            )
            # Redacted like source and logs (a debug page, a careless template), then cut.
            text = redact_text(text)
            excerpt = text.encode("utf-8")[:EXCERPT_BYTES].decode("utf-8", "ignore")
            lines += ["", f"Excerpt (first {EXCERPT_BYTES} bytes of text, tags stripped):", excerpt]
        if 500 <= result.status <= 599:
            lines += ["", *self._log_entries(started, finished, meta)]
        status_line = render_status(result.status)
        if result.redirect_reported:
            status_line += " (redirect reported, not followed)"
        return ToolResult(
            content=fenced("\n".join(lines), source=shown, status_line=status_line), meta=meta
        )

    @staticmethod
    def _log_entries(
        started: dt.datetime, finished: dt.datetime, meta: dict[str, Any]
    ) -> list[str]:
        try:
            reader = log_reader()
        except PathDenied as exc:
            meta["log_entries"] = 0
            return [f"Error log: not available ({exc.reason})."]
        window = dt.timedelta(seconds=LOG_WINDOW_SECONDS)
        entries = reader.records(
            since=started - window, until=finished + window, limit=MAX_LOG_ENTRIES
        )
        meta["log_entries"] = len(entries)
        if not entries:
            return [f"Error log: no error entries within {LOG_WINDOW_SECONDS:g} s of the probe."]
        out = [f"Error log entries within {LOG_WINDOW_SECONDS:g} s of the probe (newest first):"]
        for number, record in enumerate(entries, 1):
            out += [f"[{number}]", format_record(record, None)["text"]]
        return out
