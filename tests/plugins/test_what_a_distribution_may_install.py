"""Issue 30, the fourth attack (session 5), findings 1-7: what a plugin's distribution and
the distributions beside it may install.

The registry builds its own map of which distribution installs each top-level name, from
every distribution's RECORD (``top_level.txt`` added, never instead); a distribution it
cannot read refuses the plugins it may share a name with; a plugin distribution may write
only its own package and its own ``.dist-info``, nothing outside its directory and no
scripts; one reserved or invalid entry point refuses its whole distribution; a trusted
in-process import loads the plugin only from its recorded origin; a ``__pycache__``
beside a plugin is held to the rule of its sources.  Real distributions in a ``sys.path``
directory as pip leaves them (a wheel's ``top_level.txt`` is copied as the author wrote
it); nothing here weakens or bypasses the sandbox.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.plugins.packages import MANIFEST, trusted_t, wheel

pytestmark = pytest.mark.django_db


def _overwrite_trusted(tmp_path: Path, registry_on, top_level: bytes) -> dict:
    """A trusted plugin ``webfetch-t`` (package ``webfetch_t``), then a second distribution
    ``webfetch-helper`` (no plugin entry point: any dependency) whose wheel writes
    ``webfetch_t/__init__.py`` and ships ``top_level.txt`` = ``top_level``."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    instance = trusted_t(site, registry_on)
    rewritten = "OWNED = True\n" + MANIFEST % "t"
    wheel(site, "webfetch-helper", {}, {"webfetch_t/__init__.py": rewritten,
           "webfetch_helper/__init__.py": ""}, {"top_level.txt": top_level})  # fmt: skip
    assert (site / "webfetch_t" / "__init__.py").read_text() == rewritten
    registry.reset()
    instance.refresh_from_db()
    return {
        "t_loaded": registry.get_manifest("t") is not None,
        "trust_holds": instance.trust_holds(),
        "problems": registry.problems(),
    }


def test_top_level_txt_cannot_hide_a_write_into_another_plugins_package(tmp_path, registry_on):
    """Finding 1 (high).  The package map is built from every distribution's RECORD (the
    installer's list of what it wrote) united with its ``top_level.txt``, never replaced
    by it: a second distribution whose wheel writes ``webfetch_t/__init__.py`` and
    declares only ``webfetch_helper`` in ``top_level.txt`` is a provider of ``webfetch_t``,
    and the trusted plugin ``t`` is refused (``plugin_distribution_unsafe``).  Before,
    ``importlib.metadata.packages_distributions()`` believed ``top_level.txt`` and ``t``
    loaded with the other distribution's code, its trust holding."""
    report = _overwrite_trusted(tmp_path, registry_on, b"webfetch_helper\n")
    assert not report["t_loaded"], report
    assert any("'webfetch_t' is also installed by" in p for p in report["problems"]), report


def test_an_undecodable_top_level_txt_never_turns_the_shared_check_off(tmp_path, registry_on):
    """Finding 2 (high).  Each distribution is read on its own: one whose
    ``top_level.txt`` is not UTF-8 no longer makes the whole map raise (before, the check
    answered "" for every plugin).  Its RECORD still counts, and the plugin whose package
    it rewrote is refused."""
    # Truthful but for one byte: decoded, it would name ``webfetch_t`` and be caught.
    report = _overwrite_trusted(tmp_path, registry_on, b"webfetch_t\nwebfetch_helper\n\xff\n")
    assert not report["t_loaded"], report


