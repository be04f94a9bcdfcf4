"""The out-of-process plugin runtime (issue 23, docs/plugins.rst "The plugin runtime").

Everything runs for real: plugin processes spawned by the host, their seccomp filter and
Landlock ruleset installed by the kernel, the RPC over the socketpair, the host-owned
client against the network-namespace lab.  What a plugin reaches is observed from outside
it: the lab servers' accept logs, the lab DNS server's queries, UDP listeners on the
addresses it targets, and a packet capture on the lab's loopback.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import socket
import struct
import sys
import time

import pytest

from django_webfetch.models import EgressEvent
from django_webfetch.plugins import services
from django_webfetch.plugins.runtime.host import capabilities
from django_webfetch.tools import ToolContext, run_tool
from tests.settle import settled_call

pytestmark = pytest.mark.django_db

HOSTILE_SITE = os.path.join(os.path.dirname(__file__), "hostile_site")
HOSTILE_PACKAGE = os.path.join(HOSTILE_SITE, "webfetch_hostile_plugin")
UDP_PORT = 47123  # webfetch_hostile_plugin.UDP_PORT
APPROVED = ToolContext(approved=True, call_id="runtime")
ETH_P_ALL = 0x0003


def run(name, user, **arguments):
    return run_tool(name, arguments, user=user, context=APPROVED)


def payload(result):
    """The JSON a plugin returned, out of its untrusted-content fence."""
    assert result.ok, result
    match = re.search(r"^[\[{].*[\]}]$", result.content, re.M | re.S)
    assert match, result.content
    return json.loads(match.group(0))


class LoopbackCapture:
    """Every frame on the lab's ``lo`` (an ``AF_PACKET`` socket of this test process)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind(("lo", 0))
        self.sock.setblocking(False)

    def addresses(self) -> list[tuple[str, str]]:
        """(source, destination) of the IP packets seen since the last call, loopback
        (127/8, ::1) left out: the lab's addresses are all others."""
        seen = []
        while True:
            try:
                frame = self.sock.recv(65535)
            except BlockingIOError:
                return seen
            kind = struct.unpack("!H", frame[12:14])[0]
            if kind == 0x0800:
                pair = (socket.inet_ntoa(frame[26:30]), socket.inet_ntoa(frame[30:34]))
            elif kind == 0x86DD:
                pair = (
                    socket.inet_ntop(socket.AF_INET6, frame[22:38]),
                    socket.inet_ntop(socket.AF_INET6, frame[38:54]),
                )
            else:
                seen.append(("?", f"ethertype {kind:#x}"))
                continue
            if not all(a.startswith("127.") or a == "::1" for a in pair):
                seen.append(pair)

    def close(self) -> None:
        self.sock.close()


#: TCP states that still send frames (every one but LISTEN and TIME_WAIT).
_LIVE_TCP = {"01", "02", "03", "04", "05", "07", "08", "09", "0B"}


def _live_lab_connections() -> list[str]:
    """This namespace's TCP sockets on a lab address (not loopback) that may still send a
    frame: an earlier test's request that is still being served or closed."""
    live = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                rows = lines.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state = fields[1], fields[3]
            address = local.split(":")[0]
            loopback = address in ("0100007F", "00000000000000000000000001000000")
            if state in _LIVE_TCP and not loopback:
                live.append(row)
    return live


def _quiet_lab_connections(limit: float = 30.0) -> None:
    """Waits (a far safety net: ``limit``) until no connection on a lab address is live."""
    deadline = time.monotonic() + limit
    while _live_lab_connections() and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def capture(lab_session):
    # An earlier test's request to the lab may still be served: a lab handler that writes
    # on a timer (``/slow``, ``/slow-headers``, ``/endless``) learns that its client left
    # only at its next write, up to a second later.  (ci66's cause, a plugin call's request
    # to ``/late`` outliving the call, is gone: decision 0066,
    # tests/plugins/test_a_call_ends_its_requests.py.)  Every request the lab has seen
    # ends first, and its connection's last frames are dropped with whatever came before.
    _quiet_lab_connections()
    capture = LoopbackCapture()
    capture.addresses()  # drop whatever came before
    yield capture
    capture.close()


@pytest.fixture
def udp_listeners(lab):
    listeners = []
    for address in (lab.PRIVATE[0], lab.PUBLIC_V4[0]):
        listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        listener.bind((address, UDP_PORT))
        listener.setblocking(False)
        listeners.append(listener)

    def received():
        got = []
        for listener in listeners:
            with contextlib.suppress(BlockingIOError):
                got.append(listener.recvfrom(2048))
        return got

    yield received
    for listener in listeners:
        listener.close()


