"""Issue 30, attack 14 (outside review after the thirteenth round).

Each test fails while its finding stands: its last assertion states what docs/plugins.rst
promises.  Distributions are written as pip installs them (``tests/plugins/packages.py``),
the registry, the runtime, the models and the tools are the real ones; nothing patched.

Tried and held (no test; a throw-away hostile plugin called through ``host.execute``, with
this kernel's Landlock ABI 7 and no delegated cgroup): the sandbox's environment is
``LC_CTYPE`` only; its descriptors are ``/dev/null`` x3, the guest's ``/proc/1/status`` and
the RPC socket (bwrap keeps only its own stderr file and a signalfd); ``/``, ``/etc``,
``/proc`` (``mountinfo``, ``cgroup``, ``1/cmdline``, ``keys``, ``kallsyms``, ``net``) and
``/tmp`` outside the scratch directory are refused by Landlock, ``/sys`` is absent;
``socket()`` is EPERM; an x32-ABI system call number (``0x40000000 | nr``) kills the process
(libseccomp's bad-architecture action); ``mmap`` of ``/dev/zero`` is refused (Landlock,
not in ``_DEVICES``); ``/proc/<pid>/status`` "Name:" is escaped by the kernel, so a
``PR_SET_NAME`` cannot forge a ``SigCgt`` line for ``host._kernel_state``; the channel's
``shape`` scan is exact for valid JSON (escapes removed left to right as the decoder
reads them).  Low, not filed: ``flock(LOCK_EX)`` on a read-only bound host file (the
interpreter's ``os.py``) succeeds and a pooled process can keep it on a reused descriptor
number (no host program found that locks a file in the view); ``PR_SET_NAME`` renames the
process as the host's ``ps`` shows it (15 bytes); ``uname``, ``sysinfo`` and ``statfs``
show the host's kernel release, uptime, memory and disk sizes; 64 bytes written to
``/dev/urandom`` are accepted (mixed in, not credited).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time

import pytest

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db


# -- finding 1: the pin is compared before a call, the handler imports during it ----------

#: Plugin ``e``: its tool waits for an answer (a request to its API, played by a FIFO the
#: test writes) and then, as many tools do, imports its helper module at first use.
_WAITS_THEN_IMPORTS = """\
def run(plugin, arguments):
    with open(arguments['answer'], 'rb') as fh:  # the reviewed code waits for its API
        fh.read()
    from webfetch_e import impl
    return impl.ANSWER


def manifest():
    return {'name': 'e', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'e_run', 'description': 'x', 'handler': run}]}
