"""A plugin call's in-flight egress ends with the call (issue 30; decision 0066).

The host performs each request a plugin asks for (``runtime.host._perform``) while the
call runs.  However the call ends (its CPU bound, its wall bound, its process crashed or
killed), the request the host started for it ends with it: its connection is shut at
once (``_Watch.end``, the one place a call's end passes through), the lab's server sees
the client close before it answered, no connection on a lab address is left live, and
the failed hop is on record as ``plugin_call_ended``.

Every request goes to the lab's ``/late``, which stays silent for 4.5 s, within the
request's own bounds (5 s of silence per read, 15 s in all, the call's 20 s of wall time),
so a request not ended with its call is answered in full.  The call is ended only once the
lab has seen the request (a condition wait), from the test's side: a file the plugin waits
for in its ``/tmp`` (CPU bound, crash) or ``SIGKILL``.  Every wait is on a condition with a
far safety net.

A lookup under way when the call ends ends too (decision 0066, amended for round 27): no
DNS question is asked for a call that ended.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from django_webfetch.net.resolve import DnsResolver
from tests.plugins.test_runtime import _live_lab_connections
from tests.plugins.test_sandbox_kernel_memory_cpu_inodes_and_bytecode import _warm_pid
from tests.settle import SAFETY_NET

pytestmark = pytest.mark.django_db

#: A call whose thread waits for ``/tmp/go`` (written by the test once the lab has seen the
#: request), then does ``{then}``, while its main thread waits on its request to ``/late``.
_CALL = """\
import hashlib, os, threading, time
def then():
    while not os.path.exists('/tmp/go'):
        time.sleep(0.01)
{then}
threading.Thread(target=then, daemon=True).start()
try:
    plugin.http.get('http://granted.lab.example/late?seconds=4.5', timeout=15)
except Exception:
    pass
result = 'answered'
"""

#: What the plugin's thread does once told, per way the call ends.
_THEN = {
    # Hashing releases the interpreter's lock: CPU past the call's 0.2 s bound at once.
    "cpu_bound": "    block = bytes(1 << 20)\n    while True:\n        hashlib.sha256(block)\n",
    "crash": "    os._exit(3)\n",
    "killed": "    pass\n",
    "wall_bound": "    pass\n",
}

#: The runtime's code for each way the call ends.
_CODES = {
    "cpu_bound": "plugin_limit",
    "crash": "plugin_crashed",
    "killed": "plugin_crashed",
    "wall_bound": "plugin_timeout",
}


def _late_request(lab: Any) -> Any:
    """The lab's record of the call's request, once the lab has seen it."""
    found = lab.wait_for(
        lambda: [r for r in lab.requests if r.path.startswith("/late")], SAFETY_NET
    )
    assert found, "the lab never saw the call's request"
    return found[0]


def _end_the_call(how: str, pid: int, lab: Any, failures: list[BaseException]) -> None:
    """Run by a thread of the test while the call runs: ends it once its request is in
    flight (the wall bound ends it by itself)."""
    try:
        _late_request(lab)
        if how == "killed":
            os.kill(pid, signal.SIGKILL)
        elif how != "wall_bound":
            # The host (root) writes into the plugin's private ``/tmp`` through its root.
            with open(f"/proc/{pid}/root/tmp/go", "w") as told:
                told.write("go")
    except BaseException as exc:  # reported by the test's own thread
        failures.append(exc)


@pytest.mark.parametrize("how", sorted(_THEN))
def test_the_request_of_a_call_ends_with_the_call(how, probe, lab_settings, settings):
    """The call ends (``how``) while the host performs its request: the lab's server sees
    the client close before it answered, no connection on a lab address stays live, and
    the request's failed hop is recorded ``plugin_call_ended`` against the instance."""
    from django_webfetch.models import EgressEvent
    from django_webfetch.plugins.runtime.host import RuntimeFailure, shutdown

    settings.WEBFETCH_PLUGIN_CPU_SECONDS = 0.2
    # The wall bound ends the call of ``wall_bound`` (long enough for its request to start
    # under load, shorter than the lab's silence), and no other one.
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 3 if how == "wall_bound" else 20
    settings.WEBFETCH_TIMEOUT = 15
    failures: list[BaseException] = []
    try:
        pid = _warm_pid(probe)
        ender = threading.Thread(
            target=_end_the_call, args=(how, pid, lab_settings, failures), daemon=True
        )
        ender.start()
        with pytest.raises(RuntimeFailure) as ended:
            probe(_CALL.format(then=_THEN[how]))
        ender.join(SAFETY_NET)
    finally:
        shutdown()
    assert not failures, failures
    assert ended.value.code == _CODES[how], ended.value
    request = _late_request(lab_settings)
    # The lab's handler ends when its client closes, or after its 4.5 s of silence with the
    # page sent: which one came first is what it records.
    assert request.done.wait(SAFETY_NET)
    assert request.aborted and request.bytes_sent == 0, request
    deadline = time.monotonic() + SAFETY_NET
    while _live_lab_connections() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _live_lab_connections() == []
    failed = EgressEvent.objects.filter(plugin_instance=probe.instance, decision="failed")
    assert list(failed.values_list("failure", flat=True)) == ["plugin_call_ended"]


