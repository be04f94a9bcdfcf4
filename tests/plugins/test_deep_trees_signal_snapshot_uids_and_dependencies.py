"""Issue 30, attack round 8 (outside review of the round-6/7 fixes): findings, each a test
that fails while the finding stands.  Real parts only: real files installed as pip installs
a wheel (tests/plugins/packages.py), the real registry, the real trust check and the real
in-process (trusted) call.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.plugins.packages import MANIFEST, wheel

pytestmark = pytest.mark.django_db


def test_a_deep_package_tree_breaks_the_registry_for_every_plugin(tmp_path, registry_on):
    """Severity: Medium.  Route: ``provenance._files`` walks a plugin's package by
    recursion (``walk`` calls itself per directory level), bounded in files
    (``_DIGEST_FILES``) but not in depth.  A package ``webfetch_d`` with a directory chain
    deeper than the interpreter's recursion limit (a wheel may hold ``webfetch_d/a/a/.../
    x.py``: 1100 levels is a 2.2 kB path) makes ``code_digest`` / ``compiled_problem``
    raise ``RecursionError`` instead of returning a problem.  ``registry.load`` calls
    ``provider_of(ep)`` (-> ``code_digest``) inside the per-entry-point ``try`` that only
    catches ``ManifestError``: the ``RecursionError`` escapes ``load`` itself, so one
    installed distribution takes every plugin of the site away (``registry.origin("t")``
    of an unrelated, trusted plugin raises; so does every ``plugin_tools()``).  Expected:
    the deep plugin is refused with a stable reason (``plugin_path_unsafe`` or the like);
    plugin ``t`` installed beside it still loads and its trust still holds."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    wheel(site, "webfetch-d", {"d": "webfetch_d:manifest"},
          {"webfetch_d/__init__.py": "def manifest():\n    return {}\n"})  # fmt: skip
    # The chain made one level at a time (``pathlib`` and ``os.makedirs`` recurse too).
    where = str(site / "webfetch_d")
    for _ in range(sys.getrecursionlimit() + 100):
        where = os.path.join(where, "a")
        os.mkdir(where)
    with open(os.path.join(where, "x.py"), "w") as fh:
        fh.write("")
    registry_on.syspath_prepend(str(site))
    registry.reset()
    outcome = {}
    try:
        outcome["digest"] = provenance.code_digest(str(site), "webfetch_d")
    except RecursionError:
        outcome["digest"] = "RecursionError"
    try:
        outcome["load"] = registry.origin("t") is not None
        outcome["trust"] = PluginInstance.objects.create(
            plugin="t", alias="t", trusted=True
        ).trust_holds()
    except RecursionError:
        outcome["load"] = "RecursionError"
    try:
        assert outcome == {"digest": outcome["digest"], "load": True, "trust": True}, outcome
        assert outcome["digest"] != "RecursionError", outcome
    finally:
        # Removed bottom up (``shutil.rmtree``, pytest's clean-up, recurses per level too).
        os.unlink(os.path.join(where, "x.py"))
        while os.path.basename(where) == "a":
            os.rmdir(where)
            where = os.path.dirname(where)


#: A C-level ``SIGCONT`` handler (as attack 6, finding 7), and the guest's kernel snapshot
#: made to read what it read at ready: plain Python on the guest's own module, from inside
#: the call (the guest is this interpreter's ``__main__`` or an imported module).
_SPOOFED_SNAPSHOT = """
import ctypes, signal, sys, types
guest = next(m for m in list(sys.modules.values())
             if isinstance(getattr(m, "_KERNEL", None), dict) and hasattr(m, "_hooks"))
at_ready = guest._kernel_dispositions()
kept = sys.modules.setdefault("__s8_kept__", types.ModuleType("__s8_kept__"))
kept.log = []
def on_cont(number):
    kept.log.append("call A's handler ran")
kept.handler = ctypes.CFUNCTYPE(None, ctypes.c_int)(on_cont)
setsig = ctypes.pythonapi.PyOS_setsig
setsig.restype = ctypes.c_void_p
setsig.argtypes = [ctypes.c_int, ctypes.c_void_p]
setsig(signal.SIGCONT, ctypes.cast(kept.handler, ctypes.c_void_p))
changed = guest._kernel_dispositions() != at_ready
guest._kernel_dispositions = lambda: at_ready
result = ["kernel saw the change", changed]
"""

_READ_LOG = """
import sys
kept = sys.modules.get("__s8_kept__")
result = ["fresh process"] if kept is None else list(kept.log)
"""


def test_the_kernel_signal_snapshot_is_the_plugins_to_rewrite(probe):
    """Severity: Low (the pooled process serves the same instance; the hooks snapshot is
    the guest's own claim).  Route: the call's code finds the guest module in
    ``sys.modules`` (the object holding ``_KERNEL`` and ``_hooks``), reads
    ``guest._kernel_dispositions()`` once, sets a C-level ``SIGCONT`` handler
    (``PyOS_setsig``, attack 6 finding 7's route) and rebinds
    ``guest._kernel_dispositions`` to return the bytes read before.  ``_hooks`` looks the
    function up in the guest's globals after the call, ``_same`` compares the bytes by
    value: no ``hooks_changed``, the process is pooled, and call A's handler runs when the
    host continues the process for call B.  The same holds for ``_same``, ``_hooks`` and
    ``_KERNEL`` (its ``libc`` and ``status`` entries): the snapshot and its comparison are
    Python state of the very interpreter the plugin runs in, so nothing a plugin does in
    Python can be witnessed by it.  Expected: the decision to keep a process is taken
    where the plugin cannot write (the host reads ``/proc/<pid>/status`` of the stopped
    process, or the process is never reused after a call that ran ``ctypes``)."""
    import json

    from django_webfetch.plugins.runtime.host import idle_processes, shutdown

    try:
        first = probe(_SPOOFED_SNAPSHOT)
        pooled = idle_processes()
        second = probe(_READ_LOG)
    finally:
        shutdown()
    assert first.kind == "json", first
    assert json.loads(first.text)["result"] == "['kernel saw the change', True]", first
    seen = json.loads(second.text)["result"]
    assert pooled == 0 and "fresh process" in seen, f"call A's process was pooled; B saw {seen}"


