"""Record every outgoing socket operation of the test process (``sys.addaudithook``).

The hook sees ``socket.connect`` (TCP and connected UDP), ``socket.sendto``/``sendmsg``
(unconnected UDP, as dnspython's queries) and the name-lookup functions (``getaddrinfo``,
``gethostbyname``...), independently of our own code: tests assert on it instead of trusting
the guard.  Operations of the lab's own server threads (named ``lab-*``) are not recorded.

Audit hooks cannot be removed; this one is installed once and does almost nothing for
events it does not watch.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from dataclasses import dataclass

__all__ = ["Connect", "Lookup", "clear", "connects", "install", "lookups"]


@dataclass(frozen=True)
class Connect:
    """One outgoing ``connect``/``sendto`` of the test process."""

    event: str  # "connect" | "sendto" | "sendmsg"
    family: int
    type: int
    address: str
    port: int
    thread: str
    time: float

    @property
    def proto(self) -> str:
        return "tcp" if self.type == socket.SOCK_STREAM else "udp"


@dataclass(frozen=True)
class Lookup:
    """One call of a system name-lookup function (``getaddrinfo`` & co)."""

    event: str
    host: str
    thread: str


_connects: list[Connect] = []
_lookups: list[Lookup] = []
_lock = threading.Lock()
_installed = False

_SEND_EVENTS = {"socket.connect": "connect", "socket.sendto": "sendto", "socket.sendmsg": "sendmsg"}
_LOOKUP_EVENTS = {
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyname_ex",
    "socket.gethostbyaddr",
}
_WATCHED = frozenset(_SEND_EVENTS) | _LOOKUP_EVENTS


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event not in _WATCHED:
        return
    try:
        thread = threading.current_thread().name
        if thread.startswith("lab-"):
            return
        if event in _SEND_EVENTS:
            sock, address = args[0], args[1]
            family = getattr(sock, "family", None)
            if family not in (socket.AF_INET, socket.AF_INET6):
                return
            if not isinstance(address, tuple) or len(address) < 2:
                return
            entry = Connect(
                _SEND_EVENTS[event],
                int(family),
                int(sock.type),  # type: ignore[attr-defined]
                str(address[0]),
                int(address[1]),
                thread,
                time.monotonic(),
            )
            with _lock:
                _connects.append(entry)
        else:
            host = args[0]
            if isinstance(host, bytes):
                host = host.decode("ascii", "replace")
            with _lock:
                _lookups.append(Lookup(event.removeprefix("socket."), str(host), thread))
    except Exception:  # an audit hook must never break the operation it watches
        pass


def install() -> None:
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def connects() -> list[Connect]:
    with _lock:
        return list(_connects)


def lookups() -> list[Lookup]:
    with _lock:
        return list(_lookups)


def clear() -> None:
    with _lock:
        _connects.clear()
        _lookups.clear()
