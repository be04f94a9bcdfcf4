"""The assistant (DESIGN.md §9): conversations, runs that pause at approval and resume.

An editor's message starts an :class:`~django_webfetch.assistant.models.AssistantRun`.  A run
is a loop of *steps*: one request to the LLM provider with the tools offered to the user
(``tools_for_user``), then a durable ``ToolCall`` (``runs.request_call``) for each tool call
the model asked for.  A call that waits for a human pauses the run (nothing is held in
memory or in a worker); the call's final transition resumes it (a Celery task, or
in-process on the embedded default).

Modules: ``models`` (the records), ``services`` (the state machine and the loop),
``providers`` (LLM providers on Pydantic AI, through the egress guard), ``planner`` (the
offline rule-based planner), ``bounds`` (tool-result and context bounds).

Importing this package imports nothing heavy: Pydantic AI is loaded only when a run asks a
provider (``pip install "django-webfetch[assistant]"``).
"""

from __future__ import annotations
