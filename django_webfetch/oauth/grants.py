"""A user's approval of an OAuth client is an ``AccessToken`` row of kind ``oauth`` (a
*grant*), issued through the one door (``AccessToken.objects.issue``) when the user approves
the client on the consent page.  The client's OAuth access tokens (django-oauth-toolkit's
rows) resolve to it: :func:`principal` is what the MCP endpoint calls on every request, so
an OAuth token has its user's rights at that request, like a personal token, and stops
working when the grant is revoked (by the user on *Connected apps*, by an admin on *Access
tokens*) or the user is deactivated.  Revoking a grant deletes its OAuth tokens
(:func:`on_tokens_revoked`, connected in ``apps.py``), and so does deleting it (the admin's
*delete selected*, a queryset's ``delete()``: :func:`on_grant_deleted`, ``pre_delete``).
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime
from typing import Any

from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_refresh_token_model,
)

from django_webfetch.models import AccessToken, TokenEvent, TokenKind
from django_webfetch.models.tokens import LAST_USED_EVERY

from .provider import MCP_SCOPE

__all__ = ["approve", "grant_for", "on_grant_deleted", "on_tokens_revoked", "principal"]

logger = logging.getLogger("django_webfetch.oauth")


def grant_for(
    user_id: Any, client_id: str, *, issued: datetime | None = None
) -> AccessToken | None:
    """The live grant of ``user_id`` to ``client_id`` (made before ``issued``), or ``None``."""
    rows = AccessToken.objects.live().filter(
        kind=TokenKind.OAUTH, user_id=user_id, client_id=client_id, user__is_active=True
    )
    if issued is not None:
        rows = rows.filter(created__lte=issued)
    return rows.select_related("user").order_by("-created").first()


def approve(user: Any, application: Any) -> AccessToken:
    """The user approved ``application``: their live grant to it, issued now if none."""
    found = grant_for(user.pk, application.client_id)
    if found is not None:
        return found
    name = (application.name or application.client_id)[:80]
    token, _secret = AccessToken.objects.issue(
        user, f"OAuth: {name}", by=user, kind=TokenKind.OAUTH, client_id=application.client_id
    )
    return token


def _same(resource: str, other: object) -> bool:
    return isinstance(other, str) and other.rstrip("/") == resource.rstrip("/")


def principal(secret: str, resource: str) -> AccessToken | None:
    """The grant an OAuth access token ``secret`` acts for at the MCP endpoint ``resource``,
    or ``None``: unknown or expired token, no ``mcp`` scope, not bound to ``resource``
    (RFC 8707; a token without a resource is refused too), grant revoked or user inactive."""
    if not secret or len(secret) > 512 or not secret.isascii() or not secret.isprintable():
        return None
    checksum = hashlib.sha256(secret.encode("ascii")).hexdigest()
    token = (
        get_access_token_model()
        .objects.select_related("application")
        .filter(token_checksum=checksum)
        .first()
    )
    if token is None or token.application is None or token.is_expired():
        return None
    if MCP_SCOPE not in (token.scope or "").split():
        return None
    bound = token.resource or []
    if not bound or not all(_same(resource, value) for value in bound):
        logger.info("OAuth token %s refused: bound to another resource", token.pk)
        return None
    grant = grant_for(token.user_id, token.application.client_id, issued=token.created)
    if grant is not None:
        now = timezone.now()
        if grant.last_used is None or now - grant.last_used >= LAST_USED_EVERY:
            AccessToken.objects.filter(pk=grant.pk).update(last_used=now)
            grant.last_used = now
    return grant


def on_tokens_revoked(
    sender: Any, tokens: list[AccessToken], by: Any = None, **kwargs: Any
) -> None:
    """Delete the OAuth tokens (and pending codes) of every revoked grant."""
    for row in tokens:
        if row.kind != TokenKind.OAUTH or not row.client_id:
            continue
        scope = {"user_id": row.user_id, "application__client_id": row.client_id}
        get_refresh_token_model().objects.filter(**scope, revoked__isnull=True).update(
            revoked=timezone.now()
        )
        get_access_token_model().objects.filter(**scope).delete()
        get_grant_model().objects.filter(**scope).delete()


def on_grant_deleted(sender: Any, instance: AccessToken, **kwargs: Any) -> None:
    """A grant deleted rather than revoked: its OAuth tokens go the same way."""
    on_tokens_revoked(sender, [instance])


def record(action: str, *, user_id: Any, client_id: str, by: str = "", reason: str = "") -> None:
    """One ``TokenEvent`` for an OAuth token of ``user_id`` and ``client_id``."""
    TokenEvent.objects.create(
        token=grant_for(user_id, client_id) if user_id is not None else None,
        user_id=user_id,
        action=action,
        client_id=client_id[:255],
        by=by[:150],
        reason=reason[:100],
    )
