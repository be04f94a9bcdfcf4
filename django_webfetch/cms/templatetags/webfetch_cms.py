"""``{% load webfetch_cms %}``: ``{% webfetch_waiting_link %}``, the approvers' counter."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import ngettext

from django_webfetch import runs
from django_webfetch.cms.approvals import waiting_count

register = template.Library()


@register.simple_tag(takes_context=True)
def webfetch_waiting_link(context: dict[str, Any]) -> SafeString | str:
    """A link to the waiting calls, with their count, for users who may approve."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_active or not user.has_perm(runs.APPROVE_PERMISSION):
        return ""
    try:
        url = reverse("webfetch_cms:assistant") + "#approvals"
    except NoReverseMatch:
        return ""
    count = waiting_count(user)
    label = ngettext(
        "%(count)d call waits for your approval", "%(count)d calls wait for your approval", count
    ) % {"count": count}
    return format_html(
        '<a class="webfetch-waiting{}" href="{}" data-count="{}" '
        'style="margin-left:auto;padding:0 1rem;font-weight:{}">{}</a>',
        " is-waiting" if count else "",
        url,
        count,
        700 if count else 400,
        label,
    )
