"""Client ID Metadata Documents: a client's ``client_id`` is an ``https`` URL whose JSON
metadata this server fetches (draft-ietf-oauth-client-id-metadata-document).

django-oauth-toolkit resolves such a ``client_id`` (``CIMD_ENABLED``) with the fetcher named
by ``CIMD_METADATA_FETCHER``: this module's :class:`GuardedMetadataFetcher`, so the request
goes through the project's own guard, never a client of its own: ``external_filtered``
(DNS through dnspython, every answer public, this installation's hosts and private and
metadata addresses refused, connected only to the checked addresses), JSON only,
``WEBFETCH_OAUTH_CLIENT_DOCUMENT_BYTES`` at most (16 KiB), no redirect followed, 5 s for
the whole fetch.  Every hop is an ``EgressEvent`` (tool ``oauth_client_metadata``); a
refusal is also a ``TokenEvent`` (``client_refused``, the reason code).

A document is fetched, and a client stored, only on behalf of a user signed in at the
authorization endpoint (:func:`on_behalf_of`, which ``views.AuthorizationView`` enters
after the login; :class:`SignedInUserOnly` is the toolkit's
``CIMD_REGISTRATION_PERMISSION_CLASSES``, and the fetcher refuses too): the token,
revocation and every other endpoint an anonymous caller reaches only use clients already
stored (an unknown one is ``invalid_client``: nothing fetched, no row written).  A user
brings at most ``WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR`` (10) clients not yet stored per
hour (``client_rate``).

The toolkit caches a good document on its application row (``Cache-Control: max-age``
clamped to 5 minutes .. 1 day), backs a failing URL off for a minute and holds at most 4
fetches in flight per process.  The rows are bounded too: before a new client's document
is fetched, at most ``WEBFETCH_OAUTH_MAX_CLIENTS`` (1000) such rows may exist; past it the
stale ones no user approved are deleted, and if none is, the new client is refused
(``client_limit``).  On top of the toolkit's checks (``client_id`` equals the
URL, public client, no secret, a redirect-based grant) this module validates:

- ``client_id`` and each of ``redirect_uris``: no whitespace and no control character (the
  toolkit stores the redirect URIs space-joined and splits them on whitespace: a space
  inside one would register a second, unchecked URI);
- ``redirect_uris``: each ``https`` with a host the guard accepts (a name resolving to a
  loopback, private or metadata address is refused), or a native client's loopback
  redirect ``http://127.0.0.1:<port>/...`` or ``http://[::1]:<port>/...`` (RFC 8252
  §7.3); nothing else (no ``localhost``, no other ``http`` host, no other scheme);
- ``client_name``: text of at most 100 printable characters (it is shown on the consent page);
- ``logo_uri``: an ``https`` URL the guard accepts by its syntax (it is never fetched or
  shown: an image would make the editor's browser fetch a client-chosen URL).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from django.core.cache import cache
from django.utils import timezone
from oauth2_provider.cimd import CIMDError

from django_webfetch.conf import conf
from django_webfetch.egress import EgressRecorder, client_metadata_policy
from django_webfetch.models import TokenEvent
from django_webfetch.net import EgressDenied, WebFetchError, explain, fetch
from django_webfetch.text.patterns import compile_pattern

__all__ = [
    "TOOL",
    "GuardedMetadataFetcher",
    "MetadataRefused",
    "SignedInUserOnly",
    "last_refusal",
    "on_behalf_of",
    "rate_refusal",
]

logger = logging.getLogger("django_webfetch.oauth")

#: The ``tool`` of the ``EgressEvent`` rows of these fetches.
TOOL = "oauth_client_metadata"
MAX_NAME_CHARS = 100
MAX_REDIRECT_URIS = 10
MIN_AGE, MAX_AGE = 300, 86400
_MAX_AGE = compile_pattern(r"(?i)max-age\s*=\s*(\d{1,10})")  # RE2: linear
_LOOPBACK_HOSTS = ("127.0.0.1", "::1")
_REFUSAL_KEY = "django_webfetch:oauth:refused:"
_RATE_KEY = "django_webfetch:oauth:new-clients:"
_RATE_WINDOW = 3600

#: The user signed in at the authorization endpoint, on whose behalf a client's document
#: may be fetched; unset everywhere else (token, revocation, discovery, MCP endpoints).
_ON_BEHALF: ContextVar[Any] = ContextVar("webfetch_oauth_on_behalf", default=None)


@contextmanager
def on_behalf_of(user: Any) -> Iterator[None]:
    """Within the block, a client's metadata document may be fetched for ``user`` (a
    signed-in user; an anonymous or inactive one enables nothing)."""
    signed_in = user if getattr(user, "is_authenticated", False) and user.is_active else None
    reset = _ON_BEHALF.set(signed_in)
    try:
        yield
    finally:
        _ON_BEHALF.reset(reset)


def _signed_in_user() -> Any:
    return _ON_BEHALF.get()


def _is_stored(client_id: str) -> bool:
    from oauth2_provider.models import get_application_model

    return bool(get_application_model().objects.filter(client_id=client_id).exists())


def _rate_key(user: Any) -> str:
    return _RATE_KEY + hashlib.sha256(str(user.pk).encode()).hexdigest()


def rate_refusal(user: Any) -> str | None:
    """``client_rate`` when ``user`` brought ``WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR`` new
    clients this hour, else ``None``."""
    if not getattr(user, "is_authenticated", False):
        return None
    used = cache.get(_rate_key(user))
    limit = conf.WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR
    return "client_rate" if isinstance(used, int) and used >= limit else None


def _take_new_client(user: Any, client_id: str) -> bool:
    """Count one new client for ``user`` this hour; ``False`` (and one audit row when the
    bound is first reached) past ``WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR``."""
    key = _rate_key(user)
    cache.add(key, 0, _RATE_WINDOW)
    try:
        used = int(cache.incr(key))
    except ValueError:  # expired between add and incr
        cache.set(key, 1, _RATE_WINDOW)
        used = 1
    limit = conf.WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR
    if used <= limit:
        return True
    logger.info("new OAuth client refused for user %s: client_rate", user.pk)
    if used == limit + 1:
        TokenEvent.objects.create(
            action=TokenEvent.Action.CLIENT_REFUSED,
            user_id=user.pk,
            client_id=client_id[:255],
            reason="client_rate",
            by=user.get_username()[:150],
        )
    return False


class SignedInUserOnly:
    """The toolkit's ``CIMD_REGISTRATION_PERMISSION_CLASSES``: a client not yet stored is
    fetched only on behalf of a user signed in at the authorization endpoint, at most
    ``WEBFETCH_OAUTH_NEW_CLIENTS_PER_HOUR`` per user; a stored client's stale document is
    fetched again only there too.  A refusal here is not a fetch failure: the toolkit sets
    no back-off for the URL, so an anonymous caller cannot lock a real client out."""

    def has_permission(self, request: Any, client_id: str) -> bool:
        user = _signed_in_user()
        if user is None:
            return False
        if _is_stored(client_id):
            return True
        return _take_new_client(user, client_id)


class MetadataRefused(CIMDError):  # type: ignore[misc]
    """A client's metadata document was refused; ``reason`` is a stable code."""

    def __init__(self, reason: str, message: str = "") -> None:
        self.reason = reason
        super().__init__(message or f"client metadata refused: {reason}")


