"""Issue 30, round 24: an outside attack on the plugin sandbox.

Each test failed on the code it was written against (branch s13-attack24, c98892b); its
docstring keeps the severity, the route and the gain.  Observed from the host side: the
lock file's bytes from a descriptor of the test's own, and the codeprobe plugin
(``tests/plugins/probe_site``) reading a bound directory in its real sandbox.
"""

from __future__ import annotations

import os

import pytest

from django_webfetch.plugins.runtime import identity

pytestmark = pytest.mark.django_db

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the lock file is root's")

#: Uids of this process's own (the locks are the machine's).
_BASE = 7_500_000 + (os.getpid() % 10_000) * 100


def _free(uids: list[int]) -> list[int]:
    """Which of ``uids`` no one holds: their byte taken (and given back) from a descriptor
    of its own, as another host process would."""
    fd = identity._open_lock()
    try:
        free = []
        for uid in uids:
            if identity._lock(fd, uid):
                identity._unlock(fd, uid)
                free.append(uid)
        return free
    finally:
        os.close(fd)


@as_root
def test_a_child_forked_during_a_call_keeps_its_uid_locked_after_the_host_lets_it_go():
    """Severity: Low (a denial of service: the uid range runs dry).

    Route: a plugin process's ``OuterIdentity`` holds the uid's lock on its own
    descriptor of the lock file.  At a fork, ``host._pool.forget`` closes the child's
    copies of the *idle* processes' descriptors and ``identity._stock.forget`` those of
    the stock, but a process checked out of the pool for a call in flight (another
    thread's) is in neither: the child inherits that descriptor, the same open file
    description, and with it the OFD lock.  When the call ends the host releases the uid
    to its stock; once the stock is full it unlocks it "for anyone to take" (decision
    0063) by closing its descriptor, but the child's copy keeps the lock for as long as
    the child lives (a Celery prefork child, a ``multiprocessing`` fork made in a request
    thread: without ``exec``, ``O_CLOEXEC`` does not close it).  Gain: every fork made
    while calls are in flight takes those uids out of the machine's range for the
    child's lifetime; with a small ``WEBFETCH_PLUGIN_UID_RANGE`` no plugin process can
    start (``uid_unavailable``).  Expected: a forked child holds no lock of a uid it
    does not use (each identity's descriptor closed in the child, as the pool and the
    stock do), so the uid the host lets go is free."""
    drained = [identity.acquire(uid, 1) for uid in identity.stocked()]
    in_flight = identity.acquire(_BASE, 1)  # a plugin process's, its call in flight
    others: list[identity.OuterIdentity] = []
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked host: it runs on, without exec
        try:
            os.close(write)
            os.read(read, 1)
        finally:
            os._exit(0)
    os.close(read)
    try:
        in_flight.release()  # the call ended, its process gone: into the stock
        others = [
            identity.acquire(_BASE + 1, identity.STOCK_SIZE) for _ in range(identity.STOCK_SIZE)
        ]
        for one in others:
            one.release()  # the stock is full: its oldest (``_BASE``) is unlocked
        assert _BASE not in identity.stocked()
        assert _free([_BASE]) == [_BASE], "the forked child holds the uid's lock"
    finally:
        os.close(write)
        os.waitpid(pid, 0)
        for one in [*drained, *others]:
            one.release()
