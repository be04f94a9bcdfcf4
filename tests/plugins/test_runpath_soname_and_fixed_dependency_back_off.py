"""Issue 30, round 17: an outside attack on the plugin sandbox and the trust pin.

Each test here FAILS on the code it was written against: it is the proof of a way past
the containment or the pin (the docstring gives the severity, the route and the gain).
Findings 1 and 2 are fixed (decision 0054, amended): their tests pass.
"""

from __future__ import annotations

import itertools
import platform
import shutil
import sys

import pytest

from tests.plugins.packages import install_extension, linked_extension, requires_metadata, wheel
from tests.plugins.test_loader_namespaces_and_vendored_libraries import (
    _forget,
    _trusted_call,
    trusted_dependency,
)
from tests.plugins.test_pinned_extension_maps_hashed_bytes import _import

_count = itertools.count()


# Open findings (issue 30, round 17): each test fails while its finding stands, marked
# ``xfail`` until its fix lands (a fix shows as XPASS in the run's summary, -rX; its marker
# goes with the fix).  docs/plugins.rst, "Known open findings".
_open = pytest.mark.xfail(strict=False, reason="issue 30, attack 17: an open finding")


@pytest.mark.django_db
@pytest.mark.parametrize("token", ["$PLATFORM", "${PLATFORM}"])
def test_a_pinned_library_found_through_a_runpath_substitution_runs_changed_bytes(tmp_path, token):
    """Severity: Medium.  Route: ``loader._resolve`` passes over every RUNPATH/RPATH entry
    holding a ``$`` other than ``$ORIGIN`` ("another substitution: the system's
    directories"), so a vendored library the extension finds through ``/abs/dir/$PLATFORM``
    (or ``$LIB``) is taken for the system's: it is neither hashed nor loaded from its
    hashed descriptor, and the dynamic linker, which does expand ``$PLATFORM`` (to
    ``x86_64`` here) whatever directory the extension was loaded from, opens it by its path
    in the trusted plugin's own pinned copy.  Gain: after trust was given, whoever can
    write the plugin's installed files (the pin's whole threat: an upgrade, another
    process) replaces that library and its code runs in the host process at the next
    import of the extension, with no ``plugin_code_changed``: the pin does not hold for
    it.  The expected behaviour: the entry's directory is resolved as the linker resolves
    it (or the object refused), and the library served only from its hashed bytes."""
    k = next(_count)
    dist, package = f"wfa17p-{k}", f"wfa17p_{k}"
    libname = f"libwfa17p_{k}.so"
    marker = tmp_path / "constructor-ran"
    site = tmp_path / f"site{k}"
    plat = platform.machine()
    runpath = f"{site}/{package}.libs/{token}"
    builds = {}
    for name, answer, mark in (("good", "reviewed", None), ("bad", "OTHER CODE", marker)):
        builds[name] = linked_extension(tmp_path / name, libname, answer, runpath, mark,
                                        new_dtags=True)  # fmt: skip
    library_at = f"{package}.libs/{plat}/{libname}"
    install_extension(site, dist, package, *builds["good"], library_at)
    at = site / library_at
    with trusted_dependency(site, f"a17p{k}", package, dist):
        # After trust: the vendored library replaced on disk, as an installer writes one.
        fresh = at.with_name(at.name + ".new")
        fresh.write_bytes(builds["bad"][1])
        fresh.replace(at)
        answer = _import(f"{package}._speed")
        ran = marker.read_text() if marker.exists() else ""
        assert "OTHER CODE" not in answer and not ran, (answer, ran)