@pytest.fixture
def hostile(monkeypatch, lab_settings, group_factory):
    """The hostile plugin installed (its site directory on sys.path), never imported here."""
    from django_webfetch.plugins import registry
    from django_webfetch.tools import default_registry

    monkeypatch.syspath_prepend(HOSTILE_SITE)
    lab_settings.dns.set("granted.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    group_factory("hostile", scope="external_filtered", enabled=True)
    registry.reset()
    default_registry.reset()
    yield lab_settings
    registry.reset()
    default_registry.reset()
    assert "webfetch_hostile_plugin" not in sys.modules


@pytest.fixture
def editor_user(user_factory):
    return user_factory(staff=True)


def _process_mark_here():
    import webfetch_example_plugin

    return webfetch_example_plugin._PROCESS_MARK


def _sandboxes_here():
    """bwrap processes below this test process."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    head, _, rest = fh.read().rpartition(b")")
                if int(rest.split()[1]) == os.getpid() and head.endswith(b"(bwrap"):
                    found.append(int(name))
            except (OSError, IndexError, ValueError):
                continue
    return found


needs_isolation = pytest.mark.skipif(
    not capabilities().get("isolated"), reason="this kernel cannot isolate plugin processes"
)


@needs_isolation
def test_a_hostile_plugin_reaches_nothing_at_import_or_from_a_tool(
    hostile, capture, udp_listeners, editor_user
):
    lab = hostile
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.client import PluginHttp
    from django_webfetch.plugins.runtime.host import execute

    instance = services.install("hostile")  # reads the manifest: an import, in a process
    # Through the runner: the call is refused for what it tried, and that is on record.
    result = run("hostile_report", editor_user)  # a new process: an import, then the tool
    assert result.meta == {"reason": "unguarded_network"}
    assert EgressEvent.objects.filter(
        plugin_instance=instance, decision="denied", reason="unguarded_network"
    ).exists()
    # What each attempt got, asked of the runtime directly (the runner above keeps the
    # tool's answer from the model once it tried something).
    http = PluginHttp(instance.pk, group="hostile", tool="hostile_report")
    call = {
        "tool": "hostile_report",
        "arguments": {},
        "config": {},
        "plugin": "hostile",
        "alias": instance.alias,
        "reference": instance.reference,
    }
    reported = execute(registry.origin("hostile"), ("report", instance.pk), call, http)
    assert reported.kind == "json"
    report = json.loads(reported.text)

    # Nothing reached anyone: no connection accepted, no DNS query, no datagram, no frame.
    assert lab.accepts() == []
    assert lab.dns.queries == []
    assert udp_listeners() == []
    assert capture.addresses() == []

    for phase in ("import", "tool"):
        found = report[phase]
        refused = {k: v for k, v in found.items() if k not in ("environment", "scratch_write")}
        assert len(refused) == 29
        for name, outcome in refused.items():
            assert outcome.startswith("refused"), (phase, name, outcome)
        # The kernel's filter, not the audit hook: the calls that go past Python entirely
        # get EPERM from seccomp.
        for name in (
            "ctypes_socket_connect",
            "ctypes_syscall",
            "thread_ctypes",
            "io_uring",
            "packet",
            "netlink",
            "unix",
            "socketpair_inet",
            "fork",
            "subprocess",
            "posix_spawn",
            "multiprocessing_fork",
            "multiprocessing_spawn",
        ):
            assert found[name] == "refused: PermissionError errno=1", (phase, name)
        # In its own PID namespace no host process has a number: nothing to signal or read.
        assert found["signal_host"] == "refused: ProcessLookupError errno=3", phase
        assert found["read_host_environment"] in (
            "refused: FileNotFoundError errno=2",
            "refused: PermissionError errno=13",
        ), phase
        # Nothing of the host's environment; the scratch directory is writable.
        assert set(found["environment"].split(",")) <= {"", "LC_CTYPE"}
        assert found["scratch_write"] == "wrote"
        if capabilities().get("landlock"):
            assert found["write_tmp"] == "refused: PermissionError errno=13", phase
        # Not in its mount view at all, and what is there is read-only.
        assert found["read_settings"] == "refused: FileNotFoundError errno=2", phase
        assert found["write_package"] in (
            "refused: OSError errno=30",
            "refused: PermissionError errno=13",
        ), phase
    assert not os.path.exists(os.path.join(HOSTILE_PACKAGE, "planted.py"))
    assert glob.glob("/tmp/webfetch-hostile-*") == []

    # The same plugin's granted request, through its http object, reaches the lab host.
    # Asked of the runtime in a process of its own: a new process's first call carries what
    # its import tried (and the runner refuses that call), and whether the runner's warm
    # process is reused depends on the machine's load (a process with a thread still
    # leaving the kernel is recycled), so the runner is not the place to ask.
    fetch_call = {**call, "tool": "hostile_fetch"}
    fetch_call["arguments"] = {"url": "http://granted.lab.example/plain"}
    fetch_http = PluginHttp(instance.pk, group="hostile", tool="hostile_fetch")
    fetched = execute(registry.origin("hostile"), ("fetch", instance.pk), fetch_call, fetch_http)
    assert fetched.kind == "json", fetched
    assert json.loads(fetched.text)["status"] == 200
    # Its only attempts on record are its import's, the same as the report process's.
    assert fetched.violations
    assert set(fetched.violations) <= set(reported.violations)
    assert [r.host for r in lab.requests] == ["granted.lab.example"]
    assert (lab.PUBLIC_V4[0], lab.PUBLIC_V4[0]) in capture.addresses()  # the capture sees
    assert EgressEvent.objects.filter(plugin_instance=instance, decision="allowed").exists()


@needs_isolation
def test_a_plugin_runs_in_its_own_process_with_only_its_instance(plugin_lab, editor_user):
    instance = services.install("example")
    instance.config = {"base": "https://granted.lab.example/"}
    instance.secret_config = {"token": "s3cret"}
    instance.save()
    seen = payload(run("example_whoami", editor_user))
    # PID 1 of its own PID namespace: no host process has a number there.
    assert seen["pid"] == 1
    assert seen["process"] != _process_mark_here()
    assert seen["environment"] in ([], ["LC_CTYPE"])
    assert seen["django_settings"] == "not configured"
    assert seen["config"] == {"base": "https://granted.lab.example/", "token": "s3cret"}
    assert os.path.basename(seen["cwd"]).startswith(f"webfetch-plugin-{instance.pk}-")
    # A warm process serves the next call of the same instance ...
    assert payload(run("example_whoami", editor_user))["process"] == seen["process"]
    # ... and never another instance's.
    other = services.bind("example", alias="other", egress="none")
    other_seen = payload(
        run_tool(
            "example_whoami",
            {},
            user=editor_user,
            context=ToolContext(approved=True, call_id="other", plugin_instance=other),
        )
    )
    assert other_seen["process"] != seen["process"]
    assert "token" not in other_seen["config"]


@needs_isolation
def test_a_forked_host_leaves_its_parents_processes_alone(plugin_lab, editor_user):
    """Celery's prefork pool forks the worker: the child starts its own plugin processes
    and never uses or kills the parent's."""
    from django_webfetch.plugins.runtime import host

    services.install("example")
    warm = payload(run("example_whoami", editor_user))["process"]
    assert host.idle_processes() == 1
    child = os.fork()
    if child == 0:  # pragma: no cover (the child reports through its exit status)
        os._exit(0 if host.idle_processes() == 0 else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert payload(run("example_whoami", editor_user))["process"] == warm


@needs_isolation
@pytest.mark.parametrize(
    ("how", "code"),
    [
        ("sleep", "plugin_timeout"),
        ("spin", "plugin_limit"),
        ("memory", "plugin_limit"),
        ("output", "plugin_limit"),
        ("crash", "plugin_crashed"),
        ("segfault", "plugin_crashed"),
    ],
)
def test_a_misbehaving_plugin_fails_its_call_and_the_host_goes_on(
    plugin_lab, editor_user, settings, how, code
):
    # Only the sleeper meets the wall time: the others must hit their own limit first,
    # however loaded the machine is.
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 2 if how == "sleep" else 120
    settings.WEBFETCH_PLUGIN_CPU_SECONDS = 0.5
    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 512 << 20
    settings.WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES = 4096
    services.install("example")
    first = payload(run("example_whoami", editor_user))["process"]
    result = run("example_misbehave", editor_user, how=how)
    assert result.error == code
    assert "plugin" in result.content
    # The process that misbehaved is gone (no sandbox is left below this process); the
    # next call gets a fresh one.
    from django_webfetch.plugins.runtime import host

    assert host.idle_processes() == 0
    assert _sandboxes_here() == []
    assert payload(run("example_whoami", editor_user))["process"] != first


@needs_isolation
def test_requests_per_call_are_bounded(plugin_lab, editor_user, settings):
    settings.WEBFETCH_PLUGIN_MAX_REQUESTS = 3
    services.install("example")
    result = run(
        "example_misbehave", editor_user, how="requests", url="http://granted.lab.example/plain"
    )
    assert result.error == "plugin_limit"
    assert len(plugin_lab.requests) == 3


@needs_isolation
def test_a_plugin_that_stops_reading_cannot_hold_the_host(plugin_lab, editor_user, settings):
    """Answers of 1 MB to requests the plugin never reads fill the socketpair: the host's
    send gives up at the call's wall time."""
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 3
    services.install("example")
    result = run(
        "example_misbehave",
        editor_user,
        how="flood",
        url="http://granted.lab.example/bytes/1000000",
    )
    assert result.error == "plugin_timeout"


@needs_isolation
def test_a_plugins_own_exit_is_a_failed_call_not_a_dead_process(plugin_lab, editor_user):
    services.install("example")
    first = payload(run("example_whoami", editor_user))["process"]
    assert run("example_misbehave", editor_user, how="exit").error == "plugin_error"
    assert payload(run("example_whoami", editor_user))["process"] == first


@needs_isolation
def test_what_a_plugin_reports_cannot_forge_a_log_line(plugin_lab, editor_user, caplog):
    services.install("example")
    with caplog.at_level("WARNING", logger="django_webfetch.plugins"):
        result = run("example_misbehave", editor_user, how="forged_name")
    assert result.error == "plugin_error"
    messages = [record.getMessage() for record in caplog.records]
    assert any("Boom?2099" in message for message in messages)
    assert not any("\n" in message for message in messages)


@needs_isolation
def test_a_crashed_call_ends_failed_through_the_runs(plugin_lab, editor_user):
    from django_webfetch import runs
    from django_webfetch.models import HostListEntry, ToolGroup

    instance = services.install("example")
    group = ToolGroup.objects.get(slug=instance.default_group())
    ToolGroup.objects.filter(pk=group.pk).update(skip_approval_with_allowlist=True)
    HostListEntry.objects.create(group=group, list="allow", value="granted.lab.example")
    call = settled_call(runs.request_call("example_misbehave", {"how": "crash"}, user=editor_user))
    assert call.state == "failed"
    assert call.result["error"] == "plugin_crashed"


_WITHOUT_SECCOMP = r"""
import errno, json, os, sys

import pyseccomp as sc

# This process and its children now run like a container whose profile refuses seccomp.
rules = sc.SyscallFilter(sc.ALLOW)
rules.add_rule(sc.ERRNO(errno.ENOSYS), "seccomp")
rules.add_rule(sc.ERRNO(errno.EINVAL), "prctl", sc.Arg(0, sc.EQ, 22))  # PR_SET_SECCOMP
rules.load()

sys.path.insert(0, sys.argv[1])
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django

django.setup()
from django.contrib.auth import get_user_model

from tests import dbshare
dbshare.migrate()  # the run's migrated copy when there is one
from django_webfetch.models import ToolGroup
from django_webfetch.plugins import services
from django_webfetch.plugins.runtime.host import capabilities
from django_webfetch.tools import ToolContext, run_tool

ToolGroup.objects.create(slug="example", scope="external_filtered", enabled=True)
user = get_user_model().objects.create(username="editor", is_staff=True)
from django_webfetch.plugins import registry
from django_webfetch.plugins.models import PluginInstance
from django_webfetch.tools import default_registry

# Nothing of the package is imported to read its manifest: it is refused, with the reason.
problems = registry.problems()
imported = "webfetch_example_plugin" in sys.modules
# The operator marks an instance trusted (an explicit, warned choice): only then is the
# package imported here; an untrusted instance of it still does not run.
trusted_instance = PluginInstance.objects.create(plugin="example", alias="example", trusted=True)
untrusted_instance = PluginInstance.objects.create(plugin="example", alias="other")
registry.reset()
default_registry.reset()
def call(instance):
    context = ToolContext(approved=True, call_id="c", plugin_instance=instance)
    return run_tool("example_whoami", {}, user=user, context=context)
trusted = call(trusted_instance)
untrusted = call(untrusted_instance)
print(json.dumps({
    "capabilities": capabilities(),
    "problems": problems,
    "imported_before_trust": imported,
    "untrusted": untrusted.error,
    "trusted": trusted.error,
    "in_process": f'"pid": {os.getpid()}' in trusted.content,
    "list": sorted(s.isolation for s in services.list_instances()),
}))
"""


@pytest.mark.long  # tens of seconds: started first (tests/conftest.py)
def test_without_seccomp_untrusted_plugins_do_not_run(tmp_path):
    """A host where seccomp cannot be installed (a container profile that refuses it, made
    here with a real seccomp filter on a child process): isolation is reported unavailable,
    an untrusted instance's call fails ``plugin_isolation_unavailable``, a trusted one runs
    in-process."""
    import subprocess

    import django_webfetch

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    site = os.path.join(os.path.dirname(__file__), "site")
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_SECCOMP, site],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["capabilities"]["isolated"] is False
    assert found["capabilities"]["reason"] == "seccomp_unavailable"
    assert found["imported_before_trust"] is False
    assert any("(plugin_isolation_unavailable)" in p for p in found["problems"])
    assert found["untrusted"] == "plugin_isolation_unavailable"
    assert found["trusted"] is None and found["in_process"]
    assert found["list"] == [
        "none: untrusted plugins do not run here (seccomp_unavailable: the kernel refuses "
        "seccomp filters)",
        "trusted: in this process, audit hook only (check W032)",
    ]
