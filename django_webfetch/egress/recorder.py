"""Write ``EgressEvent`` audit rows from the guard's events.

The one home of "a guarded call that records its own failure": ``EgressRecorder.guarded``
wraps a call whose guard reports to the recorder, and records a refusal or failure the
guard did not report itself (no policy, a budget that ran out between hops), so that every
call leaves at least one row and none is recorded twice.

Only the host is server-chosen text that reaches the audit log: everything else is a
reason code, a number, an address or text this package wrote.  Even so every field is
cut and filtered, so that a log viewer never renders control characters.
"""

from __future__ import annotations

import ipaddress
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from django_webfetch import metrics
from django_webfetch.net.errors import EgressDenied, WebFetchError
from django_webfetch.net.failures import FAILURES

from .logline import emit

__all__ = ["EgressRecorder", "plugin_reference", "requested_host"]

logger = logging.getLogger("django_webfetch.egress")

_REASON_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_:.-")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-:[]_")
_DECISIONS = frozenset({"allowed", "denied", "fetched", "failed"})


def requested_host(url: str) -> tuple[str, int | None]:
    """Best-effort host/port of a model-chosen URL for the audit log (never raises)."""
    try:
        split = urlsplit(url)
        return (split.hostname or "")[:255], split.port
    except ValueError:
        return "", None


def _reason(value: object) -> str:
    text = str(value or "").lower()[:64]
    return "".join(c if c in _REASON_CHARS else "_" for c in text)


def _host(value: object) -> str:
    text = str(value or "").lower()[:255]
    return "".join(c if c in _HOST_CHARS else "?" for c in text)


def _detail(value: object) -> str:
    text = str(value or "")[:2000]
    return "".join(c if c.isprintable() else "?" for c in text)


_SUMMARY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _.,()/-")


def _failure_summary(value: object) -> str:
    """The part of a failure detail that we wrote.

    Transport failures carry ``"<ExceptionName>: <library message>"``, and a library
    message may quote bytes the server sent (a malformed header line): keep only what
    comes before the first colon, in a conservative character set.
    """
    head = str(value or "").split(":", 1)[0][:200]
    return "".join(c for c in head if c in _SUMMARY_CHARS).strip()


def _addresses(values: Any) -> list[str]:
    result: list[str] = []
    for value in tuple(values or ())[:32]:
        try:
            result.append(str(ipaddress.ip_address(str(value))))
        except ValueError:
            continue
    return result


def plugin_reference(plugin_instance: Any) -> str:
    if plugin_instance is None:
        return ""
    if isinstance(plugin_instance, str):
        return plugin_instance[:200]
    reference = getattr(plugin_instance, "reference", None)
    if isinstance(reference, str):
        return reference[:200]
    meta = getattr(plugin_instance, "_meta", None)
    if meta is not None:
        return f"{meta.label_lower}:{plugin_instance.pk}"[:200]
    return type(plugin_instance).__name__[:200]


