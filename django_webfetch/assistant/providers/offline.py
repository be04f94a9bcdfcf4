"""The offline kind: the rule-based planner (``assistant/planner.py``) answers when no
provider is configured.  It has no endpoint, so an endpoint cannot name it."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from .base import OFFLINE_KIND, OFFLINE_LABEL, Provider, ProviderConfig

__all__ = ["OfflineProvider"]


class OfflineProvider(Provider):
    kind: ClassVar[str] = OFFLINE_KIND
    name: ClassVar[str] = "Offline"
    configurable: ClassVar[bool] = False

    @classmethod
    def label(cls, config: ProviderConfig) -> str:
        return OFFLINE_LABEL

    def build_model(self, *, http_client: httpx.AsyncClient | None, timeout: float) -> Any:
        from django_webfetch.assistant.planner import offline_model

        return offline_model()
