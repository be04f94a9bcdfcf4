"""Issue 30: an untrusted plugin's process kept the site's identity and was fenced by a
list of forbidden calls.  Each test below reproduces one finding of the outside review and
asserts, on the host side, that it no longer reaches the host (docs/plugins.rst
"Containment").

Findings 1, 2, 5 and 6 run in a child process playing the site (its own session and UTS
namespace, so a finding that still works on a broken runtime kills or renames only that
child, never the test run or the machine); 3, 4 and the thread-death one run here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from django_webfetch.plugins import services
from tests.plugins.test_runtime import payload, run

pytestmark = pytest.mark.django_db

SITE = os.path.join(os.path.dirname(__file__), "site")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def descendants(root: int | None = None) -> list[int]:
    """Every process below ``root`` (this one by default), found from /proc."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(ppid, []).append(int(name))
    found, todo = [], [root or os.getpid()]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def memfd_bytes(pids: list[int]) -> int:
    """Bytes held in memfd files by the file descriptors of ``pids``."""
    held = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                if os.readlink(path).startswith("/memfd:"):
                    held += os.stat(path).st_blocks * 512
            except OSError:
                continue
    return held


# -- the site, played by a child process ---------------------------------------------------

_SITE = r"""
import ctypes, errno, json, os, socket, sys

config = json.loads(sys.argv[2])
os.environ.update(config.get("env") or {})
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
# Its own UTS namespace: a plugin that renames "the machine" renames only this child's view.
assert libc.unshare(0x04000000) == 0, "unshare(CLONE_NEWUTS)"
socket.sethostname("webfetch-site")
if config.get("cgroups"):
    # The test run's /sys is its network namespace's own, without the cgroup mounts: this
    # child (in a mount namespace of its own) mounts the v1 memory and pids hierarchies.
    assert libc.unshare(0x00020000) == 0, "unshare(CLONE_NEWNS)"
    def mount(source, target, fstype, options):
        if libc.mount(source.encode(), target.encode(), fstype.encode(), 0,
                      options.encode() if options else None) != 0:
            raise OSError(ctypes.get_errno(), f"mount {target}")
    mount("tmpfs", "/sys/fs/cgroup", "tmpfs", "")
    for name in ("memory", "pids"):
        os.mkdir(f"/sys/fs/cgroup/{name}")
        mount("cgroup", f"/sys/fs/cgroup/{name}", "cgroup", name)
def plugin_cgroups():
    return {
        os.path.join(top, name) for kind in ("memory", "pids")
        for top, dirs, _ in os.walk(f"/sys/fs/cgroup/{kind}")
        for name in dirs if name.startswith("webfetch-plugin-")
    }
cgroups_before = plugin_cgroups() if config.get("cgroups") else set()
if config.get("refuse"):
    # The missing kernel feature, simulated for this process and its children.
    import pyseccomp as sc

    rules = sc.SyscallFilter(sc.ALLOW)
    for name, code, *mask in config["refuse"]:
        conditions = [sc.Arg(0, sc.MASKED_EQ, mask[0], mask[0])] if mask else []
        rules.add_rule(sc.ERRNO(getattr(errno, code)), name, *conditions)
    rules.load()

sys.path.insert(0, sys.argv[1])
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django

django.setup()
from django.conf import settings

for name, value in (config.get("settings") or {}).items():
    setattr(settings, name, value)
from django.contrib.auth import get_user_model

from tests import dbshare
dbshare.migrate()  # the run's migrated copy when there is one
from django_webfetch.models import ToolGroup
from django_webfetch.plugins import registry, services
from django_webfetch.tools import ToolContext, run_tool


def observe():
    ioprio = libc.syscall(252, 1, 0)  # ioprio_get(IOPRIO_WHO_PROCESS, self)
    return {
        "policy": os.sched_getscheduler(0),
        "nice": os.getpriority(os.PRIO_PROCESS, 0),
        "group_nice": os.getpriority(os.PRIO_PGRP, 0),
        "affinity": sorted(os.sched_getaffinity(0)),
        "ioprio": ioprio,
        "hostname": socket.gethostname(),
    }


ToolGroup.objects.create(slug="example", scope="external_filtered", enabled=True)
user = get_user_model().objects.create(username="editor", is_staff=True)
report = {"before": observe()}
if config.get("probe"):
    instance = services.install("example")
    context = ToolContext(approved=True, call_id="c", plugin_instance=instance)
    result = run_tool(
        "example_probe",
        {"probe": config["probe"], "target": os.getpid()},
        user=user,
        context=context,
    )
    report["result"] = {"ok": result.ok, "error": result.error, "content": result.content}
    from django_webfetch.plugins.runtime.host import capabilities

    report["capabilities"] = capabilities()
else:
    from django_webfetch.plugins.runtime.host import capabilities

    report["capabilities"] = capabilities()
    registry.load()
    report["problems"] = registry.problems()
    from django.core import checks

    report["checks"] = sorted(m.id for m in checks.run_checks(tags=["security"]) if m.id)
    report["manifests"] = [m.name for m in registry.manifests()]
    report["list"] = [s.isolation for s in services.list_instances()]
if config.get("cgroups"):
    # Every plugin process ended (killed after the bomb, or closed): no cgroup is left.
    from django_webfetch.plugins.runtime.host import shutdown

    shutdown()
    report["cgroups_left"] = sorted(plugin_cgroups() - cgroups_before)
report["imported_here"] = sorted(m for m in sys.modules if m.startswith("webfetch_example"))
report["after"] = observe()
print(json.dumps(report))
"""


