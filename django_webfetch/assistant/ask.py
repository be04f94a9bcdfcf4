"""One provider request: the run's history and the user's tools, sent to its provider.

The provider is a configured endpoint: its SDK gets an httpx client on the guarded
transport (``providers.provider_client``), built from the ``assistant`` group's live
policy, so the model's own traffic is governed and recorded like any tool's (DESIGN.md §9).

With a :class:`~.stream.TextStream` the request streams (Pydantic AI's
``model_request_stream``): each text chunk goes to the stream as it arrives, through the
same guarded transport, under the same response-size cap and deadline; the answer returned
is the whole ``ModelResponse``, as without streaming.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import InterfaceError, OperationalError

from django_webfetch import metrics
from django_webfetch.budgets import BudgetExceeded, charge_provider_request, record_provider_usage
from django_webfetch.conf import conf
from django_webfetch.egress import EgressRecorder, policy_for
from django_webfetch.net.errors import WebFetchError
from django_webfetch.net.policy import Scope
from django_webfetch.tools import tools_for_user

from .history import within_context_budget
from .models import AssistantRun
from .providers import (
    OFFLINE,
    ProviderConfig,
    ProviderFailure,
    build_model,
    classify_error,
    configured_provider,
    provider_client,
    stream_cut,
)
from .stream import StreamStopped, TextStream

__all__ = ["ProviderRequest", "ask"]

logger = logging.getLogger("django_webfetch.assistant")


def ask(run: AssistantRun, history: list[Any], *, stream: TextStream | None = None) -> Any:
    """One provider request for ``run``: the model's ``ModelResponse`` (raises
    ``ProviderFailure``, and ``StreamStopped`` when the run changed while it streamed).
    Every connection it made is recorded against the run.  ``stream``: stream the answer,
    its text chunks written as ``text_delta`` events.

    The request runs on a loop of its own in the calling thread, which waits for it (inline
    runs, eager Celery tasks); the background runner and Celery workers hand it to the
    provider I/O loop instead (:meth:`ProviderRequest.send_later`)."""
    request = ProviderRequest(run, history, stream)
    # The stream's writes run back in the calling thread, on its database connection.
    flush = None if stream is None else sync_to_async(stream.flush, thread_sensitive=True)
    return request.finish(lambda: async_to_sync(request.send)(flush))


class ProviderRequest:
    """One provider request, prepared on the caller's thread (the provider, the tools, the
    budget charge, the guarded client: database work), sent by :meth:`send` on an event
    loop, and finished by :meth:`finish` back on a thread with a database connection (its
    egress and token use recorded).  Raises ``ProviderFailure`` when it cannot be sent."""

    def __init__(self, run: AssistantRun, history: list[Any], stream: TextStream | None) -> None:
        self.run = run
        self.stream = stream
        self.config = _provider_of(run)
        self.params = _tool_parameters(run)
        self.messages = within_context_budget(history)
        self.timeout = conf.WEBFETCH_ASSISTANT_TIMEOUT
        self.events: list[Any] = []
        if not self.config.offline:
            _charge(run)
        self.started = time.monotonic()
        try:
            self.client = (
                None if self.config.offline else _guarded_client(run, self.events, self.timeout)
            )
            self.model = build_model(self.config, http_client=self.client, timeout=self.timeout)
        except ProviderFailure as failure:
            self.finish(_raising(failure))

    @property
    def key(self) -> tuple[str, Any, str]:
        """What the per-provider concurrency bound counts by: the endpoint."""
        return (self.config.kind, self.config.endpoint_id, self.config.base_url)

    async def send(
        self, flush: Callable[[], Awaitable[None]] | None, *, check_first: bool = False
    ) -> Any:
        """The request on the running loop; every error classified as a ``ProviderFailure``
        (``StreamStopped`` passes).  ``flush``: writes the stream's waiting text;
        ``check_first``: flush once before sending (the run is still ours)."""
        received: list[bool] = []
        try:
            return await _request(
                self.model,
                self.client,
                self.messages,
                self.params,
                self.timeout,
                self.stream,
                flush,
                check_first=check_first,
                received=received,
            )
        except (ProviderFailure, StreamStopped, OperationalError, InterfaceError):
            # A database error (writing a delta) is not the provider's: the loop waits for
            # the database and goes on (loop.advance).
            raise
        except Exception as exc:
            failure = classify_error(exc, secret=self.config.api_key)
            if received:
                failure = stream_cut(failure)
            raise failure from exc

    def send_later(self, then: Callable[[Callable[[], Any]], None]) -> None:
        """Hand the request to the provider I/O loop and return at once.  When it ends,
        ``then(finish)`` is called on the loop's database pool (off the loop; it must not
        raise), where ``finish()`` records the request and returns its answer or raises
        its failure."""
        from .aio import provider_loop

        stream = self.stream

        def flush() -> Awaitable[None]:
            assert stream is not None
            return provider_loop.run_db(stream.flush)

        async def sent() -> None:
            outcome: Callable[[], Any]
            try:
                # Flushed first: the step's deadline counts from the moment the request is
                # sent (not from the hand-off: a slow start or a wait for the bound is not
                # a stuck step), and a run that moved on meanwhile is not asked for.
                response = await self.send(
                    None if stream is None else flush, check_first=stream is not None
                )
            except Exception as exc:
                outcome = _raising(exc)
                if stream is not None and not isinstance(exc, StreamStopped):
                    # Failed: the follow-up waits in a queue, not in a stuck step; it has
                    # a whole step's deadline to take the run up (an answer's last flush,
                    # in ``_request``, renewed it already).  A run that moved on is left
                    # to whoever moved it (the follow-up is a no-op).
                    with contextlib.suppress(Exception):
                        await provider_loop.run_db(stream.renew_lease)
            else:
                outcome = lambda: response  # noqa: E731
            await provider_loop.run_db(lambda: then(lambda: self.finish(outcome)))

        async def keepalive() -> None:
            # Renew the lease while the request waits its turn; a run that moved on is
            # found when the request is admitted (``_request`` flushes first).
            with contextlib.suppress(Exception):
                await flush()

        provider_loop.submit(sent, key=self.key, keepalive=None if stream is None else keepalive)

    def finish(self, outcome: Callable[[], Any]) -> Any:
        """Record the request whose answer ``outcome()`` returns (or whose failure it
        raises): its connections, the metrics and the token use."""
        try:
            response = outcome()
        except ProviderFailure as failure:
            if not self.config.offline:
                metrics.provider_request(self.config.kind, failure.code, self._seconds())
            raise
        finally:
            _record_egress(self.run, self.events)
        if not self.config.offline:
            _record_usage(self.run, self.config, response, self._seconds())
        return response

    def _seconds(self) -> float:
        return time.monotonic() - self.started


def _raising(failure: Exception) -> Callable[[], Any]:
    def outcome() -> Any:
        raise failure

    return outcome


def _charge(run: AssistantRun) -> None:
    """Count the request against the user's budgets before it is sent; over a ceiling the
    run fails with ``budget_exceeded:<kind>`` and the ceiling in plain words."""
    try:
        charge_provider_request(run.user)
    except BudgetExceeded as exc:
        logger.info("assistant run %s refused: %s", run.pk, exc.code)
        metrics.refusal(exc.code)
        raise ProviderFailure(exc.code, str(exc), detail=exc.kind) from exc


def _record_usage(run: AssistantRun, config: ProviderConfig, response: Any, seconds: float) -> None:
    usage = getattr(response, "usage", None)
    tokens = [getattr(usage, name, 0) for name in ("input_tokens", "output_tokens")]
    tokens = [t if isinstance(t, int) and t > 0 else 0 for t in tokens]
    metrics.provider_request(config.kind, "ok", seconds, tokens[0], tokens[1])
    if not any(tokens):
        return
    try:
        record_provider_usage(run.user, config.model_name, tokens[0], tokens[1])
    except Exception:
        logger.exception("token use of assistant run %s not recorded", run.pk)


def _tool_parameters(run: AssistantRun) -> Any:
    """The tools offered to the run's user, as the model sees them."""
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    tools = tools_for_user(run.user) if run.user is not None else []
    return ModelRequestParameters(
        function_tools=[
            ToolDefinition(
                name=t.name, description=t.description, parameters_json_schema=dict(t.parameters)
            )
            for t in tools
        ],
        allow_text_output=True,
    )


