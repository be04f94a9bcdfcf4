"""E-mail to the approvers when a tool call starts waiting for approval.

Sent with Django's mail framework after the transaction that made the call wait has
committed, to every active user who may approve it (the approve permission; not the
requester while self-approval is off) and has an e-mail address.  A mail failure is logged
and never changes the call.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.mail import send_mass_mail
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import translation

from django_webfetch.conf import conf
from django_webfetch.models import CallState, ToolCall
from django_webfetch.tools.display import argument_rows

__all__ = ["approvers", "connect", "notify_waiting"]

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


def notify_waiting(call: ToolCall, *, base_url: str = "") -> int:
    """Mail the approvers about ``call``; returns the number of messages sent."""
    recipients = approvers(call)
    if not recipients:
        return 0
    from django.conf import settings
    from django.urls import NoReverseMatch, reverse

    try:
        link = base_url + reverse("webfetch_cms:assistant") + "#approvals"
    except NoReverseMatch:
        link = ""
    preview = call.approval_preview or {}
    with translation.override(settings.LANGUAGE_CODE):
        stored = preview.get("preflight")
        context = {
            "call": call,
            "preview": preview,
            "link": link,
            # Every argument, complete, one line each (tools.display escapes line breaks).
            "arguments": argument_rows(call.arguments),
            "preflight": stored if isinstance(stored, dict) else None,
        }
        subject = render_to_string("django_webfetch/cms/approval_mail_subject.txt", context)
        body = render_to_string("django_webfetch/cms/approval_mail.txt", context)
    one_line = " ".join(subject.split())[:200]
    messages = [(one_line, body, settings.DEFAULT_FROM_EMAIL, [user.email]) for user in recipients]
    try:
        return send_mass_mail(messages, fail_silently=False)
    except Exception:
        logger.exception("approval notification for tool call %s failed", call.pk)
        return 0


def _on_transition(sender: Any, call: ToolCall, previous: str, **kwargs: Any) -> None:
    if call.state == CallState.AWAITING_APPROVAL and previous != CallState.AWAITING_APPROVAL:
        # After the commit: the mail goes out only for a call that really waits.
        transaction.on_commit(partial(notify_waiting, call))


def connect() -> None:
    from django_webfetch.runs import call_transitioned

    call_transitioned.connect(_on_transition, dispatch_uid="django_webfetch.cms.notify")
