"""``PluginInstance``: one configured binding of a plugin, with its operator grant.

The grant lives in plain fields an operator can audit (``egress_hosts``,
``egress_allow_private``), never inside the config.  Secret config values sit in
``secret_config``: write-only (no admin or CLI renders them back, ``repr`` omits them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from django_webfetch.models.fields import SecretJSONField
from django_webfetch.net.errors import HostNotAllowed
from django_webfetch.values import PluginGrant

from .manifest import ManifestError, canonical_entry, tool_group
from .provenance import Provider, installed_dependencies, installed_provider, unpinned_why

__all__ = ["PluginInstance", "validate_alias"]


def validate_alias(value: str) -> None:
    import re

    checked: object = value
    if not isinstance(checked, str) or not re.match(r"^[a-z0-9][a-z0-9_-]{0,39}\Z", checked):
        raise ValidationError(
            _("An alias is 1..40 lower-case letters, digits, '-' and '_'."), code="alias"
        )


def _entries(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(_("%(what)s must be a list of hosts."), params={"what": what})
    result = []
    for raw in value:
        try:
            result.append(canonical_entry(raw.strip()))
        except ManifestError as exc:
            raise ValidationError(str(exc), code="egress_entry") from exc
    return list(dict.fromkeys(result))


def dependency_changes(recorded: Any, plugin: str) -> list[str]:
    """What differs between the dependencies recorded at trust and those installed now
    for ``plugin`` (each added, removed, changed or unpinnable distribution, in words)."""
    from .closure import changed

    return changed(recorded, installed_dependencies(plugin))


class PluginInstance(models.Model):
    plugin = models.CharField(_("plugin"), max_length=40)
    alias = models.CharField(_("alias"), max_length=40, unique=True, validators=[validate_alias])
    #: The manifest version the operator last installed, bound or upgraded to.
    version = models.CharField(_("version"), max_length=40, blank=True)
    #: The declaration the operator saw and acknowledged (install, bind, upgrade): what an
    #: upgrade is compared against.
    declared_egress = models.JSONField(_("egress declared"), default=list, blank=True)
    enabled = models.BooleanField(_("enabled"), default=True)
    config = models.JSONField(_("config"), default=dict, blank=True)
    #: Secret config values (write-only).  Never rendered back by the admin or the CLI.
    secret_config = SecretJSONField(_("secret config"), default=dict, blank=True)
    egress_hosts = models.JSONField(
        _("egress granted"),
        default=list,
        blank=True,
        help_text=_(
            "Destinations the operator grants: exact hosts, *.suffix patterns (never the "
            "apex) or IP addresses. The plugin reaches only those it also declares."
        ),
    )
    egress_allow_private = models.JSONField(
        _("hosts allowed on private addresses"),
        default=list,
        blank=True,
        help_text=_(
            "Exact granted hosts that may resolve to private addresses (an intranet "
            "server). Metadata addresses and mixed public/private answers stay refused."
        ),
    )
    #: Run this instance's tools in the web or worker process under the audit hook instead
    #: of an isolated plugin process (docs/plugins.rst; ``check`` warns, W032).
    trusted = models.BooleanField(
        _("trusted (runs in-process)"),
        default=False,
        help_text=_(
            "Run this plugin's code inside the site's own processes, with the site's "
            "settings and database, guarded only by the audit hook. Leave off: the plugin "
            "runs in an isolated process with no network of its own."
        ),
    )
    #: The distribution that provided the plugin's entry point when the operator turned
    #: ``trusted`` on (or confirmed it again): trust holds only while it still does (W034).
    trusted_distribution = models.CharField(
        _("trusted distribution"), max_length=200, blank=True, editable=False
    )
    trusted_version = models.CharField(
        _("trusted version"), max_length=100, blank=True, editable=False
    )
    #: SHA-256 of the plugin's code in that distribution (``provenance.code_digest``).
    trusted_record = models.CharField(
        _("trusted RECORD digest"), max_length=64, blank=True, editable=False
    )
    #: The installed distributions the plugin requires (outside the site's own set) when
    #: trust was turned on or confirmed: [name, version, code digest] each; their digests
    #: are in ``trusted_record`` too, this says which one changed (W034, decision 0051).
    trusted_dependencies = models.JSONField(
        _("trusted dependencies"), default=list, blank=True, editable=False
    )
    note = models.CharField(_("note"), max_length=200, blank=True)
    created = models.DateTimeField(_("created"), auto_now_add=True)
    updated = models.DateTimeField(_("updated"), auto_now=True)

    #: Builds the host-owned client from an instance's primary key; set by ``apps.py``.
    client_factory: ClassVar[Callable[[Any], Any] | None] = None
    #: The installed manifest of a plugin name (``plugins.registry.get_manifest``), set by
    #: ``apps.py``: a row imports no registry (the registry loads plugin code).
    manifest_lookup: ClassVar[Callable[[str], Any] | None] = None

    class Meta:
        app_label = "django_webfetch"
        ordering = ["plugin", "alias"]
        verbose_name = _("plugin instance")
        verbose_name_plural = _("plugin instances")

    def __str__(self) -> str:
        return f"{self.alias} ({self.plugin})"

    def __repr__(self) -> str:
        # Never the config: it may hold secrets.
        return f"<PluginInstance {self.pk} {self.plugin}:{self.alias}>"

    def installed_manifest(self) -> Any:
        """The plugin's installed manifest (``None`` when it is not installed)."""
        lookup = type(self).manifest_lookup
        if lookup is None:
            raise ImproperlyConfigured("django_webfetch is not ready: no plugin manifest lookup")
        return lookup(self.plugin)

    @property
    def reference(self) -> str:
        """The text kept on audit rows (outlives the instance)."""
        return f"plugin:{self.plugin}:{self.alias}#{self.pk}"

    def clean(self) -> None:
        super().clean()
        self.egress_hosts = _entries(self.egress_hosts, "egress_hosts")
        self.declared_egress = _entries(self.declared_egress, "declared_egress")
        private = _entries(self.egress_allow_private, "egress_allow_private")
        for raw in private:
            if raw.startswith("*."):
                raise ValidationError(
                    {"egress_allow_private": _("Name exact hosts, not *.suffix patterns.")}
                )
        from .grants import intersect

        outside = [h for h in private if not intersect(self.egress_hosts, [h])]
        if outside:
            raise ValidationError(
                {
                    "egress_allow_private": _(
                        "Only granted hosts can be allowed on private addresses: %(hosts)s"
                    )
                    % {"hosts": ", ".join(outside[:5])}
                }
            )
        self.egress_allow_private = private
        for name in ("config", "secret_config"):
            if not isinstance(getattr(self, name), dict):
                raise ValidationError({name: _("Must be a mapping.")})
        self._check_config()

    def _check_config(self) -> None:
        """Config values against the installed manifest's typed schema; secrets only in
        ``secret_config``.  Messages never quote a value."""
        from .manifest import validate_config

        manifest = self.installed_manifest()
        if manifest is None:
            return
        secret = manifest.secret_fields
        misplaced = sorted(set(self.config) & secret) + sorted(set(self.secret_config) - secret)
        if misplaced:
            raise ValidationError(
                _("Secret fields belong in the secret config, others in the config: %(f)s")
                % {"f": ", ".join(map(str, misplaced[:5]))}
            )
        problems = validate_config(
            manifest.config, {**self.config, **self.secret_config}, partial=True
        )
        if problems:
            raise ValidationError(
                "; ".join(f"{name} {problem}" for name, problem in sorted(problems.items()))
            )

    # -- trust ----------------------------------------------------------------------------

    def trusted_for(self) -> Provider | None:
        """The distribution recorded when trust was turned on or confirmed."""
        if not self.trusted_distribution:
            return None
        return Provider(self.trusted_distribution, self.trusted_version, self.trusted_record)

    def confirm_trust(self) -> Provider | None:
        """Record the distribution providing the plugin's entry point now (nothing when
        none or more than one does: then trust holds for nothing).  Not saved here."""
        found = installed_provider(self.plugin)
        self.trusted_distribution = found.name if found else ""
        self.trusted_version = found.version if found else ""
        self.trusted_record = found.digest if found else ""
        deps = installed_dependencies(self.plugin) if found else ()
        self.trusted_dependencies = [[d.name, d.version, d.digest] for d in deps]
        return found

    def trust_problem(self) -> str:
        """Why this ``trusted`` instance is not trusted now ("" when it is, or is not
        marked trusted): the installed distribution is not the one recorded."""
        if not self.trusted:
            return ""
        recorded = self.trusted_for()
        installed = installed_provider(self.plugin)
        # A digest no pin holds for (its code or a dependency cannot be told) never holds,
        # though a registry load keeps it (issue 30, attack 9, finding 10).
        if recorded is not None and installed == recorded and not unpinned_why(recorded.digest):
            return ""
        was = str(recorded) if recorded else "no installed distribution"
        if installed is None:
            # Confirming cannot help while no distribution serves the plugin here: its
            # package is not on this process's path (or was refused; ``plugin list`` says).
            return (
                f"trusted for {was}, installed is none: the plugin is not installed here, or "
                "was refused (is its directory in WEBFETCH_PLUGIN_DIRS of this process?)"
            )
        now = str(installed)
        if recorded is not None and str(installed) == str(recorded):
            now = f"{installed} with other code"
            changed = dependency_changes(self.trusted_dependencies, self.plugin)
            if changed:
                # Stable reason: a dependency of the plugin changed (decision 0051).
                now = (
                    f"{installed} with other dependencies (plugin_dependency_changed: "
                    f"{'; '.join(changed[:5])})"
                )
            elif unpinned_why(installed.digest):
                now = f"{installed}, which cannot be pinned ({unpinned_why(installed.digest)})"
        return f"trusted for {was}, installed is {now}: confirm again"

    def trust_holds(self) -> bool:
        """Marked ``trusted`` and the distribution providing the plugin is the recorded one:
        only then does its code run in the site's processes."""
        return self.trusted and not self.trust_problem()

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.trusted:
            self.trusted_distribution = self.trusted_version = self.trusted_record = ""
            self.trusted_dependencies = []
        elif self._state.adding or not (
            type(self).objects.filter(pk=self.pk, trusted=True).exists()
        ):
            # Trust turned on now: it is given to the distribution installed now.
            self.confirm_trust()
        if self._state.adding and not self.declared_egress:
            # Creating an instance (admin, ORM) acknowledges what the package declares now;
            # only ``upgrade --confirm`` acknowledges more later.
            manifest = self.installed_manifest()
            if manifest is not None:
                self.declared_egress = list(manifest.egress)
        self.full_clean()
        super().save(*args, **kwargs)

    # -- the grant ----------------------------------------------------------------------------

    def declared(self) -> tuple[str, ...]:
        """The installed package's declaration (empty when the plugin is not installed)."""
        manifest = self.installed_manifest()
        return manifest.egress if manifest is not None else ()

    def effective(self) -> tuple[str, ...]:
        """What the installed package declares AND the operator acknowledged (install,
        bind, ``upgrade --confirm``) AND granted: a package upgrade that declares more
        reaches nothing new before ``upgrade --confirm``, even under a wider grant."""
        from .grants import intersect

        if not self.enabled:
            return ()
        return intersect(intersect(self.declared(), self.declared_egress), self.egress_hosts)

    def egress_grant(self) -> PluginGrant:
        """``egress.PluginEgressGrant``: the effective grant as of this row."""
        hosts = self.effective()
        private: list[str] = []
        if hosts:
            from .grants import intersect

            for raw in self.egress_allow_private:
                try:
                    if intersect(hosts, [raw]):
                        private.append(raw)
                except (ManifestError, HostNotAllowed):
                    continue
        return PluginGrant(hosts=hosts, label=self.reference, allow_private=tuple(private))

    def all_config(self) -> dict[str, Any]:
        """Config and secrets together, for the plugin's own use."""
        return {**self.config, **self.secret_config}

    @property
    def http(self) -> Any:
        """The host-owned client of this instance (re-reads the grant on every request).

        Built by ``client_factory`` (``plugins.client.PluginHttp``), which ``apps.py`` sets:
        a row imports no client (DESIGN.md §1, models import no services).
        """
        factory = type(self).client_factory
        if factory is None:
            raise ImproperlyConfigured("django_webfetch is not ready: no plugin client factory")
        return factory(self.pk)

    def tool_groups(self) -> list[str]:
        """Every group the plugin's tools join, in the manifest's order."""
        from .manifest import tool_group

        manifest = self.installed_manifest()
        if manifest is None or not manifest.tools:
            return [self.plugin]
        return list(dict.fromkeys(tool_group(manifest, spec) for spec in manifest.tools))

    def default_group(self) -> str:
        """The group of the plugin's first tool (the plugin's name when it has none)."""
        manifest = self.installed_manifest()
        if manifest is not None and manifest.tools:
            return tool_group(manifest, manifest.tools[0])
        return self.plugin
