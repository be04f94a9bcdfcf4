"""``identity.in_use`` reads the status of every process (issue 30, attack 8, finding 4):
a process tied to a uid by any one of its ids is seen, whoever owns its ``/proc/<pid>``,
and processes that end while the scan reads them neither raise nor count.  Real processes
with real ids (the suite runs as root)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

#: A process that takes the ids it is given (``setgroups``, ``setresgid``, ``setresuid``),
#: made dumpable again so that its ``/proc/<pid>`` belongs to its effective uid.
_TAKE_IDS = """
import ctypes, json, os, sys, time
ids = json.loads(sys.argv[1])
os.setgroups(ids["groups"])
os.setresgid(*ids["gid"])
os.setresuid(*ids["uid"])
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1
print("ready", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(
    "tie",
    ["real uid", "effective uid", "saved uid", "real gid", "effective gid", "saved gid", "group"],
)
def test_a_process_tied_to_the_uid_by_any_one_id_is_seen(tie):
    """Each id alone ties the process to ``U`` (every other id is another unprivileged
    ``X``): ``in_use(U)`` says so; ``in_use`` of a third uid does not."""
    import json

    from django_webfetch.plugins.runtime import identity

    uid, other = identity.DEFAULT_RANGE[0] + 999_980, identity.DEFAULT_RANGE[0] + 999_981
    ids = {"groups": [], "gid": [other] * 3, "uid": [other] * 3}
    where = {"real": 0, "effective": 1, "saved": 2}
    if tie == "group":
        ids["groups"] = [uid]
    else:
        position, kind = tie.split()
        ids[kind][where[position]] = uid
    child = subprocess.Popen(
        [sys.executable, "-c", _TAKE_IDS, json.dumps(ids)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert identity.in_use(uid), f"{tie} {uid} of process {child.pid} not seen"
        assert not identity.in_use(uid + 2)
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_processes_ending_while_the_scan_reads_them_neither_raise_nor_count():
    """Processes start and end throughout many scans (any may vanish between the listing
    of ``/proc`` and the read of its status): no scan raises, a uid no process holds is
    never in use, and the live one holding ``U`` is seen every time."""
    from django_webfetch.plugins.runtime import identity

    uid = identity.DEFAULT_RANGE[0] + 999_970
    holder = subprocess.Popen(
        [sys.executable, "-c", _TAKE_IDS, f'{{"groups": [], "gid": [{uid}, {uid}, {uid}], '
         f'"uid": [{uid}, {uid}, {uid}]}}'],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    stop = threading.Event()
    started = [0]

    def churn() -> None:
        while not stop.is_set():
            subprocess.run(["true"], check=True)
            started[0] += 1

    threads = [threading.Thread(target=churn) for _ in range(2)]
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        for thread in threads:
            thread.start()
        seen = [(identity.in_use(uid), identity.in_use(uid + 1)) for _ in range(200)]
        assert set(seen) == {(True, False)}
        assert started[0] > 0
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
