"""Django admin: thin ModelAdmins over the egress models.

The auth header of a ``ConfiguredEndpoint`` is write-only: the form never renders it back;
leaving the field empty keeps the stored value, a checkbox clears it.  ``EgressEvent`` is
read-only (pruned by ``manage.py webfetch prune_events``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from django_webfetch.assistant.providers import kind_choices
from django_webfetch.egress import endpoint_verdict
from django_webfetch.models import (
    ConfiguredEndpoint,
    EgressEvent,
    HostListEntry,
    SiteHost,
    ToolGroup,
)
from django_webfetch.models.fields import touches_secret

if TYPE_CHECKING:
    _HostListEntryInline = admin.TabularInline[HostListEntry, ToolGroup]
    _ToolGroupAdmin = admin.ModelAdmin[ToolGroup]
    _SiteHostAdmin = admin.ModelAdmin[SiteHost]
    _EndpointForm = forms.ModelForm[ConfiguredEndpoint]
    _EndpointAdmin = admin.ModelAdmin[ConfiguredEndpoint]
    _EventAdmin = admin.ModelAdmin[EgressEvent]
else:
    _HostListEntryInline = admin.TabularInline
    _ToolGroupAdmin = _SiteHostAdmin = _EndpointAdmin = _EventAdmin = admin.ModelAdmin
    _EndpointForm = forms.ModelForm


class SecretFieldsAdminMixin:
    """Refuse every lookup, search and ordering that reaches a field marked secret.

    Django's admin allows lookups on a model's own fields from the query string
    (``?auth_header_value__regex=^a``): answered, that is an oracle that recovers a
    write-only secret byte by byte.  Such a lookup is refused with the admin's own
    ``DisallowedModelAdminLookup`` (HTTP 400, the same answer whatever the value), also
    through a relation (``?endpoints__auth_header_value__startswith=``).  The ORM refuses
    the lookup too (``models.fields.SecretCharField``), for admins and views not ours.
    """

    model: Any

    def lookup_allowed(self, lookup: str, value: Any, request: Any = None) -> bool:
        if touches_secret(self.model, lookup):
            return False
        allowed: bool = super().lookup_allowed(lookup, value, request)  # type: ignore[misc]
        return allowed

    def get_search_fields(self, request: HttpRequest) -> Any:
        fields = super().get_search_fields(request)  # type: ignore[misc]
        return [f for f in fields if not touches_secret(self.model, f)]

    def get_ordering(self, request: HttpRequest) -> Any:
        ordering = super().get_ordering(request) or ()  # type: ignore[misc]
        return [o for o in ordering if not isinstance(o, str) or not touches_secret(self.model, o)]


class RecordsOnly:
    """Admin mixin for records nobody edits in the admin: audit events and tool calls are
    written by the services only (and never deleted by hand)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class HostListEntryInline(_HostListEntryInline):
    model = HostListEntry
    extra = 1
    fields = ("list", "value", "note")


