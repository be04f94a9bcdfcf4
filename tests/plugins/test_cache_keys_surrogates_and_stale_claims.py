"""Issue 30, attack 16: routes past the plugin sandbox or the trust pin found in round 16.

Each test fails on the code it was written against (the proof of a finding); the
distributions are written as an installer or an operator leaves them, and the registry,
the loader, the models and the tools are the real ones; nothing patched.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.packages import MANIFEST, dist_info, requires_metadata, wheel

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


def _bytes_read() -> int:
    """The bytes this process has read so far (``/proc/self/io``, ``rchar``)."""
    with open("/proc/self/io", encoding="ascii") as fh:
        return int(next(line for line in fh if line.startswith("rchar:")).split()[1])


@pytest.mark.parametrize("future", [False, True])
def test_a_file_dated_in_the_future_makes_every_provider_look_up_read_the_package_again(
    tmp_path, plugin_dirs, future
):
    """Low (CPU and I/O of the site's process).  Route: an untrusted plugin vendor's
    directory, copied into ``WEBFETCH_PLUGIN_DIRS`` as a tar archive extracts it (times
    kept), holds a large data file whose modification time is in the future.  A memo
    keyed by a file's identity keeps a key only once it has ``settled`` (its newest time
    at least ``SETTLE_NS`` in the past): a time in the future never settles, so
    ``provenance._hashes``, the closure's and the registry's memos never keep it, and
    every ``registry.provider`` look-up (``_installed``: each plugin's ``trust_digest``)
    reads the whole package again, up to ``DIGEST_BYTES`` (512 MiB), for each trusted
    instance's first call per generation, each admin row, each ``plugin list``.  The
    modification time is the file's author's to set; only the change time is the
    kernel's.  Expected: with the files unchanged, a second look-up reads a small part
    of the package (as it does when the file's times are in the past)."""
    from django_webfetch.plugins import provenance, registry

    size = 32 << 20
    site = tmp_path / "vendor"
    site.mkdir()
    _copied_plugin(site, "f16")
    data = site / "webfetch_f16" / "model.bin"
    with open(data, "wb") as fh:
        fh.truncate(size)
    if future:
        when = 4102444800  # 2100-01-01, as an archive's member may say
        os.utime(data, (when, when))
    # The change time (the kernel's) settles: only the future modification time is left.
    time.sleep(provenance.SETTLE_NS / 1e9 + 0.5)
    plugin_dirs(site)
    assert registry.origin("f16") is not None, registry.problems()
    registry.provider("f16")
    first = registry.generation()
    before = _bytes_read()
    registry.provider("f16")
    registry.provider("f16")
    read = _bytes_read() - before
    assert registry.generation() == first
    assert read < size // 4, f"two provider look-ups read {read} bytes of a {size}-byte package"


_ECHO = """\
def run(plugin, arguments):
    return 'got ' + repr(arguments)


def manifest():
    return {'name': 's16', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 's16_run', 'description': 'x', 'handler': run,
                       'parameters': {'type': 'object',
                                      'properties': {'q': {'type': 'string'}}}}]}
"""


def test_a_lone_surrogate_in_a_tool_argument_raises_out_of_an_isolated_plugin_call(
    tmp_path, plugin_dirs
):
    """Low (robustness of the host side of the channel; log volume).  Route: a model's
    tool call whose JSON arguments hold ``"\\ud800"`` (a valid JSON escape, which
    ``json.loads`` turns into a lone surrogate; text the model copies from a fetched page
    can carry it) for an untrusted plugin: the host encodes the call for the plugin
    process as strict UTF-8 (``protocol.Channel.send``) and ``UnicodeEncodeError`` escapes
    ``PluginTool.execute`` and ``host.execute`` (the warm plugin process is ended: the
    next call builds a new sandbox), where every other bad input is a ``ToolResult``
    failure with a stable reason; the tool registry logs a traceback per call.
    Expected: a failed result with a reason (``invalid_arguments`` or a runtime code),
    not an exception."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    site = tmp_path / "s"
    wheel(site, "webfetch-s16", {"s16": "webfetch_s16:manifest"},
          {"webfetch_s16/__init__.py": _ECHO})  # fmt: skip
    plugin_dirs(site)
    assert registry.origin("s16") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="s16", alias="s16")
    tool = next(t for t in plugin_tools() if t.name == "s16_run")
    context = ToolContext(approved=True, call_id="s16", plugin_instance=instance)
    assert tool.execute({"q": "plain"}, context).ok
    try:
        result = tool.execute({"q": "\ud800"}, context)
    except UnicodeError as exc:
        pytest.fail(f"the call raised {type(exc).__name__} instead of giving a result")
    assert result.content


_LAZY = """\
import importlib


def run(plugin, arguments):
    return importlib.import_module({module!r}).ANSWER


def manifest():
    return {{'name': {name!r}, 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{{'name': {name!r} + '_run', 'description': 'x', 'handler': run}}]}}
"""


def _call(instance: Any) -> str:
    from django_webfetch.plugins.tools import plugin_tools
    from django_webfetch.tools.base import ToolContext

    tool = next(t for t in plugin_tools() if t.name == f"{instance.plugin}_run")
    context = ToolContext(approved=True, call_id=tool.name, plugin_instance=instance)
    return str(tool.execute({}, context).content)


@pytest.mark.parametrize("other_called", [False, True])
def test_a_stale_claim_of_another_plugin_lets_old_bytes_serve_a_trusted_plugins_import(
    tmp_path, registry_on, other_called
):
    """Low (the trust pin of one plugin).  Route: two trusted plugins ``a16`` and ``b16``
    require one dependency; each trusted call claims its pin (``loader.claim``), and
    the loader accepts, for a file, the digests of every claim ever made in the process
    (``_index``: the union; claims are never dropped, not when an instance's pin stops
    holding, nor when it is deleted).  The dependency is upgraded (a fix) and the
    operator confirms trust for ``b16`` only; ``a16``'s pin no longer holds (its calls
    run isolated) but its claim of the old bytes stays.  The old release put back (a
    rollback, a mirror serving the old wheel) is then executed in the site's process by
    ``b16``'s import at first use, although ``b16``'s pin holds only the new bytes.
    Expected: ``plugin_code_changed`` (nothing of the old bytes run), as when ``a16``
    was never called (``other_called`` False: passes)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    dep, package = "wfu16-d", "wfu16d"
    old = {f"{package}/__init__.py": "", f"{package}/lazy.py": "ANSWER = 'old'\n"}
    new = {f"{package}/__init__.py": "", f"{package}/lazy.py": "ANSWER = 'new'\n"}
    wheel(site, dep, {}, old)
    for name in ("a16", "b16"):
        wheel(site, f"webfetch-{name}", {name: f"webfetch_{name}:manifest"},
              {f"webfetch_{name}/__init__.py": _LAZY.format(module=f"{package}.lazy", name=name)},
              requires_metadata(f"webfetch-{name}", [dep]))  # fmt: skip
    registry_on.syspath_prepend(str(site))
    registry.reset()
    a = PluginInstance.objects.create(plugin="a16", alias="a16", trusted=True)
    b = PluginInstance.objects.create(plugin="b16", alias="b16", trusted=True)
    assert a.trust_holds() and b.trust_holds(), registry.problems()
    if other_called:
        assert "old" in _call(a)
    assert "old" in _call(b)
    assert sys.modules.pop(f"{package}.lazy").ANSWER == "old"

    def install(files: dict[str, str]) -> None:
        shutil.rmtree(site / f"{dep.replace('-', '_')}-1.0.dist-info")
        wheel(site, dep, {}, files)
        importlib.invalidate_caches()

    install(new)  # the fix; trust confirmed for b16 only
    b.confirm_trust()
    b.save()
    assert b.trust_holds() and not a.trust_holds()
    assert "new" in _call(b)
    sys.modules.pop(f"{package}.lazy", None)
    install(old)  # the old release back, after b16's trusted call took its pin
    try:
        answer = importlib.import_module(f"{package}.lazy").ANSWER
    except ImportError as exc:
        answer = f"refused:{getattr(exc, 'reason', type(exc).__name__)}"
    assert answer == "refused:plugin_code_changed", f"b16's import ran the {answer} bytes"
