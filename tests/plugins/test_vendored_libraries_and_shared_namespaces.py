"""Issue 30, attack 15 (outside review after the fourteenth round).

Each test failed while its finding stood; the three are fixed (findings 1 and 3: decision
0054; finding 2: decision 0055): its last assertion states what docs/plugins.rst promises (or
what worked before decision 0053).  Distributions are written as pip installs
them (RECORD of every file), the registry, the loader, the models and the tools are the
real ones; nothing patched.

Tried and held (read or run, no test): ``loader._verified`` hashes the bytes it then
compiles, so a symlink or file swapped between the read and ``realpath`` gains nothing (only
bytes some pinned file holds run; a symlink to another pinned file runs that file's
reviewed bytes under another name: Low, not filed); a stray portion of a claimed namespace
in another ``sys.path`` directory is refused by file (not in the pin); a claimed top-level
name that is also the standard library's is not served from the plugin's copy
(``_on_path``/``_pinned_copy``); zip and foreign loaders are refused.  The channel:
``parse`` of an 8 MB number (float or 4 300+ digit int) is linear or refused; a lone
surrogate escape in a result, a violation or an error is replaced before it is stored or
shown (``fence``, ``recorder._detail``/``_host``, ``_name``).  The RPC client sets ``Host``
from the checked authority (no virtual-host fronting).  The approval card
(``services.call_plugin``) uses the same ``instance_for`` as the call, names are ASCII by
``manifest._NAME_RE``, declared hosts ASCII.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.packages import install_extension, linked_extension, requires_metadata, wheel

pytestmark = pytest.mark.django_db


def _forget(path: list[str], *tops: str) -> None:
    """``sys.path`` back to ``path``, the modules under ``tops`` unimported, the registry
    reset: what a test that installed and imported a distribution leaves behind."""
    from django_webfetch.plugins import registry

    sys.path[:] = path
    for name in list(sys.modules):
        if name.partition(".")[0] in tops:
            sys.modules.pop(name)
    importlib.invalidate_caches()
    registry.reset()


# -- finding 1: an extension with a vendored library (the manylinux layout) never loads ---

_PLUGIN_Q = """\
def run(plugin, arguments):
    try:
        from wfdep_q import _speed  # imported at first use, as numpy's or lxml's would be
    except ImportError as exc:
        return 'refused:' + str(exc)
    return _speed.answer()


def manifest():
    return {'name': 'q', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'q_run', 'description': 'x', 'handler': run}]}
