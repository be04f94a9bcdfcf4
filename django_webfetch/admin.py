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
from django.utils.translation import gettext_lazy as _

from .models import ConfiguredEndpoint, EgressEvent, HostListEntry, SiteHost, ToolGroup

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


class HostListEntryInline(_HostListEntryInline):
    model = HostListEntry
    extra = 1
    fields = ("list", "value", "note")


@admin.register(ToolGroup)
class ToolGroupAdmin(_ToolGroupAdmin):
    list_display = (
        "slug",
        "name",
        "scope",
        "enabled",
        "data_class",
        "skip_approval_with_allowlist",
        "allow_via_proxy",
    )
    list_filter = ("enabled", "scope")
    search_fields = ("slug", "name")
    inlines = [HostListEntryInline]
    actions = ["enable_groups", "disable_groups"]
    fieldsets = (
        (None, {"fields": ("slug", "name", "description", "enabled")}),
        (
            _("Egress"),
            {"fields": ("scope", "data_class", "skip_approval_with_allowlist", "allow_via_proxy")},
        ),
    )

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
class SiteHostAdmin(_SiteHostAdmin):
    list_display = ("host", "port", "scheme", "note")
    search_fields = ("host", "note")


class ConfiguredEndpointForm(_EndpointForm):
    auth_header_value = forms.CharField(
        label=_("auth header value"),
        required=False,
        strip=True,
        max_length=2000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=_("Write-only: never shown again. Leave empty to keep the stored value."),
    )
    clear_auth_header = forms.BooleanField(
        label=_("remove the stored auth header value"), required=False
    )

    class Meta:
        model = ConfiguredEndpoint
        fields = (
            "group",
            "name",
            "base_url",
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
            cleaned["auth_header_value"] = self._stored_secret
        return cleaned


@admin.register(ConfiguredEndpoint)
class ConfiguredEndpointAdmin(_EndpointAdmin):
    form = ConfiguredEndpointForm
    list_display = ("name", "group", "base_url", "has_auth_header", "allow_private", "enabled")
    list_filter = ("enabled", "allow_private", "group")
    search_fields = ("name", "base_url")
    fields = (
        "group",
        "name",
        "base_url",
        "auth_header_name",
        "auth_header_value",
        "clear_auth_header",
        "allow_private",
        "enabled",
    )

    @admin.display(boolean=True, description=_("auth header set"))
    def has_auth_header(self, obj: ConfiguredEndpoint) -> bool:
        return obj.has_auth


@admin.register(EgressEvent)
class EgressEventAdmin(_EventAdmin):
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
        "bytes",
        "duration",
    )
    list_filter = ("decision", "reason", "group_slug", "tool", "created")
    search_fields = ("url_host", "call_id", "reason")
    date_hierarchy = "created"
    list_select_related = ("user",)
    readonly_fields = [f.name for f in EgressEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


from . import admin_calls  # noqa: E402,F401