def _refusal_key(client_id: str) -> str:
    return _REFUSAL_KEY + hashlib.sha256(client_id.encode("utf-8", "replace")).hexdigest()


def last_refusal(client_id: str) -> str | None:
    """The reason code of the last refusal of ``client_id``'s document (for the page the
    editor sees), or ``None``."""
    value = cache.get(_refusal_key(client_id))
    return value if isinstance(value, str) else None


def _has_space_or_control(value: str) -> bool:
    return any(ch.isspace() or not ch.isprintable() for ch in value)


def _check_client_id(client_id: str) -> None:
    if _has_space_or_control(client_id):
        raise MetadataRefused("client_id_form")
    parts = urlsplit(client_id)
    if parts.scheme != "https":
        raise MetadataRefused("client_id_scheme")
    if not parts.path or parts.path == "/" or parts.fragment:
        raise MetadataRefused("client_id_form")
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        raise MetadataRefused("client_id_form")
    if len(client_id) > 255:
        raise MetadataRefused("client_id_too_long")


def _max_age(cache_control: str | None) -> int:
    age = MAX_AGE
    if cache_control:
        lowered = cache_control.lower()
        if "no-store" in lowered or "no-cache" in lowered:
            age = MIN_AGE
        else:
            match = _MAX_AGE.search(cache_control)
            if match:
                age = int(match.group(1))
    return max(MIN_AGE, min(age, MAX_AGE))


