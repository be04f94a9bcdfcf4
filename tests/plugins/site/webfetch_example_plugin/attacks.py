"""Ways around the host-owned client that a plugin might take (tests/plugins/
test_plugin_egress_authority.py).  Each ``attack_*`` takes ``(plugin, arguments)`` like a tool
handler and returns what it reached, or raises what it was refused with.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import os
import socket
import struct
import sys
import time
from typing import Any

#: A pool made at import time, outside any tool call, its thread already running in the
#: site's process (trusted: test_plugin_egress_authority.py).  In a plugin process (PID 1 of its
#: own PID namespace) the thread starts with the first call that uses it: a process whose
#: import left a thread serves one call only
#: (tests/plugins/test_pooled_process_descriptors_and_threads.py), and this plugin, the one the
#: runtime benchmark calls, keeps its pooled process.
POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="example")
if os.getpid() != 1:
    POOL.submit(lambda: None).result()


def _connect(address: str) -> str:
    socket.create_connection((address, 80), timeout=2).close()
    return "connected"


def attack_fresh_context(plugin: Any, arguments: dict[str, Any]) -> str:
    """An empty ``contextvars.Context`` has no plugin scope in it."""
    return contextvars.Context().run(_connect, arguments["address"])


def attack_fresh_context_borrow(plugin: Any, arguments: dict[str, Any]) -> str:
    """Another instance's client, used from an empty context."""
    from django_webfetch.plugins.client import PluginHttp

    def borrow() -> str:
        return str(PluginHttp(int(arguments["instance"])).get(arguments["url"]).status_code)

    return contextvars.Context().run(borrow)


def attack_pool(plugin: Any, arguments: dict[str, Any]) -> str:
    """Work handed to a thread pool that existed before the tool ran."""
    return POOL.submit(_connect, arguments["address"]).result()


def attack_asyncio(plugin: Any, arguments: dict[str, Any]) -> str:
    """asyncio's own connection (name lookup in its executor, connect in the loop)."""
    import asyncio

    async def connect() -> str:
        _, writer = await asyncio.open_connection(arguments["address"], 80)
        writer.close()
        return "connected"

    return asyncio.run(connect())


_LAZY: list[concurrent.futures.ThreadPoolExecutor] = []


def lazy_pool() -> concurrent.futures.ThreadPoolExecutor:
    """A pool whose thread is started by the first tool call that uses it."""
    if not _LAZY:
        _LAZY.append(concurrent.futures.ThreadPoolExecutor(max_workers=1))
    return _LAZY[0]


def attack_lazy_pool(plugin: Any, arguments: dict[str, Any]) -> str:
    return lazy_pool().submit(_connect, arguments["address"]).result()


def attack_raw_thread(plugin: Any, arguments: dict[str, Any]) -> str:
    """A thread started with ``_thread`` directly (no ``threading.Thread.start``)."""
    import _thread

    outcome: list[str] = []

    def work() -> None:
        try:
            outcome.append(_connect(arguments["address"]))
        except Exception as exc:
            outcome.append(getattr(exc, "reason", type(exc).__name__))

    _thread.start_new_thread(work, ())
    deadline = time.monotonic() + 5
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.01)
    if outcome and outcome[0] != "connected":
        from django_webfetch.net.errors import EgressDenied

        raise EgressDenied(outcome[0])
    return outcome[0] if outcome else "nothing"


def attack_silenced_audit(plugin: Any, arguments: dict[str, Any]) -> str:
    """``sys.audit`` replaced: ``subprocess.Popen`` raises its audit event through it."""
    import subprocess

    original = sys.audit
    sys.audit = lambda *args: None  # type: ignore[assignment]
    try:
        subprocess.run(["touch", arguments["path"]], check=False)
    finally:
        sys.audit = original
    return "started"


def attack_spawn_passfds(plugin: Any, arguments: dict[str, Any]) -> str:
    """multiprocessing's spawn primitive (``_posixsubprocess.fork_exec``, no audit event)."""
    import os
    from multiprocessing import util

    pid = util.spawnv_passfds("/usr/bin/touch", [b"touch", arguments["path"].encode()], ())
    os.waitpid(pid, 0)
    return "started"


def attack_ctypes_connect(plugin: Any, arguments: dict[str, Any]) -> str:
    """libc's ``connect`` through ctypes: no ``socket.connect`` audit event."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    address = (
        struct.pack("=H", socket.AF_INET)
        + struct.pack("!H", 80)
        + socket.inet_aton(arguments["address"])
        + b"\x00" * 8
    )
    try:
        if libc.connect(fd, address, len(address)) != 0:
            return "failed"
        return "connected"
    finally:
        libc.close(fd)


#: Sockets the test made outside any tool call (host code), for a tool to use later.
PREOPENED: list[socket.socket] = []


def forged_frame(source: str, address: str, port: int, payload: bytes = b"forged") -> bytes:
    """An Ethernet frame carrying a UDP datagram from a forged ``source`` (checksum 0)."""

    def checksum(data: bytes) -> int:
        total = sum(struct.unpack(f"!{len(data) // 2}H", data))
        total = (total >> 16) + (total & 0xFFFF)
        return ~(total + (total >> 16)) & 0xFFFF

    datagram = struct.pack("!HHHH", 4444, port, 8 + len(payload), 0) + payload
    header = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(datagram),
        1,
        0,
        64,
        socket.IPPROTO_UDP,
        0,
        socket.inet_aton(source),
        socket.inet_aton(address),
    )
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    return b"\x00" * 12 + b"\x08\x00" + header + datagram


def attack_packet(plugin: Any, arguments: dict[str, Any]) -> str:
    """An ``AF_PACKET`` socket on ``lo``: a whole frame, forged source, to a private address."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind(("lo", 0))
        sock.send(forged_frame("1.2.3.4", arguments["address"], int(arguments["port"])))
    return "sent"


def attack_packet_preopened(plugin: Any, arguments: dict[str, Any]) -> str:
    """A packet socket made before the tool ran, addressed per datagram."""
    frame = forged_frame("1.2.3.4", arguments["address"], int(arguments["port"]))
    PREOPENED[0].sendto(frame, ("lo", 0))
    return "sent"


def attack_raw_ip(plugin: Any, arguments: dict[str, Any]) -> str:
    """A raw IPv4 socket (``SOCK_RAW``, ``IPPROTO_UDP``): the datagram is composed here."""
    datagram = struct.pack("!HHHH", 4444, int(arguments["port"]), 14, 0) + b"forged"
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP) as sock:
        sock.sendto(datagram, (arguments["address"], 0))
    return "sent"


def attack_group(plugin: Any, arguments: dict[str, Any]) -> str:
    """The client's tool group swapped for one without the denylist."""
    http = plugin.http
    for name in list(vars(http)):
        if "group" in name:
            setattr(http, name, arguments["group"])
    return str(http.get(arguments["url"]).status_code)


def attack_foreign_group(plugin: Any, arguments: dict[str, Any]) -> str:
    """A client built by the plugin itself for its own instance, in another group."""
    from django_webfetch.plugins.client import PluginHttp

    own = plugin.http
    instance_id = next(v for k, v in vars(own).items() if "instance" in k)
    return str(PluginHttp(instance_id, group=arguments["group"]).get(arguments["url"]).status_code)


ATTACKS = {
    name[len("attack_") :]: value
    for name, value in dict(globals()).items()
    if name.startswith("attack_")
}


def attack(plugin: Any, arguments: dict[str, Any]) -> str:
    return ATTACKS[arguments["attack"]](plugin, arguments)


__all__ = ["ATTACKS", "attack"]
