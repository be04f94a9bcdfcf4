"""Tool groups and their egress scope (DESIGN.md §2)."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

__all__ = ["DataClass", "EgressScope", "ToolGroup"]


class EgressScope(models.TextChoices):
    """Exactly the scopes of ``net.policy.Scope``.  There is no "any host" value."""

    NONE = "none", _("No network access")
    OWN_SITE = "own_site", _("Only this installation's own hosts")
    CONFIGURED_ENDPOINT = "configured_endpoint", _("Only the group's configured endpoints")
    EXTERNAL_FILTERED = "external_filtered", _("Public hosts, through the full guard")


class DataClass(models.TextChoices):
    """What kind of data a group's tools bring into the conversation."""

    PUBLIC_CONTENT = "publicContent", _("Public content")
    SITE_CONTENT = "siteContent", _("This site's content")
    INTERNAL = "internal", _("Internal data")
    NONE = "none", _("No external data")


class ToolGroup(models.Model):
    """A set of tools sharing one egress scope and one set of operator settings.

    Disabled by default: a group gives its tools no egress and is not offered to anyone
    until an operator enables it.
    """

    slug = models.SlugField(_("slug"), max_length=64, unique=True)
    name = models.CharField(_("name"), max_length=100, blank=True)
    description = models.TextField(_("description"), blank=True)
    scope = models.CharField(
        _("egress scope"),
        max_length=32,
        choices=EgressScope.choices,
        default=EgressScope.NONE,
    )
    enabled = models.BooleanField(_("enabled"), default=False)
    data_class = models.CharField(
        _("data class"), max_length=32, choices=DataClass.choices, default=DataClass.NONE
    )
    skip_approval_with_allowlist = models.BooleanField(
        _("skip approval when an allowlist is set"),
        default=False,
        help_text=_(
            "Calls run without a human approval only when this is on AND the group's "
            "allowlist is not empty. Tools with a write effect always need approval."
        ),
    )
    allow_via_proxy = models.BooleanField(
        _("allow requests through a proxy"),
        default=False,
        help_text=_(
            "A proxy resolves names itself, which defeats the address checks: requests "
            "through a proxy are allowed only with this on AND a non-empty allowlist."
        ),
    )
    created = models.DateTimeField(_("created"), auto_now_add=True)
    updated = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = _("tool group")
        verbose_name_plural = _("tool groups")

    def __str__(self) -> str:
        return self.slug
