"""The errors of assistant runs::

WebFetchError
└── AssistantError                 .code
    ├── InvalidRunTransition       .current .target
    ├── RunInProgress
    └── AssistantNotInstalled
"""

from __future__ import annotations

from django_webfetch.net.errors import WebFetchError
from django_webfetch.runs.durable import TransitionRefused

__all__ = ["AssistantError", "AssistantNotInstalled", "InvalidRunTransition", "RunInProgress"]


class AssistantError(WebFetchError):
    code = "assistant_error"
    default_message = "the assistant run cannot be changed"


class InvalidRunTransition(TransitionRefused, AssistantError):
    code = "invalid_transition"
    noun = "run"


class RunInProgress(AssistantError):
    code = "run_in_progress"
    default_message = "the conversation has a run that has not finished"


class AssistantNotInstalled(AssistantError):
    code = "assistant_not_installed"
    default_message = 'the assistant needs Pydantic AI: pip install "django-webfetch[assistant]"'
