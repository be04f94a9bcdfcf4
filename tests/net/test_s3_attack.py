"""s3 attack review: the async egress path against the sync one, as an outsider would try
it in the lab.  Each test states the behaviour both flavours must share; a failing test is
a finding (see the review report), not a flaky case."""

from __future__ import annotations

import asyncio
import os
import resource
import time

import pytest

from django_webfetch.net import EgressPolicy, ResolutionError, WebFetchError
from django_webfetch.net.guarded import guarded_async_client
from django_webfetch.net.resolve import DnsResolver

V4 = "11.0.0.10"


@pytest.fixture
def high_descriptors():
    """Push the process's next descriptors past 1024 (FD_SETSIZE), as a busy server with
    many open sockets (streams, a database pool, a Celery threads pool) would."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2048
    if soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip("cannot raise the descriptor limit here")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held = []
    try:
        base = os.open(os.devnull, os.O_RDONLY)
        held.append(base)
        while held[-1] < 1100:
            held.append(os.dup(base))
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.lab
def test_a_lookup_on_a_descriptor_above_fd_setsize_answers(lookup, lab, high_descriptors):
    """The DNS socket's descriptor is above 1023: the lookup answers (or fails closed with
    a ``ResolutionError``), whichever way it waits.  ``select.select`` cannot wait on such
    a descriptor (``ValueError``), ``anyio.wait_readable`` (epoll) can."""
    lab.dns.set("fd.lab.example", a=[V4])
    try:
        resolution = lookup(DnsResolver(lab.nameservers), "fd.lab.example", timeout=3)
    except WebFetchError:  # pragma: no cover - would be a fail-closed verdict, still ours
        raise
    assert [str(a) for a in resolution.addresses] == [V4]


@pytest.mark.lab
def test_a_guarded_fetch_on_a_descriptor_above_fd_setsize_is_ours(make_client, lab, high_descriptors):
    """The same through the guarded client: a response, or one of our errors on record,
    never a raw ``ValueError`` that no audit record names."""
    lab.dns.set("fd2.lab.example", a=[V4])
    events = []
    with make_client(lab.policy(), observer=events.append) as client:
        try:
            response = client.get(lab.url("fd2.lab.example", "/plain"))
        except WebFetchError:
            assert events and events[-1].decision in {"denied", "failed"}
        except Exception as exc:  # the finding: a foreign error, unrecorded
            pytest.fail(f"{type(exc).__name__} left the guarded client: {exc}; events {events}")
        else:
            assert response.status_code == 200
            assert [e.decision for e in events] == ["allowed", "fetched"]


@pytest.mark.lab
def test_a_request_cancelled_while_its_name_resolves_is_on_record(lab):
    """An async request cancelled during its DNS wait (an SDK call abandoned, the
    assistant's timeout) leaves an audit record, as one cancelled after the guard passed
    does (``failed``): a hop attempted is never unaudited."""
    lab.dns.drop("slowdns.lab.example")
    events = []

    async def scenario():
        async with guarded_async_client(lab.policy(), observer=events.append) as client:
            task = asyncio.create_task(client.get("http://slowdns.lab.example/plain"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    assert [e.decision for e in events] in (["failed"], ["denied"]), events


@pytest.mark.lab
def test_a_lookup_cancelled_mid_wait_closes_its_socket(lab):
    """Cancellation in the UDP wait leaves no DNS socket open."""
    lab.dns.drop("slowdns2.lab.example")

    def open_sockets() -> int:
        count = 0
        for fd in os.listdir("/proc/self/fd"):
            try:
                count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
            except FileNotFoundError:  # the listing's own descriptor, closed since
                continue
        return count

    async def scenario():
        before = open_sockets()
        task = asyncio.create_task(
            DnsResolver(lab.nameservers).resolve_async("slowdns2.lab.example", timeout=5)
        )
        await asyncio.sleep(0.2)
        assert open_sockets() == before + 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return before, open_sockets()

    before, after = asyncio.run(scenario())
    assert after == before


@pytest.mark.lab
def test_dns_deadline_holds_on_both_paths(lookup, lab):
    """A dropped name costs the budget, not more, on either path (counted as one failure)."""
    lab.dns.drop("slowdns3.lab.example")
    with pytest.raises(ResolutionError) as info:
        lookup(DnsResolver(lab.nameservers), "slowdns3.lab.example", timeout=0.4)
    assert info.value.failure == "dns_timeout"


_ = (EgressPolicy, time)