def site(**config):
    """Run the site child with ``config``; its report (it must end on its own)."""
    import django_webfetch

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    done = subprocess.run(
        [sys.executable, "-c", _SITE, SITE, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={**os.environ, "PYTHONPATH": f"{root}:{SITE}"},
        start_new_session=True,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


#: Landlock's calls fail as on a kernel without it (the documented fallback of main).
NO_LANDLOCK = [["landlock_create_ruleset", "ENOSYS"]]


def test_finding_1_sigio_cannot_signal_the_site_or_its_group():
    """F_SETOWN(-pgid) + F_SETSIG(SIGKILL) + O_ASYNC, then a write: on main the kernel
    killed the whole site group (this child ended with -9); now the plugin cannot name a
    host process at all."""
    report = site(probe="setown", refuse=NO_LANDLOCK)
    assert report["result"]["ok"], report["result"]
    assert report["before"] == report["after"]


def test_finding_2_scheduling_priority_affinity_ioprio_never_reach_the_site():
    report = site(probe="sched")
    assert report["result"]["ok"], report["result"]
    assert report["after"] == report["before"]


def test_finding_6_a_root_site_plugin_has_no_capabilities_and_no_hostname():
    assert os.getuid() == 0, "the site child must run as root for this finding"
    report = site(probe="hostname")
    assert report["result"]["ok"], report["result"]
    assert report["after"]["hostname"] == "webfetch-site"
    assert '"sethostname": "refused' in report["result"]["content"]


def test_finding_5_without_a_sandbox_nothing_of_the_package_runs_in_the_site():
    """seccomp refused to every process (a container profile): the package is never
    imported by the site to read its manifest, and the reason is on record."""
    report = site(refuse=[["seccomp", "ENOSYS"], ["prctl", "EINVAL"]])
    assert report["imported_here"] == []
    assert report["manifests"] == []
    assert any("plugin_isolation_unavailable" in p for p in report["problems"])


def test_finding_3_memory_outside_the_address_space_limit_is_refused(
    plugin_lab, editor_user, settings
):
    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 128 << 20
    services.install("example")
    report = payload(run("example_probe", editor_user, probe="memfd", size=256 << 20))
    # Held after the call, while the process idles in the pool: nothing.
    assert memfd_bytes(descendants()) == 0, report
    assert report["memfd"].startswith("refused"), report
    assert report["shared_anonymous"].startswith("refused"), report
    assert report["dev_shm"].startswith("refused"), report


def test_finding_4_a_thread_left_running_burns_nothing_after_its_call(plugin_lab, editor_user):
    services.install("example")
    assert payload(run("example_probe", editor_user, probe="thread")) == {"thread": "started"}
    before = cpu_ticks(descendants())
    time.sleep(1.0)
    burnt = cpu_ticks(descendants()) - before
    # A spinning thread would have used about a second (100 ticks); an idle pool nothing.
    assert burnt <= 0.2 * _CLK_TCK, burnt
    # And the next call runs in a process with no thread of the last one in it.
    assert payload(run("example_whoami", editor_user))["threads"] <= 2


def test_thread_death_a_call_from_a_short_lived_thread_leaves_its_process_usable(
    plugin_lab, editor_user
):
    """The process is tied to the site process, not to the thread that spawned it: a
    thread-bound death signal (PR_SET_PDEATHSIG) killed it when that thread ended."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.client import PluginHttp
    from django_webfetch.plugins.runtime.host import execute

    instance = services.install("example")
    call = {
        "tool": "example_whoami",
        "arguments": {},
        "config": {},
        "plugin": "example",
        "alias": instance.alias,
        "reference": instance.reference,
    }
    key = ("thread-death", instance.pk)
    seen = {}

    def first() -> None:
        http = PluginHttp(instance.pk, group="example", tool="example_whoami")
        seen["first"] = execute(registry.origin("example"), key, call, http)

    spawner = threading.Thread(target=first)
    spawner.start()
    spawner.join()
    time.sleep(0.5)  # the spawning thread is gone: a death signal bound to it has fired
    http = PluginHttp(instance.pk, group="example", tool="example_whoami")
    second = execute(registry.origin("example"), key, call, http)
    assert json.loads(second.text)["process"] == json.loads(seen["first"].text)["process"]
