"""A lease's holder named by its process (``runs.durable``, issue 33 item 6): a sweep on
the same machine knows a dead holder at once, and never takes a live one's work."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from django_webfetch.runs.durable import (
    holder_gone,
    lease_lost,
    local_marker,
    process_identity,
    worker_label,
)


def _label_of(process: subprocess.Popen[bytes]) -> str:
    """The label the child process gives itself (its own ``worker_label``)."""
    assert process.stdout is not None
    return process.stdout.readline().decode().strip()


def _child(*code: str) -> subprocess.Popen[bytes]:
    program = "; ".join(
        (
            "import django",
            "django.setup()",
            "from django_webfetch.runs.durable import worker_label",
            "print(worker_label('child'), flush=True)",
            *code,
        )
    )
    return subprocess.Popen(
        [sys.executable, "-c", program],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd(), "DJANGO_SETTINGS_MODULE": "tests.settings"},
    )


def test_this_process_is_not_gone():
    label = worker_label("in-process")
    assert label.startswith(f"in-process:{os.getpid()}~")
    assert label.endswith(process_identity())
    assert local_marker() is not None and local_marker() in label
    assert not holder_gone(label)


def test_a_live_child_is_not_gone_an_exited_one_is():
    child = _child("import time", "time.sleep(600)")
    label = _label_of(child)
    assert not holder_gone(label)
    child.kill()
    # Dead and not reaped (WNOWAIT): a zombie; its work is not going on.
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    assert holder_gone(label)
    child.wait()
    child.stdout.close()
    assert holder_gone(label)  # and once reaped, its PID names nobody


def test_a_pid_taken_by_another_process_is_gone():
    """The label's PID is alive but started at another time: a reused PID."""
    label = worker_label("x")
    head, identity = label.rsplit("~", 1)
    boot, namespace, start = identity.split(".")
    assert holder_gone(f"{head}~{boot}.{namespace}.{int(start) + 1}")


def test_another_machine_or_pid_namespace_is_never_judged():
    head, identity = worker_label("x").rsplit("~", 1)
    boot, namespace, start = identity.split(".")
    other_boot = "0" * 8 if boot != "0" * 8 else "1" * 8
    dead_pid = head.rsplit(":", 1)[0] + ":999999999"
    assert not holder_gone(f"{dead_pid}~{other_boot}.{namespace}.{start}")
    assert not holder_gone(f"{dead_pid}~{boot}.{int(namespace) + 1}.{start}")
    # Labels without an identity (older rows, other writers) are judged by the lease.
    assert not holder_gone("celery@host:12345")
    assert not holder_gone("")


def test_a_long_name_keeps_the_identity():
    label = worker_label("w" * 500)
    assert len(label) == 200
    assert label.endswith(process_identity())
    assert not holder_gone(label)


def test_a_lease_is_lost_when_it_ran_out_or_its_holder_died():
    from datetime import timedelta

    from django.utils import timezone

    later = timezone.now() + timedelta(minutes=5)
    child = _child()
    dead = _label_of(child)
    child.wait()
    child.stdout.close()
    assert lease_lost(later, dead)
    assert not lease_lost(later, worker_label())
    assert lease_lost(timezone.now() - timedelta(seconds=1), worker_label())
    assert not lease_lost(None, dead)  # no lease taken: nothing to lose


@given(st.text(max_size=300))
def test_any_label_is_read_without_error_and_never_our_own_death(text):
    assert holder_gone(text) in (True, False)
    # Whatever a name holds, a label of this live process is never judged dead.
    assert not holder_gone(worker_label(text))
