"""A plugin process reaches no pathname Unix datagram socket of the host.

A datagram (or seqpacket) socketpair's ``sendto()`` (or a re-``connect()``) names any
filesystem socket path, and Landlock (ABI <= 7) does not govern connecting to a Unix socket
by path: such a socket would let a plugin write to ``/dev/log``, journald, a systemd notify
socket or any other local datagram service, a way out that is not the host's RPC.  The
seccomp filter allows only a Unix stream socketpair and no socket pointed at an address, so
nothing arrives at a listener the plugin was never given.
"""

from __future__ import annotations

import contextlib
import json
import socket

import pytest

from django_webfetch.plugins.runtime.host import capabilities

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not capabilities().get("isolated"), reason="no plugin isolation here"),
]

SEND = """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
fds = (ctypes.c_int * 2)()
made = libc.socketpair(1, 2, 0, fds)  # AF_UNIX, SOCK_DGRAM
addr = struct.pack('H', 1) + PATH.encode() + b'\\0'
sent = libc.sendto(fds[0], b'forged', 6, 0, addr, len(addr)) if made == 0 else -1
result = [made, sent, ctypes.get_errno()]
"""


def test_a_plugin_cannot_send_to_a_host_unix_datagram_socket(probe, tmp_path):
    path = str(tmp_path / "host-service.sock")  # stands in for /dev/log, journald, ...
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    listener.setblocking(False)
    try:
        outcome = probe(SEND.replace("PATH", repr(path)))
        received = []
        with contextlib.suppress(BlockingIOError):
            received.append(listener.recv(100))
    finally:
        listener.close()
    assert received == []
    made, sent, _ = json.loads(json.loads(outcome.text)["result"])
    assert made == -1 or sent == -1  # the socketpair or the send refused
