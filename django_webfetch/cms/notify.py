"""E-mail to the approvers when a tool call starts waiting for approval.

Sent with Django's mail framework after the transaction that made the call wait has
committed, to every active user who may approve it (the approve permission; not the
requester while self-approval is off) and has an e-mail address.  A mail failure is logged
in one line (no traceback: a mail server that is down would log one per waiting call) and
never changes the call.

The link in the mail is absolute: ``base_url`` when the caller has a request
(``request.build_absolute_uri("/")``), else the current ``Site``'s domain (``http://`` for
``localhost`` and loopback addresses, ``https://`` otherwise; system check W051 warns while
it is still ``example.com``).
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

__all__ = ["approvers", "connect", "notify_waiting", "site_base_url"]

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
    recipients = approvers(call)
    if not recipients:
        return 0
    from django.conf import settings
    from django.urls import NoReverseMatch, reverse

    try:
        path = reverse("webfetch_cms:assistant") + "#approvals"
    except NoReverseMatch:
        path = ""
    link = (base_url.rstrip("/") or site_base_url()) + path if path else ""
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
    except Exception as exc:
        logger.error(
            "approval notification for tool call %s not sent (%s); set EMAIL_BACKEND "
            "(docs/cms.rst, 'E-mail')",
            call.pk,
            _one_line(exc),
        )
        return 0


def _on_transition(sender: Any, call: ToolCall, previous: str, **kwargs: Any) -> None:
    if call.state == CallState.AWAITING_APPROVAL and previous != CallState.AWAITING_APPROVAL:
        # After the commit: the mail goes out only for a call that really waits.
        transaction.on_commit(partial(notify_waiting, call))


def connect() -> None:
    from django_webfetch.runs import call_transitioned

    call_transitioned.connect(_on_transition, dispatch_uid="django_webfetch.cms.notify")
