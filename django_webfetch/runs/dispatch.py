"""Work is sent by task name, so that no service imports ``tasks.py``.

Four names: :data:`RUN_TOOL_CALL`, :data:`ADVANCE_ASSISTANT_RUN`, :data:`SWEEP` and
:data:`PROVIDER_ANSWERED` (the follow-up of a provider request handed to the provider I/O
loop: ``assistant.loop``).

- On Celery (``WEBFETCH_ASYNC_RUNS``), :func:`send` publishes the named task: through the
  task object when this process has it registered (``apply_async``, so an eager app runs
  it inline as before), else by name (``send_task``, with the same options).  Only
  ``tasks.py`` binds the names to Celery tasks.
- In-process (the embedded default), :func:`run_here` calls the handler bound to the same
  name.  ``apps.py`` (the composition root) binds the handlers with :func:`bind`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django_webfetch.exceptions import WebFetchImproperlyInstalled

__all__ = [
    "ADVANCE_ASSISTANT_RUN",
    "PROVIDER_ANSWERED",
    "RUN_TOOL_CALL",
    "SWEEP",
    "bind",
    "bound",
    "enqueue",
    "run_here",
    "send",
]

logger = logging.getLogger("django_webfetch.runs")

RUN_TOOL_CALL = "django_webfetch.run_tool_call"
ADVANCE_ASSISTANT_RUN = "django_webfetch.advance_assistant_run"
SWEEP = "django_webfetch.expire_tool_calls"
PROVIDER_ANSWERED = "django_webfetch.assistant_provider_answered"

_handlers: dict[str, Callable[..., Any]] = {}


def bind(name: str, handler: Callable[..., Any]) -> None:
    """Run ``handler`` for the task ``name`` in-process (``apps.py`` binds them)."""
    _handlers[name] = handler


def bound(name: str) -> Callable[..., Any] | None:
    """The in-process handler of the task ``name``, if one is bound."""
    return _handlers.get(name)


def run_here(name: str, *args: Any) -> Any:
    """Run the task ``name`` in this process, now; returns what its handler returns."""
    try:
        handler = _handlers[name]
    except KeyError:
        raise LookupError(
            f"no in-process handler for task {name!r} (is django_webfetch in INSTALLED_APPS?)"
        ) from None
    return handler(*args)


def send(
    name: str,
    *args: Any,
    soft_time_limit: float | None = None,
    time_limit: float | None = None,
    queue: str | None = None,
    countdown: float | None = None,
) -> None:
    """Publish the Celery task ``name`` (``countdown``: not before that many seconds);
    raises what the broker raises."""
    try:
        from celery import current_app
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise WebFetchImproperlyInstalled("celery", "celery") from exc
    options: dict[str, Any] = {}
    if soft_time_limit is not None:
        # Celery takes seconds as float: they travel in the message's ``timelimit`` header
        # and billiard's timers compare them as floats.
        options["soft_time_limit"] = soft_time_limit
    if time_limit is not None:
        options["time_limit"] = time_limit
    if queue:
        options["queue"] = queue
    if countdown:
        options["countdown"] = countdown
    task = current_app.tasks.get(name)
    if task is not None:
        task.apply_async(args=args, **options)
    else:
        current_app.send_task(name, args=args, **options)


def enqueue(name: str, *args: Any, what: str, **options: Any) -> bool:
    """:func:`send`, never raising: ``False`` (and the error logged, naming ``what``) when
    the broker cannot take the message.  The caller's record stays as it is, and the
    sweep queues it again."""
    try:
        send(name, *args, **options)
    except WebFetchImproperlyInstalled:
        raise
    except Exception:
        logger.exception("%s could not be queued", what)
        return False
    return True
