"""The installation's own hosts, per-group host lists and configured endpoints."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from django_webfetch.net.errors import EgressDenied, HostNotAllowed, PolicyError
from django_webfetch.net.hosts import Host, HostKind, parse_host, parse_list_entry

from .fields import SecretCharField
from .scopes import EgressScope, ToolGroup

__all__ = [
    "ConfiguredEndpoint",
    "HostListEntry",
    "ListKind",
    "SiteHost",
    "endpoint_host",
    "validate_endpoint_url",
    "validate_host",
    "validate_list_entry",
]


def validate_list_entry(value: str) -> None:
    """Validate one allow/deny list entry with the guard's own parser."""
    try:
        parse_list_entry(value)
    except PolicyError as exc:
        raise ValidationError(str(exc), code="invalid_entry") from exc


def validate_host(value: str) -> None:
    """A plain host name or IP address (no pattern, no port)."""
    host = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    if ":" in host:
        host = f"[{host}]"
    try:
        parse_host(host)
    except HostNotAllowed as exc:
        raise ValidationError(
            _("%(value)s is not a valid host name or IP address (%(reason)s)."),
            code="invalid_host",
            params={"value": value[:100], "reason": exc.reason},
        ) from exc


def endpoint_host(url: str) -> Host:
    """The validated host of an endpoint base URL.  Raises ``ValidationError``."""
    try:
        split = urlsplit(url)
        hostname = split.hostname or ""
        split.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise ValidationError(_("Enter a valid URL."), code="invalid_url") from exc
    text = f"[{hostname}]" if ":" in hostname else hostname
    try:
        return parse_host(text)
    except HostNotAllowed as exc:
        raise ValidationError(
            _("The endpoint's host is not accepted (%(reason)s)."),
            code="invalid_host",
            params={"reason": exc.reason},
        ) from exc


def validate_endpoint_url(value: str) -> None:
    """http(s), a host, no userinfo, query or fragment (the tool adds the query)."""
    try:
        split = urlsplit(value)
    except ValueError as exc:
        raise ValidationError(_("Enter a valid URL."), code="invalid_url") from exc
    if split.scheme not in ("http", "https"):
        raise ValidationError(_("The endpoint must be an http or https URL."), code="scheme")
    if "@" in split.netloc:
        raise ValidationError(_("The endpoint URL must not contain credentials."), code="userinfo")
    if split.query or split.fragment or "?" in value or "#" in value:
        raise ValidationError(
            _("The endpoint URL must not have a query string or fragment."), code="query"
        )
    endpoint_host(value)
    # The guard compares requests with the base's decoded path: a base it cannot read that
    # way (an encoded separator, a ";" parameter...) would refuse every request.
    from django_webfetch.net.guard import scoped_path
    from django_webfetch.net.urlparse import parse_url

    try:
        scoped_path(parse_url(value))
    except EgressDenied as exc:
        raise ValidationError(
            _("The endpoint path must not contain encoded separators or ';' parameters."),
            code="path_encoding",
        ) from exc


