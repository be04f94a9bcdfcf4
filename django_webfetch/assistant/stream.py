"""The answer's text as the provider streams it: ``text_delta`` events, coalesced and bounded.

:class:`TextStream` collects the text chunks of one provider request (``ask``) and writes
them as ``text_delta`` events (``{"text": ..., "step": N}``) of the run's event log:

- coalesced: an event is written once ``MIN_DELTA_CHARS`` (32) characters are waiting and
  ``MIN_DELTA_INTERVAL`` (0.1 s) passed since the last one, so a run writes at most about
  ten delta rows a second however finely the provider chunks its answer;
- bounded: the deltas of one step carry at most ``MAX_STREAMED_BYTES`` (256 KiB of UTF-8);
  past it no more deltas are written (the step's answer, stored whole as its message, is
  what the ``step`` and ``completed`` events point at);
- leased: every write renews the run's lease and its step deadline (a step that streams
  is not stuck) with a compare-and-set on the run's version; a run changed under the
  stream (cancelled, or taken over by another worker after a lost lease) stops it
  (``StreamStopped``).

The text is the model's own answer, the same text the step's message stores; tool results
(and their fenced page text) never stream.
"""

from __future__ import annotations

import time
from typing import Any

from .errors import InvalidRunTransition
from .models import AssistantRun, RunState
from .state import event, lease_fields

__all__ = [
    "MAX_STREAMED_BYTES",
    "MIN_DELTA_CHARS",
    "MIN_DELTA_INTERVAL",
    "StreamStopped",
    "TextStream",
]

#: Characters a ``text_delta`` waits for (unless the stream ends first).
MIN_DELTA_CHARS = 32
#: Seconds between two ``text_delta`` events of a run, at least.
MIN_DELTA_INTERVAL = 0.1
#: UTF-8 bytes of the ``text_delta`` events of one step, at most.
MAX_STREAMED_BYTES = 256 * 1024


class StreamStopped(InvalidRunTransition):
    """The run changed under the stream (cancelled, or another worker owns it now):
    whoever changed it owns it (``loop.advance`` leaves it alone)."""


class TextStream:
    """The text deltas of one provider request of ``run``; see the module docstring."""

    def __init__(self, run: AssistantRun, *, step: int, clock: Any = time.monotonic) -> None:
        self.run_id = run.pk
        self.version = run.version
        self.step = step
        self._clock = clock
        self._pending: list[str] = []
        self._pending_chars = 0
        self._last_flush = -MIN_DELTA_INTERVAL
        self.sent_bytes = 0
        self.events = 0
        self.truncated = False

    def add(self, text: str) -> bool:
        """Take a chunk; ``True`` when the caller should :meth:`flush` now (pure: no I/O,
        so it may be called from the provider's event loop)."""
        if not text or self.truncated:
            return False
        self._pending.append(text)
        self._pending_chars += len(text)
        return (
            self._pending_chars >= MIN_DELTA_CHARS
            and self._clock() - self._last_flush >= MIN_DELTA_INTERVAL
        )

    def flush(self) -> None:
        """Write what is waiting as one ``text_delta`` (within the byte bound) and renew
        the run's lease; raises :class:`StreamStopped` when the run moved on."""
        self.renew_lease()
        if not self._pending or self.truncated:
            return
        text = "".join(self._pending)
        self._pending = []
        self._pending_chars = 0
        data = text.encode("utf-8")
        room = MAX_STREAMED_BYTES - self.sent_bytes
        if len(data) > room:
            text = data[:room].decode("utf-8", errors="ignore")
            self.truncated = True
        if text:
            event(self.run_id, "text_delta", {"text": text, "step": self.step})
            self.sent_bytes += len(text.encode("utf-8"))
            self.events += 1
        self._last_flush = self._clock()

    def renew_lease(self) -> None:
        """Renew the run's lease and step deadline, its version unchanged (the hand-off
        stays valid); raises :class:`StreamStopped` when the run moved on."""
        renewed = AssistantRun.objects.filter(
            pk=self.run_id, version=self.version, state=RunState.RUNNING
        ).update(**lease_fields())
        if not renewed:
            current = (
                AssistantRun.objects.filter(pk=self.run_id).values_list("state", flat=True).first()
            )
            raise StreamStopped(current or "", RunState.RUNNING, "the run changed while streaming")
