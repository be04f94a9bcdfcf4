"""What a provider's answer and a provider's failure leave on the run, besides the text.

- an answer cut at the token limit is marked ``incomplete`` (the message and the run), and
  the model name the provider reported is kept beside the configured one;
- a failed request keeps the provider's own explanation (redacted, bounded) on the run's
  ``provider_error`` and in the log, for operators; the editor and the model read only our
  words (``ProviderFailure.message``).
"""

from __future__ import annotations

import logging
from typing import Any

from .models import AssistantRun
from .providers import Provider, ProviderFailure, provider_class

__all__ = ["answer_fields", "record_provider_failure"]

logger = logging.getLogger("django_webfetch.assistant")


def answer_fields(kind: str, response: Any) -> dict[str, Any]:
    """``incomplete`` and ``reported_model`` of one provider answer (for the message and
    the run), read through the provider kind's hooks."""
    cls = provider_class(kind) or Provider
    return {"incomplete": cls.cut_off(response), "reported_model": cls.reported_model(response)}


def record_provider_failure(run: AssistantRun, failure: ProviderFailure) -> None:
    """Log the failure with the provider's text, and keep that text on the run (operators
    only).  A retried failure keeps its text too: the last one is what the admin shows."""
    logger.warning(
        "assistant run %s: provider failure %s%s",
        run.pk,
        failure.code,
        f": {failure.provider_text}" if failure.provider_text else "",
    )
    if failure.provider_text:
        AssistantRun.objects.filter(pk=run.pk).update(provider_error=failure.provider_text)
        run.provider_error = failure.provider_text
