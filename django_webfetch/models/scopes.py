"""Tool groups and their egress scope (DESIGN.md §2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise as StrOrPromise
else:
    StrOrPromise = object

__all__ = ["DATA_CLASS_NOTICES", "DataClass", "EgressScope", "ToolGroup"]


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
    SOURCE_AND_LOGS = (
        "sourceAndLogs",
        _("Source code and logs of this installation, sent to the LLM provider"),
    )


#: What each data class means for the data leaving the installation; shown on the group's
#: admin page.
DATA_CLASS_NOTICES: dict[str, StrOrPromise] = {
    "publicContent": _(
        "The tools bring public web content into the conversation; the LLM provider sees it."
    ),
    "siteContent": _(
        "The tools bring this site's own content (pages, search hits, status and headers) "
        "into the conversation; the LLM provider sees it."
    ),
    "internal": _("The tools bring internal data into the conversation; the LLM provider sees it."),
    "none": _("The tools bring no external data into the conversation."),
    "sourceAndLogs": _(
        "The tools read this installation's source code and error logs and SEND THEM TO THE "
        "LLM PROVIDER as part of the conversation. Paths outside the project root, settings, "
        "secrets, key material, databases, media and static files are refused, and "
        "credential-looking values are redacted, but anything else in the code and the "
        "logs (including data of requests that appear in tracebacks) leaves the "
        "installation. Enable this group only if your provider agreement allows it."
    ),
}


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
    fetch_only_seen_urls = models.BooleanField(
        _("skip approval only for URLs the conversation showed"),
        default=True,
        help_text=_(
            "Where approval is skipped through the allowlist, a URL the model composed "
            "(one the editor did not write and no earlier tool result of the conversation "
            "carried) still waits for a human, so a steered model cannot carry data out "
            "in a query string unseen."
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

    @property
    def data_notice(self) -> str:
        """What this group's data class means for data leaving the installation."""
        return str(DATA_CLASS_NOTICES.get(self.data_class, DATA_CLASS_NOTICES["internal"]))
