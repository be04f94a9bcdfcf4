"""Django admin for plugin instances: the grant in plain, auditable fields.

Secret config values are write-only, like a configured endpoint's auth header: one
password field per secret the plugin's manifest declares, never rendered back; leaving it
empty keeps the stored value, a checkbox clears them all.  Every rule (grant syntax,
private exemptions only for granted hosts, the config schema) lives in the model.

Every value a plugin distribution controls (its name and version, its dependencies', where
its code is, refusals quoting them) is shown through ``plugins.shown.shown``, as on the
command line (tests/plugins/test_shown.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from django_webfetch.admin import SecretFieldsAdminMixin
from django_webfetch.plugins.models import PluginInstance
from django_webfetch.plugins.shown import shown

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


class _ShownJSON(forms.JSONField):
    """The config as JSON whose strings write every character ``shown`` would escape as
    a JSON escape: the same value, read back unchanged, but a default the plugin's manifest
    chose cannot reorder or hide the text of the page (tests/plugins/test_shown.py)."""

    def prepare_value(self, value: Any) -> Any:
        text = super().prepare_value(value)
        if shown(text) == text:
            return text
        return "".join(c if shown(c) == c else _json_escape(c) for c in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


class PluginInstanceForm(_InstanceForm):
    egress_hosts = _HostLines(
        label=_("Egress granted"),
        required=False,
        help_text=_("One per line: exact hosts, *.suffix (never the apex) or IP addresses."),
    )
    egress_allow_private = _HostLines(
        label=_("Hosts allowed on private addresses"),
        required=False,
        help_text=_("One granted exact host per line. Metadata addresses stay refused."),
    )
    config = _ShownJSON(label=_("Config"), required=False)
    clear_secrets = forms.BooleanField(label=_("Remove every stored secret"), required=False)
    #: The fingerprint of the distribution this page showed ("installed distribution"):
    #: ticking ``trusted`` trusts that one only (``services.provider_fingerprint``).
    trust_shown = forms.CharField(required=False, widget=forms.HiddenInput)

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

        if self.instance.plugin:
            self.fields["trust_shown"].initial = _installed(self.instance.plugin)[1]
        manifest = get_manifest(self.instance.plugin) if self.instance.plugin else None
        self._secret_names = sorted(manifest.secret_fields) if manifest is not None else []
        for name in self._secret_names:
            self.fields[_SECRET_PREFIX + name] = forms.CharField(
                label=_("Secret: %(name)s") % {"name": name},
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
        if cleaned.get("trusted") and not (self.instance.pk and self.instance.trusted):
            # Trust turned on: given to the distribution this page showed, or to none.
            plugin = cleaned.get("plugin") or self.instance.plugin
            if cleaned.get("trust_shown", "") != _installed(plugin)[1]:
                self.add_error(
                    "trusted",
                    _(
                        "The distribution that provides this plugin is not the one this page "
                        "showed (installed since, or the plugin was changed): nothing was "
                        "trusted. Review the installed distribution shown now, then tick "
                        "trusted again."
                    ),
                )
            else:
                from django_webfetch.plugins.closure import unpinnable
                from django_webfetch.plugins.provenance import installed_dependencies

                cannot = unpinnable(installed_dependencies(plugin))
                if cannot:
                    # Decision 0051: a dependency whose code cannot be pinned is never trusted.
                    self.add_error(
                        "trusted",
                        _(
                            "The plugin requires an installed distribution whose code cannot "
                            "be pinned (plugin_dependency_unpinnable): %(why)s. Nothing was "
                            "trusted."
                        )
                        % {"why": shown(cannot)},
                    )
        cleaned.pop("trust_shown", None)
        secrets = {} if cleaned.get("clear_secrets") else dict(self.instance.secret_config)
        for name in self._secret_names:
            value = cleaned.pop(_SECRET_PREFIX + name, "")
            if value:
                secrets[name] = value
        self.instance.secret_config = secrets
        return cleaned


def _installed(plugin: str) -> tuple[Any, str]:
    """The distribution that provides ``plugin`` now (or ``None``) and its fingerprint."""
    from django_webfetch.plugins.provenance import installed_provider
    from django_webfetch.plugins.services import provider_fingerprint

    found = installed_provider(plugin) if plugin else None
    return found, provider_fingerprint(found)


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
        "installed_distribution_label",
    )
    actions = ("confirm_trust",)

    @admin.display(description=_("installed distribution"))
    def installed_distribution_label(self, obj: PluginInstance) -> str:
        """What ticking ``trusted`` would trust: the distribution providing the plugin now."""
        found = _installed(obj.plugin)[0]
        if found is None:
            return "-"
        from django_webfetch.plugins.provenance import installed_dependencies

        deps = ", ".join(str(d) for d in installed_dependencies(obj.plugin))
        pinned = f"; dependencies pinned with it: {deps}" if deps else ""
        return shown(f"{found} (code sha256 {found.digest or '-'}{pinned})")

    @admin.display(description=_("trusted for"))
    def trusted_distribution_label(self, obj: PluginInstance) -> str:
        """The distribution trust was given to, and whether it is still the installed one."""
        if not obj.trusted:
            return "-"
        problem = obj.trust_problem()
        recorded = obj.trusted_for()
        label = str(recorded) if recorded is not None else "-"
        return shown(f"{label} (NOT trusted now: {problem})" if problem else label)

    @admin.action(description=_("Confirm trust in the installed distribution"))
    def confirm_trust(self, request: HttpRequest, queryset: Any) -> Any:
        """First a page showing, per selected trusted instance, the distribution that
        provides its plugin now; then, confirmed there, trust in what that page showed
        (another distribution by then: refused, ``trust_not_shown``)."""
        from django_webfetch.plugins.registry import origin
        from django_webfetch.plugins.services import (
            PluginServiceError,
            confirm_trust_of,
            provider_fingerprint,
        )

        trusted = list(queryset.filter(trusted=True))  # confirms; never turns trust on
        if request.POST.get("post") != "yes":
            from django.contrib.admin import helpers
            from django.template.response import TemplateResponse

            from django_webfetch.plugins.provenance import (
                installed_dependencies,
                installed_provider,
            )

            rows = []
            for instance in trusted:
                found = installed_provider(instance.plugin)
                where = origin(instance.plugin)
                deps = installed_dependencies(instance.plugin) if found else ()
                rows.append(
                    {
                        "instance": instance,
                        "label": shown(f"{instance.alias} ({instance.plugin})"),
                        "provider": shown(found) if found is not None else "",
                        "digest": shown(found.digest) if found is not None else "",
                        "fingerprint": provider_fingerprint(found),
                        "path": shown(where.path) if where is not None else "",
                        "dependencies": [
                            {
                                "label": shown(dep),
                                "pinned": shown(f"{dep.where}, sha256 {dep.digest or '-'}")
                                if dep.version
                                else "",
                                "problem": shown(dep.problem),
                            }
                            for dep in deps
                        ],
                    }
                )
            context = {
                **self.admin_site.each_context(request),
                "title": _("Confirm trust"),
                "opts": self.model._meta,
                "rows": rows,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(
                request,
                "admin/django_webfetch/plugininstance/confirm_trust.html",
                context,
            )
        for instance in trusted:
            try:
                found = confirm_trust_of(
                    instance, shown=request.POST.get(f"shown_{instance.pk}", "")
                )
            except PluginServiceError as exc:
                self.message_user(
                    request, shown(f"{instance.alias}: {exc} ({exc.code})"), level="error"
                )
                continue
            if found is None:
                self.message_user(
                    request,
                    _("%(alias)s: no single installed distribution provides %(plugin)s.")
                    % {"alias": shown(instance.alias), "plugin": shown(instance.plugin)},
                    level="error",
                )
            else:
                self.message_user(
                    request,
                    _("%(alias)s is trusted for %(dist)s.")
                    % {"alias": shown(instance.alias), "dist": shown(found)},
                )
        return None

    @admin.display(description=_("effective now"))
    def effective_grant(self, obj: PluginInstance) -> str:
        # What ``plugin list`` says (declared ∩ acknowledged ∩ granted, and nothing while
        # the instance or its group is off, with why): tests/plugins/test_admin.py.
        from django_webfetch.plugins.services import effective_now

        hosts, off = effective_now(obj)
        return shown(", ".join(hosts) or (f"(none): {off}" if off else "-"))

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
            "trust_shown",
            "trusted_distribution_label",
            "installed_distribution_label",
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
