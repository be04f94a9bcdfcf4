"""The provider base class and the registry of provider kinds.

A provider kind is one subclass of :class:`Provider` (one module per kind) plus one call of
:func:`register`; everything that lists provider kinds (the endpoint's choices, the admin,
the system checks, :func:`configured_provider`) asks this registry, so there is no other list.
The built-in kinds are registered in one place, ``providers/__init__.py``; an integrator's
kind registers from its app's ``ready()``.

The hooks a kind may override (named as in pydantic-ai's ``Provider``, anymail's backends):

- :meth:`Provider.build_model` (required): the Pydantic AI model, given the guarded
  ``httpx.AsyncClient`` every request of the SDK must go through;
- :meth:`Provider.http_client`: the guarded client in the HTTP library the SDK is built on;
- :meth:`Provider.label`: how a run names the provider and model;
- :meth:`Provider.cut_off`: whether an answer was cut at the token limit (``finish_reason``
  ``length``, Anthropic's ``max_tokens``): the answer is then marked incomplete;
- :meth:`Provider.reported_model`: the model name the provider says answered.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, overload

import httpx

__all__ = [
    "ASSISTANT_GROUP",
    "OFFLINE",
    "OFFLINE_KIND",
    "OFFLINE_LABEL",
    "PROVIDER_KINDS",
    "Provider",
    "ProviderConfig",
    "kind_choices",
    "provider_class",
    "provider_kinds",
    "register",
    "unregister",
]

ASSISTANT_GROUP = "assistant"
OFFLINE_KIND = "offline"
OFFLINE_LABEL = "Offline rule-based planner (no language model)"
#: What a kind may be called: the endpoint field holds at most 32 characters.
_KIND_SYNTAX = re.compile(r"[a-z][a-z0-9-]{0,31}")


@dataclass(frozen=True)
class ProviderConfig:
    """The provider a run asks: its kind, model, endpoint and API key (never in ``repr``)."""

    kind: str  # a registered kind, or "offline"
    model_name: str
    base_url: str = ""
    api_key: str = field(default="", repr=False)
    endpoint_id: int | None = None

    @property
    def offline(self) -> bool:
        return self.kind == OFFLINE_KIND

    @property
    def provider(self) -> type[Provider] | None:
        """The kind's class, or ``None`` for a kind that is not registered (any more)."""
        return _registry.get(self.kind)

    @property
    def label(self) -> str:
        cls = self.provider
        if cls is None:
            return f"{self.kind}: {self.model_name}"[:200]
        return cls.label(self)


OFFLINE = ProviderConfig(kind=OFFLINE_KIND, model_name="offline-planner")


class Provider:
    """One LLM provider kind.  Subclass, set :attr:`kind` and :attr:`name`, implement
    :meth:`build_model`, and :func:`register` the class."""

    #: The stored value of ``ConfiguredEndpoint.provider_kind`` (``[a-z][a-z0-9-]*``, <= 32).
    kind: ClassVar[str] = ""
    #: The short name in run labels (``"OpenAI"``).
    name: ClassVar[str] = ""
    #: The choice shown in the admin; ``name`` when empty.
    choice_label: ClassVar[str] = ""
    #: Whether an endpoint may name this kind (the offline planner needs no endpoint).
    configurable: ClassVar[bool] = True
    #: The SDK package whose HTTP library :meth:`http_client` adapts to (``"openai"``).
    sdk: ClassVar[str] = ""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config

    @classmethod
    def label(cls, config: ProviderConfig) -> str:
        return f"{cls.name or cls.kind}: {config.model_name}"[:200]

    @classmethod
    def cut_off(cls, response: Any) -> bool:
        """Whether ``response`` (a Pydantic AI ``ModelResponse``) stopped at the token limit.
        Pydantic AI maps OpenAI's ``length`` and Anthropic's ``max_tokens`` to ``length``;
        the provider's raw value is looked at too."""
        if getattr(response, "finish_reason", None) == "length":
            return True
        details = getattr(response, "provider_details", None) or {}
        raw = details.get("finish_reason") if isinstance(details, dict) else None
        return raw in ("length", "max_tokens", "model_length")

    @classmethod
    def reported_model(cls, response: Any) -> str:
        """The model name the provider reported for ``response`` (``""`` when none)."""
        name = getattr(response, "model_name", None)
        return name[:200] if isinstance(name, str) else ""

    def http_client(self, client: httpx.AsyncClient, timeout: float) -> Any:
        """The guarded client as the SDK needs it (httpx, or httpx2 for newer SDKs)."""
        from .http import sdk_http_client

        return sdk_http_client(self.sdk, client, timeout) if self.sdk else client

    def sdk_options(self, client: httpx.AsyncClient | None, timeout: float) -> dict[str, Any]:
        """The keyword arguments of an official SDK client (``AsyncOpenAI``,
        ``AsyncAnthropic``): the API key, the base URL, the guarded client, no SDK retries."""
        if client is None:
            raise ValueError(f"provider kind {self.kind!r} needs the guarded HTTP client")
        return {
            "api_key": self.config.api_key or "unset",
            "base_url": self.config.base_url,
            "http_client": self.http_client(client, timeout),
            "max_retries": 0,
            "timeout": timeout,
        }

    def build_model(self, *, http_client: httpx.AsyncClient | None, timeout: float) -> Any:
        """A Pydantic AI model whose every request goes through ``http_client``."""
        raise NotImplementedError(f"provider kind {self.kind!r} builds no model")


# -- the registry ---------------------------------------------------------------------------

_registry: dict[str, type[Provider]] = {}


def register(cls: type[Provider]) -> type[Provider]:
    """Make ``cls`` a provider kind (usable as a class decorator).

    Raises ``ValueError`` for a malformed kind or a kind another class holds already.
    """
    kind = cls.kind
    if not _KIND_SYNTAX.fullmatch(kind):
        raise ValueError(f"provider kind {kind!r} is not [a-z][a-z0-9-]* of at most 32 characters")
    holder = _registry.get(kind)
    if holder is not None and holder is not cls:
        raise ValueError(f"provider kind {kind!r} is already registered by {holder.__qualname__}")
    _registry[kind] = cls
    return cls


def unregister(kind: str) -> None:
    """Forget a provider kind (tests, and an integrator replacing a built-in kind)."""
    _registry.pop(kind, None)


def provider_class(kind: str) -> type[Provider] | None:
    return _registry.get(kind)


def provider_kinds() -> tuple[str, ...]:
    """The kinds an endpoint may name, in registration order."""
    return tuple(kind for kind, cls in _registry.items() if cls.configurable)


def kind_choices() -> list[tuple[str, str]]:
    """``(kind, label)`` for the endpoint's ``provider_kind`` field and the admin."""
    return [
        (kind, cls.choice_label or cls.name or kind)
        for kind, cls in _registry.items()
        if cls.configurable
    ]


class _KindsView(Sequence[str]):
    """``PROVIDER_KINDS``: a live, read-only view of :func:`provider_kinds` (a kind
    registered later is in it)."""

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return provider_kinds()[index]

    def __len__(self) -> int:
        return len(provider_kinds())

    def __iter__(self) -> Iterator[str]:
        return iter(provider_kinds())

    def __contains__(self, value: object) -> bool:
        return value in provider_kinds()

    def __repr__(self) -> str:
        return repr(provider_kinds())


PROVIDER_KINDS: Sequence[str] = _KindsView()
