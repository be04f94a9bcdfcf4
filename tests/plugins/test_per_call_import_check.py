"""Issue 30, attack 9, findings 3, 4 and 7: what the import system may load for a trusted
plugin between two calls that its pin does not cover is checked at every trusted call
(``registry.code_problem``, from ``tools._trust_holds``).  Real parts only: files on disk,
the real import system, the real registry."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import itertools
import py_compile
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import wheel

_counter = itertools.count()

#: What a stray ``sys.path`` entry holds for top-level name T: a module, a regular
#: package, a namespace portion, a sourceless module, a zip file's package, or nothing.
_KINDS = ("module", "package", "portion", "sourceless", "zip", "nothing")


def _lay(where: Path, top: str, kind: str) -> str:
    """The ``sys.path`` entry of a stray of ``kind`` laid out under ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    if kind == "zip":
        import zipfile

        with zipfile.ZipFile(where / "stray.zip", "w") as archive:
            archive.writestr(f"{top}/__init__.py", "ANSWER = 'stray'\n")
            archive.writestr(f"{top}/dep.py", "ANSWER = 'stray'\n")
        return str(where / "stray.zip")
    if kind == "module":
        (where / f"{top}.py").write_text("ANSWER = 'stray'\n")
    elif kind == "package":
        (where / top).mkdir()
        (where / top / "__init__.py").write_text("ANSWER = 'stray'\n")
        (where / top / "dep.py").write_text("ANSWER = 'stray'\n")
    elif kind == "portion":
        (where / top).mkdir()
        (where / top / "dep.py").write_text("ANSWER = 'stray'\n")
    elif kind == "sourceless":
        source = where / "x_source.py"
        source.write_text("ANSWER = 'stray'\n")
        py_compile.compile(str(source), cfile=str(where / f"{top}.pyc"), doraise=True)
        source.unlink()
    return str(where)


def _escapes(top: str, pinned: Path) -> bool:
    """The import system's own answer: importing ``top`` and ``top.dep`` loads a file, or
    leaves a package path entry, outside the pinned directory."""
    root = str(pinned.resolve()) + "/"
    module = importlib.import_module(top)
    places = [getattr(module, "__file__", None), *list(getattr(module, "__path__", ()) or ())]
    with contextlib.suppress(ImportError):
        places.append(importlib.import_module(f"{top}.dep").__file__)
    return any(p and not str(Path(p).resolve()).startswith(root) for p in places)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    namespace=st.booleans(),
    strays=st.lists(st.tuples(st.sampled_from(_KINDS), st.booleans()), max_size=3),
)
def test_a_name_is_refused_exactly_when_the_import_system_would_load_it_elsewhere(
    tmp_path_factory, namespace, strays
):
    """Property: for a pinned dependency's top-level name installed as a regular package or
    as a namespace package (``T/dep.py``, no ``__init__``), and strays of every kind
    (module, package, namespace portion, sourceless ``.pyc``, a zip file's package) before
    or after it on
    ``sys.path``, the shadow check refuses exactly when importing ``T`` and ``T.dep`` would
    load a file, or leave a package path entry, outside the pinned copy: before the import
    (found by the finders) and after it (the module in ``sys.modules``)."""
    from django_webfetch.plugins import registry

    top = f"wfprop_{next(_counter)}"
    base = tmp_path_factory.mktemp("layout")
    pinned = base / "pinned"
    (pinned / top).mkdir(parents=True)
    (pinned / top / "dep.py").write_text("ANSWER = 'reviewed'\n")
    if not namespace:
        (pinned / top / "__init__.py").write_text("ANSWER = 'reviewed'\n")
    before: list[str] = []
    after: list[str] = []
    for index, (kind, earlier) in enumerate(strays):
        stray = base / f"stray{index}"
        (before if earlier else after).append(_lay(stray, top, kind))
    saved = list(sys.path)
    sys.path[:0] = [*before, str(pinned), *after]
    importlib.invalidate_caches()
    try:
        checked = {top: [str(pinned)]}
        found = registry._shadow_problem(checked)
        escaped = _escapes(top, pinned)
        assert bool(found) == escaped, (found, escaped, strays)
        assert bool(registry._shadow_problem(checked)) == escaped  # imported now
        if not any(kind != "nothing" for kind, _ in strays):
            assert not found
    finally:
        sys.path[:] = saved
        for name in (f"{top}.dep", top):
            sys.modules.pop(name, None)
        importlib.invalidate_caches()


