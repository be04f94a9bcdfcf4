"""The ``OAUTH2_PROVIDER`` setting for django-oauth-toolkit (imported by settings modules:
no Django model is imported here).

In the project's settings::

    from django_webfetch.oauth.provider import oauth_provider_settings

    WEBFETCH_OAUTH_RESOURCE = "https://mysite.example/mcp"
    OAUTH2_PROVIDER = oauth_provider_settings(WEBFETCH_OAUTH_RESOURCE)
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = ["ACCESS_TOKEN_SECONDS", "MCP_SCOPE", "REFRESH_TOKEN_SECONDS", "oauth_provider_settings"]

#: The one scope: use this site's tools over MCP, with the user's rights at each request.
MCP_SCOPE = "mcp"
#: An access token lives an hour; the client refreshes it (the refresh token rotates).
ACCESS_TOKEN_SECONDS = 3600
#: A refresh token unused for 30 days expires; the editor signs in again.
REFRESH_TOKEN_SECONDS = 30 * 24 * 3600


def oauth_provider_settings(
    resource: str, *, dynamic_registration: bool = False, **overrides: Any
) -> dict[str, Any]:
    """The toolkit's settings for the MCP endpoint at ``resource`` (its canonical URL).

    Authorization code with PKCE (S256 only); no implicit, password or client-credentials
    grant; tokens stored hashed; refresh tokens rotated with reuse protection; Client ID
    Metadata Documents fetched through the guard; Dynamic Client Registration (RFC 7591)
    only with ``dynamic_registration=True``.  ``overrides`` win (an operator's choice).
    """
    parts = urlsplit(resource)
    origin = f"{parts.scheme}://{parts.netloc}"
    settings: dict[str, Any] = {
        "OAUTH2_VALIDATOR_CLASS": "django_webfetch.oauth.validator.OAuth2Validator",
        "SCOPES": {MCP_SCOPE: "Use this site's tools over MCP, with your rights"},
        "DEFAULT_SCOPES": [MCP_SCOPE],
        "PKCE_REQUIRED": True,
        "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
        "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
        "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
        "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
        "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
        "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
        "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
        "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
        "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
        "ACCESS_TOKEN_EXPIRE_SECONDS": ACCESS_TOKEN_SECONDS,
        "REFRESH_TOKEN_EXPIRE_SECONDS": REFRESH_TOKEN_SECONDS,
        "ROTATE_REFRESH_TOKEN": True,
        "REFRESH_TOKEN_REUSE_PROTECTION": True,
        "REQUEST_APPROVAL_PROMPT": "force",
        "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none"],
        "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],
        "CIMD_ENABLED": True,
        "CIMD_METADATA_FETCHER": "django_webfetch.oauth.cimd.GuardedMetadataFetcher",
        # A client's document is fetched only for a user signed in at the consent page.
        "CIMD_REGISTRATION_PERMISSION_CLASSES": ("django_webfetch.oauth.cimd.SignedInUserOnly",),
        "CIMD_MAX_CONCURRENT_FETCHES": 4,
        "CIMD_FAILURE_BACKOFF_SECONDS": 60,
        "CIMD_METADATA_MIN_AGE_SECONDS": 300,
        "CIMD_METADATA_MAX_AGE_SECONDS": 86400,
        "DCR_ENABLED": bool(dynamic_registration),
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
        "OAUTH2_PROTECTED_RESOURCE_IDENTIFIER": resource.rstrip("/"),
        "OAUTH2_PROTECTED_RESOURCE_AUTHORIZATION_SERVERS": [origin],
        "OAUTH2_PROTECTED_RESOURCE_NAME": "MCP server",
    }
    settings.update(overrides)
    return settings
