"""Issue 30, the fourth outsider attack (session 5), after the third round's fixes.

A hostile second distribution installed beside a trusted plugin, and a hostile plugin
author whose calls leave state in a pooled process.  Real distributions in a ``sys.path``
directory as pip leaves them (a wheel's ``top_level.txt`` is copied as the author wrote
it), real plugin processes; nothing here weakens or bypasses the sandbox.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db

_MANIFEST = (
    "def manifest():\n    return {'name': %r, 'version': '1.0', "
    "'description': 'x', 'egress': [], 'tools': []}\n"
)


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(
    site: Path,
    dist: str,
    entry_points: dict[str, str],
    files: dict[str, str],
    meta_extra: dict[str, bytes] | None = None,
) -> Path:
    """Distribution ``dist`` 1.0 installed into ``site`` as pip installs a wheel: its files
    written (over whatever is there), a RECORD with each file's sha256 (pip writes RECORD
    itself, truthfully); ``meta_extra`` are further files of the wheel's ``.dist-info``
    (``top_level.txt``), which pip copies as they are."""
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    meta: dict[str, bytes] = {
        "METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode(),
        **({"entry_points.txt": ("[django_webfetch.plugins]\n" + "".join(
            f"{k} = {v}\n" for k, v in entry_points.items())).encode()} if entry_points else {}),
        **(meta_extra or {}),
    }  # fmt: skip
    lines = []
    every = {k: v.encode() for k, v in files.items()}
    every.update({f"{info.name}/{k}": v for k, v in meta.items()})
    for name, data in every.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        lines.append(f"{name},{_hash(data)},{len(data)}\n")
    lines.append(f"{info.name}/RECORD,,\n")
    (info / "RECORD").write_text("".join(lines))
    return info


def _overwrite_trusted(tmp_path: Path, registry_on, top_level: bytes) -> dict:
    """A trusted plugin ``webfetch-t`` (package ``webfetch_t``), then a second distribution
    ``webfetch-helper`` (no plugin entry point: any dependency) whose wheel writes
    ``webfetch_t/__init__.py`` and ships ``top_level.txt`` = ``top_level``."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    _wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
           {"webfetch_t/__init__.py": _MANIFEST % "t"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()
    rewritten = "OWNED = True\n" + _MANIFEST % "t"
    _wheel(site, "webfetch-helper", {}, {"webfetch_t/__init__.py": rewritten,
           "webfetch_helper/__init__.py": ""}, {"top_level.txt": top_level})  # fmt: skip
    assert (site / "webfetch_t" / "__init__.py").read_text() == rewritten
    registry.reset()
    instance.refresh_from_db()
    return {
        "t_loaded": registry.get_manifest("t") is not None,
        "trust_holds": instance.trust_holds(),
        "problems": registry.problems(),
    }


def test_a_second_distribution_hides_its_write_into_a_trusted_package_with_top_level_txt(
    tmp_path, registry_on
):
    """High.  ``_shared_packages`` asks ``importlib.metadata.packages_distributions()``,
    which takes a distribution's ``top_level.txt`` when it has one and reads its RECORD
    only otherwise.  ``top_level.txt`` is a file of the wheel, written by its author and
    copied by pip as it is: a second distribution whose wheel writes
    ``webfetch_t/__init__.py`` (its RECORD, written by pip, says so) and declares
    ``webfetch_helper`` in ``top_level.txt`` is not counted as a provider of
    ``webfetch_t``.  The trusted plugin ``t`` loads with the other distribution's code and
    its trust still holds (its own RECORD did not change).
    Fix: build the map from each distribution's RECORD (``dist.files``; union with
    ``top_level.txt``, never instead of it)."""
    report = _overwrite_trusted(tmp_path, registry_on, b"webfetch_helper\n")
    assert not report["t_loaded"], report
    assert any("'webfetch_t' is also installed by" in p for p in report["problems"]), report


def test_a_distribution_with_an_undecodable_top_level_txt_turns_the_shared_check_off(
    tmp_path, registry_on
):
    """High.  ``packages_distributions()`` reads every distribution's ``top_level.txt`` as
    UTF-8; one that is not (a byte 0xff, from any installed wheel) raises
    ``UnicodeDecodeError``, and ``_shared_packages`` answers "" for every plugin ("unreadable
    metadata: nothing to compare").  One hostile distribution turns the shared-package
    check off for the whole environment and writes into the trusted plugin's package.
    Fix: read each distribution on its own, and an unreadable one refuses the plugins whose
    packages it may share (fail closed), never none."""
    # Truthful but for one byte: decoded, it would name ``webfetch_t`` and be caught.
    report = _overwrite_trusted(tmp_path, registry_on, b"webfetch_t\nwebfetch_helper\n\xff\n")
    assert not report["t_loaded"], report


#: A call that leaves kernel memory with the descriptor count it found: socket pairs are
#: filled, sent in flight (SCM_RIGHTS) into one socket's queue and closed; that socket is
#: put over a descriptor the process had at ready (``dup2``), and the result is
#: the bytes queued, the descriptors at ready and after.
_IN_FLIGHT = r"""
import os, socket, stat, sys
def fds():
    found = {}
    for fd in range(64):
        try:
            found[fd] = os.fstat(fd).st_mode
        except OSError:
            pass
    return found
before = fds()
kept, held = sys.modules.setdefault('__kept_flight__', []), 0
block = bytearray(12 << 20)  # resident, counted: under the 16 MiB margin alone
for i in range(0, len(block), 4096):
    block[i] = 1
kept.append(block)
held += len(block)
def fill(sock):
    global held
    sock.setblocking(False)
    chunk = b'x' * 65536
    while True:
        try:
            held += sock.send(chunk)
        except OSError:
            return
carrier, queue = socket.socketpair()
sent = 0
while True:
    try:
        c, d = socket.socketpair()
    except OSError:
        break
    fill(c)
    fill(d)
    try:
        socket.send_fds(carrier, [b'.'], [c.fileno(), d.fileno()])
    except OSError:
        c.close(); d.close()
        break
    sent += 2
    c.close(); d.close()
carrier.close()
# stdin, or else a character device (/dev/null) the process had at ready
spare = [fd for fd, mode in sorted(before.items()) if fd == 0 or stat.S_ISCHR(mode)]
target = spare[0]
os.dup2(queue.fileno(), target)  # the queue now stands where a descriptor of ready was
queue.close()
after = fds()
result = f'{held} {sent} {len(before)} {len(after)}'
"""


def test_sockets_in_flight_keep_kernel_memory_in_a_pooled_process_without_a_new_descriptor(
    probe, settings
):
    """``grown()`` counts a pooled process's descriptors: more than at ready, it is not
    kept.  A socket sent over a unix socket (SCM_RIGHTS, ``sendmsg`` is allowed) and closed
    is in no ``/proc/<pid>/fd`` but keeps its queued bytes while the message waits in the
    receiving socket's queue; that socket put over a descriptor the process had at ready
    (``dup2``) leaves the count unchanged.  A call leaves 12 MiB resident and the queues of
    up to ``RLIMIT_NOFILE`` in-flight sockets, and its process is pooled holding more than
    ``MAX_IDLE_GROWTH``.  Medium-low (kernel memory bounded by RLIMIT_NOFILE in flight per
    uid, per idle process).  Fix: count what a pooled process holds, not its descriptors:
    its memory cgroup's ``memory.current`` (sockets, kernel memory, shmem charged) against
    the value at ready, or a descriptor set compared by identity (``/proc/<pid>/fdinfo``
    inode) plus no in-flight fds (``SCM_RIGHTS`` refused: no ``sendmsg`` with control
    data from the guest)."""
    from django_webfetch.plugins.runtime.host import MAX_IDLE_GROWTH, idle_processes, shutdown

    settings.WEBFETCH_PLUGIN_MEMORY_BYTES = 256 << 20
    try:
        assert probe("result = 0").text == '{"result": "0"}'
        outcome = probe(_IN_FLIGHT)
        assert outcome.text.startswith('{"result": '), outcome
        held, sent, before, after = map(int, outcome.text.split('"')[3].split())
        pooled = idle_processes()
        report = {"MiB": held >> 20, "in_flight": sent, "fds": (before, after), "pooled": pooled}
        assert not (pooled == 1 and held > MAX_IDLE_GROWTH), report
    finally:
        shutdown()


def test_a_reserved_entry_point_lets_its_distribution_write_into_django(tmp_path, registry_on):
    """Medium.  ``_distribution_problem`` allows files under the top-level package of every
    plugin entry point of the distribution, reserved ones included, and leaves reserved
    names out of the shared-package check ("reserved: refused").  But only that entry
    point is refused (``entry_point_reserved``): a distribution with a second entry point
    ``b = django.webfetch_planted:manifest`` may install ``django/...`` (Django's package,
    installed by another distribution: here a copy in the test's directory, the real one is
    not touched), and its first entry point ``a`` is loaded as an ordinary plugin.  The
    check that refuses a distribution writing outside its own package is bypassed for every
    third-party name of ``RESERVED_NAMES`` (django, httpx, certifi, idna, rich, ...).
    Fix: a distribution with a reserved entry point is refused as a whole (its files are
    checked against its non-reserved packages only), and the shared check covers every
    name the distribution installs, reserved or not."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    _wheel(site, "webfetch-r", {"r": "webfetch_r:manifest",
           "rb": "django.webfetch_planted:manifest"},
           {"webfetch_r/__init__.py": _MANIFEST % "r",
            "django/webfetch_planted.py": "PLANTED = True\n"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    report = {"r_loaded": registry.get_manifest("r") is not None, "problems": registry.problems()}
    assert not report["r_loaded"], report


def test_in_the_documented_layout_a_plugins_dependency_shadows_a_trusted_plugin_unrefused(
    tmp_path, registry_on
):
    """High.  docs/plugins.rst's layout: each plugin in a directory of its own
    (``pip install --no-deps --target``... or with its dependencies) added to ``sys.path``
    as a plain entry.  The hostile plugin ``webfetch-evil`` passes every check (its RECORD
    holds only ``webfetch_evil``); a dependency installed beside it, ``evil-helper`` (no
    plugin entry point, so never checked), provides a package ``webfetch_t`` and declares
    ``evil_helper`` in its ``top_level.txt``.  Its directory comes first on ``sys.path``.
    Nothing is refused, the trusted ``t`` loads, and importing ``webfetch_t`` by name, as a
    trusted instance's in-process import does (``registry._import``:
    ``importlib.import_module``, not the plugin's own directory as the sandbox binds it),
    runs the helper's file in the site.
    Fix: ``_shared_packages`` from RECORD (see above), and the in-process import loads the
    module from ``Origin.path`` (a spec for that file), refusing a name that resolves
    elsewhere on ``sys.path``."""
    import importlib.util

    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    own, other = tmp_path / "plugins-t", tmp_path / "plugins-evil"
    _wheel(own, "webfetch-t", {"t": "webfetch_t:manifest"},
           {"webfetch_t/__init__.py": _MANIFEST % "t"})  # fmt: skip
    registry_on.syspath_prepend(str(own))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()
    _wheel(other, "webfetch-evil", {"evil": "webfetch_evil:manifest"},
           {"webfetch_evil/__init__.py": _MANIFEST % "evil"})  # fmt: skip
    _wheel(other, "evil-helper", {}, {"webfetch_t/__init__.py": "OWNED = True\n" + _MANIFEST % "t"},
           {"top_level.txt": b"evil_helper\n"})  # fmt: skip
    registry_on.syspath_prepend(str(other))
    registry.reset()
    instance.refresh_from_db()
    spec = importlib.util.find_spec("webfetch_t")
    found = registry.origin("t")
    report = {
        "t_loaded": registry.get_manifest("t") is not None,
        "trust_holds": instance.trust_holds(),
        "sandbox_path": found.path if found else None,
        "in_process_import": spec.origin if spec else None,
        "problems": registry.problems(),
    }
    shadowed = report["in_process_import"] and str(other) in report["in_process_import"]
    assert not (report["t_loaded"] and report["trust_holds"] and shadowed), report


def test_a_writable_pycache_beside_a_module_plugin_is_not_refused(tmp_path, registry_on):
    """Low-medium.  ``_path_problem`` checks the plugin's directory chain and every entry
    of it named like the top-level name (``webfetch_m.py``, ``webfetch_m/``), as sshd's
    StrictModes would.  A plugin that is one module (``webfetch_m.py``) has its compiled
    code in ``<dir>/__pycache__/webfetch_m.cpython-*.pyc``, which Python loads in place of
    the source whenever its header matches the source's size and mtime (both readable by
    anyone): a ``__pycache__`` writable by group or others (left by a umask 002 import)
    lets another local user replace the code a trusted instance imports in the site, and
    the plugin is not refused.  Fix: check ``<dir>/__pycache__`` (and the ``.pyc`` files
    of the top-level name in it) with the same rule, or import trusted plugins with
    ``sys.dont_write_bytecode`` and a source-only loader."""
    import os

    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    _wheel(site, "webfetch-m", {"m": "webfetch_m:manifest"}, {"webfetch_m.py": _MANIFEST % "m"})
    cache = site / "__pycache__"
    cache.mkdir()
    os.chmod(cache, 0o777)  # as a umask-000 (or group: 002) import leaves it
    registry_on.syspath_prepend(str(site))
    registry.reset()
    report = {"m_loaded": registry.get_manifest("m") is not None, "problems": registry.problems()}
    assert not report["m_loaded"], report


def test_a_plugin_that_installs_a_script_over_the_sites_own_is_not_refused(tmp_path, registry_on):
    """Medium.  ``_distribution_problem`` lets a plugin install any file outside the import
    path that is not ``.py``/``.pyc``/``.so``/``.pth`` ("a script or data file").  pip writes
    a wheel's ``console_scripts`` and ``.data/scripts`` into the environment's ``bin/``,
    over whatever is there: a plugin that declares ``[console_scripts] gunicorn =
    webfetch_s:run`` (or ``celery``, ``django-admin``) replaces the command the site's
    service runs, and its code runs there, unsandboxed, at the next restart (RECORD:
    ``../../../bin/gunicorn``).  The plugin is loaded as an ordinary one.
    Fix: refuse a plugin distribution with ``console_scripts``/``gui_scripts`` entry
    points or any RECORD entry under ``..`` that is an executable or lies in a ``bin``/
    ``Scripts`` directory (or: any RECORD entry outside the site directory at all)."""
    from django_webfetch.plugins import registry

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    wrapper = "#!/usr/bin/env python\nfrom webfetch_s import run\nrun()\n"
    points = b"[django_webfetch.plugins]\ns = webfetch_s:manifest\n"
    points += b"[console_scripts]\ngunicorn = webfetch_s:run\n"
    _wheel(site, "webfetch-s", {"s": "webfetch_s:manifest"},
           {"webfetch_s/__init__.py": _MANIFEST % "s" + "def run():\n    pass\n",
            "../../../bin/gunicorn": wrapper},
           {"entry_points.txt": points})  # fmt: skip
    assert (tmp_path / "venv" / "bin" / "gunicorn").read_text() == wrapper
    registry_on.syspath_prepend(str(site))
    registry.reset()
    report = {"s_loaded": registry.get_manifest("s") is not None, "problems": registry.problems()}
    assert not report["s_loaded"], report


_DEFERRED = """
import threading, time

