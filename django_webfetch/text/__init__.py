"""Page text: HTML to bounded text, and the untrusted-content fence.  Pure Python."""

from __future__ import annotations
