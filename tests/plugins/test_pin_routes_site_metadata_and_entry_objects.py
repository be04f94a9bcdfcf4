"""Issue 30, attack 12 (outside review of decisions 0050/0051 after the eleventh round).

Each test fails while its finding stands.  Real files laid out as pip installs them, the
real ``importlib.metadata``, the real registry and trust."""

from __future__ import annotations

import shutil
import time

import pytest

from tests.plugins.packages import (
    MANIFEST,
    lazy_plugin,
    plugin_requiring,
    record_hash,
    requires_metadata,
    wheel,
)

pytestmark = pytest.mark.django_db


#: What a dependency's wheel ships in ``.data/purelib`` (pip copies it into site-packages
#: as it is): a second metadata directory of the site's own distribution, whose METADATA
#: requires the dependency.
_FAKE_SITE_META = (
    "django_webfetch-0.0.0.dist-info/METADATA",
    "Metadata-Version: 2.1\nName: django-webfetch\nVersion: 0.0.0\nRequires-Dist: wfdep-k\n",
)  # with a RECORD of its own (below) listing nothing but itself


def test_a_dependency_that_installs_a_copy_of_the_sites_metadata_is_never_pinned(
    tmp_path, registry_on
):
    """Finding 1: ``closure.site_names`` takes every metadata directory on ``sys.path``
    whose ``Name`` is ``django-webfetch`` (``_installed``: "every copy of a name") and
    follows its requirements; ``_nodes`` leaves every site name out of the closure.  A
    dependency whose wheel ships ``.data/purelib/django_webfetch-0.0.0.dist-info/METADATA``
    (``Requires-Dist: <itself>``; pip copies ``.data/purelib`` as it is, and the registry's
    check of what a distribution installs covers plugin distributions only) makes itself
    one of the site's names: ``webfetch plugin trust`` shows no dependency, trust pins the
    plugin's code alone, and a later release of the dependency (other code, imported in the
    site's process at every trusted call) keeps trust (decision 0051 undone)."""
    from django_webfetch.plugins import closure, registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": lazy_plugin("t", "import wfdep_k", "wfdep_k.ANSWER")},
          requires_metadata("webfetch-t", ["wfdep-k"]))  # fmt: skip
    path, text = _FAKE_SITE_META
    own = "django_webfetch-0.0.0.dist-info/RECORD"
    files = {"wfdep_k/__init__.py": "ANSWER = 'reviewed'\n", path: text, own: f"{path},,\n"}
    wheel(site, "wfdep-k", {}, files)
    registry_on.syspath_prepend(str(site))
    registry.reset()
    time.sleep(2.2)  # settled: what the memos keep
    print("site names hold wfdep-k:", "wfdep-k" in closure.site_names())
    # What the operator is shown and trust pins: the dependency must be among them.
    shown = {d.name for d in registry.dependencies("t")}
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    # Either trust holds (the dependency pinned), or it never does because the dependency
    # writes into a metadata directory not its own (decision 0051, round 12 amendment:
    # fixed so; test bug fixed: the test required the first).
    held = instance.trust_holds()
    assert held or closure.FOREIGN_METADATA in instance.trust_problem(), instance.trust_problem()
    # The dependency's next release: other code, same name and version.
    (site / "wfdep_k" / "__init__.py").write_text("ANSWER = 'other code'\n")
    registry.reset()
    still = instance.trust_holds()
    assert "wfdep-k" in shown and not still, (shown, still)


def _call(instance, name):
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    tool = next(t for t in plugin_tools() if t.name == name)
    context = ToolContext(approved=True, call_id=name, plugin_instance=instance)
    return tool.execute({}, context)


def test_a_trusted_plugin_importing_another_plugin_of_its_distribution_runs_unpinned_code(
    tmp_path, registry_on
):
    """Finding 2: trust is given to a distribution (``webfetch plugin trust`` shows
    ``webfetch-t 1.0``), but its pin (``closure.trust_digest``) digests only the top-level
    package of the trusted entry point (``origin.top_level``), and the per-call checks
    (``registry.code_problem``) look at that package and the dependencies only.  A
    distribution may install the packages of all its entry points (``_distribution_problem``
    allows "its entry points' packages"): plugin ``t`` imports ``webfetch_u``, the package
    of the same distribution's second plugin ``u`` (never installed, never trusted), at
    first use.  A release that changes ``webfetch_u`` alone keeps ``t``'s trust, and its
    code runs in the site's process at the next trusted call of ``t``."""
    from django_webfetch.plugins import registry, tools
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    lazy = lazy_plugin("t", "import webfetch_u", "webfetch_u.ANSWER")
    other = MANIFEST % "u" + "ANSWER = 'reviewed'\n"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest", "u": "webfetch_u:manifest"},
          {"webfetch_t/__init__.py": lazy, "webfetch_u/__init__.py": other})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    assert registry.get_manifest("u") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    # The distribution's next release, installed as pip installs it (a RECORD of its own):
    # plugin u's package changed, plugin t's not.
    shutil.rmtree(site / "webfetch_t-1.0.dist-info")
    other = MANIFEST % "u" + "ANSWER = 'other code'\n"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest", "u": "webfetch_u:manifest"},
          {"webfetch_t/__init__.py": lazy, "webfetch_u/__init__.py": other})  # fmt: skip
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    holds = instance.trust_holds()
    per_call = tools._trust_holds(instance)
    # While it holds, the tool runs here, in the site's process: what does it import?
    ran = _call(instance, "t_lazy").content if per_call else "(isolated)"
    assert not holds and not per_call, (holds, per_call, ran)


_TWO_MANIFESTS = (
    "def reviewed(plugin, arguments):\n    return 'reviewed'\n\n\n"
    "def other(plugin, arguments):\n    return 'other code path'\n\n\n"
    "def _manifest(handler):\n    return {'name': 't', 'version': '1.0', 'description': 'x',"
    " 'egress': [],\n            'tools': [{'name': 't_run', 'description': 'x', "
    "'handler': handler}]}\n\n\n"
    "def manifest():\n    return _manifest(reviewed)\n\n\n"
    "def manifest_debug():\n    return _manifest(other)\n"
)


def test_a_release_that_points_the_entry_point_at_another_object_keeps_trust(tmp_path, registry_on):
    """Finding 3: the pin (``closure.trust_digest``) covers the files of the plugin's
    package and its dependencies, not which object of that package the entry point loads
    (``entry_points.txt``, in the ``.dist-info``, outside the package; nor the plugin's
    own ``METADATA``).  A release whose package is byte for byte the reviewed one but
    whose entry point is ``webfetch_t:manifest_debug`` instead of ``webfetch_t:manifest``
    keeps trust: the site's process now serves another manifest, with other handlers,
    than the one the operator reviewed and was shown."""
    from django_webfetch.plugins import registry, tools
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _TWO_MANIFESTS})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    assert "reviewed" in _call(instance, "t_run").content
    # The next release, installed as pip installs it: the same package, another entry point.
    shutil.rmtree(site / "webfetch_t-1.0.dist-info")
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest_debug"},
          {"webfetch_t/__init__.py": _TWO_MANIFESTS})  # fmt: skip
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    holds = instance.trust_holds()
    per_call = tools._trust_holds(instance)
    ran = _call(instance, "t_run").content if per_call else "(isolated)"
    assert not holds and not per_call, (holds, per_call, ran)


def _longest_mark_run(text: str) -> int:
    import unicodedata

    longest = run = 0
    for char in text:
        run = run + 1 if unicodedata.category(char).startswith("M") else 0
        longest = max(longest, run)
    return longest


def test_a_version_stacking_combining_marks_on_one_digit_is_shown_as_it_is(tmp_path, registry_on):
    """Finding 4 (low): ``shown`` (``tools.display.visible_text``) escapes a combining mark
    only when nothing alphanumeric precedes it, and a mark never resets what precedes:
    any number of marks after one digit is shown raw.  The plugin's own METADATA
    ``Version`` is not checked against PEP 440 (only a dependency's is), so ``1.0``
    followed by 90 stacked marks (above, below, overlays: "Zalgo") is what
    ``webfetch plugin trust``, ``list`` and the admin's trust confirmation page print; on
    an HTML page such a glyph grows far above and below its line box and draws over the
    rows around it (the digest, the dependencies).  Unicode's stream-safe format (UAX #15)
    already bounds a run of non-starters; a display needs far fewer than that."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.provenance import installed_provider
    from django_webfetch.plugins.shown import shown

    marks = "\u0336\u0338\u0301\u0316\u030d\u0353" * 15  # 90 marks: overlays, above, below
    site = tmp_path / "site"
    meta = {"METADATA": f"Metadata-Version: 2.1\nName: webfetch-t\nVersion: 1.0{marks}\n".encode()}
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"}, meta)  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    found = installed_provider("t")
    assert found is not None, registry.problems()
    printed = shown(f"  distribution:  {found}")  # as ``webfetch plugin trust`` prints it
    assert _longest_mark_run(printed) <= 4, printed.encode("unicode_escape")[:120]


def _bytes_read_by(script: str, *args: str, ceiling: int) -> tuple[int, int | None]:
    """Run ``script`` (``python -c``) in a new interpreter from the checkout and watch
    how many bytes it reads (``rchar`` of ``/proc/<pid>/io``): stopped once it has read
    more than ``ceiling``.  The bytes read, and its exit status (``None``: stopped)."""
    import os
    import subprocess
    import sys

    import django_webfetch

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    read = 0
    try:
        while child.poll() is None:
            with open(f"/proc/{child.pid}/io") as fh:
                fields = dict(line.split(": ") for line in fh.read().splitlines())
            read = max(read, int(fields["rchar"]))
            if read > ceiling:
                child.kill()
                child.wait()
                return read, None
            time.sleep(0.01)
    except (OSError, KeyError, ValueError):
        child.wait()  # it ended between two looks
    return read, child.returncode


#: The registry's load, as every web and worker process runs it, in a child.
_LOAD = (
    "import os, sys\nos.environ['DJANGO_SETTINGS_MODULE'] = 'tests.settings'\n"
    "import django\ndjango.setup()\nfrom django.conf import settings\n"
    "settings.WEBFETCH_PLUGIN_DIRS = [sys.argv[1]]\n"
    "from django_webfetch.plugins import registry\nregistry.reset()\nregistry.load()\n"
    "print(registry.problems())\n"
)


def test_a_link_to_a_proc_file_makes_the_digest_read_without_bound(tmp_path):
    """Finding 5: every walk of a package follows symbolic links, and the bytes bound of a
    closure (``MAX_BYTES``, "decided from each file's ``stat`` before any is read") and the
    plugin's own digest read each file to its end.  A file of ``/proc`` is a regular file
    whose ``stat`` says 0 bytes: ``/proc/self/pagemap`` reads as 8 bytes per page of the
    reader's address space (256 GiB on x86-64), and its owner is the reading process's
    uid, mode 0400, so the registry's ownership check (``plugin_path_unsafe``) passes it.
    A package holding ``blob -> /proc/self/pagemap`` (a plugin directory unpacked from a
    tarball, an sdist's install: links a wheel cannot carry) makes ``provider_of``, which
    every registry load runs for every entry point, installed or not, read hundreds of
    GiB in every web and worker process; a load must end having read a bounded amount
    (here: not 2 GiB more than a load without the plugin)."""
    import os

    plugins = tmp_path / "plugins"
    wheel(plugins, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    os.symlink("/proc/self/pagemap", plugins / "webfetch_t" / "blob")
    # Without the link, a load reads a bounded amount (the interpreter, Django, the site).
    done, status = _bytes_read_by(_LOAD, str(tmp_path / "none"), ceiling=2 << 30)
    assert status == 0, (done, status)
    read, status = _bytes_read_by(_LOAD, str(plugins), ceiling=done + (2 << 30))
    assert status is not None, f"a registry load still reading after {read >> 20} MiB"


def test_a_versioned_shared_library_a_dependency_installs_outside_its_directory_is_not_pinned(
    tmp_path,
):
    """Finding 6: ``closure._tops`` makes a dependency unpinnable for a ``RECORD`` row
    outside its directory only when the row ends with a suffix the import system loads
    (``_CODE_SUFFIXES``: ``.so``, ``.py``...); anything else there is "a script or a data
    file: not imported".  A shared library is loaded by the dynamic linker, not the
    import system, and is named with its version after ``.so``: ``libwfk.so.1``,
    installed by the wheel's ``.data/data/lib/`` into ``<prefix>/lib`` (outside
    ``site-packages``), is what the dependency's pinned extension module links to
    (``RPATH $ORIGIN/../../..``) or what its reviewed code opens with
    ``ctypes.CDLL``.  A release that changes that library alone (other native code, run in
    the site's process at the trusted import) keeps the pin."""
    import shutil as sh
    import subprocess
    import sys

    from django_webfetch.plugins import closure

    prefix = tmp_path / "prefix"
    purelib = prefix / "lib" / "python3" / "site-packages"
    dist = plugin_requiring(purelib, ["wfdep-n"])
    loader = (
        "import ctypes, os\n"
        "LIB = ctypes.CDLL(os.path.join(os.path.dirname(__file__), '..', '..', '..', "
        "'libwfk.so.1'))\n"
    )
    info = wheel(purelib, "wfdep-n", {}, {"wfdep_n/__init__.py": loader, "../../libwfk.so.1": ""})
    library = prefix / "lib" / "libwfk.so.1"

    def release(source: str) -> None:
        """The library of a release, its RECORD row as pip writes it."""
        sh.copyfile(source, library)
        rows = (info / "RECORD").read_text().splitlines()
        row = f"../../libwfk.so.1,{record_hash(library.read_bytes())},{library.stat().st_size}"
        (info / "RECORD").write_text(
            "".join(f"{row if r.startswith('../../libwfk') else r}\n" for r in rows)
        )

    release("/usr/lib/x86_64-linux-gnu/libz.so.1")  # the reviewed library
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(purelib)!r}); "
         "import wfdep_n; print(wfdep_n.LIB._name)"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip().endswith("libwfk.so.1"), done.stderr
    deps = closure.dependencies(dist, str(purelib))
    assert [(d.name, d.version, d.problem) for d in deps] == [("wfdep-n", "1.0", "")], deps
    before = closure.pinned_digest("c" * 64, deps)
    release("/usr/lib/x86_64-linux-gnu/libm.so.6")  # the next release's
    after = closure.pinned_digest("c" * 64, closure.dependencies(dist, str(purelib)))
    assert before != after, ("the native library it loads changed and its pin holds", deps)