def test_a_dependency_beside_another_plugin_cannot_shadow_a_trusted_plugin_unrefused(
    tmp_path, registry_on
):
    """Finding 3 (high).  docs/plugins.rst's layout: each plugin in a directory of its own
    on ``sys.path``.  A dependency installed beside the hostile plugin ``webfetch-evil``
    (``evil-helper``, no plugin entry point, a misleading ``top_level.txt``) provides a
    package ``webfetch_t`` first on ``sys.path``: the map reads its RECORD and the trusted
    ``t`` is refused, so nothing imports the helper's ``webfetch_t`` as ``t``
    (the in-process import itself refuses a name resolving elsewhere:
    ``test_a_trusted_import_refuses_a_name_that_resolves_outside_its_origin``)."""
    import importlib.util

    from django_webfetch.plugins import registry

    own, other = tmp_path / "plugins-t", tmp_path / "plugins-evil"
    instance = trusted_t(own, registry_on)
    wheel(other, "webfetch-evil", {"evil": "webfetch_evil:manifest"},
           {"webfetch_evil/__init__.py": MANIFEST % "evil"})  # fmt: skip
    wheel(other, "evil-helper", {}, {"webfetch_t/__init__.py": "OWNED = True\n" + MANIFEST % "t"},
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


def test_a_plugin_writing_into_another_distributions_metadata_is_refused(tmp_path, registry_on):
    """Finding 4 (medium).  A plugin's RECORD may name metadata files only in its own
    ``<name>-<version>.dist-info``: a plugin that overwrites
    ``realmod-1.0.dist-info/top_level.txt`` (pip writes ``.data/purelib/...`` there) to
    hide that it replaced the module ``webfetch_realmod`` is refused; the map, from
    RECORDs, names ``realmod`` for that package anyway."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    info = wheel(site, "realmod", {}, {"webfetch_realmod/__init__.py": "REAL = True\n"},
                  {"top_level.txt": b"webfetch_realmod\n"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    import importlib.metadata

    assert importlib.metadata.packages_distributions()["webfetch_realmod"] == ["realmod"]
    wheel(site, "webfetch-shadow", {"shadow": "webfetch_realmod.webfetch:manifest"},
           {"webfetch_realmod/__init__.py": "REAL = False\n",
            "webfetch_realmod/webfetch.py": MANIFEST % "shadow",
            f"{info.name}/top_level.txt": "webfetch_realmod_gone\n"})  # fmt: skip
    registry.reset()
    report = {"loaded": registry.get_manifest("shadow") is not None,
              "problems": registry.problems()}  # fmt: skip
    assert not report["loaded"], report


def test_a_distribution_with_a_reserved_entry_point_is_refused_whole(tmp_path, registry_on):
    """Finding 5 (medium).  A distribution with a second entry point
    ``rb = django.webfetch_planted:manifest`` (which lets it install ``django/...``) is
    refused as a whole: ``rb`` for its reserved name, ``r`` because its distribution has a
    reserved entry point; every name the distribution installs is checked for sharing,
    reserved names included.  Django here is a copy in the test's directory."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    wheel(site, "webfetch-r", {"r": "webfetch_r:manifest",
           "rb": "django.webfetch_planted:manifest"},
           {"webfetch_r/__init__.py": MANIFEST % "r",
            "django/webfetch_planted.py": "PLANTED = True\n"})  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    report = {"r_loaded": registry.get_manifest("r") is not None, "problems": registry.problems()}
    assert not report["r_loaded"], report
    assert any("'rb' refused (entry_point_reserved)" in p for p in report["problems"]), report
    assert any("'r' refused (plugin_distribution_unsafe)" in p for p in report["problems"]), report


def test_a_plugin_installing_a_script_over_the_sites_own_is_refused(tmp_path, registry_on):
    """Finding 6 (medium).  pip writes a wheel's ``console_scripts`` and ``.data/scripts``
    into the environment's ``bin/`` over whatever is there (RECORD:
    ``../../../bin/gunicorn``): a plugin distribution declaring ``console_scripts`` or
    ``gui_scripts``, or with any RECORD entry outside its directory (``..`` or absolute,
    whatever its suffix), is refused."""
    from django_webfetch.plugins import registry

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    wrapper = "#!/usr/bin/env python\nfrom webfetch_s import run\nrun()\n"
    points = b"[django_webfetch.plugins]\ns = webfetch_s:manifest\n"
    points += b"[console_scripts]\ngunicorn = webfetch_s:run\n"
    wheel(site, "webfetch-s", {"s": "webfetch_s:manifest"},
           {"webfetch_s/__init__.py": MANIFEST % "s" + "def run():\n    pass\n",
            "../../../bin/gunicorn": wrapper},
           {"entry_points.txt": points})  # fmt: skip
    assert (tmp_path / "venv" / "bin" / "gunicorn").read_text() == wrapper
    registry_on.syspath_prepend(str(site))
    registry.reset()
    report = {"s_loaded": registry.get_manifest("s") is not None, "problems": registry.problems()}
    assert not report["s_loaded"], report


