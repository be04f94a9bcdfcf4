"""Issue 30, attack 12, findings 2 and 3 (decision 0051): trust pins what the plugin's
distribution runs, not one package of it.  Every top-level name the distribution installs
(another entry point's package, a module beside it, a name of its ``top_level.txt``; without
``RECORD``, every entry of its directory) is in the pin and checked at every trusted call,
and so are the entry point's value and the metadata that decides what runs
(``entry_points.txt``, ``METADATA``).  Real files as pip lays them out, the real
``importlib.metadata``, the real registry."""

from __future__ import annotations

import importlib.util
import itertools
import py_compile
import time
from importlib.metadata import PathDistribution
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plugins.packages import MANIFEST, lazy_plugin, wheel

pytestmark = pytest.mark.django_db

_counter = itertools.count()

#: What another top-level name of the plugin's distribution is: a second plugin's package
#: (its own entry point), a module its ``RECORD`` lists, a package its ``top_level.txt``
#: names (on disk, not in ``RECORD``), a package beside it in a directory without ``RECORD``.
_KINDS = ("entry", "module", "top_level", "beside")


def _site(root: Path, kinds: list[str], record: bool) -> tuple[Path, Path, dict[str, Path]]:
    """Plugin ``t`` (distribution ``webfetch-t``, package ``webfetch_t``) with one more
    top-level name of each of ``kinds``, and an unrelated distribution beside it: the
    site directory, the plugin's metadata directory and each name's file."""
    site = root / f"site{next(_counter)}"
    points = {"t": "webfetch_t:manifest"}
    files = {"webfetch_t/__init__.py": MANIFEST % "t"}
    declared: list[str] = []
    laid: dict[str, Path] = {"webfetch_t": site / "webfetch_t" / "__init__.py"}
    for n, kind in enumerate(kinds):
        name = f"wfown_{kind}{n}"
        if kind == "entry":
            points[f"u{n}"] = f"{name}:manifest"
            files[f"{name}/__init__.py"] = MANIFEST % f"u{n}"
            laid[name] = site / name / "__init__.py"
        elif kind == "module":
            files[f"{name}.py"] = "ANSWER = 'reviewed'\n"
            laid[name] = site / f"{name}.py"
        else:  # on disk, named by top_level.txt or by the directory alone
            (site / name).mkdir(parents=True)
            (site / name / "__init__.py").write_text("ANSWER = 'reviewed'\n")
            declared.append(name)
            laid[name] = site / name / "__init__.py"
    extra = {"top_level.txt": "".join(f"{d}\n" for d in declared).encode()} if declared else {}
    info = wheel(site, "webfetch-t", points, files, extra)
    if not record:
        (info / "RECORD").unlink()
    wheel(site, "wfother", {}, {"wfother/__init__.py": "ANSWER = 'theirs'\n"})
    return site, info, laid


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(_KINDS), min_size=1, max_size=4),
    st.booleans(),
    st.data(),
)
def test_every_top_level_name_of_the_plugins_distribution_is_in_its_pin(
    tmp_path_factory, kinds, record, data
):
    """Property: for a plugin distribution installing any set of further top-level names
    (with or without ``RECORD``), a byte changed in, or a file added to, any of them
    changes the pin (``closure.trust_digest``), which is stable meanwhile.  A change to
    another distribution in the same directory changes it only when the plugin has no
    ``RECORD`` (credited with every entry of its directory, as the registry credits it).
    (Finding 2: only the entry point's own package was pinned.)"""
    from django_webfetch.plugins import closure, provenance

    if not record:
        kinds = ["beside" if k == "top_level" else k for k in kinds]
    site, info, laid = _site(tmp_path_factory.mktemp("closure12a"), kinds, record)
    dist = PathDistribution(info)
    entry = "webfetch_t:manifest"
    pin = closure.trust_digest(dist, str(site), "webfetch_t", entry)
    assert not provenance.unpinned_why(pin), provenance.unpinned_why(pin)
    assert pin == closure.trust_digest(dist, str(site), "webfetch_t", entry)
    names, why = closure.own_names(dist)
    assert why == "" and set(laid) <= set(names), (names, why)
    (site / "wfother" / "__init__.py").write_text("ANSWER = 'changed'\n")
    beside = closure.trust_digest(dist, str(site), "webfetch_t", entry)
    assert (beside != pin) == (not record), record
    name = data.draw(st.sampled_from(sorted(laid)))
    if data.draw(st.booleans()):
        laid[name].write_text(laid[name].read_text() + "ANSWER = 'other code'\n")
    elif laid[name].name == "__init__.py":
        (laid[name].parent / "wfadded.py").write_text("")
    else:  # an extension module of that name, beside the module
        (site / f"{name}.abi3.so").write_text("")
    after = closure.trust_digest(dist, str(site), "webfetch_t", entry)
    assert after != beside, (name, kinds, record)