#: A call whose request's name the lab's DNS never answers (the plugin's own slow
#: authoritative server, or a dropped packet: the resolver waits and asks again).
_DNS_CALL = """\
try:
    plugin.http.get('http://granted.lab.example/page', timeout=15)
except Exception:
    pass
result = 'answered'
"""


def test_a_call_that_ends_ends_the_dns_lookup_of_its_request(probe, lab_settings, settings):
    """The call ends (its process killed) while the host's lookup for its request waits on
    a nameserver that never answers, one of the usual two: the lookup ends with the call
    (its exchange's socket shut, decision 0066 amended for round 27), no DNS question is
    asked after the call ended, and the hop is recorded ``plugin_call_ended``.

    History: issue 30, round 27, finding 3 (the lookup went on asking, server after server,
    for the request's whole budget, after the plugin process was dead).
    """
    from django_webfetch.models import EgressEvent
    from django_webfetch.plugins.runtime.host import RuntimeFailure, shutdown

    lab = lab_settings
    settings.WEBFETCH_DNS_NAMESERVERS = (lab.DNS_V4, lab.DNS_V6)
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 20
    settings.WEBFETCH_TIMEOUT = 15
    failures: list[BaseException] = []
    killed: list[int] = []

    def asked() -> list[Any]:
        return [q for q in lab.dns.queries if q.name.startswith("granted.lab.example")]

    def end_the_call(pid: int) -> None:
        try:
            assert lab.wait_for(asked, SAFETY_NET), "no DNS question was asked"
            killed.append(len(asked()))
            os.kill(pid, signal.SIGKILL)
        except BaseException as exc:  # reported by the test's own thread
            failures.append(exc)

    try:
        pid = _warm_pid(probe)
        lab.dns.drop("granted.lab.example")
        ender = threading.Thread(target=end_the_call, args=(pid,), daemon=True)
        ender.start()
        with pytest.raises(RuntimeFailure) as ended:
            probe(_DNS_CALL)
        ender.join(SAFETY_NET)
    finally:
        shutdown()
    assert not failures, failures
    assert ended.value.code == "plugin_crashed", ended.value
    # The first exchange (A and AAAA to the first server) was asked while the call ran;
    # a question after it would be asked for a call whose process was already dead.
    lab.dns.set("marker.lab.example", a=[lab.PUBLIC_V4[0]])
    DnsResolver((lab.DNS_V4,)).resolve("marker.lab.example", timeout=SAFETY_NET)
    after = [(q.qtype, q.server) for q in asked()[2:]]
    assert killed and killed[0] <= 2, killed
    assert after == [], f"DNS questions asked after the call ended: {after}"
    hops = EgressEvent.objects.filter(plugin_instance=probe.instance)
    assert list(hops.values_list("failure", flat=True)) == ["plugin_call_ended"]
