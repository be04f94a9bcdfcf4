"""The egress audit log: one row per guard decision and per fetch."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .scopes import ToolGroup

__all__ = ["Decision", "EgressEvent"]


class Decision(models.TextChoices):
    ALLOWED = "allowed", _("allowed by the guard")
    DENIED = "denied", _("denied")
    FETCHED = "fetched", _("fetched")
    FAILED = "failed", _("failed")


class EgressEvent(models.Model):
    """An audit record.  Holds no server-chosen text except the URL host."""

    created = models.DateTimeField(_("when"), default=timezone.now)
    tool = models.CharField(_("tool"), max_length=100, blank=True)
    group = models.ForeignKey(
        ToolGroup,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("group"),
    )
    group_slug = models.CharField(_("group slug"), max_length=64, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("user"),
    )
    #: The plugin instance the attempt is recorded against (DESIGN.md §8).  Set to NULL if
    #: the instance is deleted; ``plugin_ref`` keeps its text so the row outlives it.
    plugin_instance = models.ForeignKey(
        "django_webfetch.PluginInstance",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="egress_events",
        verbose_name=_("plugin instance"),
    )
    #: ``plugin:<plugin>:<alias>#<pk>`` (or another caller-chosen reference).
    plugin_ref = models.CharField(_("plugin reference"), max_length=200, blank=True)
    #: Correlates the rows of one tool call (the durable ``ToolCall``'s id).
    call_id = models.CharField(_("call id"), max_length=64, blank=True)
    url_host = models.CharField(_("host"), max_length=255, blank=True)
    port = models.PositiveIntegerField(_("port"), null=True, blank=True)
    decision = models.CharField(_("decision"), max_length=10, choices=Decision.choices)
    reason = models.CharField(_("reason"), max_length=64, blank=True)
    addresses = models.JSONField(_("addresses"), default=list, blank=True)
    bytes = models.PositiveBigIntegerField(_("bytes"), default=0)
    duration = models.FloatField(_("duration (s)"), default=0.0)
    hop = models.PositiveSmallIntegerField(_("hop"), default=0)
    status = models.PositiveSmallIntegerField(_("HTTP status"), null=True, blank=True)
    detail = models.TextField(_("detail"), blank=True)
    #: What failed, in our words: a ``net.failures`` sub-code (``tls_certificate``,
    #: ``connect_refused``...), for a failed event; ``failure_text`` is its fixed sentence.
    failure = models.CharField(_("failure"), max_length=32, blank=True)

    class Meta:
        ordering = ["-created", "-pk"]
        verbose_name = _("egress event")
        verbose_name_plural = _("egress events")
        indexes = [
            models.Index(fields=["created"], name="webfetch_event_created"),
            models.Index(fields=["decision", "created"], name="webfetch_event_decision"),
            models.Index(fields=["group_slug", "created"], name="webfetch_event_group"),
            models.Index(fields=["url_host", "created"], name="webfetch_event_host"),
            models.Index(fields=["reason"], name="webfetch_event_reason"),
            models.Index(fields=["call_id"], name="webfetch_event_call"),
            models.Index(fields=["plugin_ref", "created"], name="webfetch_event_plugin"),
        ]

    def __str__(self) -> str:
        return f"{self.decision} {self.url_host or '-'} ({self.reason or 'ok'})"

    @property
    def failure_text(self) -> str:
        from django_webfetch.net.failures import describe_failure

        return describe_failure(self.failure)
