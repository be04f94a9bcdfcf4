"""The assistant (DESIGN.md §9): conversations, runs that pause at approval and resume.

An editor's message starts an :class:`~django_webfetch.assistant.models.AssistantRun`.  A run
is a loop of *steps*: one request to the LLM provider with the tools offered to the user
(``tools_for_user``), then a durable ``ToolCall`` (``runs.request_call``) for each tool call
the model asked for.  A call that waits for a human pauses the run (nothing is held in
memory or in a worker); the call's final transition resumes it (a Celery task, or
in-process on the embedded default).

Modules, one per journey: ``models`` (the records), ``errors``, ``state`` (the one place
that changes a run, its lease and event log), ``conversations`` (turns and messages),
``history`` (the stored exchange and what a request sends of it), ``calls`` (the durable
tool calls of a run), ``ask`` (one provider request), ``loop`` (advancing a run),
``dispatch`` and ``signals`` (resuming in the background), ``recover`` (the sweep),
``providers`` (LLM providers on Pydantic AI, through the egress guard), ``planner`` (the
offline rule-based planner), ``bounds`` (tool-result bounds).  ``services`` re-exports the
public names of all of them.

Importing this package imports nothing heavy: Pydantic AI is loaded only when a run asks a
provider (``pip install "django-webfetch[assistant]"``).
"""

from __future__ import annotations