class EgressRecorder:
    """An observer for ``net.fetch``: one ``EgressEvent`` per ``GuardEvent``.

    Also records decisions taken before the guard ran (``record_exception``), so that every
    call leaves at least one row.  Writing the audit row is not optional: a database error
    propagates (the call fails) rather than fetching unaudited.
    """

    def __init__(
        self,
        *,
        tool: str = "",
        group: str = "",
        user: Any = None,
        plugin_instance: Any = None,
        call_id: str = "",
        run_id: str = "",
    ) -> None:
        self.tool = tool[:100]
        self.group_slug = group[:64]
        self.user = user if getattr(user, "pk", None) is not None else None
        self.plugin_ref = plugin_reference(plugin_instance)
        # A real reference when given a saved PluginInstance row.
        self.plugin_instance_id = (
            plugin_instance.pk
            if getattr(getattr(plugin_instance, "_meta", None), "model_name", "")
            == "plugininstance"
            else None
        )
        self.call_id = str(call_id or "")[:64]
        #: The assistant run (for the log line); found from the call when not given.
        self.run_id: str | None = str(run_id)[:64] if run_id else None
        self.count = 0
        #: The decision of the last row written (``""`` before the first).
        self.last_decision = ""
        #: A denial or failure was written since ``guarded`` opened its block.
        self.refused_in_block = False
        self._group: Any = None
        self._group_loaded = False

    def _group_row(self) -> Any:
        if not self._group_loaded:
            from django_webfetch.models import ToolGroup

            self._group = ToolGroup.objects.filter(slug=self.group_slug).first()
            self._group_loaded = True
        return self._group

    def __call__(self, event: Any) -> None:
        """Record a ``net.GuardEvent``."""
        decision = getattr(event, "decision", "failed")
        detail = getattr(event, "detail", "")
        if decision == "failed":
            detail = _failure_summary(detail)
        self.record(
            decision=decision,
            reason=getattr(event, "reason", ""),
            url_host=getattr(event, "url_host", ""),
            port=getattr(event, "port", None),
            addresses=getattr(event, "addresses", ()),
            bytes=getattr(event, "bytes", 0),
            duration=getattr(event, "duration", 0.0),
            hop=getattr(event, "hop", 0),
            status=getattr(event, "status", None),
            detail=detail,
            failure=getattr(event, "failure", ""),
        )

    def record(
        self,
        *,
        decision: str,
        reason: str = "",
        url_host: str = "",
        port: int | None = None,
        addresses: Any = (),
        bytes: int = 0,
        duration: float = 0.0,
        hop: int = 0,
        status: int | None = None,
        detail: str = "",
        failure: str = "",
    ) -> Any:
        from django_webfetch.models import EgressEvent
        from django_webfetch.models.outage import survive_outage

        # A restart of the database while the request was in flight: the row is written
        # once the database is back (no row, no answer: the block fails closed otherwise).
        event = survive_outage(
            lambda: EgressEvent.objects.create(
                tool=self.tool,
                group=self._group_row(),
                group_slug=self.group_slug,
                user=self.user,
                plugin_instance_id=self.plugin_instance_id,
                plugin_ref=self.plugin_ref,
                call_id=self.call_id,
                url_host=_host(url_host),
                port=port if isinstance(port, int) and 0 < port < 65536 else None,
                decision=decision if decision in _DECISIONS else "failed",
                reason=_reason(reason),
                addresses=_addresses(addresses),
                bytes=max(int(bytes or 0), 0),
                duration=max(float(duration or 0.0), 0.0),
                hop=min(max(int(hop or 0), 0), 32767),
                status=status if isinstance(status, int) and 100 <= status <= 999 else None,
                detail=_detail(detail),
                failure=failure if failure in FAILURES else "",
            ),
            what="the decision log",
        )
        self.count += 1
        self.last_decision = event.decision
        if event.decision in ("denied", "failed"):
            self.refused_in_block = True
        self._report(event)
        return event

    def _report(self, event: Any) -> None:
        """The decision's one log line and its metrics: written here, and only here."""
        emit(event, run=self._run, scope=str(getattr(self._group_row(), "scope", "") or ""))
        metrics.egress_decision(
            group=event.group_slug,
            tool=event.tool or ("plugin" if event.plugin_ref else ""),
            decision=event.decision,
            reason=event.reason,
            duration=event.duration,
            size=event.bytes,
        )

    def _run(self) -> str:
        """The assistant run the call belongs to (``ToolCall.run``, written by the run;
        never parsed from the call's free-text ``conversation``)."""
        if self.run_id is None:
            self.run_id = ""
            from django_webfetch.models import ToolCall

            try:
                call = uuid.UUID(self.call_id)
            except ValueError:
                return ""
            run = ToolCall.objects.filter(pk=call).values_list("run_id", flat=True).first()
            if run is not None:
                self.run_id = str(run)
        return self.run_id

    def record_exception(
        self, exc: BaseException, *, url_host: str = "", port: int | None = None, hop: int = 0
    ) -> Any:
        """Record a refusal or failure that the guard did not report itself."""
        if isinstance(exc, EgressDenied):
            return self.record(
                decision="denied",
                reason=exc.reason,
                url_host=url_host,
                port=port,
                hop=getattr(exc, "hop", hop),
                detail=exc.detail,
            )
        code = exc.code if isinstance(exc, WebFetchError) else "internal_error"
        return self.record(
            decision="failed",
            reason=code,
            url_host=url_host,
            port=port,
            hop=hop,
            detail=type(exc).__name__,
            failure=getattr(exc, "failure", ""),
        )

    @contextmanager
    def guarded(self, *, url_host: str = "", port: int | None = None) -> Iterator[None]:
        """Run a guarded call that reports to this recorder; record its failure once.

        A ``WebFetchError`` (an ``EgressDenied`` included) leaving the block is recorded
        unless a row written inside the block already is a denial or a failure (the guard
        reported it).  The error propagates either way.
        """
        self.last_decision = ""
        self.refused_in_block = False
        try:
            yield
        except WebFetchError as exc:
            # A hop's own "fetched" may close after the refusal of its redirect: any
            # denial or failure in the block means the guard reported it already.
            if not self.refused_in_block:
                self.record_exception(exc, url_host=url_host, port=port)
            raise