def test_a_writable_pycache_beside_a_module_plugin_refuses_it(tmp_path, registry_on):
    """Finding 7 (low-medium).  A plugin that is one module (``webfetch_m.py``) has its
    compiled code in ``<dir>/__pycache__``, which Python loads in place of the source
    when its header matches: ``_path_problem`` holds that directory (and the top-level
    name's ``.pyc`` files in it) to the rule of the sources, so a ``__pycache__`` writable
    by group or others refuses the plugin (``plugin_path_unsafe``)."""
    import os

    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    wheel(site, "webfetch-m", {"m": "webfetch_m:manifest"}, {"webfetch_m.py": MANIFEST % "m"})
    cache = site / "__pycache__"
    cache.mkdir()
    os.chmod(cache, 0o777)  # as a umask-000 (or group: 002) import leaves it
    registry_on.syspath_prepend(str(site))
    registry.reset()
    report = {"m_loaded": registry.get_manifest("m") is not None, "problems": registry.problems()}
    assert not report["m_loaded"], report


def test_a_namespace_package_split_over_two_distributions_refuses_both(tmp_path, registry_on):
    """Held (and held still).  ``t`` is ``webfetch_ns.t`` in a namespace package (no
    ``__init__``); a second plugin in another ``sys.path`` directory provides
    ``webfetch_ns/t/...`` first on the path: both are refused, nothing of either is
    loaded."""
    from django_webfetch.plugins import registry

    own, other = tmp_path / "own", tmp_path / "other"
    wheel(own, "webfetch-nst", {"nst": "webfetch_ns.t:manifest"},
           {"webfetch_ns/t/__init__.py": MANIFEST % "nst"})  # fmt: skip
    wheel(other, "webfetch-nsevil", {"nsevil": "webfetch_ns.evil:manifest"},
           {"webfetch_ns/evil/__init__.py": MANIFEST % "nsevil",
            "webfetch_ns/t/__init__.py": "OWNED = True\n" + MANIFEST % "nst"})  # fmt: skip
    registry_on.syspath_prepend(str(own))
    registry_on.syspath_prepend(str(other))
    registry.reset()
    loaded = [n for n in ("nst", "nsevil") if registry.get_manifest(n) is not None]
    assert loaded == [], registry.problems()
    assert sum("'webfetch_ns' is also installed by" in p for p in registry.problems()) == 2


def test_an_unreadable_distribution_refuses_the_plugins_beside_it_and_no_other(
    tmp_path, registry_on
):
    """Fail closed, not off: a distribution whose ``top_level.txt`` cannot be decoded
    (``junk``, which installs nothing of ``p1``) refuses the plugin whose package its
    directory holds, with a stable reason and a message naming it; a plugin in another
    directory is still loaded, and the check still finds what other distributions share."""
    from django_webfetch.plugins import registry

    first, second = tmp_path / "first", tmp_path / "second"
    wheel(first, "webfetch-p1", {"p1": "webfetch_p1:manifest"},
           {"webfetch_p1/__init__.py": MANIFEST % "p1"})  # fmt: skip
    wheel(first, "junk", {}, {"junk/__init__.py": ""}, {"top_level.txt": b"junk\n\xff\n"})
    wheel(second, "webfetch-p2", {"p2": "webfetch_p2:manifest"},
           {"webfetch_p2/__init__.py": MANIFEST % "p2"})  # fmt: skip
    registry_on.syspath_prepend(str(first))
    registry_on.syspath_prepend(str(second))
    registry.reset()
    problems = registry.problems()
    assert registry.get_manifest("p1") is None, problems
    assert registry.get_manifest("p2") is not None, problems
    (refusal,) = [p for p in problems if "'p1' refused" in p]
    assert "(plugin_distribution_unsafe)" in refusal and "junk" in refusal, refusal
    assert "cannot be read" in refusal, refusal


