"""The assistant page (``/assistant/``) and its approvals fragment.

Server-rendered; ``static/django_webfetch/cms/assistant.js`` (plain JavaScript, no build
step) talks to the assistant API (conversations, runs) and to the tool-call endpoints, and
refreshes the approvals fragment.  Everything the page shows comes from those APIs, which
enforce who may see and decide what.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.templatetags.static import static
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.views.generic import TemplateView, View

from django_webfetch import runs
from django_webfetch.assistant.services import answers_after_pause
from django_webfetch.models import ToolGroup
from django_webfetch.net.failures import FAILURES
from django_webfetch.tools.display import argument_rows

from . import content
from .approvals import MAX_CARDS, preflight, waiting_count, waiting_for
from .reasons import REASONS, REFUSALS, plain_reason

__all__ = ["ApprovalsView", "AssistantView", "StatusView", "counts", "provider_label"]


def provider_label() -> tuple[str, bool]:
    """The active LLM provider's label, and whether it is the offline planner."""
    from django_webfetch.assistant.providers import configured_provider

    provider = configured_provider()
    return provider.label, provider.offline


def _api_base() -> str:
    try:
        return reverse("django_webfetch:tool-list").removesuffix("tools/")
    except NoReverseMatch:
        return ""


#: Stands for a run's id in the stream URL the page fills in.
_RUN_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


def _stream_template() -> str:
    """The run event stream's URL with a placeholder id ("" where no stream is served)."""
    try:
        return reverse("django_webfetch:run-stream", kwargs={"pk": _RUN_PLACEHOLDER})
    except NoReverseMatch:
        return ""


def _admin_url(name: str) -> str:
    try:
        return reverse(name)
    except NoReverseMatch:
        return ""


def _plugin(call: Any) -> Any:
    from django_webfetch.plugins.services import call_plugin
    from django_webfetch.tools import default_registry

    return call_plugin(default_registry.get(call.tool))


def approval_cards(user: Any) -> list[dict[str, Any]]:
    cards = []
    for call in waiting_for(user)[:MAX_CARDS]:
        preview = dict(call.approval_preview or {})
        cards.append(
            {
                "call": call,
                "preview": preview,
                "query": preview.get("query_decoded") or [],
                # Every argument, complete (tools.display), beside the tool's own card.
                "arguments": argument_rows(call.arguments),
                "preflight": preflight(call),
                # A plugin's tool: which plugin and instance, where it may reach, trusted.
                "plugin": _plugin(call),
                "refused_by": plain_reason(preview["refused_by"])
                if preview.get("refused_by")
                else "",
            }
        )
    return cards


def _strings() -> dict[str, Any]:
    """Every text the page's script shows, translated here (no JavaScript catalog)."""
    return {
        "you": _("You"),
        "assistant": _("Assistant"),
        "sending": _("Sending…"),
        "thinking": _("The assistant is working…"),
        "waiting": _("Waiting for an approver…"),
        "denied_comment": _("The approver's comment: “%(comment)s”"),
        "empty": _(
            "Ask a question about this site's pages or about a public web page (paste its address)."
        ),
        "no_conversations": _("No conversations yet."),
        "untitled": _("(untitled)"),
        "rename": _("Rename"),
        "rename_label": _("Rename “%(title)s”"),
        "new_title": _("New title"),
        "save": _("Save"),
        "cancel": _("Cancel"),
        "delete": _("Delete"),
        "delete_label": _("Delete “%(title)s”"),
        "delete_confirm": _("Delete the conversation “%(title)s” and its messages?"),
        "failed": _("The assistant could not finish."),
        "cancelled": _("Cancelled."),
        "incomplete": _(
            "This answer is incomplete: the model stopped at its length limit. "
            "Ask it to continue, or ask a narrower question."
        ),
        "error": _("Something went wrong; try again."),
        "provider": _("Provider: %(label)s"),
        "offline": _("the offline planner (no language model configured)"),
        "third_party": _("Page text from a third party (untrusted content): %(source)s"),
        "own_page": _("Text of this site's page: %(source)s"),
        "approved_note": _("Approved."),
        "denied_note": _("Denied."),
        "states": {
            "pending": _("requested"),
            "awaiting_approval": _("waiting for approval"),
            "approved": _("approved, queued"),
            "running": _("running"),
            "succeeded": _("done"),
            "failed": _("failed"),
            # A failed call that a rule refused (the guard, a bound): not a failure.
            "refused": _("refused"),
            "denied": _("denied"),
            "expired": _("expired"),
            "cancelled": _("cancelled"),
        },
        "reasons": {code: str(text) for code, text in REASONS.items()},
        # A failed call's code is a refusal's (shown "refused") or a failure's (shown
        # "failed" with what failed: ``meta.failure`` in net.failures' fixed words).
        "refusals": sorted(REFUSALS),
        "failures": dict(FAILURES),
    }


