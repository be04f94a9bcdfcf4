"""Personal access tokens in the admin: issue (the secret is shown once), revoke, list.

OAuth grants (``kind`` ``oauth``: an MCP client a user approved) are rows of the same table,
listed and revoked beside the personal tokens; revoking one deletes its OAuth tokens.

A token is issued through ``AccessToken.objects.issue`` (the one door, ``models.tokens``):
a staff user with "Can add access token" issues tokens for themselves; only a superuser
picks another user.  A non-superuser sees and revokes their own tokens only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from django_webfetch.models import AccessToken

if TYPE_CHECKING:
    _TokenAdmin = admin.ModelAdmin[AccessToken]
else:
    _TokenAdmin = admin.ModelAdmin


def _picks_any_user(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_superuser)


@admin.register(AccessToken)
class AccessTokenAdmin(_TokenAdmin):
    list_display = ("name", "user", "kind", "client_id", "hint", "created", "last_used", "revoked")
    list_filter = ("kind", ("revoked", admin.EmptyFieldListFilter))
    search_fields = ("name", "user__username")
    readonly_fields = ("hint", "created", "last_used", "revoked")
    raw_id_fields = ("user",)
    actions = ["revoke_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AccessToken]:
        queryset = super().get_queryset(request)
        if _picks_any_user(request):
            return queryset
        return queryset.filter(user_id=request.user.pk)  # type: ignore[misc]

    def get_fields(self, request: HttpRequest, obj: AccessToken | None = None) -> Any:
        if obj is None:
            return ("user", "name") if _picks_any_user(request) else ("name",)
        return ("user", "name", "kind", "client_id", "hint", "created", "last_used", "revoked")

    def get_readonly_fields(self, request: HttpRequest, obj: AccessToken | None = None) -> Any:
        if obj is None:
            return ()
        return ("user", "kind", "client_id", "hint", "created", "last_used", "revoked")

    def save_model(self, request: HttpRequest, obj: AccessToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # Whose token: the chosen user for a superuser, else the issuer; the door
        # (AccessToken.objects.issue) decides whether the issuer may issue it.
        user = form.cleaned_data.get("user") if _picks_any_user(request) else request.user
        token, secret = AccessToken.objects.issue(user, obj.name, by=request.user)
        obj.pk = token.pk
        obj.user = token.user
        obj.token_hash, obj.hint, obj.created = token.token_hash, token.hint, token.created
        obj._state.adding = False
        self.message_user(
            request,
            _("The token's secret (shown once, store it now): %(secret)s") % {"secret": secret},
            messages.WARNING,
        )

    @admin.action(description=_("Revoke the selected tokens"), permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> None:
        count = queryset.revoke(by=request.user)  # type: ignore[attr-defined]
        self.message_user(request, _("%(count)d token(s) revoked.") % {"count": count})