_job = []
_wake = threading.Event()
_done = []
_state = {"call": ""}


def _worker():  # an import-time thread (a library's pool): allowed to stay
    while True:
        _wake.wait()
        _wake.clear()
        time.sleep(0.4)  # asleep (state S, no CPU) through the host's quiet samples
        _done.append((_job.pop(), "ran during call " + _state["call"]))


threading.Thread(target=_worker, daemon=True).start()


def a(plugin, arguments):
    _state["call"] = "a"
    _job.append("work of call a")
    _wake.set()
    time.sleep(0.05)  # the worker has taken the job and sleeps
    return "a done"


def b(plugin, arguments):
    _state["call"] = "b"
    time.sleep(1.0)
    return repr(_done)
"""


def test_work_a_call_hands_to_an_import_time_thread_runs_in_the_next_call(tmp_path):
    """Low.  docs/plugins.rst: "a process is never handed to the next call while a thread
    of its call still exists or runs".  ``quiet()`` allows the import-time threads (by
    id) when they are asleep at the samples and used no CPU between two samples 30 ms
    apart.  Call ``a`` hands its work (its user's data) to an import-time thread that
    sleeps 0.4 s before doing it: at the samples it is asleep, the process is pooled
    (stopped), and on ``SIGCONT`` for call ``b`` (another editor's) the thread does ``a``'s
    work inside ``b``, on ``b``'s CPU and wall budget (and any request it makes is
    performed and recorded in ``b``'s call).  Fix: before pooling, read each non-RPC
    thread's ``/proc/<pid>/task/<tid>/syscall``: keep the process only when every such
    thread is blocked where nothing but another thread of the process can wake it (a
    futex wait or a read with no timeout: ``clock_nanosleep``, a timed futex, ``poll``/
    ``select``/``epoll_wait`` with a timeout wake by themselves); otherwise recycle (or:
    one call per process for plugins with threads beside the RPC thread at ready)."""
    import os
    import textwrap

    from django_webfetch.plugins.runtime.host import Limits, Origin, execute, shutdown

    site = tmp_path / "site"
    package = site / "webfetch_s5_deferred"
    package.mkdir(parents=True)
    tools = (
        '[{"name": "a", "description": "x", "handler": a}, '
        '{"name": "b", "description": "x", "handler": b}]'
    )
    manifest = textwrap.dedent(
        f"""
        def manifest():
            return {{"name": "s5deferred", "version": "1.0", "description": "x",
                     "egress": [], "tools": {tools}}}
        """
    )
    (package / "__init__.py").write_text(textwrap.dedent(_DEFERRED) + manifest)
    os.chmod(site, 0o755)
    origin = Origin("webfetch_s5_deferred:manifest", str(site), "webfetch_s5_deferred")
    limits = Limits(5, 20, 1 << 30, 1 << 16, 5, 2)
    key = ("s5-deferred", 1)

    def call(tool: str) -> str:
        message = {"tool": tool, "arguments": {}, "config": {}, "plugin": "s5deferred",
                   "alias": "s5deferred", "reference": "s5deferred"}  # fmt: skip
        return execute(origin, key, message, None, limits=limits).text

    try:
        assert "a done" in call("a")
        seen = call("b")
        assert "ran during call b" not in seen, seen
    finally:
        shutdown()


def test_held_a_namespace_package_split_over_two_distributions_refuses_the_trusted_one(
    tmp_path, registry_on
):
    """Held (truthful metadata).  ``t`` is ``webfetch_ns.t`` in a namespace package (no
    ``__init__``); a second plugin in another ``sys.path`` directory provides
    ``webfetch_ns/t/...`` first on the path.  ``packages_distributions()`` names both
    under ``webfetch_ns``: both are refused, nothing of either is loaded."""
    from django_webfetch.plugins import registry

    own, other = tmp_path / "own", tmp_path / "other"
    _wheel(own, "webfetch-nst", {"nst": "webfetch_ns.t:manifest"},
           {"webfetch_ns/t/__init__.py": _MANIFEST % "nst"})  # fmt: skip
    _wheel(other, "webfetch-nsevil", {"nsevil": "webfetch_ns.evil:manifest"},
           {"webfetch_ns/evil/__init__.py": _MANIFEST % "nsevil",
            "webfetch_ns/t/__init__.py": "OWNED = True\n" + _MANIFEST % "nst"})  # fmt: skip
    registry_on.syspath_prepend(str(own))
    registry_on.syspath_prepend(str(other))
    registry.reset()
    loaded = [n for n in ("nst", "nsevil") if registry.get_manifest(n) is not None]
    assert loaded == [], registry.problems()
    assert sum("'webfetch_ns' is also installed by" in p for p in registry.problems()) == 2


def test_a_plugin_rewrites_another_distributions_metadata_to_pass_the_shared_check(
    tmp_path, registry_on
):
    """Medium.  ``_distribution_problem`` lets a plugin install files into *any*
    ``*.dist-info`` directory, not only its own.  A plugin named like a module the site
    imports (here ``webfetch_realmod``, provided by the non-plugin distribution
    ``realmod``: redis, celery... on a real site) overwrites that module's package and
    rewrites ``realmod-1.0.dist-info/top_level.txt``: ``packages_distributions()`` no
    longer names ``realmod`` for ``webfetch_realmod`` and the plugin that replaced a
    module of the site is loaded, unrefused (the third round's
    ``test_a_plugin_named_like_a_module_another_distribution_provides_is_refused``, undone
    by one file).  Checked with pip 26.3 (``pip install --prefix``): a wheel file
    ``webfetch_shadow-1.0.data/purelib/realmod-1.0.dist-info/top_level.txt`` overwrites
    realmod's (pip refuses a second ``.dist-info`` only at the wheel's root), the wheel's
    own ``top_level.txt`` is copied as written, and its ``console_scripts`` land in
    ``bin/`` over what is there.  Fix: files in a ``.dist-info``/``.egg-info`` pass only in the
    distribution's own (``dist._path``); the shared map from RECORDs, never from
    ``top_level.txt``."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    info = _wheel(site, "realmod", {}, {"webfetch_realmod/__init__.py": "REAL = True\n"},
                  {"top_level.txt": b"webfetch_realmod\n"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    import importlib.metadata

    assert importlib.metadata.packages_distributions()["webfetch_realmod"] == ["realmod"]
    _wheel(site, "webfetch-shadow", {"shadow": "webfetch_realmod.webfetch:manifest"},
           {"webfetch_realmod/__init__.py": "REAL = False\n",
            "webfetch_realmod/webfetch.py": _MANIFEST % "shadow",
            f"{info.name}/top_level.txt": "webfetch_realmod_gone\n"})  # fmt: skip
    registry.reset()
    report = {"loaded": registry.get_manifest("shadow") is not None,
              "problems": registry.problems()}  # fmt: skip
    assert not report["loaded"], report
