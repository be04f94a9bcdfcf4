"""``manage.py webfetch token create|revoke|list``: personal access tokens (MCP clients).

``create`` issues as the operator (``models.tokens.OPERATOR``: whoever runs it holds the
database already) and prints the secret once (only its SHA-256 is stored); ``revoke`` refuses the
token
from its next request on; ``list`` shows every token (never a secret).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from django_webfetch.models import AccessToken
from django_webfetch.models.tokens import OPERATOR

__all__ = ["add_arguments", "handle"]


def add_arguments(sub: Any) -> None:
    token = sub.add_parser("token", help="Personal access tokens (MCP clients).")
    actions = token.add_subparsers(dest="token_action", required=True)
    create = actions.add_parser("create", help="Issue a token to a user; prints the secret once.")
    create.add_argument("--user", required=True, help="The user's username.")
    create.add_argument("--name", required=True, help="What the token is for.")
    revoke = actions.add_parser("revoke", help="Revoke a token (by its id).")
    revoke.add_argument("id", type=int)
    listing = actions.add_parser("list", help="List tokens (never their secrets).")
    listing.add_argument("--user", default=None, help="Only this user's tokens.")


def handle(command: BaseCommand, options: dict[str, Any]) -> None:
    action = options["token_action"]
    if action == "create":
        User = get_user_model()
        user = User._default_manager.filter(**{User.USERNAME_FIELD: options["user"]}).first()
        if user is None:
            raise CommandError(f"no user {options['user']!r}")
        if not user.is_active:
            raise CommandError(f"user {options['user']!r} is inactive")
        # The shell is the operator (it holds the database): it issues to any active user.
        row, secret = AccessToken.objects.issue(user, options["name"], by=OPERATOR)
        command.stdout.write(f"token {row.pk} for {user.get_username()} ({row.name}):")
        command.stdout.write(secret)
        command.stderr.write("Store the secret now: it is not shown again.")
    elif action == "revoke":
        found = AccessToken.objects.filter(pk=options["id"]).first()
        if found is None:
            raise CommandError(f"no token {options['id']}")
        if not found.is_live:
            command.stdout.write(f"token {found.pk} was already revoked at {found.revoked}")
            return
        found.revoke(by=OPERATOR)
        command.stdout.write(f"token {found.pk} revoked")
    else:
        rows = AccessToken.objects.select_related("user").order_by("pk")
        if options["user"]:
            rows = rows.filter(**{f"user__{get_user_model().USERNAME_FIELD}": options["user"]})
        for row in rows:
            state = f"revoked {row.revoked:%Y-%m-%d %H:%M}" if row.revoked else "live"
            used = f"{row.last_used:%Y-%m-%d %H:%M}" if row.last_used else "never"
            command.stdout.write(
                f"{row.pk}\t{row.user.get_username()}\t{row.name}\t{row.hint}…\t"
                f"created {row.created:%Y-%m-%d %H:%M}\tlast used {used}\t{state}"
            )
