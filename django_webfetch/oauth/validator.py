"""django-oauth-toolkit's request validator, narrowed and audited.

Only the authorization code grant (with PKCE, required by the settings) and the refresh
token grant; only the ``code`` response type.  The user's grant (``grants.approve``) is
issued when an authorization code is saved, after the toolkit validated the request.
Every access token minted (by the code exchange or a refresh) and every revocation by a
client is a ``TokenEvent``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator as _Base

from django_webfetch.models import TokenEvent

from .grants import approve, record

__all__ = ["GRANT_TYPES", "OAuth2Validator"]

GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})


class OAuth2Validator(_Base):  # type: ignore[misc]
    def validate_grant_type(
        self, client_id: Any, grant_type: Any, client: Any, request: Any, *args: Any, **kwargs: Any
    ) -> bool:
        if grant_type not in GRANT_TYPES:
            return False
        return bool(
            super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)
        )

    def validate_response_type(
        self,
        client_id: Any,
        response_type: Any,
        client: Any,
        request: Any,
        *args: Any,
        **kwargs: Any,
    ) -> bool:
        if response_type != "code":
            return False
        return bool(
            super().validate_response_type(
                client_id, response_type, client, request, *args, **kwargs
            )
        )

    def save_authorization_code(
        self, client_id: Any, code: Any, request: Any, *args: Any, **kwargs: Any
    ) -> Any:
        # The user approved and the toolkit validated the whole request: the grant is
        # issued now, never for an authorization the toolkit then refuses.
        approve(request.user, request.client)
        return super().save_authorization_code(client_id, code, request, *args, **kwargs)

    def save_bearer_token(self, token: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        saved = super().save_bearer_token(token, request, *args, **kwargs)
        refreshed = request.grant_type == "refresh_token"
        record(
            TokenEvent.Action.REFRESHED if refreshed else TokenEvent.Action.TOKEN,
            user_id=getattr(request.user, "pk", None),
            client_id=getattr(request.client, "client_id", "") or "",
            by="client",
        )
        return saved

    def revoke_token(
        self, token: Any, token_type_hint: Any, request: Any, *args: Any, **kwargs: Any
    ) -> Any:
        checksum = hashlib.sha256(token.encode("utf-8")).hexdigest()
        client: Any = getattr(request, "client", None)
        owner = None
        if getattr(client, "pk", None) is not None:
            for model in (get_access_token_model(), get_refresh_token_model()):
                owner = (
                    model.objects.filter(token_checksum=checksum, application_id=client.pk)
                    .values_list("user_id", flat=True)
                    .first()
                )
                if owner is not None:
                    break
        result = super().revoke_token(token, token_type_hint, request, *args, **kwargs)
        if owner is not None:
            record(
                TokenEvent.Action.CLIENT_REVOKED,
                user_id=owner,
                client_id=client.client_id,
                by="client",
            )
        return result
