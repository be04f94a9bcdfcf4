"""Issue 30, reopened (s4), findings 5 and 8: what the channel and the sandbox's sockets
cost the host.

Finding 8: one message under the byte cap, parsed whole, cost the host ~24 bytes per byte
(``{}`` is 3 bytes on the wire and a dict plus a list slot in the host).  The linear
pre-scan of ``protocol.shape`` now counts values as well as depth and the reader refuses a
message of more than ``MAX_VALUES`` before parsing it.

Finding 5: ``setsockopt(SO_SNDBUF)`` and ``socketpair()`` let one plugin process queue
~1 GiB of kernel memory under a 128 MiB bound.  ``setsockopt`` is now refused, a
socketpair is a Unix stream one at the default buffer size, and ``RLIMIT_NOFILE`` is
``guest.MAX_FILES``.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap, guest, protocol
from django_webfetch.plugins.runtime.protocol import Channel, ProtocolError

# -- finding 8: what one message costs the reader --------------------------------------

#: What the reader may hold per byte of a message while it reads and parses it: the
#: chunks and their join (2), the text decoded (up to 4 when one character is outside the
#: BMP), the strings parsed (as many again), the scan's copies; and per counted value.
PER_BYTE = 12
PER_VALUE = 256


def _received(body: bytes) -> tuple[int, Any]:
    """Peak bytes allocated by ``Channel.recv`` reading ``body`` (already framed and in
    this process), and what it returned or raised."""
    host, peer = socket.socketpair()
    framed = protocol._HEADER.pack(len(body)) + body
    sender = threading.Thread(target=peer.sendall, args=(framed,))
    sender.start()
    channel = Channel(host, max_message=len(body))
    try:
        tracemalloc.start()
        tracemalloc.reset_peak()
        try:
            result: Any = channel.recv(time.monotonic() + 30)
        except ProtocolError as exc:
            result = exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        sender.join()
        host.close()
        peer.close()
    return peak, result


_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
_SHAPES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)


@hypothesis_settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=_SHAPES, size=st.sampled_from([1 << 18, 1 << 20]), astral=st.booleans())
def test_one_message_costs_the_reader_a_bounded_multiple_of_its_size(shape, size, astral):
    """Random nested shapes repeated up to ``size`` bytes (the densest a hostile guest
    can send): the reader's peak allocation stays within ``PER_BYTE`` per byte plus
    ``PER_VALUE`` per value the cap lets through, whether the message is parsed or
    refused.  Before the fix, 1 MiB of ``{}`` cost ~34 MiB (the scan ~10 bytes per byte,
    the parse ~24)."""
    item = json.dumps(shape, ensure_ascii=False).encode() + b","
    head = b'{"op": "result", "t": "' + ("\U0001f600" if astral else "a").encode() + b'", "v": ['
    body = head + item * max(1, (size - len(head)) // len(item)) + b"0]}"
    peak, result = _received(body)
    assert peak <= PER_BYTE * len(body) + PER_VALUE * protocol.MAX_VALUES, (peak, len(body))
    _, values = protocol.shape(body)
    if values > protocol.MAX_VALUES:
        assert isinstance(result, ProtocolError) and "values" in str(result)
    else:
        assert result == json.loads(body)


def test_a_message_of_empty_objects_is_refused_before_parsing():
    """The attacker's message (``{}`` repeated to 1 MiB here, 8 MiB there) is refused by
    the scan; the scan holds a slice, not the message, in pieces."""
    body = b'{"op": "result", "violations": [' + b"{}," * (1 << 18) + b"{}]}"
    peak, result = _received(body)
    assert isinstance(result, ProtocolError), result
    assert str(result) == f"a message of more than {protocol.MAX_VALUES} values"
    assert peak <= 3 * len(body), peak


def test_the_value_count_is_an_upper_bound_and_stops_at_most():
    """Every value is counted (brackets, commas, colons in strings are not); the scan
    stops at the slice that goes over ``most``."""

    def values(value: Any) -> int:
        if isinstance(value, dict):
            return 1 + sum(1 + values(v) for v in value.values())
        if isinstance(value, list):
            return 1 + sum(values(v) for v in value)
        return 1

    @given(_SHAPES)
    def agree(value):
        body = json.dumps({"op": "x", "v": value}).encode()
        deepest, counted = protocol.shape(body, len(body) + 1)
        assert values(json.loads(body)) <= counted <= 2 * values(json.loads(body))
        assert deepest == protocol.depth(body)

    agree()
    assert protocol.shape(b'{"a": "[{,:\\"", "b": [1, 2]}') == (2, 7)
    many = b"[" + b"0," * (4 * protocol._SCAN_CHUNK) + b"0]"
    assert protocol.shape(many, 10)[1] <= protocol._SCAN_CHUNK + 1
    assert protocol.shape(many, len(many) + 1)[1] == 4 * protocol._SCAN_CHUNK + 2


#: One message of ~8 MiB of ``{}`` from inside the sandbox (the attacker's reproduction).
AMPLIFY = r"""
import socket, struct, sys
fd = int(sys.argv[-1])
channel = socket.socket(fileno=fd)
head = b'{"op": "result", "kind": "text", "text": "", "violations": ['
body = head + b"{}," * (8 * 1024 * 1024 // 3 - 40) + b"{}]}"
channel.sendall(struct.pack("!I", len(body)) + body)
channel.detach()
import time
time.sleep(5)
"""


def _rss() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.django_db
def test_a_sandboxed_plugins_message_of_empty_objects_fails_its_call_cheaply(probe, settings):
    """From a real plugin process: the site's RSS while it reads the 8 MiB message grows
    by a few times the message at most (it was 213 MiB), and the call fails with
    ``plugin_protocol_error``."""
    from django_webfetch.plugins.runtime.host import RuntimeFailure

    settings.WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES = 1 << 22
    baseline = _rss()
    done: dict[str, Any] = {}

    def work() -> None:
        try:
            done["outcome"] = probe(AMPLIFY)
        except RuntimeFailure as exc:
            done["outcome"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    seen = [baseline]
    while thread.is_alive():
        seen.append(_rss())
        time.sleep(0.02)
    thread.join()
    assert max(seen) - baseline <= 4 * (9 << 20), ((max(seen) - baseline) >> 20, done)
    outcome = done["outcome"]
    assert isinstance(outcome, RuntimeFailure), outcome
    assert outcome.code == "plugin_protocol_error", outcome


# -- finding 5: socket buffers -----------------------------------------------------------

#: The attacker's hoard, made to go on past each refusal: raise SO_SNDBUF, make socketpairs
#: until refused, fill both directions, then put filled sockets in flight (SCM_RIGHTS over
#: a socket of its own) and close them to make room for more; report what it got.
HOARD = r"""
import asyncio, errno, json, socket, sys
asyncio.run(asyncio.sleep(0))  # why socketpair stays: asyncio's self-pipe
chunk = b"x" * 65536
kept, queued, refusals = [], 0, {}
def note(what, exc):
    refusals[what] = errno.errorcode.get(exc.errno, str(exc.errno))
def fill(s):
    global queued
    s.setblocking(False)
    while True:
        try:
            queued += s.send(chunk)
        except OSError:
            return
try:
    carrier = socket.socketpair()
except OSError as exc:
    note("carrier", exc)
    carrier = None
for _ in range(200):
    try:
        a, b = socket.socketpair()
    except OSError as exc:
        note("socketpair", exc)
        break
    for s in (a, b):
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
        except OSError as exc:
            note("setsockopt", exc)
        fill(s)
    if carrier is None:
        kept += [a, b]
        continue
    try:
        socket.send_fds(carrier[0], [b"f"], [a.fileno(), b.fileno()])
    except OSError as exc:
        note("in_flight", exc)
        kept += [a, b]
        continue
    a.close()
    b.close()
for kind in (socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
    try:
        socket.socketpair(socket.AF_UNIX, kind)
        refusals[str(kind)] = "allowed"
    except OSError as exc:
        note(str(kind), exc)
sys.modules["__hoard__"] = (carrier, kept)
result = json.dumps({"queued": queued, "refusals": refusals})
"""


def _mem_available() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable")


def _open_files(pids: list[int]) -> dict[int, int]:
    found = {}
    for pid in pids:
        try:
            found[pid] = len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:
            continue
    return found


@pytest.mark.django_db
def test_socket_buffers_a_plugin_can_fill_stay_small(probe, settings):
    """From inside: ``setsockopt`` fails with EPERM, socketpairs stop at the descriptor
    limit, no socket can be put in flight (``sendmsg`` is refused: EPERM, issue 30 finding
    8, tests/plugins/test_pooled_process_descriptors_and_threads.py), and datagram/seqpacket
    socketpairs are refused; an asyncio event loop (a stream socketpair of its own) still runs.
    From the host: the process that filled those buffers (they were ~1 GiB under 128 MiB) holds more
    descriptors than when it got ready, so the pool does not keep it: its buffers go with it
    (test_shared_package_names.py)."""
    from django_webfetch.plugins.runtime.host import idle_processes

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 128 << 20
    outcome = probe(HOARD)
    report = json.loads(json.loads(outcome.text)["result"])
    assert idle_processes() == 0, outcome
    assert report["refusals"]["setsockopt"] == "EPERM", report
    assert report["refusals"]["socketpair"] == "EMFILE", report
    assert report["refusals"]["in_flight"] == "EPERM", report
    assert report["refusals"][str(int(socket.SOCK_DGRAM))] == "EPERM", report
    assert report["refusals"][str(int(socket.SOCK_SEQPACKET))] == "EPERM", report
    # Default-sized buffers (wmem_default, 208 KiB here) on at most 2 x MAX_FILES sockets.
    assert report["queued"] <= 2 * guest.MAX_FILES * (512 << 10), report


def test_setsockopt_is_not_in_the_allow_list_and_socketpair_is_stream_only():
    allowed = {name for _why, names in bubblewrap.ALLOWED for name in names}
    assert "setsockopt" not in allowed
    assert "setsockopt" not in bubblewrap.CONDITIONAL
    assert "stream" in bubblewrap.CONDITIONAL["socketpair"]