"""


def _compiled(tmp: Path) -> tuple[bytes, bytes]:
    """(the extension ``wfdep_q._speed``, its vendored ``libwfq.so``), linked as auditwheel
    links them: the extension's RUNPATH is ``$ORIGIN/../wfdep_q.libs``, the library's
    ``DT_SONAME`` the name the extension needs (auditwheel sets it on each library it
    vendors)."""
    return linked_extension(tmp, "libwfq.so", "reviewed", "$ORIGIN/../wfdep_q.libs")


def test_a_trusted_plugins_dependency_with_a_vendored_library_cannot_be_imported(tmp_path):
    """Severity: Low (availability of trusted plugins; no bypass).  Route: decision 0053's
    ``loader._PinnedExtension`` loads a pinned extension module through
    ``/proc/self/fd/N`` (so that the bytes hashed are the bytes loaded).  The dynamic
    linker then takes ``$ORIGIN`` to be ``/proc/self/fd``: an extension whose RUNPATH is
    ``$ORIGIN/../<dist>.libs`` (every manylinux wheel that vendors a library, as auditwheel
    repairs them: numpy, Pillow, lxml, cryptography's older wheels, psycopg2-binary...)
    finds none of its libraries, and its import fails (``cannot open shared object file``)
    when a trusted plugin imports it after its claim: at first use in a handler, or at the
    plugin's own import when the site had not imported it before.  The same file loads by
    its path.  What an attacker gains: nothing past the pin; an operator loses every
    trusted plugin built on such a dependency (and may turn trust off to get it back).
    Suggested fix: keep the descriptor's identity but give the linker a real directory:
    hash through the descriptor, then load by the resolved path and compare
    ``(st_dev, st_ino)`` and the digest of the mapped file (``/proc/self/map_files``) with
    what was hashed, or refuse with a clear reason; or resolve ``$ORIGIN`` by loading a
    private copy placed beside the original."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    extension, library = _compiled(tmp_path)
    site = tmp_path / "srv" / "q"
    wheel(site, "webfetch-q", {"q": "webfetch_q:manifest"}, {"webfetch_q/__init__.py": _PLUGIN_Q},
          requires_metadata("webfetch-q", ["wfdep-q"]))  # fmt: skip
    install_extension(site, "wfdep-q", "wfdep_q", extension, library, "wfdep_q.libs/libwfq.so")
    # The same extension, loaded by its path in a fresh interpreter: it works.
    control = subprocess.run(
        [sys.executable, "-c", "import wfdep_q._speed as s; print(s.answer())"],
        cwd=site,
        capture_output=True,
        text=True,
        check=False,
    )
    assert control.stdout.strip() == "reviewed", control.stderr
    path = list(sys.path)
    sys.path.insert(0, str(site))
    try:
        importlib.invalidate_caches()
        registry.reset()
        assert registry.origin("q") is not None, registry.problems()
        instance = PluginInstance.objects.create(plugin="q", alias="q", trusted=True)
        assert instance.trust_holds(), instance.trust_problem()
        tool = next(t for t in plugin_tools() if t.name == "q_run")
        context = ToolContext(approved=True, call_id="q_run", plugin_instance=instance)
        result = str(tool.execute({}, context).content)
        instance.delete()
    finally:
        _forget(path, "webfetch_q", "wfdep_q")
    assert "reviewed" in result and "refused:" not in result, (
        "a trusted plugin's pinned dependency that vendors a library cannot be imported",
        result[-300:],
    )


# -- finding 2: a package of many files is read in a plugin process at every load ---------

#: (Fixed by decision 0055: one stamp, ``host.stamp``, with the walk limit.)
#: Files of a package: more than ``host._stamp`` walks (10 000, then "no stamp": a failed
#: read is not remembered) and than ``registry._stamp`` walks (5 000, then a stamp "never
#: reused": a verdict is not kept), fewer than the registry's own path check refuses
#: (``provenance._DIGEST_FILES``, 20 000).
_MANY_FILES = 10_050


def _reads_of_two_loads(site: Path, name: str, files: int) -> tuple[int, int]:
    """Plugin processes started by a first registry load and by a second one of the same,
    unchanged, installed distribution (a plugin whose import fails, as a hostile one's
    does: it hangs until the wall time, here it ends its process at once)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import host

    wheel(site, f"webfetch-{name}", {name: f"webfetch_{name}:manifest"},
          {f"webfetch_{name}/__init__.py": "import os\nos._exit(3)\n"})  # fmt: skip
    data = site / f"webfetch_{name}" / "data"
    data.mkdir()
    for i in range(files):
        (data / f"f{i}.txt").write_bytes(b"")
    registry.reset()
    before = host.reads_started
    registry.load()
    first = host.reads_started - before
    assert any(f"{name!r}" in p for p in registry.problems()), registry.problems()
    registry.reset()  # another generation: the same files, the same origin
    before = host.reads_started
    registry.load()
    return first, host.reads_started - before


# Open finding (issue 30, round 15): the test fails while the finding stands; a fix shows as
# XPASS in the run's summary (-rX), and its marker goes with the fix.  Not strict: it depends
# on a read budget a loaded machine can spend.
def test_a_package_of_many_files_makes_every_registry_load_start_a_plugin_process(
    tmp_path, registry_on
):
    """Severity: Medium (availability of every web and worker process).  Route: the
    registry's load budget (``MAX_READS_PER_LOAD``, ``READ_SECONDS``, attack 14 finding 2)
    bounds one load; what keeps it from being spent again at every load is that a read's
    outcome is kept: a verdict by ``registry._stamp`` of the package's files, a failure
    (a timeout, a crash) by ``host._stamp``, for ``_REMEMBER_SECONDS``.  Both stamps give
    up on a large package (``registry._stamp``: over 5 000 files, a stamp "never reused";
    ``host._stamp``: over 10 000, ``None``, and ``describe`` then remembers no failure),
    while the registry accepts a package of up to 20 000 entries
    (``provenance._DIGEST_FILES``).  A distribution merely installed (no instance) whose
    package holds 10 050 empty files and whose import hangs is read in a new sandbox at
    every load, each read held to the wall time (30 s) under the registry's lock; with
    three such entry points a load's 60 s budget is spent and one is deferred, so a load
    is done again at the next ``load()`` 60 s later (``_RETRY_SECONDS``), forever: every
    plugin tool offer and call in every process waits up to a minute out of every two.
    What an attacker gains: the assistant's plugins stall site-wide from one package on
    ``sys.path`` (a dependency), with no instance and no operator action.  Suggested fix:
    key remembered failures and verdicts by something that exists for every accepted
    package (the distribution's RECORD digest, or the origin with a bounded stamp of the
    top of the tree), refuse before any read a package the stamps cannot cover (make the
    stamps' limits the registry's), and bound the retry of deferred reads by backing off."""
    registry_on.syspath_prepend(str(tmp_path / "small"))
    small_first, small_again = _reads_of_two_loads(tmp_path / "small", "small", 10)
    assert (small_first, small_again) == (1, 0)  # a failure of a small package is remembered
    registry_on.syspath_prepend(str(tmp_path / "big"))
    first, again = _reads_of_two_loads(tmp_path / "big", "big", _MANY_FILES)
    print(f"plugin processes: {first} at the first load, {again} at the second")
    assert first == 1
    assert again == 0, "an unchanged package's failed read started a plugin process again"


# -- finding 3: a claim over a shared namespace refuses other distributions' portions ----

_PLUGIN_N = """\
def run(plugin, arguments):
    from wfns import a
    return a.ANSWER


def manifest():
    return {'name': 'n', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'n_run', 'description': 'x', 'handler': run}]}