def test_an_undecodable_entry_points_txt_refuses_its_own_plugins_and_no_other(
    tmp_path, registry_on
):
    """``importlib.metadata.entry_points()`` decodes every distribution's
    ``entry_points.txt``: one undecodable byte in one of them made it raise, and with it
    every registry load (no plugin at all, an error on every page that reads the registry).
    The registry reads them one distribution at a time: the broken one is refused with a
    stable reason, an unrelated broken one (not naming the plugin group) says nothing, and
    every other plugin loads."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site"
    wheel(site, "webfetch-good", {"good": "webfetch_good:manifest"},
           {"webfetch_good/__init__.py": MANIFEST % "good"})  # fmt: skip
    broken = wheel(site, "webfetch-broken", {}, {"webfetch_broken/__init__.py": ""})
    (broken / "entry_points.txt").write_bytes(
        b"[django_webfetch.plugins]\nbroken = webfetch_broken\xff:manifest\n"
    )
    other = wheel(site, "unrelated", {}, {"unrelated/__init__.py": ""})
    (other / "entry_points.txt").write_bytes(b"[console_scripts]\nx = unrelated\xff:main\n")
    registry_on.syspath_prepend(str(site))
    registry.reset()
    problems = registry.problems()
    assert registry.get_manifest("good") is not None, problems
    (refusal,) = [p for p in problems if "webfetch-broken" in p]
    assert "(plugin_distribution_unsafe)" in refusal and "cannot be read" in refusal, refusal
    assert not [p for p in problems if "unrelated" in p], problems


def test_a_trusted_import_refuses_a_name_that_resolves_outside_its_origin(tmp_path, registry_on):
    """The in-process import of a trusted instance (``registry._import``, used by the
    in-process handler and, without a sandbox, by the load) loads the plugin from the
    files under its recorded ``Origin.path`` only: a directory put on ``sys.path`` before
    it by hand (no distribution metadata: no map can see it) with a package of the same
    name is refused (``plugin_origin_mismatch``) before anything of either runs; with that
    directory gone, the same origin imports the plugin's own code (a package and a
    single module alike)."""
    import importlib
    import sys

    from django_webfetch.plugins import registry
    from django_webfetch.plugins.manifest import ManifestError
    from django_webfetch.plugins.runtime.host import Origin

    own, shadow, mark = tmp_path / "own", tmp_path / "shadow", tmp_path / "ran"
    files = {"webfetch_ti/__init__.py": MANIFEST % "ti", "webfetch_tm.py": MANIFEST % "tm"}
    wheel(own, "webfetch-ti", {"ti": "webfetch_ti:manifest"}, files)
    planted = f"open({str(mark)!r}, 'w').close()\n" + MANIFEST % "ti"
    for name in ("webfetch_ti/__init__.py", "webfetch_tm.py"):
        (shadow / name).parent.mkdir(parents=True, exist_ok=True)
        (shadow / name).write_text(planted)
    registry_on.syspath_prepend(str(own))
    registry_on.syspath_prepend(str(shadow))
    package = Origin("webfetch_ti:manifest", str(own), "webfetch_ti")
    module = Origin("webfetch_tm:manifest", str(own), "webfetch_tm")
    try:
        for origin in (package, module):
            with pytest.raises(ManifestError) as refused:
                registry._import(origin)
            assert refused.value.reason == "plugin_origin_mismatch", refused.value
            assert str(shadow) in str(refused.value), refused.value
            with pytest.raises(ManifestError):
                registry.InProcessHandler(origin, "x")(None, {})
        assert not mark.exists()
        assert "webfetch_ti" not in sys.modules and "webfetch_tm" not in sys.modules
        sys.path.remove(str(shadow))
        importlib.invalidate_caches()
        assert registry._import(package)["name"] == "ti"
        assert registry._import(module)["name"] == "tm"
        assert not mark.exists()
    finally:
        sys.modules.pop("webfetch_ti", None)
        sys.modules.pop("webfetch_tm", None)


@pytest.mark.parametrize("group", ["console_scripts", "gui_scripts"])
def test_a_plugin_distribution_declaring_scripts_is_refused(tmp_path, group):
    """Declared scripts alone (no RECORD entry outside the directory) refuse the
    distribution: an installer writes them into the environment's ``bin/``."""
    from importlib.metadata import PathDistribution

    from django_webfetch.plugins.registry import _distribution_problem

    points = f"[django_webfetch.plugins]\nd = webfetch_d:manifest\n[{group}]\nx = webfetch_d:run\n"
    info = wheel(tmp_path / "site", "webfetch-d", {"d": "webfetch_d:manifest"},
                  {"webfetch_d/__init__.py": MANIFEST % "d"},
                  {"entry_points.txt": points.encode()})  # fmt: skip
    (ep,) = [e for e in PathDistribution(info).entry_points if e.name == "d"]
    assert group in _distribution_problem(ep)