@pytest.mark.django_db
def test_a_trusted_extension_binds_to_a_revoked_plugins_library_of_the_same_soname(tmp_path):
    """Severity: Low.  Route: ``loader._PinnedExtension`` loads a trusted plugin's vendored
    library from its hashed descriptor, then its extension, counting on the dynamic linker
    to match the extension's ``DT_NEEDED`` with that library by its ``DT_SONAME``; but the
    linker matches the FIRST object loaded under that name in the process.  Plugin A's
    extension and library (``DT_SONAME libwfa17s.so``) were imported while A was trusted;
    A's trust is then revoked (its claim released).  Plugin B, trusted, vendors its own
    reviewed library of the same ``DT_SONAME`` (an auditwheel name is a hash of the bytes,
    but a hand-built or renamed one is not): B's library is hashed and mapped, and B's
    extension is then bound to A's library.  Gain: B's trusted calls run code of a
    revoked plugin (or of any earlier-loaded library of that name: another version of the
    same library) that B's pin does not hold, with no ``plugin_code_changed``.  Expected:
    a pinned library whose ``DT_SONAME`` names an object already loaded (other than from
    the same hashed bytes) is refused, or the extension's answer is its own library's."""
    from django_webfetch.plugins.models import PluginInstance

    libname = "libwfa17s.so"
    path = list(sys.path)
    made = []
    try:
        for who in ("A", "B"):
            k = next(_count)
            dist, package = f"wfa17s-{k}", f"wfa17s_{k}"
            extension, library = linked_extension(tmp_path / f"build{who}", libname,
                                                  f"{who}'s library",
                                                  f"$ORIGIN/../{package}.libs")  # fmt: skip
            site = tmp_path / f"site{who}"
            install_extension(site, dist, package, extension, library,
                              f"{package}.libs/{libname}")  # fmt: skip
            sys.path.insert(0, str(site))
            plugin = f"a17s{k}"
            made.append((package, plugin))
            called = _trusted_call(site, plugin, package, [dist])
            assert "reviewed" in called and "Error" not in called, called[-300:]
            answer = _import(f"{package}._speed")
            if who == "A":
                assert answer == "A's library", answer
                instance = PluginInstance.objects.get(plugin=plugin)
                instance.trusted = False
                instance.save()  # A's trust revoked: its claim is released
        # Fixed (decision 0054, amended): B's library is refused before anything of it is
        # mapped, since the linker would bind B's extension to A's loaded library.
        refused = answer.startswith("refused:plugin_code_changed") and "loaded in this" in answer
        assert answer == "B's library" or refused, f"B's trusted extension answered {answer!r}"
    finally:
        for package, plugin in made:
            _forget(path, package, f"webfetch_{plugin}")


_NEEDS_DEP = """\
import {dep}


def manifest():
    return {{'name': {name!r}, 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': []}}
"""


@pytest.mark.django_db
def test_a_plugin_whose_broken_dependency_was_fixed_stays_off_for_the_back_off(
    tmp_path, registry_on
):
    """Severity: Low (availability of a plugin; an operator's fix not taken).  Route: a
    manifest read that failed (the plugin process crashed, ran out of time or memory) is
    remembered by ``host.stamp`` of the plugin's OWN top-level package (``_Failures``:
    10 minutes, doubled at each further failure up to 4 hours), and answered from memory
    without a process until then.  When the crash came from a dependency the plugin
    imports (another distribution: a release whose import crashes, a bad upgrade), the
    operator's fix (the dependency upgraded again) changes no file of the plugin's
    package: the stamp is the same, and the plugin stays refused for the whole window
    (up to 4 hours in a process that read it a few times), though nothing of it fails
    now; ``registry.reset`` does not forget it, and no CLI or admin action does.  A
    hostile dependency release that was pulled can so keep every plugin depending on it
    off long after.  Expected: a read whose inputs changed (the dependency's files: the
    pinned closure, or its stamp) is read again.  Fixed: what is remembered is keyed by
    every input of the read (decision 0055, amended;
    tests/plugins/test_manifest_memory_keyed_by_inputs.py)."""
    from django_webfetch.plugins import registry

    site = tmp_path / "site-packages"  # the guest's sys.path holds such directories
    # A release of the dependency whose import crashes, then the plugin requiring it.
    wheel(site, "wfa17dep", {}, {"wfa17dep/__init__.py": "import os\nos._exit(3)\n"})
    wheel(site, "webfetch-f17", {"f17": "webfetch_f17:manifest"},
          {"webfetch_f17/__init__.py": _NEEDS_DEP.format(dep="wfa17dep", name="f17")},
          requires_metadata("webfetch-f17", ["wfa17dep"]))  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.origin("f17") is None
    assert "f17" in str(registry.problems()), registry.problems()
    # The operator's fix: the dependency upgraded again, to a release that imports.
    shutil.rmtree(site / "wfa17dep-1.0.dist-info")
    wheel(site, "wfa17dep", {}, {"wfa17dep/__init__.py": "ANSWER = 1\n"})
    registry.reset()
    assert registry.origin("f17") is not None, registry.problems()