_VALUES = ("webfetch_t:manifest", "webfetch_t:manifest_debug", "webfetch_t.sub:manifest",
           "webfetch_t:tools.manifest", "webfetch_t : manifest")  # fmt: skip


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(_VALUES),
    st.sampled_from(_VALUES),
    st.sampled_from(["", "# a comment\n", "[django_webfetch.plugins]\nz = webfetch_t:manifest\n"]),
)
def test_which_object_the_entry_point_loads_is_in_its_pin(tmp_path_factory, before, after, more):
    """Property: a release whose package is byte for byte the reviewed one but whose entry
    point loads another object (another attribute, module or spelling), or whose
    ``entry_points.txt`` says anything more, has another pin (``provenance.provider_of``,
    what trust records and compares); the same release has the same pin.  (Finding 3: the
    pin covered the package's files only.)"""
    from django_webfetch.plugins import provenance

    site = tmp_path_factory.mktemp("closure12a") / "site"
    source = MANIFEST % "t" + "manifest_debug = manifest\nclass tools:\n    manifest = manifest\n"
    files = {"webfetch_t/__init__.py": source, "webfetch_t/sub.py": source}
    info = wheel(site, "webfetch-t", {"t": before}, files)
    (ep,) = PathDistribution(info).entry_points
    pinned = provenance.provider_of(ep)
    assert pinned is not None and not provenance.unpinned_why(pinned.digest)
    assert provenance.provider_of(ep) == pinned
    text = f"[django_webfetch.plugins]\nt = {after}\n"
    (info / "entry_points.txt").write_text(text + (more if after == before else ""))
    eps = [e for e in PathDistribution(info).entry_points if e.name == "t"]
    now = provenance.provider_of(eps[0])
    assert now is not None and now.name == pinned.name and now.version == pinned.version
    changed = after != before or more != ""
    assert (now.digest != pinned.digest) == changed, (before, after, more)


def test_the_plugins_own_metadata_is_in_its_pin(tmp_path):
    """The plugin's ``METADATA`` (what it requires, as a dependency's) is pinned with it; a
    file of its ``.dist-info`` that decides nothing that runs (``RECORD``, ``INSTALLER``)
    is not."""
    from django_webfetch.plugins import closure

    site = tmp_path / "site"
    info = wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
                 {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    dist = PathDistribution(info)
    pin = closure.own_digest(dist, str(site), "webfetch_t", "webfetch_t:manifest")
    (info / "INSTALLER").write_text("pip\n")
    assert pin == closure.own_digest(dist, str(site), "webfetch_t", "webfetch_t:manifest")
    (info / "METADATA").write_text((info / "METADATA").read_text() + "Requires-Dist: wfx\n")
    assert pin != closure.own_digest(dist, str(site), "webfetch_t", "webfetch_t:manifest")


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ("../../elsewhere.py", "outside its directory"),
        ("wfown.pth", "path configuration file"),
    ],
)
def test_a_plugin_distribution_whose_names_cannot_be_told_has_no_pin(tmp_path, row, why):
    """A ``RECORD`` row outside the distribution's directory, or of a path configuration
    file, or more than ``MAX_OWN_NAMES`` names: what it runs cannot be told, and its
    digest is one no pin holds for (the registry refuses such a distribution anyway)."""
    from django_webfetch.plugins import closure, provenance

    site = tmp_path / "site"
    info = wheel(site, "webfetch-t", {"t": "webfetch_t:manifest"},
                 {"webfetch_t/__init__.py": MANIFEST % "t"})  # fmt: skip
    (info / "RECORD").write_text((info / "RECORD").read_text() + f"{row},,\n")
    digest = closure.trust_digest(PathDistribution(info), str(site), "webfetch_t")
    assert why in provenance.unpinned_why(digest), provenance.unpinned_why(digest)
    many = "".join(f"wfname{i}\n" for i in range(closure.MAX_OWN_NAMES + 1))
    (info / "RECORD").write_text((info / "RECORD").read_text().replace(f"{row},,\n", ""))
    (info / "top_level.txt").write_text(many)
    digest = closure.trust_digest(PathDistribution(info), str(site), "webfetch_t")
    assert "more than" in provenance.unpinned_why(digest)


