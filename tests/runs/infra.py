"""Real infrastructure for the run tests: Redis, Celery workers, PostgreSQL."""

from __future__ import annotations

__all__: list[str] = []
