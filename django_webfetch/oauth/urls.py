"""The authorization server's routes; in the project's root URLconf::

    path("", include("django_webfetch.oauth.urls")),

- ``/.well-known/oauth-authorization-server`` (RFC 8414) and
  ``/.well-known/oauth-protected-resource[/mcp]`` (RFC 9728), at the origin's root;
- ``/oauth/authorize/`` (the consent page, behind the site's login), ``/oauth/token/``,
  ``/oauth/revoke_token/`` (RFC 7009), ``/oauth/connections/`` (*Connected apps*);
- ``/oauth/register/`` (RFC 7591) answers only when the operator opted in
  (``oauth_provider_settings(..., dynamic_registration=True)``; 404 otherwise).

The names are in the ``oauth2_provider`` namespace (the toolkit's views reverse them).
"""

from __future__ import annotations

from django.urls import include, path
from oauth2_provider import views as dot

from .views import AuthorizationView, ConnectionsView, TokenView

__all__ = ["urlpatterns"]


_oauth = [
    path("oauth/authorize/", AuthorizationView.as_view(), name="authorize"),
    path("oauth/token/", TokenView.as_view(), name="token"),
    path("oauth/revoke_token/", dot.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", dot.DynamicClientRegistrationView.as_view(), name="dcr-register"),
    path("oauth/connections/", ConnectionsView.as_view(), name="webfetch-connections"),
    path(
        ".well-known/oauth-authorization-server",
        dot.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        dot.OAuthProtectedResourceMetadataView.as_view(),
        name="oauth-resource-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/<path:resource_path>",
        dot.OAuthProtectedResourceMetadataView.as_view(),
        name="oauth-resource-metadata-path",
    ),
]

urlpatterns = [path("", include((_oauth, "oauth2_provider")))]