class SiteHost(models.Model):
    """A host of this installation, in addition to the Sites framework and ALLOWED_HOSTS.

    Own hosts are the only destinations of the ``own_site`` scope and are refused by every
    other scope.
    """

    class Scheme(models.TextChoices):
        HTTPS = "https", "https"
        HTTP = "http", "http"

    host = models.CharField(_("host"), max_length=255, validators=[validate_host])
    port = models.PositiveIntegerField(
        _("port"),
        null=True,
        blank=True,
        help_text=_("Leave empty for the scheme's default port."),
    )
    scheme = models.CharField(
        _("scheme"), max_length=5, choices=Scheme.choices, default=Scheme.HTTPS
    )
    note = models.CharField(_("note"), max_length=200, blank=True)

    class Meta:
        ordering = ["host", "port"]
        verbose_name = _("site host")
        verbose_name_plural = _("site hosts")
        constraints = [
            models.UniqueConstraint(
                fields=["host", "port", "scheme"], name="webfetch_sitehost_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}" + (f":{self.port}" if self.port else "")

    def clean(self) -> None:
        super().clean()
        self.host = self.host.strip().lower()
        if self.port is not None and not 0 < self.port < 65536:
            raise ValidationError({"port": _("A port is 1..65535.")})

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.full_clean()
        super().save(*args, **kwargs)

    def list_entries(self) -> tuple[str, ...]:
        """This host as ``own_site_hosts`` entries (port-specific entry first).

        Raises ``PolicyError`` for a row that is invalid in the database (a pattern would
        widen the ``own_site`` scope): the policy service then refuses (fail closed).
        """
        host = self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        try:
            parsed = parse_host(host)
        except HostNotAllowed as exc:
            raise PolicyError(f"site host {self.pk} is invalid ({exc.reason})") from exc
        host = parsed.url_text
        if self.port is not None and not 0 < self.port < 65536:
            raise PolicyError(f"site host {self.pk} has an invalid port")
        if self.port:
            return (f"{host}:{self.port}", host)
        return (host,)


class ListKind(models.TextChoices):
    ALLOW = "allow", _("allowlist")
    DENY = "deny", _("denylist")


class HostListEntry(models.Model):
    """One allowlist or denylist entry of a group.

    The value is validated with the guard's own list-entry syntax on save; an entry that
    is invalid in the database anyway makes its whole list invalid and the guard refuses
    every request of the group (fail closed).
    """

    group = models.ForeignKey(
        ToolGroup, on_delete=models.CASCADE, related_name="host_entries", verbose_name=_("group")
    )
    list = models.CharField(_("list"), max_length=5, choices=ListKind.choices)
    value = models.CharField(
        _("entry"),
        max_length=300,
        validators=[validate_list_entry],
        help_text=_(
            "A host name (docs.example.org), a suffix pattern (*.example.org, never the apex) "
            "or an IP address (IPv6 bare or in brackets), optionally with :port."
        ),
    )
    note = models.CharField(_("note"), max_length=200, blank=True)
    created = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["group", "list", "value"]
        verbose_name = _("host list entry")
        verbose_name_plural = _("host list entries")
        constraints = [
            models.UniqueConstraint(
                fields=["group", "list", "value"], name="webfetch_hostlistentry_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.list}: {self.value}"

    def clean_fields(self, exclude: Any = None) -> None:
        if isinstance(self.value, str):
            self.value = self.value.strip()
        super().clean_fields(exclude=exclude)

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.full_clean()
        super().save(*args, **kwargs)


#: Where the provider kinds come from: ``apps.py`` (the composition root) points this at the
#: assistant's provider registry, so the kinds are listed in one place and models import no
#: service.  Until then no kind is valid (fail closed).
_provider_kind_source: Callable[[], Iterable[tuple[str, str]]] = list


def set_provider_kind_source(source: Callable[[], Iterable[tuple[str, str]]]) -> None:
    """Called once from ``apps.py``: ``source()`` returns ``(kind, label)`` pairs."""
    global _provider_kind_source
    _provider_kind_source = source


def provider_kind_choices() -> list[tuple[str, str]]:
    """The choices of ``ConfiguredEndpoint.provider_kind`` (a callable: read on use, so a
    kind registered later is valid, and the migration state never lists kinds)."""
    return list(_provider_kind_source())


class ConfiguredEndpoint(models.Model):
    """An operator-configured HTTP endpoint: the only destinations of a
    ``configured_endpoint`` group.

    The auth header value is write-only: the admin and the API never render it back.
    """

    group = models.ForeignKey(
        ToolGroup,
        on_delete=models.CASCADE,
        related_name="endpoints",
        verbose_name=_("group"),
        limit_choices_to={"scope": EgressScope.CONFIGURED_ENDPOINT},
    )
    name = models.CharField(_("name"), max_length=100)
    base_url = models.CharField(
        _("base URL"),
        max_length=500,
        validators=[validate_endpoint_url],
        help_text=_("Every URL under this base (same scheme, host and port) is reachable."),
    )
    auth_header_name = models.CharField(
        _("auth header name"), max_length=100, blank=True, default="Authorization"
    )
    #: Write-only: every lookup, filter and ordering on it is refused (``fields.py``).
    auth_header_value = SecretCharField(
        _("auth header value"), max_length=2000, blank=True, editable=True
    )
    allow_private = models.BooleanField(
        _("allow private addresses"),
        default=False,
        help_text=_(
            "Let this endpoint's host resolve to private addresses (an internal search "
            "service, a model server you run yourself), and be a host of this installation "
            "(localhost, 127.0.0.1): the host is your choice, never a model's. Metadata "
            "addresses and mixed public/private answers stay refused."
        ),
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    #: For an endpoint of the ``assistant`` group: the LLM provider's API and model.
    provider_kind = models.CharField(
        _("LLM provider kind"),
        max_length=32,
        blank=True,
        choices=provider_kind_choices,
        help_text=_("Only for endpoints of the assistant group."),
    )
    model_name = models.CharField(
        _("LLM model name"),
        max_length=200,
        blank=True,
        help_text=_("Only for endpoints of the assistant group, e.g. gpt-4.1-mini."),
    )
    created = models.DateTimeField(_("created"), auto_now_add=True)
    updated = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["group", "pk"]
        verbose_name = _("configured endpoint")
        verbose_name_plural = _("configured endpoints")

    def __str__(self) -> str:
        return f"{self.name} ({self.group})"

    def __repr__(self) -> str:
        # Never the secret.
        return f"<ConfiguredEndpoint {self.pk} {self.base_url!r}>"

    @property
    def has_auth(self) -> bool:
        return bool(self.auth_header_value)

    @property
    def host(self) -> str:
        """The canonical host name (or IP text) of the base URL."""
        return endpoint_host(self.base_url).name

    @property
    def host_is_ip(self) -> bool:
        return endpoint_host(self.base_url).kind is not HostKind.NAME

    def clean(self) -> None:
        super().clean()
        name = self.auth_header_name
        if self.auth_header_value and not name:
            raise ValidationError({"auth_header_name": _("Name the header the value goes in.")})
        if name and (not name.isascii() or not all(c.isalnum() or c in "-_" for c in name)):
            raise ValidationError({"auth_header_name": _("Enter a valid HTTP header name.")})
        value = self.auth_header_value
        if any(c in value for c in "\r\n\0"):
            raise ValidationError({"auth_header_value": _("The value must be a single line.")})
        if value and not re.fullmatch(r"[\x21-\x7e](?:[ \t]*[\x21-\x7e])*", value):
            # What the fetcher would refuse at run time (net.fetcher._check_headers).
            raise ValidationError(
                {
                    "auth_header_value": _(
                        "Use visible ASCII characters, with spaces only between them."
                    )
                }
            )
        group_id = getattr(self, "group_id", None)
        if group_id is not None and self.group.scope != "configured_endpoint":
            raise ValidationError(
                {"group": _("Endpoints belong to groups with the configured_endpoint scope.")}
            )

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.full_clean()
        super().save(*args, **kwargs)