_LAZY = """\
def plain(plugin, arguments):
    return 'plain'


def manifest():
    return {'name': 't', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 't_plain', 'description': 'x', 'handler': plain}]}
"""


def _trusted(site: Path, registry_on):
    from django_webfetch.plugins import provenance, registry
    from django_webfetch.plugins.models import PluginInstance

    meta = b"Metadata-Version: 2.1\nName: webfetch-t\nVersion: 1.0\nRequires-Dist: wfdep-m\n"
    wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
          {"webfetch_t/__init__.py": _LAZY}, {"METADATA": meta})  # fmt: skip
    wheel(site, "wfdep-m", {}, {"wfdep_m/__init__.py": "ANSWER = 'reviewed'\n"})
    py_compile.compile(str(site / "wfdep_m" / "__init__.py"), doraise=True)  # as an import does
    registry_on.syspath_prepend(str(site))
    registry.reset()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    time.sleep(provenance.SETTLE_NS / 1e9 + 0.2)  # every key settled: the memos are used
    assert registry.code_problem("t") is None
    assert registry.code_problem("t") is None  # remembered
    return instance


@pytest.mark.django_db
def test_the_remembered_verdicts_see_a_stray_a_pyc_and_a_finder_added_later(tmp_path, registry_on):
    """The per-call check's memos (each ``.pyc``'s verdict by its identity, the names'
    resolution by the identity of ``sys.path``'s directories, the finders and the modules)
    see what is added after they were filled: a stray module in an earlier ``sys.path``
    directory, a cached ``.pyc`` rewritten in place with other code, a finder put on
    ``sys.meta_path`` that serves the dependency's name from elsewhere; and the trusted
    call then runs as an untrusted instance's (``tools._trust_holds``)."""
    from django_webfetch.plugins import registry, tools

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    site = tmp_path / "site"
    instance = _trusted(site, registry_on)
    registry_on.syspath_prepend(str(cwd))  # sys.path[0] again, as manage.py's directory
    assert registry.code_problem("t") is None and tools._trust_holds(instance)

    (cwd / "wfdep_m.py").write_text("ANSWER = 'stray'\n")
    found = registry.code_problem("t")
    assert found is not None and found.reason == "plugin_origin_mismatch", found
    assert not tools._trust_holds(instance)
    (cwd / "wfdep_m.py").unlink()
    assert registry.code_problem("t") is None

    cached = importlib.util.cache_from_source(str(site / "wfdep_m" / "__init__.py"))
    other = tmp_path / "other.py"
    other.write_text("ANSWER = 'OTHER'\n")
    compiled = tmp_path / "other.pyc"
    py_compile.compile(str(other), cfile=str(compiled), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)  # fmt: skip
    with open(cached, "r+b") as fh:  # in place: the directory's identity is unchanged
        fh.write(compiled.read_bytes())
        fh.truncate()
    found = registry.code_problem("t")
    assert found is not None and found.reason == "plugin_code_compiled", found
    assert not tools._trust_holds(instance)
    Path(cached).unlink()
    assert registry.code_problem("t") is None

    class Finder:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "wfdep_m":
                return importlib.util.spec_from_file_location(name, str(other))
            return None

    registry_on.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    found = registry.code_problem("t")
    assert found is not None and found.reason == "plugin_origin_mismatch", found
    assert "wfdep_m" not in sys.modules
