"""Django admin for tool calls: the approval queue.

Read-only records (nothing is added, edited or deleted here); ``approve`` and ``deny`` are
actions (bulk, and per object from the change page) that ask for a comment on an
intermediate page and report per call.  Both need ``django_webfetch.approve_toolcall``; the
service refuses self-approval unless ``WEBFETCH_ALLOW_SELF_APPROVAL`` is on.

Everything shown from a call's preview is escaped: the URL and its query string were chosen
by the model (and so, possibly, by a page it read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from django_webfetch import runs
from django_webfetch.admin import RecordsOnly, SecretFieldsAdminMixin
from django_webfetch.models import CallState, ToolCall
from django_webfetch.runs.reasons import plain_reason
from django_webfetch.tools.display import argument_rows

__all__ = ["AwaitingApprovalFilter", "DecisionForm", "ToolCallAdmin"]

if TYPE_CHECKING:
    _ToolCallAdmin = admin.ModelAdmin[ToolCall]
else:
    _ToolCallAdmin = admin.ModelAdmin

_DECISIONS: dict[str, tuple[Callable[..., ToolCall], Any, Any]] = {
    "approve": (runs.approve, _("Approve"), _("approved")),
    "deny": (runs.deny, _("Deny"), _("denied")),
}


class DecisionForm(forms.Form):
    comment = forms.CharField(
        label=_("Comment"),
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text=_("Recorded with the decision."),
    )


class AwaitingApprovalFilter(admin.SimpleListFilter):
    title = _("approval")
    parameter_name = "approval"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [
            ("awaiting", _("Awaiting approval")),
            ("awaiting_others", _("Awaiting approval, not mine")),
            ("decided", _("Decided by a person")),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[ToolCall]) -> QuerySet[ToolCall]:
        value = self.value()
        if value in ("awaiting", "awaiting_others"):
            queryset = queryset.filter(
                state=CallState.AWAITING_APPROVAL, expires_at__gt=timezone.now()
            )
            if value == "awaiting_others":
                queryset = queryset.exclude(user__pk=request.user.pk or 0)
        elif value == "decided":
            queryset = queryset.filter(decided_by__isnull=False)
        return queryset


#: What the approver must see in full: never cut (the schema bounds them, e.g. 2,048 for
#: fetch_external_url's URL, and the guard refuses URLs over 8,192 characters).
_UNCUT = 1_000_000


def _text(value: Any, limit: int = 2000) -> str:
    text = "" if value is None else str(value)
    text = "".join(c if c.isprintable() else "\N{REPLACEMENT CHARACTER}" for c in text)
    return text if len(text) <= limit else text[:limit] + "\N{HORIZONTAL ELLIPSIS}"


def _preflight_text(verdict: Any) -> SafeString:
    """The guard's pre-flight verdict stored on the call, in words (never a raw dict)."""
    if not isinstance(verdict, dict):
        return format_html("<code>{}</code>", _text(verdict, 500))
    checked = _text(verdict.get("checked_at") or "", 64)
    when = format_html(" ({} {})", _("checked at"), checked) if checked else ""
    if verdict.get("verdict") == "allowed":
        addresses = verdict.get("addresses") or []
        listed = ", ".join(_text(a, 64) for a in addresses if isinstance(a, str))
        return format_html(
            "<strong>{}</strong>{}{}{}",
            _("allowed when requested"),
            format_html("; {} <code>{}</code>", _("resolves to"), listed) if listed else "",
            when,
            format_html(". {}", _("The guard checks again when the call runs.")),
        )
    reason = _text(verdict.get("reason") or "", 100)
    return format_html(
        "<strong>{}</strong>{}{}",
        _("could not be checked"),
        format_html(": {} (<code>{}</code>)", plain_reason(reason), reason) if reason else "",
        when,
    )


class ToolCallAdmin(SecretFieldsAdminMixin, RecordsOnly, _ToolCallAdmin):
    list_display = (
        "short_id",
        "tool",
        "state",
        "user",
        "destination",
        "created",
        "expires_at",
        "decided_by",
        "reason",
    )
    list_filter = (AwaitingApprovalFilter, "state", "tool", "group", "created")
    search_fields = ("=id", "tool", "conversation", "user__username", "reason")
    list_select_related = ("user", "decided_by")
    date_hierarchy = "created"
    actions = ["approve_selected", "deny_selected"]
    change_form_template = "django_webfetch/calls/change_form.html"
    fieldsets = (
        (_("Approval card"), {"fields": ("preview_card",)}),
        (
            None,
            {
                "fields": (
                    "id",
                    "tool",
                    "group",
                    "state",
                    "reason",
                    "user",
                    "conversation",
                    "all_arguments",
                )
            },
        ),
        (
            _("Decision"),
            {
                "fields": (
                    "requires_approval",
                    "expires_at",
                    "decided_by",
                    "decided_at",
                    "decision_comment",
                )
            },
        ),
        (
            _("Run"),
            {
                "fields": (
                    "attempts",
                    "worker",
                    "queued_at",
                    "started_at",
                    "lease_expires_at",
                    "finished_at",
                    "result_error",
                    "result_content",
                )
            },
        ),
        (_("Record"), {"fields": ("created", "updated")}),
    )
    readonly_fields = (
        "preview_card",
        "id",
        "tool",
        "group",
        "state",
        "reason",
        "user",
        "conversation",
        "all_arguments",
        "requires_approval",
        "expires_at",
        "decided_by",
        "decided_at",
        "decision_comment",
        "attempts",
        "worker",
        "queued_at",
        "started_at",
        "lease_expires_at",
        "finished_at",
        "result_error",
        "result_content",
        "result_withheld",
        "created",
        "updated",
    )

    # -- permissions: a read-only record; deciding needs approve_toolcall ----------------------

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.has_perm(runs.APPROVE_PERMISSION))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        allowed = super().has_view_permission(request, obj) or self.has_approve_permission(request)
        return allowed and (obj is None or runs.can_read(request.user, obj))

    def get_queryset(self, request: HttpRequest) -> QuerySet[ToolCall]:
        # Who reads which call is runs.can_read/visible_calls, not the model permission.
        visible = runs.visible_calls(request.user).values("pk")
        return super().get_queryset(request).filter(pk__in=visible)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> ToolCall | None:
        """The call, with its result as this reader may read it (``runs.results``, the one
        reader): the result's fields show only what was read here, nothing else."""
        obj = super().get_object(request, object_id, from_field)
        if obj is not None:
            obj._webfetch_read = runs.result_dict(request.user, obj)  # type: ignore[attr-defined]
            obj._webfetch_withheld = runs.withheld(request.user, obj)  # type: ignore[attr-defined]
        return obj

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """The result only for who may read it (``runs.results``)."""
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None and not getattr(obj, "_webfetch_withheld", True):
            return fieldsets
        hidden = {"result_error", "result_content"}
        shown = []
        for name, options in fieldsets:
            fields = [f for f in options["fields"] if f not in hidden]
            if len(fields) != len(options["fields"]):
                fields.append("result_withheld")
            shown.append((name, {**options, "fields": tuple(fields)}))
        return shown

    def lookup_allowed(self, lookup: str, value: Any, request: Any = None) -> bool:
        # A lookup on the result from the query string (?result__icontains=...) would be
        # an oracle on results the reader may not read.
        if lookup.split("__", 1)[0] == "result":
            return False
        return super().lookup_allowed(lookup, value, request)

    # -- columns and fields ------------------------------------------------------------------

    @admin.display(description=_("id"))
    def short_id(self, obj: ToolCall) -> str:
        return str(obj.pk)[:8]

    @admin.display(description=_("destination"))
    def destination(self, obj: ToolCall) -> str:
        preview = obj.approval_preview or {}
        return _text(preview.get("host", ""), 100)

    @admin.display(description=_("arguments"))
    def all_arguments(self, obj: ToolCall) -> SafeString:
        """Every argument, complete, control characters escaped (``tools.display``)."""
        return format_html_join(
            "",
            "<div><code>{}</code> = <code>{}</code></div>",
            argument_rows(obj.arguments),
        )

    # The result's fields show what ``get_object`` read through ``runs.results`` for this
    # request's user, and nothing when it read nothing.

    @admin.display(description=_("result error"))
    def result_error(self, obj: ToolCall) -> str:
        return _text((getattr(obj, "_webfetch_read", None) or {}).get("error") or "")

    @admin.display(description=_("result"))
    def result_withheld(self, obj: ToolCall) -> str:
        if not getattr(obj, "_webfetch_withheld", False):
            return ""
        return str(_("Withheld: only the requester and superusers read a call's result."))

    @admin.display(description=_("result content"))
    def result_content(self, obj: ToolCall) -> SafeString:
        content = _text((getattr(obj, "_webfetch_read", None) or {}).get("content") or "", 20_000)
        return format_html(
            '<pre style="white-space: pre-wrap; max-height: 30em; overflow: auto">{}</pre>', content
        )

    @admin.display(description=_("approval card"))
    def preview_card(self, obj: ToolCall) -> SafeString:
        """Host, the full query string (raw and decoded), group and requesting user."""
        preview = dict(obj.approval_preview or {})
        rows: list[tuple[Any, str]] = [
            (_("tool"), _text(preview.pop("tool", obj.tool))),
            (_("group"), _text(preview.pop("group", obj.group))),
            (_("requested by"), _text(preview.pop("user", obj.user))),
        ]
        for key, label in (
            ("host", _("host")),
            ("scheme", _("scheme")),
            ("port", _("port")),
            ("path", _("path")),
            ("url", _("full URL")),
            ("query_raw", _("query string (raw)")),
        ):
            if key in preview:
                rows.append((label, _text(preview.pop(key), _UNCUT)))
        decoded = preview.pop("query_decoded", None)
        body = format_html_join("", "<tr><th>{}</th><td><code>{}</code></td></tr>", rows)
        if isinstance(decoded, list):
            pairs = format_html_join(
                "",
                "<li><code>{}</code> = <code>{}</code></li>",
                (
                    (_text(p[0], _UNCUT), _text(p[1], _UNCUT))
                    for p in decoded
                    if isinstance(p, (list, tuple)) and len(p) == 2
                ),
            )
            body = format_html(
                "{}<tr><th>{}</th><td><ul>{}</ul></td></tr>",
                body,
                _("query string (decoded)"),
                pairs,
            )
        preview.pop("arguments", None)  # shown below, from the arguments that will run
        preview.pop("url_provenance", None)
        note = preview.pop("url_note", None)
        if note:  # the model composed the URL (tools.approval)
            body = format_html(
                '{}<tr><th>{}</th><td><strong class="webfetch-url-note">{}</strong></td></tr>',
                body,
                _("URL provenance"),
                _text(note, 200),
            )
        verdict = preview.pop("preflight", None)
        if verdict is not None:
            body = format_html(
                "{}<tr><th>{}</th><td>{}</td></tr>",
                body,
                _("guard pre-flight"),
                _preflight_text(verdict),
            )
        for key, value in preview.items():  # anything else the tool put on its card
            body = format_html(
                "{}<tr><th>{}</th><td><code>{}</code></td></tr>",
                body,
                _text(key, 100),
                _text(value, _UNCUT),
            )
        # Every argument, complete and escaped (tools.display): what is approved is what
        # runs, whatever the tool put on its card.
        arguments = format_html_join(
            "",
            "<tr><th><code>{}</code></th><td>"
            '<pre class="webfetch-argument" style="white-space: pre-wrap; overflow-wrap: anywhere">'
            "{}</pre></td></tr>",
            argument_rows(obj.arguments),
        )
        body = format_html(
            '{}<tr><th colspan="2">{}</th></tr>{}',
            body,
            _("arguments (all, as they run)"),
            arguments,
        )
        return format_html('<table class="webfetch-approval-card">{}</table>', body)

    # -- decisions -----------------------------------------------------------------------------

    @admin.action(description=_("Approve the selected calls"), permissions=["approve"])
    def approve_selected(
        self, request: HttpRequest, queryset: QuerySet[ToolCall]
    ) -> HttpResponse | None:
        return self._decision(request, queryset, "approve")

    @admin.action(description=_("Deny the selected calls"), permissions=["approve"])
    def deny_selected(
        self, request: HttpRequest, queryset: QuerySet[ToolCall]
    ) -> HttpResponse | None:
        return self._decision(request, queryset, "deny")

    def _decision(
        self,
        request: HttpRequest,
        queryset: QuerySet[ToolCall],
        decision: str,
        *,
        single: ToolCall | None = None,
    ) -> HttpResponse | None:
        form = DecisionForm(request.POST if "confirm" in request.POST else None)
        if form.is_bound and form.is_valid():
            self._decide(request, list(queryset), decision, form.cleaned_data["comment"])
            return None
        verb, _past = _DECISIONS[decision][1:]
        context = {
            **self.admin_site.each_context(request),
            "title": _("%(verb)s tool calls") % {"verb": verb},
            "opts": self.model._meta,
            "calls": [
                (call, self.preview_card(call), runs.can_approve(request.user, call))
                for call in queryset
            ],
            "decision": decision,
            "verb": verb,
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "action": f"{decision}_selected",
            "single": single,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "django_webfetch/calls/decision.html", context)

    def _decide(
        self, request: HttpRequest, calls: Iterable[ToolCall], decision: str, comment: str
    ) -> None:
        service, _verb, past = _DECISIONS[decision]
        for call in calls:
            label = f"{call.tool} {str(call.pk)[:8]}"
            try:
                result = service(call.pk, by=request.user, comment=comment)
            except runs.RunError as exc:
                self.message_user(
                    request,
                    # The message starts with our words: the admin capitalises a message's
                    # first letter, which would turn a tool name into "Fetch_external_url".
                    _("Call %(call)s was not %(past)s: %(reason)s (%(code)s).")
                    % {"call": label, "past": past, "reason": exc, "code": exc.code},
                    messages.ERROR,
                )
                continue
            except ToolCall.DoesNotExist:
                continue
            state = result.get_state_display()
            if str(state).lower() == str(past).lower():  # "denied; it is now denied"
                text = _("Call %(call)s %(past)s.") % {"call": label, "past": past}
            else:
                text = _("Call %(call)s %(past)s; it is now %(state)s.") % {
                    "call": label,
                    "past": past,
                    "state": state,
                }
            self.message_user(request, text, messages.SUCCESS)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        own = [
            path(
                "<uuid:object_id>/decide/<str:decision>/",
                self.admin_site.admin_view(self.decision_view),
                name="{}_{}_decision".format(*info),
            ),
        ]
        return own + super().get_urls()

    def decision_view(self, request: HttpRequest, object_id: Any, decision: str) -> HttpResponse:
        """Approve or deny one call from its change page (same confirmation step)."""
        if decision not in _DECISIONS:
            raise PermissionDenied
        if not self.has_approve_permission(request):
            raise PermissionDenied
        queryset = self.get_queryset(request).filter(pk=object_id)
        call = queryset.first()
        change_url = reverse(
            f"{self.admin_site.name}:{self.opts.app_label}_{self.opts.model_name}_change",
            args=[quote(str(object_id))],
        )
        if call is None:
            return HttpResponseRedirect(change_url)
        response = self._decision(request, queryset, decision, single=call)
        return response or HttpResponseRedirect(change_url)

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        obj = kwargs.get("obj") or context.get("original")
        context["webfetch_can_decide"] = bool(
            obj is not None
            and obj.state == CallState.AWAITING_APPROVAL
            and self.has_approve_permission(request)
            and runs.can_approve(request.user, obj)
        )
        return super().render_change_form(request, context, *args, **kwargs)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        runs.expire_due()  # expiry is enforced on read
        return super().changelist_view(request, extra_context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            call = ToolCall.objects.filter(pk=object_id).first()
        except (ValueError, ValidationError):
            call = None
        if call is not None:
            runs.refresh(call)
        return super().change_view(request, object_id, form_url, extra_context)


admin.site.register(ToolCall, ToolCallAdmin)
