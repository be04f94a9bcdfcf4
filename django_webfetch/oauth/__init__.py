"""OAuth 2.1 sign-in for remote MCP clients: the site is the authorization server, its
accounts are the users (django-oauth-toolkit underneath; the ``mcp`` extra).

- ``provider.py``: ``oauth_provider_settings(resource)``, the ``OAUTH2_PROVIDER`` setting
  (authorization code with PKCE S256 only, short-lived audience-bound tokens, Client ID
  Metadata Documents, Dynamic Client Registration only when the operator opts in);
- ``cimd.py``: the fetcher of a client's metadata document, through the project's guard;
- ``validator.py``: the toolkit's request validator, narrowed and audited;
- ``grants.py``: a user's approval of a client is an ``AccessToken`` row of kind ``oauth``
  (one door, the same table as personal tokens); an OAuth access token resolves to it;
- ``views.py`` / ``urls.py``: discovery (RFC 8414, RFC 9728), the consent page, the token,
  revocation and the user's *Connected apps* page.

``provider.py`` imports nothing of Django's models: a project's settings module imports it.
"""

from __future__ import annotations
