"""Model field markers.

``SecretCharField`` marks a write-only secret (an endpoint's auth header value).  A secret
must not be recoverable through any query channel: every lookup and transform on it is
refused by the ORM itself (``FieldError``), so neither an admin filter
(``?auth_header_value__regex=^a``), nor a related lookup from another admin
(``?endpoints__auth_header_value__startswith=``), nor an API filter parameter can turn it
into an oracle, whichever ModelAdmin or view builds the query.  The admin refuses them
earlier (``SecretFieldsAdminMixin``), and a system check (``django_webfetch.E009``) refuses
any ModelAdmin that filters, searches or orders on one.

In migrations the field is a plain ``CharField``: the marker changes no column.
"""

from __future__ import annotations

from typing import Any

from django.db import models

__all__ = ["SecretCharField", "SecretJSONField", "is_secret", "secret_fields", "touches_secret"]


class SecretCharField(models.CharField):  # type: ignore[type-arg]
    """A ``CharField`` holding a secret: write-only, never a lookup, never an ordering."""

    #: The explicit marker every secret-aware check looks for.
    webfetch_secret = True

    def get_lookup(self, lookup_name: str) -> Any:
        return None  # "exact", "regex", "startswith", "gt", "isnull"...: all refused

    def get_transform(self, lookup_name: str) -> Any:
        return None  # "lower", "length"...: refused as well

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class SecretJSONField(models.JSONField):
    """A ``JSONField`` of secrets (a plugin instance's ``secret_config``): no lookup and no
    key transform (``secret_config__token__startswith``) reaches it."""

    webfetch_secret = True

    def get_lookup(self, lookup_name: str) -> Any:
        return None

    def get_transform(self, lookup_name: str) -> Any:
        return None

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


def is_secret(field: Any) -> bool:
    return bool(getattr(field, "webfetch_secret", False))


def secret_fields(model: type[models.Model]) -> list[Any]:
    """Every field of ``model`` marked secret."""
    return [f for f in model._meta.get_fields() if is_secret(f)]


def touches_secret(model: type[models.Model], path: str) -> bool:
    """Whether a lookup/ordering/search path (``a__b__regex``, ``-a``, ``^a``) reaches a
    secret field, following relations from ``model``."""
    path = path.lstrip("-+?^=@").strip()
    current: Any = model
    for part in path.split("__"):
        if current is None or not part:
            return False
        if part == "pk":
            return False
        try:
            field = current._meta.get_field(part)
        except Exception:
            return False  # a transform or lookup name: the path ends here
        if is_secret(field):
            return True
        current = getattr(field, "related_model", None)
    return False