def _guarded_client(run: AssistantRun, events: list[Any], timeout: float) -> Any:
    """An httpx client on the guarded transport, under the ``assistant`` group's live
    policy; each egress event is appended to ``events``."""
    try:
        policy = policy_for("assistant", user=run.user, require_scope=Scope.CONFIGURED_ENDPOINT)
    except WebFetchError as exc:
        raise classify_error(exc) from exc
    return provider_client(policy, observer=events.append, timeout=timeout)


async def _request(
    model: Any,
    client: Any,
    messages: list[Any],
    params: Any,
    timeout: float,
    stream: TextStream | None,
    flush: Callable[[], Awaitable[None]] | None,
    *,
    check_first: bool = False,
    received: list[bool] | None = None,
) -> Any:
    """Send the request; the model's and our clients are closed afterwards (the request's
    sockets with them).  Streamed, ``flush()`` writes the text waiting in ``stream``;
    ``check_first``: once before sending too."""
    from pydantic_ai.direct import model_request, model_request_stream
    from pydantic_ai.settings import ModelSettings

    settings = ModelSettings(max_tokens=conf.WEBFETCH_ASSISTANT_MAX_TOKENS, timeout=timeout)
    try:
        if stream is None or flush is None:
            return await model_request(
                model, messages, model_settings=settings, model_request_parameters=params
            )
        if check_first:
            # It waited its turn: the run is still ours (its lease renewed), or
            # ``StreamStopped`` before anything is sent.
            await flush()
        async with model_request_stream(
            model, messages, model_settings=settings, model_request_parameters=params
        ) as streamed:
            async for item in streamed:
                if received is not None and not received:
                    received.append(True)  # a cut from now on is a cut stream
                if stream.add(_text_of(item)):
                    await flush()
            response = streamed.get()
        await flush()
        return response
    finally:
        await _close(model, client)