"""


def _trusted_e(site, plugin_dirs, files):
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    wheel(site, "webfetch-e", {"e": "webfetch_e:manifest"}, files)
    plugin_dirs(site)
    assert registry.origin("e") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="e", alias="e", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    return instance


def test_a_release_installed_while_a_trusted_call_runs_is_imported_by_that_call(
    tmp_path, plugin_dirs
):
    """Severity: Medium.  Route: a time-of-check/time-of-use race on the trust pin.
    ``tools._trust_holds`` compares the code digest with the recorded one once, before the
    trusted handler is called (``_pin_holds``, ``registry.code_problem``); what the
    handler imports at first use is read from disk when the import runs, which may be
    seconds later (after the request the tool waits for, up to
    ``WEBFETCH_PLUGIN_WALL_SECONDS``/``WEBFETCH_TIMEOUT``).  A release of the plugin
    installed under the running site in that window (``pip install -U`` on a live host,
    the very case decision 0050 and docs/plugins.rst cover: "after a reinstall under a
    long-running process, a module the handler imports at first use is never imported
    from other code") has its unreviewed module imported and run in the site's process by
    the call in flight; the next call sees the pin changed, too late.  A plugin's
    background thread (a cache refresher started at import) importing lazily has no
    check at all.  What an attacker gains: one execution of an unreviewed release in the
    web or worker process (``SECRET_KEY``, the database, every grant), timed by the
    reviewed code's own slow calls.  Suggested fix: verify at import time, not before the
    call: a ``sys.meta_path`` finder for the trusted package and its pinned closure that
    loads each module from bytes it hashed and compares with the pinned digest of that
    file (refusing a mismatch), or import the whole pinned closure eagerly while the pin
    is checked and refuse any later import below those names."""
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "srv" / "e"
    files = {"webfetch_e/__init__.py": _WAITS_THEN_IMPORTS,
             "webfetch_e/impl.py": "ANSWER = 'reviewed'\n"}  # fmt: skip
    instance = _trusted_e(site, plugin_dirs, files)
    answer = tmp_path / "answer"
    os.mkfifo(answer)
    installed = threading.Event()

    def release_during_the_call() -> None:
        # Opening the FIFO for writing returns once the handler opened it for reading:
        # the call is past every check, in the reviewed code, waiting for its answer.
        fd = os.open(answer, os.O_WRONLY)
        try:
            # The next release, installed as pip installs it (its own RECORD).
            shutil.rmtree(site / "webfetch_e-1.0.dist-info")
            (site / "webfetch_e" / "impl.py").unlink()
            wheel(site, "webfetch-e", {"e": "webfetch_e:manifest"},
                  {**files, "webfetch_e/impl.py": "ANSWER = 'OTHER CODE'\n"})  # fmt: skip
            installed.set()
            os.write(fd, b"the API's answer")
        finally:
            os.close(fd)

    releaser = threading.Thread(target=release_during_the_call, daemon=True)
    releaser.start()
    tool = next(t for t in plugin_tools() if t.name == "e_run")
    context = ToolContext(approved=True, call_id="e_run", plugin_instance=instance)
    result = tool.execute({"answer": str(answer)}, context)
    releaser.join(30)
    assert installed.is_set()
    assert not instance.trust_holds()  # the installed code is no longer the pinned one
    ran_here = getattr(sys.modules.get("webfetch_e.impl"), "ANSWER", None)
    assert ran_here != "OTHER CODE" and "OTHER CODE" not in result.content, (
        "the unreviewed release's module was imported and run in the site's process",
        ran_here,
        result.content[-200:],
    )


# -- finding 2: one distribution, any number of sandboxed manifest reads per load ----------


def _many_entry_points(count: int) -> tuple[dict[str, str], str]:
    """``count`` entry points of one distribution, each naming its own manifest callable
    of one small package (``p0 = webfetch_many:m0`` ...)."""
    source = "".join(
        f"def m{i}():\n    return {{'name': 'p{i}', 'version': '1.0', 'description': 'x', "
        f"'egress': [], 'tools': []}}\n\n\n"
        for i in range(count)
    )
    return {f"p{i}": f"webfetch_many:m{i}" for i in range(count)}, source


#: Plugin processes one distribution may make a registry load start, at most: as many as
#: a manifest may have tools (``manifest.MAX_TOOLS``), generous for any real package.
_REASONABLE = 32


def test_one_distribution_makes_every_registry_load_start_a_plugin_process_per_entry_point(
    tmp_path, registry_on
):
    """Severity: Medium (availability of every web and worker process).  Route: the
    registry reads each entry point's manifest in a plugin process of its own
    (``registry._load_entry_point`` -> ``_described_manifest`` -> ``host.describe``: a
    bubblewrap sandbox, an interpreter, the plugin's import), one after the other, under
    the registry's lock, for every entry point of the ``django_webfetch.plugins`` group on
    ``sys.path``, installed (an instance) or not; nothing bounds how many entry points one
    distribution declares (``entry_points.txt`` is one line each; distinct names pass
    ``entry_point_duplicate``, distinct ``module:attribute`` values make distinct
    ``Origin``\\ s, so ``_described`` caches nothing between them).  Each read may take up
    to ``WEBFETCH_PLUGIN_WALL_SECONDS`` (30 s) and a read that timed out is read again
    after ``_REMEMBER_SECONDS`` (10 min): a package with 500 entry points whose import
    sleeps 29 s holds the registry's lock for 4 hours in every process that loads it
    (every tool offer, every plugin tool call, ``webfetch plugin list``), and again at
    each restart; at the sandbox's bare cost (about 0.1 s a start here) 500 entry points
    still stall each process's first load for about a minute.  What an attacker gains:
    the assistant and every plugin of the site stop, from a package merely present
    (a dependency, a plugin not yet installed).  Suggested fix: refuse a distribution
    that declares more than a few entry points of the group (``MAX_TOOLS``) before any is
    read, and bound a whole load's manifest reads (count and time), reading what is left
    on a later load."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    count = 2 * _REASONABLE
    entry_points, source = _many_entry_points(count)
    site = tmp_path / "site"
    wheel(site, "webfetch-many", entry_points, {"webfetch_many/__init__.py": source})
    registry_on.syspath_prepend(str(site))
    registry.reset()
    began = time.monotonic()
    registry.load()
    took = time.monotonic() - began  # printed only: no timed assertion
    started = {origin for origin in registry._described if origin.path == str(site)}
    started |= {key[0] for key in host._failed_reads if key[0].path == str(site)}
    loaded = [name for name in entry_points if registry.get_manifest(name) is not None]
    print(f"{len(started)} plugin processes started in {took:.1f} s; {len(loaded)} loaded")
    assert len(started) <= _REASONABLE, (
        f"one distribution made one registry load start {len(started)} plugin processes"
    )


# -- finding 3: the manifest reads a load refused stay in the host's memory ---------------

#: Bytes of one manifest's description: under the channel's cap (``2 x
#: WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES + 1 MiB``), 16 times ``manifest.MAX_MANIFEST_BYTES``.
_HUGE = 1 << 20


def _empty_the_bounded_caches() -> None:
    """Every ``Memo`` (an LRU of at most N entries) and the failure memory of this
    process, emptied."""
    import gc

    from django_webfetch.plugins.provenance import Memo
    from django_webfetch.plugins.runtime import host

    # By the object's own type: ``isinstance`` asks ``__class__``, which evaluates a lazy
    # object an earlier test left in memory (a test client's ``resolver_match``: a full run
    # raised its Resolver404 here).
    for cache in [each for each in gc.get_objects() if issubclass(type(each), Memo)]:
        cache.clear()
    host._failed_reads.clear()


def test_a_refused_oversized_manifest_is_kept_whole_in_every_host_process(tmp_path, registry_on):
    """Severity: Low-Medium (host memory).  Route: ``registry._described_manifest`` keeps
    what each sandboxed manifest read returned (``host.describe``: the guest's ``ready``
    manifest, as parsed JSON) in ``_described``, keyed by origin, before ``parse_manifest``
    decides on it, and never evicts an entry (``host._failed_reads`` is bounded at 256;
    ``_described`` is not).  A manifest is refused over ``MAX_MANIFEST_BYTES`` (64 KiB),
    but the channel lets the guest send up to ``2 x WEBFETCH_PLUGIN_MAX_OUTPUT_BYTES +
    1 MiB`` (1.5 MiB by default; 9 MiB at the setting's ceiling) and 16,384 values: each
    entry point of a distribution (finding 2: any number) leaves that much in every web
    and worker process for its life, refused or not: 500 entry points, 750 MiB per
    process.  What an attacker gains: memory exhaustion of the site from a package merely
    present on ``sys.path``.  Suggested fix: bound the manifest a ``ready`` may carry at
    ``MAX_MANIFEST_BYTES`` on the host's side (a protocol limit), cache the verdict (the
    parsed ``Manifest`` or the refusal), not the raw read, and bound the cache as
    ``_failed_reads`` is."""
    import gc
    import tracemalloc

    from django_webfetch.plugins import registry

    count = 8
    source = "".join(
        f"def m{i}():\n    return {{'name': 'q{i}', 'version': '1.0', 'egress': [], "
        f"'tools': [], 'description': {'x' * _HUGE!r}}}\n\n\n"
        for i in range(count)
    )
    entry_points = {f"q{i}": f"webfetch_huge:m{i}" for i in range(count)}
    warm = tmp_path / "warm"
    wheel(warm, "webfetch-warm", {"w": "webfetch_w:manifest"},
          {"webfetch_w/__init__.py": MANIFEST % "w"})  # fmt: skip
    registry_on.syspath_prepend(str(warm))
    registry.reset()
    # The process-wide bounded caches emptied, then filled by a first load: what the
    # measured load adds to them is then this test's, not a table resized for the entries
    # earlier tests of this worker left (a full run measured 700 KiB, 405 alone).
    _empty_the_bounded_caches()
    assert registry.get_manifest("w") is not None  # the imports and caches of a first load
    site = tmp_path / "site"
    wheel(site, "webfetch-huge", entry_points, {"webfetch_huge/__init__.py": source})
    registry_on.syspath_prepend(str(site))
    registry.reset()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        registry.load()
        for name in entry_points:
            assert registry.get_manifest(name) is None  # every one refused (too large)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert any("manifest_too_large" in p for p in registry.problems()), registry.problems()
    print(f"{kept >> 10} KiB kept by the host after a load that refused {count} manifests")
    assert kept < count * MAX_KEPT_PER_REFUSAL, (
        f"{kept >> 20} MiB of refused manifests kept in the host process"
    )


#: What a refused manifest may leave in the host: its message, a verdict.
MAX_KEPT_PER_REFUSAL = 64 * 1024