#: Path segments a RECORD line is drawn from: the plugin's own package, module, compiled
#: code and metadata; another top-level name, metadata not its own, a ``.pth``, a
#: ``sitecustomize``, ``..`` and absolute paths.
_SEGMENTS = [
    "webfetch_d", "webfetch_d-1.0.dist-info", "webfetch_d-2.0.dist-info", "other-1.0.dist-info",
    "webfetch_d.egg-info", "__pycache__", "..", ".", "", "other", "bin", "x.py", "z.txt",
    "webfetch_d.py", "webfetch_d.cpython-311.pyc", "webfetch_d.cpython-311-x86_64-linux-gnu.so",
    "y.pth", "sitecustomize.py", "usercustomize", "webfetch_d.pyc", "METADATA",
]  # fmt: skip


def _allowed(path: str) -> bool:
    """What a plugin distribution may install, said directly: files in its own package or
    its own ``.dist-info``, its own module (source or extension) and its compiled code,
    nothing outside its directory, no ``.pth`` anywhere."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts:
        return True  # no file (``/``, ``.``): nothing is installed
    if path.startswith("/"):
        return False
    if ".." in parts or parts[-1].endswith(".pth"):
        return False
    if len(parts) > 1 and parts[0] == "webfetch_d-1.0.dist-info":
        return True  # its own metadata: never imported, any name
    if "__pycache__" in parts and not (
        len(parts) >= 2
        and parts[-2] == "__pycache__"
        and parts[-1].endswith(".pyc")
        and "__pycache__" not in parts[:-2]
    ):
        # ``__pycache__`` is a bytecode cache only with ``.pyc`` files directly in it
        # (attack 7): any other use of the name is refused wherever it is.
        return False
    if len(parts) > 1 and parts[0] in ("webfetch_d", "webfetch_d-1.0.dist-info"):
        return True
    if len(parts) == 1:
        return parts[0] in ("webfetch_d.py", "webfetch_d.cpython-311-x86_64-linux-gnu.so")
    return (
        len(parts) == 2
        and parts[0] == "__pycache__"
        and parts[1].startswith("webfetch_d.")
        and parts[1].endswith(".pyc")
    )


def test_a_plugin_is_loaded_only_if_every_record_path_is_its_own():
    """Property: for any set of RECORD lines, the distribution passes the file rules
    exactly when every path is under its own package or its own ``.dist-info`` (or is its
    own module or compiled code): nothing outside its directory, no other metadata, no
    other top-level name, no ``.pth``."""
    import shutil
    import tempfile
    from importlib.metadata import PathDistribution

    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from django_webfetch.plugins.registry import _distribution_problem, _Providers

    providers = _Providers().build()  # the environment's map, read once for every example
    paths = st.builds(
        lambda absolute, parts: ("/" if absolute else "") + "/".join(parts),
        st.booleans(),
        st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=4),
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(paths, max_size=6))
    # A random search found the first (the name as a file): ``__pycache__`` is a cache
    # only with ``.pyc`` files directly in it, except in its own metadata.
    @example(["webfetch_d/__pycache__"])
    @example(["webfetch_d/__pycache__/x.py"])
    @example(["webfetch_d/__pycache__/__pycache__/webfetch_d.pyc"])
    @example(["webfetch_d/__pycache__/webfetch_d.cpython-311.pyc"])
    @example(["webfetch_d-1.0.dist-info/__pycache__"])
    def check(record: list[str]) -> None:
        site = Path(tempfile.mkdtemp())
        try:
            info = site / "webfetch_d-1.0.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(
                "Metadata-Version: 2.1\nName: webfetch-d\nVersion: 1.0\n"
            )
            (info / "entry_points.txt").write_text(
                "[django_webfetch.plugins]\nd = webfetch_d:manifest\n"
            )
            (info / "RECORD").write_text("".join(f"{line},,\n" for line in record))
            dist = PathDistribution(info)
            (ep,) = dist.entry_points
            listed = [str(f) for f in dist.files or ()]
            problem = _distribution_problem(ep, providers)
            assert (problem == "") == all(_allowed(p) for p in listed), (listed, problem)
        finally:
            shutil.rmtree(site)

    check()