def check_redirect_uri(uri: object) -> None:
    """Raise :class:`MetadataRefused` unless ``uri`` is an acceptable redirect URI."""
    # No whitespace: the toolkit stores the list space-joined and splits it on whitespace.
    if not isinstance(uri, str) or len(uri) > 2000 or _has_space_or_control(uri):
        raise MetadataRefused("redirect_uri_form")
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as exc:
        raise MetadataRefused("redirect_uri_form") from exc
    if parts.fragment or parts.username is not None or parts.password is not None:
        raise MetadataRefused("redirect_uri_form")
    if parts.scheme == "http":
        # RFC 8252 §7.3: a native client's loopback redirect, by IP literal only (§8.3:
        # "localhost" is not recommended); any port.
        if parts.hostname in _LOOPBACK_HOSTS and port is not None:
            return
        raise MetadataRefused("redirect_uri_not_loopback")
    if parts.scheme != "https":
        raise MetadataRefused("redirect_uri_scheme")
    verdict = explain(uri, policy=client_metadata_policy(1), resolve=True)
    if not verdict.allowed:
        raise MetadataRefused(f"redirect_uri:{verdict.reason}")


def _check_metadata(metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise MetadataRefused("not_an_object")
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        raise MetadataRefused("redirect_uris")
    for uri in uris:
        check_redirect_uri(uri)
    name = metadata.get("client_name", "")
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS or not name.isprintable():
        raise MetadataRefused("client_name")
    logo = metadata.get("logo_uri")
    if logo is not None:
        if not isinstance(logo, str) or not logo.startswith("https://"):
            raise MetadataRefused("logo_uri")
        if not explain(logo, policy=client_metadata_policy(1), resolve=False).allowed:
            raise MetadataRefused("logo_uri")


def make_room(client_id: str) -> None:
    """Keep the clients known by a metadata document under ``WEBFETCH_OAUTH_MAX_CLIENTS``
    before ``client_id`` (not yet known) is fetched; raise ``client_limit`` when full."""
    from oauth2_provider.models import get_application_model

    from django_webfetch.models import AccessToken, TokenKind

    Application = get_application_model()
    documented = Application.objects.filter(registration_source="cimd")
    if documented.filter(client_id=client_id).exists():
        return  # a refresh of a known client takes no new room
    limit = conf.WEBFETCH_OAUTH_MAX_CLIENTS
    if documented.count() < limit:
        return
    approved = AccessToken.objects.filter(kind=TokenKind.OAUTH).values("client_id")
    stale = documented.filter(cimd_expires_at__lt=timezone.now()).exclude(client_id__in=approved)
    stale.filter(pk__in=list(stale.values_list("pk", flat=True)[:1000])).delete()
    if documented.count() >= limit:
        raise MetadataRefused("client_limit")


class GuardedMetadataFetcher:
    """django-oauth-toolkit's ``CIMD_METADATA_FETCHER``: ``fetch(client_id)`` returns
    ``(metadata, max_age_seconds)`` or raises ``CIMDError`` (see the module)."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        user = _signed_in_user()
        if user is None:
            # Only reached when an operator replaced the permission classes: still no
            # fetch and no audit row for an anonymous caller.
            raise MetadataRefused("client_unknown")
        try:
            return self._fetch(client_id)
        except MetadataRefused as exc:
            self._refused(client_id, exc.reason, user)
            raise

    def _fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        _check_client_id(client_id)
        make_room(client_id)
        max_bytes = conf.WEBFETCH_OAUTH_CLIENT_DOCUMENT_BYTES
        recorder = EgressRecorder(tool=TOOL)
        try:
            result = fetch(
                client_id,
                policy=client_metadata_policy(max_bytes),
                observer=recorder,
                follow_redirects=False,
            )
        except EgressDenied as exc:
            raise MetadataRefused(exc.reason) from exc
        except WebFetchError as exc:
            raise MetadataRefused(exc.code) from exc
        if result.status != 200:
            raise MetadataRefused("redirect" if result.redirect_reported else "http_status")
        try:
            metadata = json.loads(result.body)
        except ValueError as exc:
            raise MetadataRefused("not_json") from exc
        _check_metadata(metadata)
        return metadata, _max_age(dict(result.headers).get("cache-control"))

    @staticmethod
    def _refused(client_id: str, reason: str, user: Any) -> None:
        logger.info("client metadata document refused (%s)", reason)
        cache.set(_refusal_key(client_id), reason[:100], MIN_AGE)
        TokenEvent.objects.create(
            action=TokenEvent.Action.CLIENT_REFUSED,
            user_id=user.pk,
            client_id=client_id[:255],
            reason=reason[:100],
            by="server",
        )