def counts(user: Any) -> dict[str, Any]:
    """The toolbar's two live numbers: calls waiting for this approver (``None`` for a user
    who may not approve) and this editor's runs that finished after a pause, unseen."""
    approver = bool(user.has_perm(runs.APPROVE_PERMISSION))
    return {
        "approvals": waiting_count(user) if approver else None,
        "answers": answers_after_pause(user),
    }


class StatusView(LoginRequiredMixin, View):
    """``GET``: :func:`counts` as JSON (the toolbar and the page poll it)."""

    raise_exception = True

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = JsonResponse(counts(request.user))
        response["Cache-Control"] = "no-store"
        return response


class _Base(LoginRequiredMixin, TemplateView):
    raise_exception = False

    def can_approve(self) -> bool:
        return bool(self.request.user.has_perm(runs.APPROVE_PERMISSION))


class AssistantView(_Base):
    template_name = "django_webfetch/cms/assistant.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        request = self.request
        page_ref = None
        page_param = request.GET.get("page", "")
        if page_param.isdigit() and len(page_param) < 12:
            try:
                page_ref = content.find_page(request.user, page_id=int(page_param))[2]
            except content.PageNotFound:
                page_ref = None
        enabled = list(ToolGroup.objects.filter(enabled=True).values_list("slug", flat=True))
        can_approve = self.can_approve()
        context.update(
            {
                "api_base": _api_base(),
                "stream_template": _stream_template(),
                "provider_label": provider_label()[0],
                "provider_offline": provider_label()[1],
                "enabled_groups": enabled,
                # Linked only for a user the admin lets change them: any other staff
                # user (an editor) would get a 403 there, and reads where to ask instead.
                "groups_admin_url": (
                    _admin_url("admin:django_webfetch_toolgroup_changelist")
                    if request.user.has_perm("django_webfetch.change_toolgroup")
                    else None
                ),
                "groups_admin_label": _("%(app)s › Tool groups")
                % {"app": apps.get_app_config("django_webfetch").verbose_name},
                "page_ref": page_ref,
                "can_approve": can_approve,
                "cards": approval_cards(request.user) if can_approve else [],
                "strings": _strings(),
                "script_url": static("django_webfetch/cms/assistant.js"),
            }
        )
        return context

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        """The form posted without the page's script (JavaScript off, or its static files not
        served): the page again, saying that nothing was sent, never a 405.  Messages are sent
        only through the API (the script), so this sends nothing."""
        text = request.POST.get("content", "")[:4000]
        return self.render_to_response(
            self.get_context_data(posted_without_script=True, posted_text=text)
        )


class ApprovalsView(_Base):
    """The approval cards alone (the page refreshes them without a reload)."""

    template_name = "django_webfetch/cms/_approvals.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        can_approve = self.can_approve()
        context.update(
            {
                "api_base": _api_base(),
                "can_approve": can_approve,
                "cards": approval_cards(self.request.user) if can_approve else [],
            }
        )
        return context
