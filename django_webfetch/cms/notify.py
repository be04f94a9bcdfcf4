"""E-mail to the approvers when tool calls start waiting for approval.

Sent with Django's mail framework after the transaction that made the calls wait has
committed, to every active user who may approve them (the approve permission; not the
requester while self-approval is off) and has an e-mail address.  The calls of one
assistant step (one model answer) are one mail per approver, listing every call of the
step that approver may decide (``assistant.notices``); a call requested outside a run
(the API, MCP) is one mail of its own.  A mail failure is logged
in one line (no traceback: a mail server that is down would log one per waiting call) and
never changes a call.

The link in the mail is absolute: ``base_url`` when the caller has a request
(``request.build_absolute_uri("/")``), else the current ``Site``'s domain (``http://`` for
``localhost`` and loopback addresses, ``https://`` otherwise; system check W051 warns while
it is still ``example.com``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.mail import send_mass_mail
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import translation

from django_webfetch.assistant.notices import step_awaiting_approval
from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall
from django_webfetch.tools.display import argument_rows

__all__ = ["approvers", "connect", "notify_step", "notify_waiting", "site_base_url"]

logger = logging.getLogger("django_webfetch.cms")

#: At most this many approvers get one notification (a bound on one send).
MAX_RECIPIENTS = 50


def approvers(call: ToolCall) -> list[Any]:
    """The active users who may approve ``call``, with an e-mail address."""
    User = get_user_model()
    perm = Permission.objects.filter(
        content_type__app_label="django_webfetch", codename="approve_toolcall"
    ).first()
    may = Q(is_superuser=True)
    if perm is not None:
        may |= Q(user_permissions=perm) | Q(groups__permissions=perm)
    users = User.objects.filter(may, is_active=True).exclude(email="").distinct()
    if not conf.WEBFETCH_ALLOW_SELF_APPROVAL and call.user_id is not None:
        users = users.exclude(pk=call.user_id)
    return list(users.order_by("pk")[:MAX_RECIPIENTS])


_LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def site_base_url() -> str:
    """``scheme://domain`` of the current Site (``""`` without django.contrib.sites)."""
    from django.apps import apps

    if not apps.is_installed("django.contrib.sites"):
        return ""
    from django.contrib.sites.models import Site

    try:
        domain = Site.objects.get_current().domain.strip().rstrip("/")
    except Exception:  # no current Site (SITE_ID unset and no request): a relative link
        return ""
    if not domain:
        return ""
    if "://" in domain:
        return domain
    host = domain.rsplit(":", 1)[0] if not domain.endswith("]") else domain
    scheme = "http" if host.lower() in _LOCAL_HOSTS or host.endswith(".localhost") else "https"
    return f"{scheme}://{domain}"


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def notify_waiting(call: ToolCall, *, base_url: str = "") -> int:
    """Mail the approvers about ``call``; returns the number of messages sent."""
    return notify_step([call], base_url=base_url)


def notify_step(calls: Sequence[ToolCall], *, base_url: str = "") -> int:
    """One mail to each approver listing every call of ``calls`` they may approve (the
    waiting calls of one step); returns the number of messages sent."""
    mine: dict[Any, tuple[Any, list[ToolCall]]] = {}
    for call in calls:
        for user in approvers(call):
            mine.setdefault(user.pk, (user, []))[1].append(call)
    if not mine:
        return 0
    from django.conf import settings
    from django.urls import NoReverseMatch, reverse

    try:
        path = reverse("webfetch_cms:assistant") + "#approvals"
    except NoReverseMatch:
        path = ""
    link = (base_url.rstrip("/") or site_base_url()) + path if path else ""
    messages = []
    with translation.override(settings.LANGUAGE_CODE):
        for user, waiting in mine.values():
            subject, body = _render(waiting, link)
            messages.append((subject, body, settings.DEFAULT_FROM_EMAIL, [user.email]))
    try:
        return send_mass_mail(messages, fail_silently=False)
    except Exception as exc:
        logger.error(
            "approval notification for tool calls %s not sent (%s); set EMAIL_BACKEND "
            "(docs/cms.rst, 'E-mail')",
            ", ".join(str(c.pk) for c in calls),
            _one_line(exc),
        )
        return 0


def _call_context(call: ToolCall) -> dict[str, Any]:
    preview = call.approval_preview or {}
    stored = preview.get("preflight")
    return {
        "call": call,
        "preview": preview,
        # Every argument, complete, one line each (tools.display escapes line breaks).
        "arguments": argument_rows(call.arguments),
        "preflight": stored if isinstance(stored, dict) else None,
    }


def _render(calls: list[ToolCall], link: str) -> tuple[str, str]:
    if len(calls) == 1:
        context = {**_call_context(calls[0]), "link": link}
        subject = render_to_string("django_webfetch/cms/approval_mail_subject.txt", context)
        body = render_to_string("django_webfetch/cms/approval_mail.txt", context)
    else:
        first = calls[0].approval_preview or {}
        context = {
            "calls": [_call_context(c) for c in calls],
            "count": len(calls),
            "user": first.get("user", ""),
            "tools": ", ".join(dict.fromkeys(c.tool for c in calls)),
            "link": link,
        }
        subject = render_to_string("django_webfetch/cms/approval_mail_step_subject.txt", context)
        body = render_to_string("django_webfetch/cms/approval_mail_step.txt", context)
    return " ".join(subject.split())[:200], body


def _on_transition(sender: Any, call: ToolCall, previous: str, **kwargs: Any) -> None:
    if call.state != CallState.AWAITING_APPROVAL or previous == CallState.AWAITING_APPROVAL:
        return
    if call.run_id is not None:
        return  # a run's call (ToolCall.run, written by the run): its step is one notice
    # After the commit: the mail goes out only for a call that really waits.
    transaction.on_commit(partial(notify_waiting, call))


def _on_step(sender: Any, run: Any, step: int, calls: Sequence[ToolCall], **kwargs: Any) -> None:
    transaction.on_commit(partial(notify_step, list(calls)))


def connect() -> None:
    from django_webfetch.runs import call_transitioned

    call_transitioned.connect(_on_transition, dispatch_uid="django_webfetch.cms.notify")
    step_awaiting_approval.connect(_on_step, dispatch_uid="django_webfetch.cms.notify_step")