#: A process whose real uid is ``U`` and whose effective (and saved, file-system) uid is
#: another unprivileged ``X``, dumpable again: ``/proc/<pid>`` is then ``X``'s.
_REAL_UID_ONLY = """
import ctypes, os, sys, time
uid, other = int(sys.argv[1]), int(sys.argv[2])
os.setgroups([])
os.setresgid(other, other, other)
os.setresuid(uid, other, other)
ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1
print("ready", flush=True)
time.sleep(60)
"""


def test_in_use_misses_a_process_whose_only_tie_to_the_uid_is_its_real_uid():
    """Severity: Low (no plugin process can change its ids; the claim is ``in_use``'s own:
    "any of its four ids").  Route: ``identity.in_use`` reads ``/proc/<pid>/status`` only
    when ``/proc/<pid>`` belongs to root or to the uid asked about, reasoning that the
    directory belongs to the effective uid.  A dumpable process whose real uid is ``U``
    and whose effective uid is another unprivileged uid (``setresuid(U, X, X)`` then
    ``PR_SET_DUMPABLE``: a set-user-ID helper, a service dropping to another account)
    has ``/proc/<pid>`` owned by ``X``: it is skipped, and ``acquire`` hands ``U`` out
    while that process runs with it (and may signal, ``ptrace``-attach to or share
    ``RLIMIT_NPROC`` with the plugin process given ``U``).  Expected: ``in_use(U)``."""
    import subprocess

    from django_webfetch.plugins.runtime import identity

    uid, other = identity.DEFAULT_RANGE[0] + 999_990, identity.DEFAULT_RANGE[0] + 999_991
    child = subprocess.Popen(
        [sys.executable, "-c", _REAL_UID_ONLY, str(uid), str(other)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert os.stat(f"/proc/{child.pid}").st_uid == other  # the premise
        with open(f"/proc/{child.pid}/status") as fh:
            ids = next(line for line in fh if line.startswith("Uid:")).split()[1:]
        assert ids[0] == str(uid), ids
        assert identity.in_use(uid), f"process {child.pid} runs with real uid {uid}"
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


_USES_DEPENDENCY = """\
def run(plugin, arguments):
    import webfetch_dep  # its declared dependency (Requires-Dist), another distribution
    return webfetch_dep.ANSWER


def manifest():
    return {'name': 't', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 't_run', 'description': 'x', 'handler': run}]}
"""


def test_trust_leaves_the_plugins_dependencies_out(tmp_path, registry_on):
    """Severity: Medium.  Route: trusted plugin ``t`` (``webfetch-t``, ``Requires-Dist:
    webfetch-dep``) imports its dependency ``webfetch_dep`` in the site's process.  The
    operator reviews both (docs/plugins.rst asks to "review the plugin's dependencies")
    and trusts the instance.  ``webfetch-dep`` is then replaced (an upgrade pulled in by
    any other ``pip install``, or a rebuilt wheel; here its files and ``RECORD`` rewritten
    as pip does): the trust fingerprint (name, version, ``code_digest`` of ``webfetch_t``)
    and the per-call pin (``tools._pin_holds``) are unchanged, ``_refuse_compiled`` never
    looks at the dependency (it could be an extension module), and the trusted call runs
    the new dependency code in the site's process without the operator confirming trust
    again.  Expected: trust records the installed distributions the plugin requires (or
    the call is refused / isolated once one changes)."""
    import shutil

    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "site"
    metadata = (
        b"Metadata-Version: 2.1\nName: webfetch-t\nVersion: 1.0\nRequires-Dist: webfetch-dep\n"
    )
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _USES_DEPENDENCY}, {"METADATA": metadata})  # fmt: skip
    dep = wheel(site, "webfetch-dep", {}, {"webfetch_dep.py": "ANSWER = 'reviewed dep'\n"})
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.origin("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()

    def call():
        tool = next(t for t in plugin_tools() if t.name == "t_run")
        return tool.execute({}, ToolContext(approved=True, call_id="t", plugin_instance=instance))

    try:
        first = call()
        assert first.ok and "reviewed dep" in str(first.content), first
        sys.modules.pop("webfetch_dep", None)  # a new worker process, after the upgrade
        shutil.rmtree(dep)
        (site / "webfetch_dep.py").unlink()
        wheel(site, "webfetch-dep", {}, {"webfetch_dep.py": "ANSWER = 'UNREVIEWED DEP'\n"})
        registry.reset()
        later = call()
        # In the site's process: the module is this interpreter's.
        here = getattr(sys.modules.get("webfetch_dep"), "ANSWER", None) == "UNREVIEWED DEP"
        in_site = here and later.ok and "UNREVIEWED" in str(later.content)
        assert not in_site, (
            f"the replaced dependency ran in the site's process under trust "
            f"(trust holds: {instance.trust_holds()})"
        )
    finally:
        for name in ("webfetch_dep", "webfetch_t"):
            sys.modules.pop(name, None)
