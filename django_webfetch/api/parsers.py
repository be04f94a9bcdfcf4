"""Request parsers of the API: bounded before they parse, and refusing what cannot be stored.

Every view of the API parses its body with these (``BaseView.parser_classes``):

- the body is read at most :data:`MAX_BODY_BYTES` (lowered by Django's
  ``DATA_UPLOAD_MAX_MEMORY_SIZE``) plus one byte; a longer body is ``413`` with code
  ``request_too_large``, whatever its ``Content-Length`` says;
- JSON is pre-scanned for its nesting depth in one linear pass before ``json.loads`` sees
  it: deeper than :data:`MAX_BODY_DEPTH` is ``400`` ``nesting_too_deep`` (the stdlib parser
  recurses and raises ``RecursionError`` a few thousand levels down);
- every string of the parsed data, keys included, is checked for NUL characters and lone
  surrogates (``400`` ``invalid_characters``), which PostgreSQL refuses with ``DataError``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from rest_framework import exceptions, parsers, status

from django_webfetch.runs.bounds import InputRejected, check_text, safe_label

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_BODY_DEPTH",
    "BoundedFormParser",
    "BoundedJSONParser",
    "BoundedMultiPartParser",
    "RequestTooLarge",
    "max_body_bytes",
]

#: A request body of the API.  Arguments are bounded to 16 KiB of UTF-8 JSON; escaped as
#: ``\\uXXXX`` they may take six times that on the wire, plus the envelope.
MAX_BODY_BYTES = 128 * 1024
#: Nesting of a request body (arguments are bounded to 32 levels; the envelope adds one).
MAX_BODY_DEPTH = 64

#: One token per match, left to right: a whole string (to its end, or to the end of the
#: input when unterminated, so no match restarts inside a string) or one bracket.
_TOKENS = re.compile(rb'"(?:[^"\\]++|\\.)*+"?|[\[\]{}]', re.DOTALL)


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "request_too_large"


def max_body_bytes() -> int:
    django_limit = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None)
    if isinstance(django_limit, int) and django_limit >= 0:
        return min(MAX_BODY_BYTES, django_limit)
    return MAX_BODY_BYTES


def _read_bounded(stream: Any) -> bytes:
    limit = max_body_bytes()
    if stream is None:
        return b""
    body = bytes(stream.read(limit + 1))
    if len(body) > limit:
        raise RequestTooLarge(f"The request body may be at most {limit} bytes.")
    return body


def _rejected(exc: InputRejected) -> exceptions.ParseError:
    return exceptions.ParseError(str(exc), code=exc.code)


def json_depth(body: bytes) -> int:
    """The deepest nesting of ``[``/``{`` in a JSON text, strings skipped; linear."""
    depth = deepest = 0
    for token in _TOKENS.findall(body):
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def check_data(data: Any) -> None:
    """Refuse NUL characters and lone surrogates in any string of ``data`` (iterative)."""
    stack: list[tuple[Any, str]] = [(data, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            check_text(item, where=where or "/")
        elif isinstance(item, Mapping):
            for key, value in item.items():
                label = f"{where}/{safe_label(str(key))}"
                if isinstance(key, str):
                    check_text(key, where=label)
                stack.append((value, label))
        elif isinstance(item, (list, tuple)):
            stack.extend((value, f"{where}/{index}") for index, value in enumerate(item))


class BoundedJSONParser(parsers.JSONParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = _encoding(parser_context)
        body = _read_bounded(stream)
        if json_depth(body) > MAX_BODY_DEPTH:
            raise exceptions.ParseError(
                f"JSON may be nested at most {MAX_BODY_DEPTH} levels deep.",
                code="nesting_too_deep",
            )
        try:
            data = json.loads(body.decode(encoding), parse_constant=_no_constant)
        except RecursionError as exc:  # pragma: no cover - the pre-scan comes first
            raise exceptions.ParseError("JSON nested too deep.", code="nesting_too_deep") from exc
        except ValueError as exc:
            raise exceptions.ParseError("JSON parse error.", code="parse_error") from exc
        try:
            check_data(data)
        except InputRejected as exc:
            raise _rejected(exc) from exc
        return data


def _encoding(parser_context: Mapping[str, Any] | None) -> str:
    """The request's charset: a text encoding only (a bytes-to-bytes codec such as
    ``bz2_codec`` would inflate the body after its size was checked)."""
    encoding = str((parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET)
    try:
        "".encode(encoding)
    except (LookupError, UnicodeError) as exc:
        raise exceptions.ParseError("Unsupported charset.", code="parse_error") from exc
    return encoding


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class BoundedFormParser(parsers.FormParser):
    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        from io import BytesIO

        body = _read_bounded(stream)
        data = super().parse(BytesIO(body), media_type, parser_context)
        try:
            check_data({key: data.getlist(key) for key in data})
        except InputRejected as exc:
            raise _rejected(exc) from exc
        return data


class BoundedMultiPartParser(parsers.MultiPartParser):
    """Form fields only (the API takes no files); bounded like the others."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        from io import BytesIO

        context = dict(parser_context or {})
        body = _read_bounded(stream)
        request = context["request"]
        meta = {**request.META, "CONTENT_LENGTH": str(len(body))}
        request.META = meta
        result = super().parse(BytesIO(body), media_type, context)
        try:
            check_data({key: result.data.getlist(key) for key in result.data})
        except InputRejected as exc:
            raise _rejected(exc) from exc
        return result