@admin.register(ToolGroup)
class ToolGroupAdmin(SecretFieldsAdminMixin, _ToolGroupAdmin):
    # Short column headers and values: the field labels are sentences, too wide for the
    # list at 1,280 px (the change form keeps them whole).
    list_display = (
        "slug",
        "name",
        "scope_column",
        "enabled",
        "data_column",
        "skips_approval",
        "via_proxy",
    )
    list_filter = ("enabled", "scope")
    search_fields = ("slug", "name")
    inlines = [HostListEntryInline]
    actions = ["enable_groups", "disable_groups"]

    @admin.display(description=_("scope"), ordering="scope")
    def scope_column(self, obj: ToolGroup) -> SafeString:
        return format_html('<span title="{}">{}</span>', obj.get_scope_display(), obj.scope)

    @admin.display(description=_("data"), ordering="data_class")
    def data_column(self, obj: ToolGroup) -> SafeString:
        return format_html(
            '<span title="{}">{}</span>', obj.get_data_class_display(), obj.data_class
        )

    @admin.display(
        description=_("no approval with allowlist"),
        boolean=True,
        ordering="skip_approval_with_allowlist",
    )
    def skips_approval(self, obj: ToolGroup) -> bool:
        return obj.skip_approval_with_allowlist

    @admin.display(description=_("via proxy"), boolean=True, ordering="allow_via_proxy")
    def via_proxy(self, obj: ToolGroup) -> bool:
        return obj.allow_via_proxy

    fieldsets = (
        (None, {"fields": ("slug", "name", "description", "enabled")}),
        (
            _("Egress"),
            {
                "fields": (
                    "scope",
                    "data_class",
                    "data_notice",
                    "skip_approval_with_allowlist",
                    "fetch_only_seen_urls",
                    "allow_via_proxy",
                )
            },
        ),
    )
    readonly_fields = ("data_notice",)

    @admin.display(description=_("data leaving the installation"))
    def data_notice(self, obj: ToolGroup | None) -> str:
        if obj is None or not obj.pk:
            return str(_("Shown once the group is saved."))
        return obj.data_notice

    @admin.action(description=_("Enable the selected tool groups"), permissions=["change"])
    def enable_groups(self, request: HttpRequest, queryset: QuerySet[ToolGroup]) -> None:
        count = queryset.update(enabled=True)
        self.message_user(
            request, _("%(count)d tool group(s) enabled.") % {"count": count}, messages.SUCCESS
        )

    @admin.action(description=_("Disable the selected tool groups"), permissions=["change"])
    def disable_groups(self, request: HttpRequest, queryset: QuerySet[ToolGroup]) -> None:
        count = queryset.update(enabled=False)
        self.message_user(
            request, _("%(count)d tool group(s) disabled.") % {"count": count}, messages.SUCCESS
        )


@admin.register(SiteHost)
class SiteHostAdmin(SecretFieldsAdminMixin, _SiteHostAdmin):
    list_display = ("host", "port", "scheme", "note")
    search_fields = ("host", "note")


#: Refusals the endpoint's private-address exemption lifts (never metadata, never mixed).
_SELF_HOSTED_RULES = frozenset(
    {"own_site", *(f"address_class:{c}" for c in ("loopback", "private", "shared", "ula"))}
)


def _provider_kind_choices() -> list[tuple[str, str]]:
    # Read on every form (the registry), not once when the form class is built.
    return [("", "---------"), *kind_choices()]


