"""What failed, in our own words: one stable sub-code and one fixed sentence per cause.

A ``FetchError`` or ``ResolutionError`` says *that* the fetch failed; its ``failure``
attribute says *why* (``tls_certificate``, ``connect_refused``, ...).  The sentence shown to
people and to the model is ours and fixed per sub-code: no library or server text ever
reaches it (the library's message goes to ``detail``, for the audit log only).

``failure_of(exc)`` walks an exception's ``__cause__``/``__context__`` chain and maps what it
finds (``ssl``, ``OSError``, httpcore and httpx exceptions) onto a sub-code.  The fetcher
and the guarded transport both use it, so one cause has one name everywhere.
"""

from __future__ import annotations

import errno
import ssl
from collections.abc import Iterator, Mapping

import h11
import httpcore
import httpx

__all__ = ["FAILURES", "Interrupted", "describe_failure", "failure_of"]

#: sub-code -> the sentence shown for it (CLI, API, admin, tool results).
FAILURES: Mapping[str, str] = {
    "tls_certificate": "The server's TLS certificate could not be verified for this host name.",
    "tls_handshake": "The TLS handshake with the server failed.",
    "connect_refused": "The server refused the connection: nothing listens on that port.",
    "connect_timeout": "The server did not accept the connection in time.",
    "connect_failed": "The connection to the server could not be opened.",
    "network_unreachable": "There is no route to the server's address.",
    "connection_reset": "The server reset the connection.",
    "connection_closed": "The server closed the connection before the response was complete.",
    "read_timeout": "The server stopped sending before the response was complete.",
    "write_timeout": "The request could not be sent in time.",
    "protocol_error": "The server's response was not valid HTTP.",
    "dns_timeout": "The DNS servers did not answer in time.",
    "dns_failure": "No DNS server could answer for this host.",
    "budget_exhausted": "The fetch ran out of its overall time budget.",
    "fetch_failed": "The fetch failed.",
    "cancelled": "The request was cancelled before it finished.",
    "plugin_call_ended": "The plugin call the request was made for ended before it finished.",
}


class Interrupted(httpcore.NetworkError):
    """A connection ended by its ``Cancellation``, not by the server: ``failure`` names
    why (a sub-code above, which ``failure_of`` gives it)."""

    def __init__(self, failure: str) -> None:
        super().__init__(f"the connection was ended ({failure})")
        self.failure = failure


def describe_failure(code: str) -> str:
    """The fixed sentence of a sub-code ("" for an unknown or empty one)."""
    return FAILURES.get(code, "")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 32:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_TIMEOUTS: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((httpx.ConnectTimeout, httpcore.ConnectTimeout), "connect_timeout"),
    ((httpx.ReadTimeout, httpcore.ReadTimeout), "read_timeout"),
    ((httpx.WriteTimeout, httpcore.WriteTimeout), "write_timeout"),
    ((httpx.PoolTimeout, httpcore.PoolTimeout), "connect_timeout"),
)


def failure_of(exc: BaseException) -> str:
    """The sub-code of what failed, from the most specific cause in ``exc``'s chain."""
    chain = list(_chain(exc))
    for cause in chain:
        if isinstance(cause, Interrupted):  # ended by its owner, whatever the socket said
            return cause.failure
    # The root causes first: an ssl or OS error says more than the wrapper around it.
    for cause in reversed(chain):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "tls_certificate"
        if isinstance(cause, ssl.SSLError):
            return "tls_handshake"
        if isinstance(cause, ConnectionRefusedError):
            return "connect_refused"
        if isinstance(cause, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            return "connection_reset"
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "network_unreachable"
    for cause in chain:
        for kinds, code in _TIMEOUTS:
            if isinstance(cause, kinds):
                return code
        if isinstance(cause, (httpx.RemoteProtocolError, httpcore.RemoteProtocolError)):
            # h11 raises it both for garbage and for a peer that hung up mid-response.
            text = str(cause).lower()
            if "disconnected" in text or "peer closed" in text or "incomplete" in text:
                return "connection_closed"
            return "protocol_error"
        if isinstance(cause, (httpx.ProtocolError, httpcore.ProtocolError, h11.ProtocolError)):
            return "protocol_error"
        if isinstance(cause, (httpx.ConnectError, httpcore.ConnectError)):
            return "connect_failed"
        if isinstance(cause, (httpx.ReadError, httpcore.ReadError)):
            return "connection_reset"
    return "fetch_failed"
