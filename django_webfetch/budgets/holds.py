"""What one principal may hold open: the one door (issue 29, findings 4 and 5).

Everything a signed-in principal can open and keep is a *hold* of a kind:

- ``streams``: an open ``runs/{id}/stream/`` (Server-Sent Events);
- ``long_polls``: a ``runs/{id}/events/?wait=S`` that waits;
- ``mcp_sessions``: an MCP Streamable HTTP session (opened by ``initialize``);
- ``mcp_waits``: an MCP ``tools/call`` waiting for an approval.

A hold is taken with :func:`hold` (a context manager, sync or async) or :func:`acquire`
(a :class:`Lease` released once, however often :meth:`Lease.release` is called) and counted
in this process, under a lock, per kind: per principal (a user; an MCP token is a second
principal of the same hold, bounded alone) against ``WEBFETCH_OPEN_PER_PRINCIPAL`` and for
everyone together against ``WEBFETCH_OPEN_PER_PROCESS``.  The per-principal bound is well
below the process bound (``django_webfetch.E046`` otherwise), so one principal never takes
what the others need.

Past a bound nothing is opened: :class:`TooManyOpen` (code ``too_many_open``), which every
surface answers the same way: HTTP ``429`` with ``Retry-After`` and the body of
:meth:`TooManyOpen.as_dict` (the API's error shape; in an MCP error's ``data``).  The
client is told to poll instead.  The counts are the gauges ``webfetch_open_<kind>``; a
refusal counts in ``webfetch_refusals_total`` as ``too_many_open:<kind>``.

The counts are per process on purpose: what a hold costs (a socket, a task, a session's
memory) is the process's; with several processes each bounds its own.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Hashable
from types import TracebackType
from typing import Any

from django_webfetch import metrics
from django_webfetch.conf import OPEN_KINDS, conf
from django_webfetch.net.errors import WebFetchError

__all__ = [
    "KINDS",
    "Lease",
    "TooManyOpen",
    "acquire",
    "counts",
    "hold",
    "principal_counts",
    "surface",
    "surfaces",
]

logger = logging.getLogger("django_webfetch.budgets")

KINDS = OPEN_KINDS

_WHAT = {
    "streams": "open event streams",
    "long_polls": "waiting long-polls",
    "mcp_sessions": "open MCP sessions",
    "mcp_waits": "MCP calls waiting for an approval",
}

Principal = Hashable


class TooManyOpen(WebFetchError):
    """A bound of what may be held open is reached: nothing was opened; poll instead."""

    code = "too_many_open"
    default_message = "too many open"

    def __init__(self, kind: str, *, limit: int, scope: str, retry_after: int) -> None:
        self.kind = kind
        self.limit = limit
        self.scope = scope  # "principal" or "process"
        self.retry_after = retry_after
        whose = "You have" if scope == "principal" else "This server has"
        super().__init__(
            f"{whose} too many {_WHAT[kind]} (at most {limit}). "
            f"Poll instead, or try again in {retry_after} s."
        )

    def as_dict(self) -> dict[str, Any]:
        """The body of the refusal on every surface (the API's error shape)."""
        return {
            "detail": str(self),
            "code": self.code,
            "kind": self.kind,
            "retry_after": self.retry_after,
        }


class _Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total: Counter[str] = Counter()
        self.by_principal: Counter[tuple[str, Principal]] = Counter()


_COUNTS = _Counts()


class Lease:
    """One hold; :meth:`release` gives it back (once: later calls do nothing)."""

    __slots__ = ("_released", "kind", "principals")

    def __init__(self, kind: str, principals: tuple[Principal, ...]) -> None:
        self.kind = kind
        self.principals = principals
        self._released = False

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        with _COUNTS.lock:
            if self._released:
                return
            self._released = True
            _COUNTS.total[self.kind] -= 1
            for principal in self.principals:
                key = (self.kind, principal)
                _COUNTS.by_principal[key] -= 1
                if _COUNTS.by_principal[key] <= 0:
                    del _COUNTS.by_principal[key]
            total = _COUNTS.total[self.kind]
        metrics.open_count(self.kind, total)

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    async def __aenter__(self) -> Lease:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def acquire(kind: str, *principals: Principal) -> Lease:
    """Take one hold of ``kind`` for every one of ``principals`` (a user's pk first; an MCP
    token as ``("token", pk)``), or raise :class:`TooManyOpen` and take nothing."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of hold: {kind!r}")
    if not principals:
        raise ValueError("a hold needs a principal")
    per_principal = conf.WEBFETCH_OPEN_PER_PRINCIPAL[kind]
    per_process = conf.WEBFETCH_OPEN_PER_PROCESS[kind]
    refused: TooManyOpen | None = None
    with _COUNTS.lock:
        if _COUNTS.total[kind] >= per_process:
            refused = TooManyOpen(
                kind,
                limit=per_process,
                scope="process",
                retry_after=conf.WEBFETCH_OPEN_RETRY_AFTER,
            )
        elif any(_COUNTS.by_principal[(kind, p)] >= per_principal for p in principals):
            refused = TooManyOpen(
                kind,
                limit=per_principal,
                scope="principal",
                retry_after=conf.WEBFETCH_OPEN_RETRY_AFTER,
            )
        else:
            _COUNTS.total[kind] += 1
            for principal in principals:
                _COUNTS.by_principal[(kind, principal)] += 1
            total = _COUNTS.total[kind]
    if refused is not None:
        metrics.refusal(f"too_many_open:{kind}")
        logger.info("too many open %s (%s): %s", kind, refused.scope, principals[0])
        raise refused
    metrics.open_count(kind, total)
    return Lease(kind, tuple(principals))


def hold(kind: str, *principals: Principal) -> Lease:
    """``with hold("streams", user.pk): ...`` (or ``async with``): :func:`acquire`, released
    when the block ends."""
    return acquire(kind, *principals)


def counts() -> dict[str, int]:
    """What this process holds open now, by kind."""
    with _COUNTS.lock:
        return {kind: _COUNTS.total[kind] for kind in KINDS}


def principal_counts(principal: Principal) -> dict[str, int]:
    """What ``principal`` holds open in this process now, by kind."""
    with _COUNTS.lock:
        return {kind: _COUNTS.by_principal[(kind, principal)] for kind in KINDS}


# -- the surfaces that hold ----------------------------------------------------------------

_SURFACES: dict[str, str] = {}


def surface(kind: str, name: str) -> Callable[[Any], Any]:
    """Mark ``name`` (a view, a URL name, an MCP method) as a surface that holds ``kind``:
    the surface-enumeration test checks that every long-lived surface is marked and is
    refused at the bound."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of hold: {kind!r}")

    def mark(target: Any) -> Any:
        _SURFACES[name] = kind
        target.webfetch_holds = kind
        return target

    return mark


def surfaces() -> dict[str, str]:
    """Every marked surface: name -> kind."""
    return dict(_SURFACES)