class ConfiguredEndpointForm(_EndpointForm):
    provider_kind = forms.ChoiceField(
        label=_("LLM provider kind"),
        choices=_provider_kind_choices,
        required=False,
        help_text=_("Only for endpoints of the assistant group."),
    )
    auth_header_value = forms.CharField(
        label=_("Auth header value"),
        required=False,
        strip=True,
        max_length=2000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Write-only: never shown again. Leave empty to keep the stored value."),
    )
    clear_auth_header = forms.BooleanField(
        label=_("Remove the stored auth header value"), required=False
    )

    class Meta:
        model = ConfiguredEndpoint
        fields = (
            "group",
            "name",
            "base_url",
            "provider_kind",
            "model_name",
            "auth_header_name",
            "auth_header_value",
            "allow_private",
            "enabled",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Never put the stored secret into the form: not as a value, not as an initial.
        self.initial.pop("auth_header_value", None)
        self.fields["auth_header_value"].initial = None
        self._stored_secret = self.instance.auth_header_value if self.instance.pk else ""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("clear_auth_header"):
            cleaned["auth_header_value"] = ""
        elif not cleaned.get("auth_header_value"):
            if self._stored_secret and self._origin_changed(cleaned.get("base_url")):
                # A stored secret never follows the endpoint to another origin: whoever
                # moves it must enter the secret again (or clear it).
                self.add_error(
                    "auth_header_value",
                    _(
                        "The endpoint moves to another scheme, host or port: enter the auth "
                        "header value again, or tick the box to remove it."
                    ),
                )
            cleaned["auth_header_value"] = self._stored_secret
        self._check_guard(cleaned)
        return cleaned

    def _check_guard(self, cleaned: dict[str, Any]) -> None:
        """Refuse an endpoint the guard would refuse for its scope, naming the rule (the
        static rules: no DNS lookup at save; ``manage.py webfetch explain`` resolves)."""
        group, base_url = cleaned.get("group"), cleaned.get("base_url")
        if group is None or not isinstance(base_url, str) or self.has_error("base_url"):
            return
        verdict = endpoint_verdict(
            ConfiguredEndpoint(
                group=group, base_url=base_url, allow_private=bool(cleaned.get("allow_private"))
            )
        )
        if verdict.allowed:
            return
        message = _(
            "The egress guard would refuse this endpoint for its scope (rule: %(rule)s)."
        ) % {"rule": verdict.reason}
        if verdict.reason in _SELF_HOSTED_RULES:
            message += " " + str(
                _(
                    "If it is a model or search server you run yourself (Ollama, llama.cpp, vLLM "
                    'on localhost or a private address), tick "allow private addresses": the '
                    "endpoint is then an operator-chosen, self-hosted endpoint."
                )
            )
        self.add_error("base_url", message)

    def _origin_changed(self, new_url: Any) -> bool:
        if not self.instance.pk or not isinstance(new_url, str):
            return False
        return _origin(new_url) != _origin(self.instance.base_url)


def _origin(url: str) -> tuple[str, str, int | None]:
    from urllib.parse import urlsplit

    try:
        split = urlsplit(url)
        return (split.scheme.lower(), (split.hostname or "").lower(), split.port)
    except ValueError:
        return ("", url, None)


@admin.register(ConfiguredEndpoint)
class ConfiguredEndpointAdmin(SecretFieldsAdminMixin, _EndpointAdmin):
    form = ConfiguredEndpointForm
    list_display = ("name", "group", "base_url", "has_auth_header", "allow_private", "enabled")
    list_filter = ("enabled", "allow_private", "group")
    search_fields = ("name", "base_url")
    fields = (
        "group",
        "name",
        "base_url",
        "provider_kind",
        "model_name",
        "auth_header_name",
        "auth_header_value",
        "clear_auth_header",
        "allow_private",
        "enabled",
    )

    @admin.display(boolean=True, description=_("auth header set"))
    def has_auth_header(self, obj: ConfiguredEndpoint) -> bool:
        return obj.has_auth

    def get_fields(self, request: HttpRequest, obj: ConfiguredEndpoint | None = None) -> Any:
        fields = super().get_fields(request, obj)
        if not self.has_change_permission(request, obj) and not (
            obj is None and self.has_add_permission(request)
        ):
            # Read-only pages render model values as they are: the secret field must not
            # be there at all.  "auth header set" says whether one is stored.
            fields = [f for f in fields if f not in ("auth_header_value", "clear_auth_header")]
            fields.append("has_auth_header")
        return fields

    def get_readonly_fields(
        self, request: HttpRequest, obj: ConfiguredEndpoint | None = None
    ) -> Any:
        readonly = list(super().get_readonly_fields(request, obj))
        if "has_auth_header" not in readonly:
            readonly.append("has_auth_header")
        return readonly


@admin.register(EgressEvent)
class EgressEventAdmin(SecretFieldsAdminMixin, RecordsOnly, _EventAdmin):
    list_display = (
        "created",
        "decision",
        "reason",
        "tool",
        "group_slug",
        "user",
        "url_host",
        "port",
        "hop",
        "status",
        "failure",
        "bytes",
        "duration_display",
    )
    list_filter = ("decision", "reason", "failure", "group_slug", "tool", "created")
    search_fields = ("url_host", "call_id", "reason")
    date_hierarchy = "created"
    list_select_related = ("user",)
    readonly_fields = [*(f.name for f in EgressEvent._meta.fields), "failure_text"]

    @admin.display(description=_("duration"), ordering="duration")
    def duration_display(self, obj: EgressEvent) -> str:
        return format_duration(obj.duration)

    @admin.display(description=_("what failed"))
    def failure_text(self, obj: EgressEvent) -> str:
        return obj.failure_text


def format_duration(seconds: float | None) -> str:
    """A duration for people, rounded, with its unit: "850 ms", "1.2 s"."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"


from . import assistant, budgets, calls, operations, plugins, tokens  # noqa: E402,F401
