"""drf-spectacular, when it is installed (the OpenAPI schema is optional)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["AVAILABLE", "AutoSchema", "OpenApiParameter", "OpenApiResponse", "extend_schema"]

try:
    from drf_spectacular.openapi import AutoSchema
    from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
    from drf_spectacular.utils import extend_schema as _extend_schema

    AVAILABLE = True

    def extend_schema(**kwargs: Any) -> Callable[[Any], Any]:
        """``drf_spectacular.utils.extend_schema`` that extends spectacular's AutoSchema even
        when the project's ``DEFAULT_SCHEMA_CLASS`` is DRF's own (the app does not ask
        integrators to change it)."""
        decorate = _extend_schema(**kwargs)

        def apply(method: Any) -> Any:
            if getattr(method, "schema", None) is None:
                method.schema = AutoSchema
            return decorate(method)

        return apply
except ImportError:  # pragma: no cover - depends on the installed extras
    AVAILABLE = False
    from rest_framework.schemas.openapi import AutoSchema  # type: ignore[assignment]

    def extend_schema(**kwargs: Any) -> Callable[[Any], Any]:
        return lambda target: target

    class OpenApiParameter:  # type: ignore[no-redef]
        QUERY = "query"

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    class OpenApiResponse:  # type: ignore[no-redef]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass
