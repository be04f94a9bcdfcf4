"""Issue 30, attack round 7 (outside review of the round-6 fixes: ``WEBFETCH_PLUGIN_DIRS``,
the code pin of decision 0050, owned tool names and groups, shown fingerprints).

Each test FAILS on the code as it is: its last assertion states what docs/plugins.rst and
decisions 0049/0050 promise.  Distributions are written as pip installs them
(``tests/plugins/packages.py``: a ``.dist-info`` with a true ``RECORD``) into the test's own
directories; the registry, the models and the tools are the real ones.

Tried and held (no test): the pin memo's key has the change time, so a same-size rewrite
with ``os.utime`` changes the pin; a relative ``WEBFETCH_PLUGIN_DIRS`` entry is E001; a
symbolic link to a package directory is refused by the by-location import
(``plugin_origin_mismatch``, read, not run); a linked directory inside the package is
digested through the link; hidden dot files are digested; a ``.pth`` in ``site-packages``
adding a plugin directory to ``sys.path`` is E035 (read, not run); no code path adds a
plugin directory to the site's ``sys.path``, and the plugin process starts with ``-I -S``
(no ``.pth``, no ``sitecustomize``); a shared plugin directory holding two plugins does not
let one's package into the other's process (the sandbox binds the plugin's own package
only); tool names and groups are compared exactly everywhere (no case or ``-``/``_``
folding), ``acme-``/``acmex``/``acme_x`` are not ``acme``'s; the upgrade fingerprint covers
what is granted (egress is intersected with the acknowledged declaration, so a manifest that
differs across processes, by ``/proc/self/uid_map`` for one, widens nothing); the sandbox's
environment is cleared and its host name fixed.
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys

import pytest

from tests.plugins.packages import lazy_plugin, wheel

pytestmark = pytest.mark.django_db


#: Plugin ``e``: its tool answers ``ANSWER`` of the module named by ``WHERE``.
_REVIEWED = """\
ANSWER = 'reviewed'


def run(plugin, arguments):
    import importlib
    return importlib.import_module(WHERE).ANSWER


WHERE = 'webfetch_e'


def manifest():
    return {'name': 'e', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'e_run', 'description': 'x', 'handler': run}]}
"""


def _call_e(instance):
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    tool = next(t for t in plugin_tools() if t.name == "e_run")
    return tool.execute({}, ToolContext(approved=True, call_id="e", plugin_instance=instance))


def _trusted_e(site, plugin_dirs, files):
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    if files:
        wheel(site, "webfetch-e", {"e": "webfetch_e:manifest"}, files)
    plugin_dirs(site)
    assert registry.origin("e") is not None, registry.problems()
    assert registry.origin("e").path == str(site), registry.problems()
    instance = PluginInstance.objects.create(plugin="e", alias="e", trusted=True)
    assert instance.trust_holds()
    return instance


def test_a_trusted_plugin_of_a_plugin_dir_runs_an_unchecked_pyc_in_the_site(
    tmp_path, plugin_dirs, caplog
):
    """Severity: Critical (fixed).  Route: the plugin is installed as docs/plugins.rst says
    (``WEBFETCH_PLUGIN_DIRS``), the operator reviews ``webfetch_e/__init__.py`` and trusts
    the instance; a second ``webfetch-e 1.0`` wheel (a mirror, a rebuilt wheelhouse) with
    the same sources also ships ``webfetch_e/__pycache__/__init__.cpython-3XX.pyc``, a PEP
    552 UNCHECKED_HASH ``.pyc`` of other code, installed with ``pip --no-compile``.  The
    pin leaves a bytecode cache's ``.pyc`` out (the source is what is reviewed), so trust
    holds; ``registry._import`` runs the compiled-code check (``_refuse_compiled``) before
    either route (``sys.path`` or plugin directory), and ``tools._trust_holds`` at every
    trusted call (``registry.code_problem``), so the call runs as for an untrusted instance
    (``plugin_code_compiled``, logged) and nothing of the package is imported here."""
    from django_webfetch.plugins import provenance, registry

    site = tmp_path / "srv" / "e"
    instance = _trusted_e(site, plugin_dirs, {"webfetch_e/__init__.py": _REVIEWED})
    source = site / "webfetch_e" / "__init__.py"
    hidden = _REVIEWED.replace("'reviewed'", "'HIDDEN CODE RAN IN THE SITE'")
    code = compile(hidden, str(source), "exec", dont_inherit=True)
    flags = (0b01).to_bytes(4, "little")  # hash-based, unchecked
    pyc = (
        importlib.util.MAGIC_NUMBER + flags + importlib.util.source_hash(b"x") + marshal.dumps(code)
    )
    cached = importlib.util.cache_from_source(str(source))
    os.makedirs(os.path.dirname(cached), mode=0o755, exist_ok=True)
    with open(cached, "wb") as fh:
        fh.write(pyc)
    registry.reset()
    assert registry.origin("e").path == str(site)  # the plugin-directory route
    assert provenance.compiled_problem(str(site), "webfetch_e")
    assert instance.trust_holds()  # a bytecode cache's .pyc is outside the pin
    caplog.clear()
    with caplog.at_level("ERROR", logger="django_webfetch.plugins"):
        result = _call_e(instance)
    # Runs as for an untrusted instance (attack 9, finding 7: the check is made at every
    # trusted call): from the reviewed source in a plugin process, or nowhere.
    assert "HIDDEN" not in str(result.content), result
    assert not result.ok or "\nreviewed\n" in str(result.content), result
    refused = [r.getMessage() for r in caplog.records if "plugin_code_compiled" in r.getMessage()]
    assert refused and "__init__.cpython-" in refused[0], [r.getMessage() for r in caplog.records]
    assert "webfetch_e" not in sys.modules
    # The reviewed source alone (the .pyc the site's interpreter writes is its compilation).
    os.unlink(cached)
    registry.reset()
    result = _call_e(instance)
    assert result.ok and "\nreviewed\n" in str(result.content), result


def test_a_subpackage_named_pycache_is_code_outside_the_pin(tmp_path, plugin_dirs):
    """Severity: High (fixed).  Route: ``__pycache__`` is a valid package name: the reviewed
    ``webfetch_e/__init__.py`` imports ``webfetch_e.__pycache__.impl`` (a ``.py`` file); a
    second ``webfetch-e 1.0`` wheel's ``impl.py`` is other code.  A directory named
    ``__pycache__`` is a bytecode cache only when it holds nothing but ``.pyc`` files
    (``provenance.cache_problem``): a distribution whose ``RECORD`` lists anything else in
    one is refused at load (``plugin_distribution_unsafe``); the same files put there after
    install (no ``RECORD`` row) leave a package no pin holds for (``code_digest``), and the
    in-site import is refused (``plugin_code_compiled``)."""
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.manifest import ManifestError

    site = tmp_path / "srv" / "e"
    reviewed = _REVIEWED.replace("WHERE = 'webfetch_e'", "WHERE = 'webfetch_e.__pycache__.impl'")
    files = {
        "webfetch_e/__init__.py": reviewed,
        "webfetch_e/__pycache__/__init__.py": "",
        "webfetch_e/__pycache__/impl.py": "ANSWER = 'reviewed impl'\n",
    }
    wheel(site, "webfetch-e", {"e": "webfetch_e:manifest"}, files)
    plugin_dirs(site)
    assert registry.get_manifest("e") is None
    problems = [p for p in registry.problems() if "plugin_distribution_unsafe" in p]
    assert problems and "'webfetch_e/__pycache__/" in problems[0], registry.problems()
    # Not listed in a RECORD: a package trusted before the subpackage appeared.
    other = tmp_path / "srv" / "e2"
    instance = _trusted_e(other, plugin_dirs, {"webfetch_e/__init__.py": reviewed})
    pinned = instance.trusted_for()
    for relative in ("webfetch_e/__pycache__/__init__.py", "webfetch_e/__pycache__/impl.py"):
        (other / relative).parent.mkdir(exist_ok=True)
        (other / relative).write_text("ANSWER = 'OTHER CODE RAN IN THE SITE'\n")
    registry.reset()
    problem = provenance.compiled_problem(str(other), "webfetch_e")
    assert "'webfetch_e/__pycache__' is named as a bytecode cache but holds" in problem, problem
    assert provenance.code_digest(str(other), "webfetch_e") != provenance.code_digest(
        str(other), "webfetch_e"
    )  # no pin holds for it
    assert not instance.trust_holds(), pinned
    # Untrusted: it runs in the plugin sandbox, never in the site's process.
    _call_e(instance)
    assert not [m for m in sys.modules if m == "webfetch_e" or m.startswith("webfetch_e.")]
    origin = registry.origin("e")
    assert origin is not None and origin.path == str(other), registry.problems()
    with pytest.raises(ManifestError) as refused:
        registry._import(origin)  # what a trusted call runs first, whatever the route
    assert refused.value.reason == "plugin_code_compiled"
    assert "webfetch_e" not in sys.modules


#: A process holding a shared writable mapping of a file: dirties its page with the same
#: bytes, then (at a line on stdin) writes others through it, then waits for the end.
_MAPPER = """
import mmap, os, sys
path, other = sys.argv[1], bytes.fromhex(sys.argv[2])
fd = os.open(path, os.O_RDWR)
mapped = mmap.mmap(fd, 0)
with open(path, 'rb') as fh:
    mapped[:] = fh.read()
print('dirty', flush=True)
sys.stdin.readline()
mapped[:] = other
print('written', flush=True)
sys.stdin.readline()
mapped.close()
os.close(fd)
"""


def test_a_writable_mapping_changes_a_trusted_file_under_the_pin_memo(tmp_path, plugin_dirs):
    """Severity: Low (needs write access to the package, the site's uid).  Route: the pin
    memo (``provenance.file_sha256``) trusts a file's (dev, inode, size, mtime, ctime) key
    once it is 2 s old.  A process holding a shared writable ``mmap`` of
    ``webfetch_e/__init__.py`` dirties its page once (the kernel stamps mtime/ctime at that
    first write fault only), waits out ``SETTLE_NS`` while the operator confirms trust
    (the digest is memoized), then writes other code through the still-dirty page: no time
    changes until writeback.

    Fixed: each registry generation (``registry.load``) reads every plugin's code in full
    again (``provenance.rehashed``), whatever the memo says: the next load sees the other
    bytes, the ``RECORD`` check refuses the distribution and the pin no longer holds, so
    nothing of it is served, let alone run in the site.  Documented limit
    (docs/plugins.rst): between two loads the per-call pin uses the memo."""
    import subprocess
    import time
    from importlib.metadata import PathDistribution

    from django_webfetch.plugins import closure, provenance, registry
    from django_webfetch.plugins.tools import plugin_tools

    def pin() -> str:  # what trust records for it (no dependency: its own digest alone)
        dist = PathDistribution(site / "webfetch_e-1.0.dist-info")
        return closure.own_digest(dist, str(site), "webfetch_e", "webfetch_e:manifest")

    site = tmp_path / "srv" / "e"
    wheel(site, "webfetch-e", {"e": "webfetch_e:manifest"}, {"webfetch_e/__init__.py": _REVIEWED})
    source = site / "webfetch_e" / "__init__.py"
    other = _REVIEWED.encode().replace(b"'reviewed'", b"'OTHERCOD'")
    # Another process of the site's uid holds the mapping (the host holds no descriptor of
    # the plugin's code open for writing: it would mask it as the site's data).
    mapper = subprocess.Popen(
        [sys.executable, "-c", _MAPPER, str(source), other.hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert mapper.stdout is not None and mapper.stdin is not None
        assert mapper.stdout.readline().strip() == "dirty"  # the page is dirty; same bytes
        time.sleep(provenance.SETTLE_NS / 1e9 + 0.3)
        instance = _trusted_e(site, plugin_dirs, {})
        reviewed_digest = instance.trusted_record
        assert len(other) == len(_REVIEWED.encode())
        before = os.stat(source)
        mapper.stdin.write("write\n")
        mapper.stdin.flush()
        assert mapper.stdout.readline().strip() == "written"
        after = os.stat(source)
    finally:
        if mapper.stdin is not None:
            mapper.stdin.close()
        mapper.wait(timeout=60)
        if mapper.stdout is not None:
            mapper.stdout.close()
    assert source.read_bytes() == other
    if (before.st_mtime_ns, before.st_ctime_ns) == (after.st_mtime_ns, after.st_ctime_ns):
        # The key did not change, so the memo alone still says "reviewed": what the load's
        # full read fixes.
        assert pin() == reviewed_digest
    registry.reset()
    assert not instance.trust_holds(), instance.trust_problem()
    assert registry.get_manifest("e") is None
    assert any("plugin_distribution_unsafe" in p for p in registry.problems()), registry.problems()
    assert "e_run" not in {t.name for t in plugin_tools()}
    assert pin() != reviewed_digest
    assert "webfetch_e" not in sys.modules


def test_a_tool_of_a_plugin_never_installed_takes_an_installed_plugins_tool_away(
    tmp_path, settings, user_factory
):
    """Severity: Low (availability).  Route: ``plugins.tools.served_specs`` decides
    contested names from every *loaded* manifest, before ``offered_when_installed``
    filters by enabled instance: a distribution merely present in a plugin directory (no
    ``webfetch plugin install``, no instance, nothing of it offered) that declares a tool
    named like an installed, enabled plugin's tool removes that tool from every editor
    (``tool_name_claimed_twice``), and a plugin ``good`` never installed removes plugin
    ``good-admin``'s whole default group the same way (``tool_group_claimed_twice``).
    docs/plugins.rst says an uninstalled package "offers nothing"; it still takes away.

    Fixed: contests are decided among the plugins that have an instance
    (``served_specs(..., installed)``, looked up again at each offer)."""
    import io

    from django.core.management import call_command

    from django_webfetch.models import ToolGroup
    from django_webfetch.plugins import registry
    from django_webfetch.tools import default_registry

    runs = "def run(plugin, arguments):\n    return %r\n\n\n"
    source = runs + (
        "def manifest():\n    return {'name': %r, 'version': '1.0', 'description': 'x', "
        "'egress': [], 'tools': [{'name': %r, 'description': 'd', 'handler': run}]}\n"
    )
    site = tmp_path / "srv"
    victim = source % ("victim answered", "victim", "victim_run")
    wheel(site / "victim", "webfetch-victim", {"victim": "victim_plugin:manifest"},
          {"victim_plugin/__init__.py": victim})  # fmt: skip
    settings.WEBFETCH_PLUGIN_DIRS = [str(site / "victim")]
    registry.reset()
    default_registry.reset()
    try:
        call_command("webfetch", "plugin", "install", "victim", stdout=io.StringIO())
        ToolGroup.objects.filter(slug="victim").update(enabled=True)
        user = user_factory(staff=True)
        assert "victim_run" in {t.name for t in default_registry.tools_for_user(user)}, (
            default_registry.why_not_offered(user, "victim_run"),
            registry.problems(),
            list(ToolGroup.objects.values_list("slug", "enabled")),
        )
        # Another distribution lands in a plugin directory; nobody installs it.
        wheel(site / "squat", "webfetch-squat", {"squat": "squat_plugin:manifest"},
              {"squat_plugin/__init__.py": source % ("squat", "squat", "victim_run")})  # fmt: skip
        settings.WEBFETCH_PLUGIN_DIRS = [str(site / "victim"), str(site / "squat")]
        registry.reset()
        default_registry.reset()
        assert registry.get_manifest("squat") is not None, registry.problems()
        from django_webfetch.plugins.tools import plugin_tools, tool_problems

        # Fixed: a plugin without an instance never takes a name away (its own tool of
        # that name is not served), and no contest is reported while it is not installed.
        assert "victim_run" in {t.name for t in default_registry.tools_for_user(user)}, (
            tool_problems()
        )
        assert [(t.plugin, t.name) for t in plugin_tools() if t.name == "victim_run"] == [
            ("victim", "victim_run")
        ]
        assert tool_problems() == []
        # Once it is installed, the name is contested: served by neither, and said.
        call_command("webfetch", "plugin", "install", "squat", stdout=io.StringIO())
        assert "victim_run" not in {t.name for t in default_registry.tools_for_user(user)}
        default_registry.reset()
        assert "victim_run" not in {t.name for t in default_registry.tools_for_user(user)}
        assert any("tool_name_claimed_twice" in p for p in tool_problems("squat")), tool_problems()
    finally:
        settings.WEBFETCH_PLUGIN_DIRS = []
        registry.reset()
        default_registry.reset()


def test_a_plugin_directory_that_is_the_sites_own_site_packages_is_reported(settings, tmp_path):
    """Severity: Medium.  Route: ``WEBFETCH_PLUGIN_DIRS`` is only checked to be absolute
    paths; check E035 skips every ``sys.path`` entry that is one of the interpreter's
    ``site-packages`` (``checks._site_packages``).  An operator who lists the
    environment's ``site-packages`` (or a symbolic link to it) as the untrusted plugin
    directory and ``pip install --target``\\ s plugins there gets no error, though every
    import, site.py ``.pth`` and entry-point discovery of the site reaches them (decision
    0049's whole premise).  Fixed: E035 also errs for a ``WEBFETCH_PLUGIN_DIRS`` entry that
    is a ``sys.path`` directory or is inside the interpreter's ``site-packages`` (compared
    resolved)."""
    import sysconfig

    from django.core import checks as django_checks

    from django_webfetch import checks
    from django_webfetch.plugins import registry

    purelib = os.path.realpath(sysconfig.get_paths()["purelib"])
    assert purelib in {os.path.realpath(p or ".") for p in sys.path}
    settings.WEBFETCH_PLUGIN_DIRS = [purelib]
    registry.reset()
    try:
        assert registry.plugin_dirs() == [purelib]
        messages = django_checks.run_checks()
        said = [
            m for m in messages
            if m.id == "django_webfetch.E035" or "WEBFETCH_PLUGIN_DIRS" in str(m.msg)
        ]  # fmt: skip
        assert [m.id for m in said] == ["django_webfetch.E035"], [m.id for m in messages]
        assert "WEBFETCH_PLUGIN_DIRS" in said[0].msg and purelib in said[0].msg, said[0].msg
        # Inside site-packages too (a directory an import reaches by a dotted name, and
        # that pip manages), through a symbolic link as well.
        inside = os.path.join(purelib, "django_webfetch-test-plugins")
        settings.WEBFETCH_PLUGIN_DIRS = [inside]
        registry.reset()
        assert [m.id for m in checks.check_plugin_path()] == ["django_webfetch.E035"]
        link = tmp_path / "plugins"
        link.symlink_to(purelib)
        settings.WEBFETCH_PLUGIN_DIRS = [str(link)]
        registry.reset()
        assert [m.id for m in checks.check_plugin_path()] == ["django_webfetch.E035"]
        # A directory of its own, off sys.path, is no error.
        settings.WEBFETCH_PLUGIN_DIRS = [str(tmp_path / "own")]
        registry.reset()
        assert checks.check_plugin_path() == []
    finally:
        settings.WEBFETCH_PLUGIN_DIRS = []
        registry.reset()


#: ``e_lazy`` imports its submodule at first use, as many tools do.
_LAZY = lazy_plugin("e", "from webfetch_e import impl", "impl.ANSWER", plain="run")


def test_a_submodule_imported_after_the_trust_check_is_not_the_pinned_code(tmp_path, plugin_dirs):
    """Severity: High.  Route: ``plugins.tools._trust_holds`` decides trust once per
    registry generation (``_trust_seen``) and nothing else in a call compares the pin
    again (``_served`` and ``plugin_tools`` call ``registry.load()``, never
    ``registry.provider()``, the only path that notices installed code changed).  A
    trusted tool that imports a submodule of its package at first use (``from webfetch_e
    import impl`` inside the handler) imports it when that call comes, from whatever is on
    disk then: a second ``webfetch-e 1.0`` wheel installed after the first trusted call
    (``pip install --force-reinstall --target``) puts other code there, the pin no longer
    holds (``trust_holds()`` is False), and the long-running web or worker process still
    runs that code in-process.  Fixed: ``tools._trust_holds`` compares the code digest
    with the recorded one at every call (``tools._pin_holds``)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "srv" / "e"
    files = {"webfetch_e/__init__.py": _LAZY, "webfetch_e/impl.py": "ANSWER = 'reviewed'\n"}
    instance = _trusted_e(site, plugin_dirs, files)

    def call(name):
        tool = next(t for t in plugin_tools() if t.name == name)
        context = ToolContext(approved=True, call_id=name, plugin_instance=instance)
        return tool.execute({}, context)

    first = call("e_run")  # trust found to hold; the package is imported in the site
    assert first.ok and "plain" in first.content, first.content
    assert "webfetch_e" in sys.modules and "webfetch_e.impl" not in sys.modules
    # The second wheel's files (new inodes, as pip writes them).
    impl = site / "webfetch_e" / "impl.py"
    impl.unlink()
    impl.write_text("ANSWER = 'OTHER CODE'\n")
    generation = registry.generation()
    later = call("e_lazy")
    # Fixed: the pin is compared at every trusted call; it no longer holds, so the call
    # does not run in the site's process (isolated, or refused where no sandbox can be
    # built) and the registry loads again.
    assert "webfetch_e.impl" not in sys.modules
    assert registry.generation() > generation
    assert not instance.trust_holds()
    if later.ok:
        assert "OTHER CODE" in later.content, later.content  # ran in the plugin process
    else:
        # No sandbox here: the plugin is not served untrusted (refused at the new load).
        assert later.error in ("plugin_isolation_unavailable", "plugin_not_bound"), later


def test_a_trusted_plugin_of_a_plugin_dir_loads_its_extension_module_in_the_site(
    tmp_path, plugin_dirs, caplog
):
    """Severity: High (fixed; same root as the unchecked ``.pyc`` above).  Route: a
    ``webfetch_e/__init__.cpython-3XX-....so`` beside the reviewed ``__init__.py`` (the
    import system prefers it).  Decision 0050: "a plugin that ships an extension module
    cannot be trusted"; ``registry._import`` runs the compiled-code check before either
    route (and ``registry.code_problem`` at every trusted call), so the call runs as for an
    untrusted instance (``plugin_code_compiled``, logged) and the shared object
    (here the standard library's ``_json``) is never ``dlopen``\\ ed in the site's
    process."""
    import _json
    import shutil
    import sysconfig
    from importlib.machinery import EXTENSION_SUFFIXES

    from django_webfetch.plugins import provenance

    site = tmp_path / "srv" / "e"
    wheel(site, "webfetch-e", {"e": "webfetch_e:manifest"}, {"webfetch_e/__init__.py": _REVIEWED})
    assert sysconfig.get_config_var("EXT_SUFFIX") == EXTENSION_SUFFIXES[0]
    shipped = site / "webfetch_e" / f"__init__{EXTENSION_SUFFIXES[0]}"
    shutil.copyfile(_json.__file__, shipped)
    os.chmod(shipped, 0o644)
    instance = _trusted_e(site, plugin_dirs, {})
    assert provenance.compiled_problem(str(site), "webfetch_e")
    caplog.clear()
    with caplog.at_level("ERROR", logger="django_webfetch.plugins"):
        result = _call_e(instance)
    # Runs as for an untrusted instance (attack 9, finding 7): from the reviewed source in a
    # plugin process (which loads no extension module), or nowhere.
    assert not result.ok or "\nreviewed\n" in str(result.content), result
    refused = [r.getMessage() for r in caplog.records if "plugin_code_compiled" in r.getMessage()]
    assert refused and shipped.name in refused[0], [r.getMessage() for r in caplog.records]
    with open("/proc/self/maps") as fh:
        mapped = str(shipped) in fh.read()
    assert not mapped, f"{shipped} was dlopen()ed in the site's process"
    assert "webfetch_e" not in sys.modules


def test_a_plugin_directory_on_sys_path_with_unreadable_entry_points_evades_e035(
    tmp_path, monkeypatch
):
    """Severity: Low (a check that detects the old layout, not a guard).  Route: check
    E035 reads each ``sys.path`` directory's plugin entry points through
    ``dist.entry_points`` inside ``contextlib.suppress(Exception)``: a distribution whose
    ``entry_points.txt`` holds one byte that is not UTF-8 raises there and is not counted,
    so a ``PYTHONPATH`` directory holding it (and, beside it, a ``zstandard`` package the
    site's httpx imports at start) gets no E035; the registry refuses the plugin (E030,
    "its entry points cannot be read"), which never says the directory is on
    ``sys.path``, so the operator is never told to take it off."""
    from django_webfetch import checks

    old = tmp_path / "srv" / "old"
    info = wheel(old, "webfetch-p", {"p": "webfetch_p:manifest"},
                 {"webfetch_p/__init__.py": "def manifest():\n    return {}\n"})  # fmt: skip
    (info / "entry_points.txt").write_bytes(
        b"[django_webfetch.plugins]\np = webfetch_p:manifest\n# \xff\n"
    )
    monkeypatch.syspath_prepend(str(old))
    importlib.invalidate_caches()
    found = checks.check_plugin_path()
    assert [m.id for m in found] == ["django_webfetch.E035"], found
    assert str(old) in found[0].msg and "webfetch-p" in found[0].msg, found[0].msg
    # Fixed by failing closed only where the bytes name the plugin group: an undecodable
    # entry_points.txt of another group is no plugin distribution.
    (info / "entry_points.txt").write_bytes(b"[console_scripts]\np = webfetch_p:main\n# \xff\n")
    assert checks.check_plugin_path() == []


def test_compiled_problem_never_looks_at_the_pyc_of_a_module_inside_a_pycache_package(
    tmp_path,
):
    """Severity: High (fixed; the ``sys.path`` route).  Route: a wheel ships
    ``good/__pycache__/__init__.py`` and ``good/__pycache__/impl.py`` (reviewable source,
    imported as ``good.__pycache__.impl``) and, for that source, an UNCHECKED_HASH
    ``good/__pycache__/__pycache__/impl.cpython-3XX.pyc`` of other code, which the import
    system runs in place of ``impl.py``.  ``compiled_problem`` refuses the package: its
    ``__pycache__`` is not a bytecode cache (it holds a source, a subdirectory); and in a
    package without that name, the same ``.pyc`` at any depth is compared with its source."""
    from importlib.machinery import SourceFileLoader

    from django_webfetch.plugins import provenance

    def forge(source):
        code = compile("ANSWER = 'OTHER'\n", str(source), "exec", dont_inherit=True)
        flags = (0b01).to_bytes(4, "little")
        pyc = importlib.util.MAGIC_NUMBER + flags + b"\0" * 8 + marshal.dumps(code)
        cached = importlib.util.cache_from_source(str(source))
        os.makedirs(os.path.dirname(cached))
        with open(cached, "wb") as fh:
            fh.write(pyc)
        loader = SourceFileLoader("m", str(source))
        namespace: dict[str, object] = {}
        exec(loader.get_code("m"), namespace)
        return namespace["ANSWER"]

    package = tmp_path / "good"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("from good.__pycache__ import impl\n")
    (package / "__pycache__" / "__init__.py").write_text("")
    source = package / "__pycache__" / "impl.py"
    source.write_text("ANSWER = 'reviewed'\n")
    assert forge(source) == "OTHER"  # what the import system would run
    problem = provenance.compiled_problem(str(tmp_path), "good")
    assert problem.startswith("'good/__pycache__' is named as a bytecode cache but holds"), problem
    # The same forged .pyc for a module four packages down, beside an honest cache.
    deep = tmp_path / "deep"
    source = deep / "good" / "a" / "b" / "c" / "impl.py"
    source.parent.mkdir(parents=True)
    for directory in source.parents[:4]:
        (directory / "__init__.py").write_text("")
    source.write_text("ANSWER = 'reviewed'\n")
    assert provenance.compiled_problem(str(deep), "good") == ""
    assert forge(source) == "OTHER"
    problem = provenance.compiled_problem(str(deep), "good")
    assert "beside 'good/a/b/c/impl.py'" in problem, problem