"""


def test_a_trusted_call_makes_the_site_refuse_its_own_upgraded_module_of_a_shared_namespace(
    tmp_path,
):
    """Severity: Low (availability of the site's own code; any trusted plugin).  Route:
    ``registry.pin_imports`` claims (``loader.claim``) every top-level name of the trusted
    plugin's pinned dependencies, and ``PinnedFinder`` then serves every module below such
    a name, in the whole process, for the process's life, only from files whose bytes that
    pin holds.  A namespace package is shared by distributions (``google``, ``azure``,
    ``zope``, ``jaraco``, ``sphinxcontrib``, ``backports``): a trusted plugin requiring one
    ``google-*`` distribution claims ``google`` (the pin holds the other portions of the
    same directory too), and from its first trusted call on, a module of another
    distribution below ``google`` (the site's ``google.protobuf``, another plugin's
    dependency) upgraded since and not imported yet by this process is refused
    (``plugin_code_changed``) wherever it is imported: in a view, a Celery task, the
    site's own code; the plugin's own calls are isolated by then (its pin fails), so the
    claim protects nothing.  What an attacker gains: a trusted plugin breaks unrelated
    parts of the site after an ordinary upgrade of an unrelated package, in every process
    that ran one of its calls, depending on import order.
    Suggested fix: claim files, not names: serve below a claimed name only the modules
    whose file lies in a pinned copy's own files (a portion of the pinned distribution),
    and leave any other portion of a namespace to the ordinary finders."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "site"
    wheel(site, "webfetch-n", {"n": "webfetch_n:manifest"}, {"webfetch_n/__init__.py": _PLUGIN_N},
          requires_metadata("webfetch-n", ["wfns-a"]))  # fmt: skip
    wheel(site, "wfns-a", {}, {"wfns/a.py": "ANSWER = 'reviewed'\n"})
    # Another distribution of the same namespace: the site's, no dependency of the plugin.
    wheel(site, "wfns-b", {}, {"wfns/b.py": "ANSWER = 'the site'\n"})
    path = list(sys.path)
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    try:
        registry.reset()
        assert registry.origin("n") is not None, registry.problems()
        instance = PluginInstance.objects.create(plugin="n", alias="n", trusted=True)
        assert instance.trust_holds(), instance.trust_problem()
        tool = next(t for t in plugin_tools() if t.name == "n_run")
        context = ToolContext(approved=True, call_id="n_run", plugin_instance=instance)
        assert "reviewed" in str(tool.execute({}, context).content)
        instance.delete()
        # The site upgrades its own distribution of the namespace, as pip does (RECORD
        # rewritten), while the process runs; then its code imports the module.
        shutil.rmtree(site / "wfns_b-1.0.dist-info")
        wheel(site, "wfns-b", {}, {"wfns/b.py": "ANSWER = 'the site'  # 1.1\n"})
        importlib.invalidate_caches()
        try:
            answer = importlib.import_module("wfns.b").ANSWER
        except ImportError as exc:
            answer = f"refused: {getattr(exc, 'reason', '')} {exc}"
    finally:
        _forget(path, "webfetch_n", "wfns")
    assert answer == "the site", answer
