"""Django admin for plugin instances: the grant in plain, auditable fields.

Secret config values are write-only, like a configured endpoint's auth header: one
password field per secret the plugin's manifest declares, never rendered back; leaving it
empty keeps the stored value, a checkbox clears them all.  Every rule (grant syntax,
private exemptions only for granted hosts, the config schema) lives in the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from django_webfetch.admin import SecretFieldsAdminMixin
from django_webfetch.plugins.models import PluginInstance

if TYPE_CHECKING:
    _InstanceForm = forms.ModelForm[PluginInstance]
    _InstanceAdmin = admin.ModelAdmin[PluginInstance]
else:
    _InstanceForm = forms.ModelForm
    _InstanceAdmin = admin.ModelAdmin

_SECRET_PREFIX = "secret__"


class _HostLines(forms.Field):
    """A list of hosts, one per line."""

    widget = forms.Textarea(attrs={"rows": 4})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return "\n".join(str(v) for v in value)
        return value

    def to_python(self, value: Any) -> list[str]:
        text = value if isinstance(value, str) else ""
        return [line.strip() for line in text.splitlines() if line.strip()]


class PluginInstanceForm(_InstanceForm):
    egress_hosts = _HostLines(
        label=_("egress granted"),
        required=False,
        help_text=_("One per line: exact hosts, *.suffix (never the apex) or IP addresses."),
    )
    egress_allow_private = _HostLines(
        label=_("hosts allowed on private addresses"),
        required=False,
        help_text=_("One granted exact host per line. Metadata addresses stay refused."),
    )
    clear_secrets = forms.BooleanField(label=_("remove every stored secret"), required=False)

    class Meta:
        model = PluginInstance
        fields = (
            "plugin",
            "alias",
            "enabled",
            "trusted",
            "egress_hosts",
            "egress_allow_private",
            "config",
            "note",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from django_webfetch.plugins.registry import get_manifest

        manifest = get_manifest(self.instance.plugin) if self.instance.plugin else None
        self._secret_names = sorted(manifest.secret_fields) if manifest is not None else []
        for name in self._secret_names:
            self.fields[_SECRET_PREFIX + name] = forms.CharField(
                label=_("secret: %(name)s") % {"name": name},
                required=False,
                strip=False,
                max_length=4096,
                widget=forms.PasswordInput(
                    render_value=False, attrs={"autocomplete": "new-password"}
                ),
                help_text=_("Write-only: never shown again. Leave empty to keep it."),
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        secrets = {} if cleaned.get("clear_secrets") else dict(self.instance.secret_config)
        for name in self._secret_names:
            value = cleaned.pop(_SECRET_PREFIX + name, "")
            if value:
                secrets[name] = value
        self.instance.secret_config = secrets
        return cleaned


@admin.register(PluginInstance)
class PluginInstanceAdmin(SecretFieldsAdminMixin, _InstanceAdmin):
    form = PluginInstanceForm
    list_display = (
        "alias",
        "plugin",
        "version",
        "enabled",
        "trusted",
        "effective_grant",
        "has_secrets",
    )
    list_filter = ("enabled", "trusted", "plugin")
    search_fields = ("alias", "plugin", "note")
    readonly_fields = (
        "version",
        "declared_egress",
        "effective_grant",
        "has_secrets",
        "trusted_distribution_label",
    )
    actions = ("confirm_trust",)

    @admin.display(description=_("trusted for"))
    def trusted_distribution_label(self, obj: PluginInstance) -> str:
        """The distribution trust was given to, and whether it is still the installed one."""
        if not obj.trusted:
            return "-"
        problem = obj.trust_problem()
        recorded = obj.trusted_for()
        shown = str(recorded) if recorded is not None else "-"
        return f"{shown} (NOT trusted now: {problem})" if problem else shown

    @admin.action(description=_("Confirm trust in the installed distribution"))
    def confirm_trust(self, request: HttpRequest, queryset: Any) -> None:
        from django_webfetch.plugins.services import confirm_trust_of

        for instance in queryset.filter(trusted=True):  # confirms; never turns trust on
            found = confirm_trust_of(instance)
            if found is None:
                self.message_user(
                    request,
                    _("%(alias)s: no single installed distribution provides %(plugin)s.")
                    % {"alias": instance.alias, "plugin": instance.plugin},
                    level="error",
                )
            else:
                self.message_user(
                    request,
                    _("%(alias)s is trusted for %(dist)s.")
                    % {"alias": instance.alias, "dist": str(found)},
                )

    @admin.display(description=_("effective (declared ∩ granted)"))
    def effective_grant(self, obj: PluginInstance) -> str:
        return ", ".join(obj.effective()) or "-"

    @admin.display(boolean=True, description=_("secrets set"))
    def has_secrets(self, obj: PluginInstance) -> bool:
        return bool(obj.secret_config)

    def get_form(
        self,
        request: HttpRequest,
        obj: PluginInstance | None = None,
        change: bool = False,
        **kwargs: Any,
    ) -> Any:
        # The manifest's secret fields are added per instance by the form itself.
        kwargs["fields"] = None
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: PluginInstance | None = None) -> Any:
        fields = [
            "plugin",
            "alias",
            "enabled",
            "trusted",
            "trusted_distribution_label",
            "version",
            "declared_egress",
            "egress_hosts",
            "egress_allow_private",
            "effective_grant",
            "config",
            "note",
            "has_secrets",
        ]
        from django_webfetch.plugins.registry import get_manifest

        manifest = get_manifest(obj.plugin) if obj is not None else None
        editable = self.has_change_permission(request, obj) or (
            obj is None and self.has_add_permission(request)
        )
        if manifest is not None and editable:
            fields += [_SECRET_PREFIX + n for n in sorted(manifest.secret_fields)]
            fields.append("clear_secrets")
        return fields
