"""Issue 30, attack 16: routes past the plugin sandbox or the trust pin found in round 16.

Each test fails on the code it was written against (the proof of a finding); the
distributions are written as an installer or an operator leaves them, and the registry,
the loader, the models and the tools are the real ones; nothing patched.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.plugins.packages import MANIFEST, dist_info, wheel

pytestmark = pytest.mark.django_db


def _copied_plugin(site: Path, name: str) -> None:
    """Plugin ``name`` (package ``webfetch_<name>``) as an operator copies a vendor's
    directory into a plugin directory: a ``.dist-info`` with ``METADATA`` and
    ``entry_points.txt``, no ``RECORD`` (decision 0049: hand-placed packages)."""
    dist_info(site, f"webfetch-{name}", {name: f"webfetch_{name}:manifest"})
    (site / f"webfetch_{name}").mkdir()
    (site / f"webfetch_{name}" / "__init__.py").write_text(MANIFEST % name)


def test_a_non_utf8_cache_file_name_makes_every_provider_look_up_load_the_registry_again(
    tmp_path, plugin_dirs
):
    """Medium (availability of every plugin, log volume).  Route: an untrusted plugin
    vendor's directory, copied into ``WEBFETCH_PLUGIN_DIRS`` (no ``RECORD``: its names are
    its directory's entries, ``closure._own_names``), holds ``__pycache__/<0xff>.pyc``, a
    file name that is not UTF-8 (a tar archive keeps it).  Its top-level name is then
    ``'\\udcff'``, which no entry of the directory has, so ``code_tree`` digests nothing
    and ``own_digest`` encodes the name: ``UnicodeEncodeError``, outside
    ``provider_of``'s ``try``.  ``registry._point`` turns the exception into a key with
    ``time.time_ns()`` in it, so the installed state never equals itself: every
    ``registry.provider`` look-up (each trusted instance's first call per generation,
    each admin row, ``plugin list``) resets the registry, ends every idle plugin process
    of every plugin (``shutdown``), loads again and logs an ERROR, and the new generation
    makes the next trusted call look up again.  The attacker needs no trust at all: one
    installed plugin degrades every other.  Expected: the same files are the same state
    (``provider`` twice, one generation)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    bad = tmp_path / "vendor"
    bad.mkdir()
    _copied_plugin(bad, "u16")
    (bad / "__pycache__").mkdir()
    with open(os.path.join(os.fsencode(bad / "__pycache__"), b"\xff.cpython-311.pyc"), "wb"):
        pass
    good = tmp_path / "good"
    wheel(good, "webfetch-g16", {"g16": "webfetch_g16:manifest"},
          {"webfetch_g16/__init__.py": MANIFEST % "g16"})  # fmt: skip
    plugin_dirs(good, bad)
    assert registry.origin("g16") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="g16", alias="g16", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    before = registry.generation()
    for _ in range(3):
        assert instance.trust_holds()
    assert registry.generation() == before, (
        f"{registry.generation() - before} registry loads (each ending every idle plugin "
        "process) for three look-ups of a trusted plugin's provider"
    )
    assert registry._installed()[2] == registry._installed()[2], "the same files, two states"
