"""The whole extracted text of a tool call, kept to be read in parts (issue 21).

A ``StoredText`` row holds what ``fetch_external_url`` (or ``read_page``) extracted for one
call: at most ``MAX_STORED_CHARS`` characters of text and the URLs of its links.  A later
call in the same conversation, by the same user, for the same URL, reads its next part from
here, without another network request, until ``expires_at``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

__all__ = ["StoredText"]


class StoredText(models.Model):
    call = models.ForeignKey(
        "django_webfetch.ToolCall",
        on_delete=models.CASCADE,
        related_name="stored_texts",
        verbose_name=_("tool call"),
    )
    tool = models.CharField(_("tool"), max_length=100)
    conversation = models.CharField(_("conversation"), max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("user"),
    )
    #: The URL as the model asked for it (the key of a later part), at most 2,048 characters.
    url = models.CharField(_("URL"), max_length=2048)
    #: After a redirect: where the text came from (server-chosen, shown inside the fence).
    final_url = models.CharField(_("final URL"), max_length=2048, blank=True)
    mode = models.CharField(_("mode"), max_length=16, blank=True)
    #: What the status line says (ours: the HTTP status, redirects, the mode).
    status_line = models.CharField(_("status line"), max_length=200, blank=True)
    text = models.TextField(_("text"))
    links = models.JSONField(_("link URLs"), default=list, blank=True)
    created = models.DateTimeField(_("created"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires at"))

    objects: models.Manager[StoredText] = models.Manager()

    class Meta:
        ordering = ["-created"]
        verbose_name = _("stored text")
        verbose_name_plural = _("stored texts")
        indexes = [
            models.Index(fields=["conversation", "tool", "expires_at"], name="webfetch_text_conv"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.url[:80]}"