def _text_of(item: Any) -> str:
    """The answer text an event of the stream adds (a new text part, or a text delta)."""
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

    if isinstance(item, PartStartEvent) and isinstance(item.part, TextPart):
        return item.part.content
    if isinstance(item, PartDeltaEvent) and isinstance(item.delta, TextPartDelta):
        return item.delta.content_delta
    return ""


async def _close(model: Any, client: Any) -> None:
    """Close the SDK's client and ours (nothing left for the garbage collector)."""
    sdk = getattr(model, "client", None)
    close = getattr(sdk, "close", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
    if client is not None:
        with contextlib.suppress(Exception):
            await client.aclose()


def _record_egress(run: AssistantRun, events: list[Any]) -> None:
    if not events:
        return
    recorder = EgressRecorder(
        tool="assistant:provider",
        group="assistant",
        user=run.user,
        call_id=str(run.pk),
        run_id=str(run.pk),
    )
    for event in events:
        try:
            recorder(event)
        except Exception:
            logger.exception("egress event of assistant run %s not recorded", run.pk)


def _provider_of(run: AssistantRun) -> ProviderConfig:
    """The provider the run started with (its API key read now, never stored on the run)."""
    if run.provider == "offline":
        return OFFLINE
    current = configured_provider()
    if current.kind != run.provider or current.model_name != run.model_name:
        raise ProviderFailure(
            "provider_changed",
            "The LLM provider configuration changed while the run was in progress.",
        )
    return current
