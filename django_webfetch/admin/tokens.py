"""Personal access tokens in the admin: issue (the secret is shown once), revoke, list."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from django_webfetch.models import AccessToken

if TYPE_CHECKING:
    _TokenAdmin = admin.ModelAdmin[AccessToken]
else:
    _TokenAdmin = admin.ModelAdmin


@admin.register(AccessToken)
class AccessTokenAdmin(_TokenAdmin):
    list_display = ("name", "user", "hint", "created", "last_used", "revoked")
    list_filter = (("revoked", admin.EmptyFieldListFilter),)
    search_fields = ("name", "user__username")
    readonly_fields = ("hint", "created", "last_used", "revoked")
    raw_id_fields = ("user",)
    actions = ["revoke_selected"]

    def get_fields(self, request: HttpRequest, obj: AccessToken | None = None) -> Any:
        if obj is None:
            return ("user", "name")
        return ("user", "name", "hint", "created", "last_used", "revoked")

    def get_readonly_fields(self, request: HttpRequest, obj: AccessToken | None = None) -> Any:
        if obj is None:
            return ()
        return ("user", "hint", "created", "last_used", "revoked")

    def save_model(self, request: HttpRequest, obj: AccessToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        secret = obj.new_secret()
        super().save_model(request, obj, form, change)
        self.message_user(
            request,
            _("The token's secret (shown once, store it now): %(secret)s") % {"secret": secret},
            messages.WARNING,
        )

    @admin.action(description=_("Revoke the selected tokens"), permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> None:
        count = queryset.filter(revoked__isnull=True).update(revoked=timezone.now())
        self.message_user(request, _("%(count)d token(s) revoked.") % {"count": count})
