"""Issue 30, second attack (s4b), finding 2: overlapping ``WEBFETCH_PLUGIN_UID_RANGE``.

The byte a host locked to hold an outer uid was the uid's index in its own range, so two
sites on one machine (or one site whose range moved while old workers still run) whose
ranges overlap locked different bytes for the same uid, and both got it.  The byte locked
is now at the offset equal to the uid, whatever range the caller has.  Every acquire opens
its own open file description, so two acquires in this process conflict exactly as two host
processes do (``F_OFD_SETLK``); ``test_outer_uid.py::test_a_uid_is_held_once_across_processes``
shows the same lock across processes.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import settings as settings_h
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import identity

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lock file is root's")

#: A corner of uids no other test takes, and no other run of the suite on this machine: the
#: locks are the machine's (a fixed corner collided with a second run's same test).
BASE = 5_000_000 + (os.getpid() % 10_000) * 100


def test_two_uid_ranges_that_overlap_never_hand_out_the_same_uid():
    """The attack's case: a first host holds uid U (range (U, 1)); a second with range
    (U - 1, 2) must get U - 1, never U again; with U - 1 taken too, nothing."""
    first = identity.DEFAULT_RANGE[0] + identity.DEFAULT_RANGE[1] - 7  # a corner no one uses
    one = identity.acquire(first, 1)
    try:
        two = identity.acquire(first - 1, 2)
        try:
            assert (one.uid, two.uid) == (first, first - 1)
            with pytest.raises(identity.IdentityUnavailable):
                identity.acquire(first - 1, 2)
        finally:
            two.release()
    finally:
        one.release()


def test_the_lock_file_stays_empty_however_high_the_uid():
    """The lock is on the byte at offset uid, beyond the end of the file: no sparse file of
    2 GB is written, the file stays empty."""
    last = identity.DEFAULT_RANGE[0] + identity.DEFAULT_RANGE[1] - 1
    held = identity.acquire(last, 1)
    try:
        assert held.uid == last
        assert os.stat(identity.lock_path()).st_size == 0
    finally:
        held.release()


@settings_h(max_examples=40, deadline=None)
@given(
    a=st.tuples(st.integers(0, 40), st.integers(1, 24)),
    b=st.tuples(st.integers(0, 40), st.integers(1, 24)),
)
def test_any_two_ranges_share_no_uid_held_at_once(a, b):
    """Property: with every uid of range A held, range B (any placement, overlapping A or
    not) hands out only uids outside A, and none at all when B lies inside A."""
    first_a, count_a = BASE + a[0], a[1]
    first_b, count_b = BASE + b[0], b[1]
    held = [identity.acquire(first_a, count_a) for _ in range(count_a)]
    taken = {h.uid for h in held}
    got: list[identity.OuterIdentity] = []
    try:
        assert taken == set(range(first_a, first_a + count_a))
        free = set(range(first_b, first_b + count_b)) - taken
        for _ in range(len(free)):
            got.append(identity.acquire(first_b, count_b))
        assert {g.uid for g in got} == free
        with pytest.raises(identity.IdentityUnavailable):
            identity.acquire(first_b, count_b)
    finally:
        for one in held + got:
            one.release()
