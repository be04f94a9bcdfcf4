"""Per-call cost of the out-of-process plugin runtime against today's in-process run.

Run: ``.venv/bin/python -m tests.benchmarks.bench_plugin_runtime [calls]`` (default 200).

The example plugin (tests/plugins/site) is installed into an in-memory SQLite database of
the test settings, once ``trusted`` (its tool runs in this process under the audit hook)
and once isolated (a plugin process in its bubblewrap sandbox: user, PID, network, IPC,
UTS, mount and cgroup namespaces, the allow-list seccomp filter, Landlock, a memory and
pids cgroup where the host can make one, the RPC; an idle process stopped between calls).  Each
side calls, through
the real runner (``tools.run_tool``):

* ``example_whoami``: a tool that does no I/O (the bare cost of a call),
* ``example_fetch`` of an ungranted URL: one request through ``http`` (refused by the
  host-owned client after reading the grant: no network is needed, and none is used),

with a warm pool (the default), and a cold start (pool size 0: a new process per call, the
manifest already read).  Reported per call and as ratios to the in-process run of the same
machine and run; nothing is timed inside the test suite.  To compare two versions of the
runtime (issue 30: before and after the sandbox), run this file from each checkout one
after the other and compare the ratios, which the in-process column normalises for the
machine's load.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "tests" / "plugins" / "site"


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    sys.path.insert(0, str(SITE))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _per_call(name: str, arguments: dict[str, object], instance: object, calls: int) -> float:
    from django.contrib.auth import get_user_model

    from django_webfetch.tools import ToolContext, run_tool

    user, _ = get_user_model().objects.get_or_create(username="bench", is_staff=True)

    context = ToolContext(approved=True, call_id="bench", plugin_instance=instance)
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        result = run_tool(name, arguments, user=user, context=context)
        assert result.ok or result.error == "egress_denied", result
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def _spawn_cost(times: int = 30) -> None:
    """What the sandbox alone adds to a cold start: ``python -I -S -c pass`` bare and in the
    plugin sandbox (bubblewrap's namespaces, mounts and the allow-list filter; as root, with
    the launcher that gives up root first, as the host starts it)."""
    import subprocess

    from django_webfetch.plugins.runtime import bubblewrap

    python = [bubblewrap.interpreter_path(), "-I", "-S", "-c", "pass"]
    read, write = os.pipe()

    def boxed() -> None:
        from django_webfetch.plugins.runtime import host, identity

        program = bubblewrap.program_fd()
        spec = bubblewrap.SandboxSpec("/nonexistent", "", 0, write, program, "/tmp/bench")
        argv = bubblewrap.command(spec)
        argv = argv[: argv.index("--") + 1] + python
        sources: dict[str, int] = {}
        outer = None
        if os.geteuid() == 0:  # as the host starts it: the launcher, under a uid of its own
            outer = identity.acquire(*identity.DEFAULT_RANGE)
            sources = host._open_sources(spec)
            launcher = host._as_unprivileged(spec, sources, outer)
            plan = json.loads(launcher[-1])
            plan["argv"] = plan["argv"][: plan["argv"].index("--") + 1] + python
            argv = [*launcher[:-1], json.dumps(plan)]
        subprocess.run(argv, check=True, pass_fds=(program, write, *sources.values()))
        for fd in sources.values():
            os.close(fd)
        if outer is not None:
            outer.release()
        os.close(program)
        os.read(read, 4096)  # bwrap's --info-fd JSON, so the pipe never fills

    def bare() -> None:
        subprocess.run(python, check=True)

    medians = {}
    for label, run in (("bare", bare), ("sandboxed", boxed)):
        samples = []
        for _ in range(times):
            start = time.perf_counter()
            run()
            samples.append(time.perf_counter() - start)
        medians[label] = statistics.median(samples)
    os.close(read)
    os.close(write)
    print(
        f"  interpreter start    bare {medians['bare'] * 1e3:8.2f} ms"
        f" | in the sandbox {medians['sandboxed'] * 1e3:8.2f} ms"
        f" (+{(medians['sandboxed'] - medians['bare']) * 1e3:.1f} ms)"
    )


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    calls = int(args[0]) if args else 200
    _setup()
    from django.conf import settings

    from django_webfetch.models import ToolGroup
    from django_webfetch.plugins import services
    from django_webfetch.plugins.runtime.host import capabilities, shutdown

    found = capabilities()
    if not found.get("isolated"):
        print(f"plugin processes cannot be isolated here: {found.get('why')}")
        return
    ToolGroup.objects.update_or_create(
        slug="example", defaults={"scope": "external_filtered", "enabled": True}
    )
    trusted = services.install("example", alias="inproc")
    trusted.trusted = True
    trusted.save()
    isolated = services.bind("example", alias="isolated", egress="declared")
    cases = {
        "no I/O": ("example_whoami", {}),
        "one refused request": ("example_fetch", {"url": "http://nowhere.example/"}),
    }
    print(f"median per call over {calls} calls (isolation: {found}):")
    for label, (name, arguments) in cases.items():
        _per_call(name, arguments, trusted, 5)  # warm up both sides
        _per_call(name, arguments, isolated, 5)
        here = _per_call(name, arguments, trusted, calls)
        warm = _per_call(name, arguments, isolated, calls)
        shutdown()
        settings.WEBFETCH_PLUGIN_POOL_SIZE = 0
        cold = _per_call(name, arguments, isolated, max(5, calls // 20))
        settings.WEBFETCH_PLUGIN_POOL_SIZE = 2
        print(
            f"  {label:<20} in-process {here * 1e3:8.2f} ms"
            f" | isolated, warm {warm * 1e3:8.2f} ms ({warm / here:6.1f}x)"
            f" | isolated, cold {cold * 1e3:8.2f} ms ({cold / here:6.1f}x)"
        )
    shutdown()
    if found.get("namespaces"):  # the bubblewrap runtime
        _spawn_cost()


if __name__ == "__main__":
    main()
