"""Personal access tokens: how an MCP client (or another machine client) is a Django user.

A token is issued through one door, :meth:`AccessTokenQuerySet.issue` (the admin and
``manage.py webfetch token create`` both call it; a token saved any other way is refused):
a user issues tokens for themselves; only a superuser issues one for another user (never
above their own rights: a superuser holds every right); the shell (the CLI) is the
operator, who holds the database already (:data:`OPERATOR`).  The secret is shown once and
only its SHA-256 is stored.  A token carries no rights of its own: every request looks it
up again with its user, so it has its owner's rights *at that request*, and it is refused
from the moment it is revoked or its user is deactivated.

An OAuth grant (an MCP client an editor connected with OAuth, ``django_webfetch.oauth``) is
a row of the same table, of kind ``oauth``: it is issued through the same door when the
editor approves the client, it is the principal the client's OAuth access tokens resolve
to, and it is listed and revoked beside the personal tokens.  It has no secret anyone
knows (the client holds OAuth tokens instead), so ``authenticate`` never accepts one.
Revoking a token sends :data:`tokens_revoked` (the OAuth layer deletes the grant's OAuth
tokens).  Every issue and revocation is a :class:`TokenEvent`.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import models
from django.dispatch import Signal
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = [
    "OPERATOR",
    "TOKEN_PREFIX",
    "AccessToken",
    "TokenEvent",
    "TokenIssueDenied",
    "TokenKind",
    "hash_secret",
    "may_issue",
    "tokens_revoked",
]

#: Every secret starts with it (secret scanners and people can tell what it is).
TOKEN_PREFIX = "wfpat_"
#: Longer than any secret we issue: a longer value is refused before it is hashed.
MAX_SECRET_CHARS = 128
#: ``last_used`` is written at most this often per token (not on every request).
LAST_USED_EVERY = timedelta(seconds=60)


#: Sent with ``tokens=[AccessToken, ...]`` (rows just revoked) and ``by`` (who revoked them).
tokens_revoked = Signal()


class TokenKind(models.TextChoices):
    PERSONAL = "personal", _("personal access token")
    OAUTH = "oauth", _("OAuth grant")


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class TokenIssueDenied(PermissionDenied):
    """The issuer may not issue this token (another user's, or to an inactive user)."""

    code = "token_issue_not_permitted"


class _Operator:
    """The issuer at the shell (``manage.py webfetch token create``)."""

    def __repr__(self) -> str:
        return "OPERATOR"


#: Who issues a token from the shell: the operator, who holds the database already.
OPERATOR: Any = _Operator()


def may_issue(issuer: Any, user: Any) -> bool:
    """May ``issuer`` issue a token to ``user``?  Themselves, or (a superuser) anyone;
    the shell's :data:`OPERATOR` anyone.  Never to an inactive user."""
    if user is None or not getattr(user, "is_active", False):
        return False
    if issuer is OPERATOR:
        return True
    if (
        issuer is None
        or not getattr(issuer, "is_authenticated", False)
        or not getattr(issuer, "is_active", False)
    ):
        return False
    return bool(issuer.pk == user.pk or getattr(issuer, "is_superuser", False))


class AccessTokenQuerySet(models.QuerySet["AccessToken"]):
    def issue(
        self,
        user: Any,
        name: str,
        *,
        by: Any,
        kind: str = TokenKind.PERSONAL,
        client_id: str = "",
    ) -> tuple[AccessToken, str]:
        """A new token for ``user``, issued by ``by`` (a user, or :data:`OPERATOR`):
        ``(row, secret)``.  The secret is not stored.  Raises :class:`TokenIssueDenied`
        unless :func:`may_issue`.  The one way a token is made (the module docstring).
        ``kind=TokenKind.OAUTH`` with the client's ``client_id``: the grant of an OAuth
        client the user approved (its secret is thrown away: nobody ever knows it)."""
        if not may_issue(by, user):
            raise TokenIssueDenied(
                "A user issues access tokens for themselves; only a superuser issues one "
                "for another user (and never for an inactive one)."
            )
        kind = TokenKind(kind)
        token = self.model(user=user, name=str(name)[:100], kind=kind, client_id=client_id[:255])
        secret = token.new_secret()
        token._issued = True
        token.save(force_insert=True, using=self.db)
        TokenEvent.objects.using(self.db).create(
            token=token,
            user=user,
            action=TokenEvent.Action.ISSUED,
            client_id=token.client_id,
            by=_actor(by),
        )
        return token, secret

    def revoke(self, *, by: Any = None) -> int:
        """Revoke the live rows of this queryset; each revocation is a :class:`TokenEvent`
        and :data:`tokens_revoked` is sent with the rows.  Returns how many."""
        now = timezone.now()
        rows = list(self.filter(revoked__isnull=True))
        revoked = []
        for row in rows:
            if self.model.objects.filter(pk=row.pk, revoked__isnull=True).update(revoked=now):
                row.revoked = now
                revoked.append(row)
        for row in revoked:
            TokenEvent.objects.create(
                token=row,
                user_id=row.user_id,
                action=TokenEvent.Action.REVOKED,
                client_id=row.client_id,
                by=_actor(by),
            )
        if revoked:
            tokens_revoked.send(sender=self.model, tokens=revoked, by=by)
        return len(revoked)

    def authenticate(self, secret: object) -> AccessToken | None:
        """The live token of ``secret`` (not revoked, its user active), or ``None``."""
        if (
            not isinstance(secret, str)
            or not secret.startswith(TOKEN_PREFIX)
            or len(secret) > MAX_SECRET_CHARS
            or not secret.isascii()
            or not secret.isprintable()
        ):
            return None
        token = (
            self.select_related("user")
            .filter(
                token_hash=hash_secret(secret),
                kind=TokenKind.PERSONAL,
                revoked__isnull=True,
                user__is_active=True,
            )
            .first()
        )
        if token is None:
            return None
        now = timezone.now()
        if token.last_used is None or now - token.last_used >= LAST_USED_EVERY:
            self.model.objects.using(self.db).filter(pk=token.pk).update(last_used=now)
            token.last_used = now
        return token

    def live(self) -> AccessTokenQuerySet:
        return self.filter(revoked__isnull=True)


class AccessToken(models.Model):
    """A personal access token of one user (MCP clients send it as a bearer token)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="webfetch_access_tokens",
        verbose_name=_("user"),
    )
    name = models.CharField(
        _("name"), max_length=100, help_text=_("What the token is for (e.g. 'laptop IDE').")
    )
    #: SHA-256 (hex) of the secret; the secret itself is never stored.
    token_hash = models.CharField(_("token hash"), max_length=64, unique=True, editable=False)
    #: The secret's first characters, to tell tokens apart in lists.
    hint = models.CharField(_("starts with"), max_length=16, editable=False)
    created = models.DateTimeField(_("created"), auto_now_add=True)
    last_used = models.DateTimeField(_("last used"), null=True, blank=True, editable=False)
    revoked = models.DateTimeField(_("revoked at"), null=True, blank=True)
    kind = models.CharField(
        _("kind"), max_length=16, choices=TokenKind.choices, default=TokenKind.PERSONAL
    )
    #: An OAuth grant's client (its ``client_id``: a Client ID Metadata Document URL or a
    #: registered id); empty for a personal token.
    client_id = models.CharField(_("OAuth client"), max_length=255, blank=True, editable=False)

    objects = AccessTokenQuerySet.as_manager()
    #: Set by ``AccessToken.objects.issue`` on the row it makes (the one door).
    _issued: bool = False

    class Meta:
        ordering = ["-created"]
        verbose_name = _("access token")
        verbose_name_plural = _("access tokens")

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A new token is made by ``AccessToken.objects.issue`` only (who issues it is
        # checked there); an existing one may be renamed or revoked.
        if self._state.adding and not self._issued:
            raise TokenIssueDenied("Access tokens are issued with AccessToken.objects.issue().")
        super().save(*args, **kwargs)

    def new_secret(self) -> str:
        """Give this (unsaved) token a new secret; returns it (it is not kept)."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.token_hash = hash_secret(secret)
        self.hint = secret[: len(TOKEN_PREFIX) + 4]
        return secret

    @property
    def is_live(self) -> bool:
        return self.revoked is None

    def revoke(self, *, by: Any = None) -> None:
        if self.revoked is None:
            type(self).objects.filter(pk=self.pk).revoke(by=by)
            self.refresh_from_db(fields=["revoked"])


def _actor(by: Any) -> str:
    if by is None:
        return ""
    if by is OPERATOR:
        return "operator"
    if isinstance(by, str):
        return by[:150]
    name = getattr(by, "get_username", None)
    return str(name() if callable(name) else by)[:150]


class TokenEvent(models.Model):
    """The audit of tokens and OAuth grants: issued, refreshed, revoked, refused."""

    class Action(models.TextChoices):
        ISSUED = "issued", _("issued")
        #: An OAuth access token minted for a grant (by the code exchange or a refresh).
        TOKEN = "token", _("OAuth access token issued")
        REFRESHED = "refreshed", _("OAuth access token refreshed")
        REVOKED = "revoked", _("revoked")
        #: An OAuth client's access or refresh token revoked by the client (RFC 7009).
        CLIENT_REVOKED = "client_revoked", _("revoked by the client")
        DECLINED = "declined", _("consent declined")
        #: A client's metadata document was refused (``reason``: the guard's or ours).
        CLIENT_REFUSED = "client_refused", _("client refused")

    token = models.ForeignKey(
        AccessToken,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="events",
        verbose_name=_("token"),
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("user"),
    )
    action = models.CharField(_("action"), max_length=32, choices=Action.choices)
    client_id = models.CharField(_("OAuth client"), max_length=255, blank=True)
    reason = models.CharField(_("reason"), max_length=100, blank=True)
    #: Who did it (a user name, ``operator``, ``client``); empty when not known.
    by = models.CharField(_("by"), max_length=150, blank=True)
    created = models.DateTimeField(_("at"), auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created", "-pk"]
        verbose_name = _("token event")
        verbose_name_plural = _("token events")

    def __str__(self) -> str:
        return f"{self.action} {self.client_id or self.token_id}"