#: What appears for another top-level name of the trusted plugin's distribution after
#: trust: a stray module of that name in an earlier ``sys.path`` directory, a cached
#: ``.pyc`` of other code beside its source.
_LATER = ("stray", "pyc")


def _other_code_pyc(source: Path, tmp: Path) -> None:
    other = tmp / f"other{next(_counter)}.py"
    other.write_text("ANSWER = 'other code'\n")
    made = py_compile.compile(
        str(other),
        cfile=str(tmp / f"{other.stem}.pyc"),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.parent.mkdir(exist_ok=True)
    cached.write_bytes(Path(made).read_bytes())


@pytest.mark.parametrize("later", _LATER)
@pytest.mark.parametrize("record", [True, False])
def test_a_trusted_call_checks_every_top_level_name_of_its_distribution(
    tmp_path, registry_on, later, record
):
    """The per-call check (``registry.code_problem``, from ``tools._trust_holds``) looks at
    every top-level name the trusted plugin's distribution installs, as at its own
    package: another entry point's package (with ``RECORD``) or a module beside the plugin
    (a directory without ``RECORD``).  A stray module of that name written later in an
    earlier ``sys.path`` directory (``plugin_origin_mismatch``) or a cached ``.pyc`` of
    other code beside its source (``plugin_code_compiled``), which the plugin's import at
    first use would load, makes the call run isolated.  (Finding 2: only the entry point's
    package and the dependencies were checked.)"""
    from django_webfetch.plugins import registry, tools
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    name = "wfown_other"
    points = {"t": "webfetch_t:manifest"}
    files = {"webfetch_t/__init__.py": lazy_plugin("t", f"import {name}", f"{name}.ANSWER")}
    if record:
        points["u"] = f"{name}:manifest"
        files[f"{name}/__init__.py"] = MANIFEST % "u" + "ANSWER = 'reviewed'\n"
        source = site / name / "__init__.py"
    else:
        files[f"{name}.py"] = "ANSWER = 'reviewed'\n"
        source = site / f"{name}.py"
    info = wheel(site, "webfetch-t", points, files)
    if not record:
        (info / "RECORD").unlink()
    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.get_manifest("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    time.sleep(2.2)  # settled: what the per-call memos keep
    assert registry.code_problem("t") is None
    assert tools._trust_holds(instance)
    if later == "stray":
        earlier = tmp_path / "earlier"
        earlier.mkdir()
        (earlier / f"{name}.py").write_text("ANSWER = 'stray'\n")
        registry_on.syspath_prepend(str(earlier))
        importlib.invalidate_caches()
        reason = "plugin_origin_mismatch"
    else:
        _other_code_pyc(source, tmp_path)
        reason = "plugin_code_compiled"
    problem = registry.code_problem("t")
    assert problem is not None and problem.reason == reason, problem
    assert not tools._trust_holds(instance)
