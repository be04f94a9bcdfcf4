"""Reason codes in plain words: the table lives in ``runs.reasons`` (the offline planner
reads it too); re-exported here for the CMS surfaces."""

from __future__ import annotations

from django_webfetch.runs.reasons import ADDRESS_CLASSES, REASONS, REFUSALS, plain_reason

__all__ = ["ADDRESS_CLASSES", "REASONS", "REFUSALS", "plain_reason"]
