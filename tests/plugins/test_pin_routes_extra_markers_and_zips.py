"""Issue 30, attack 10 (an outside reviewer): ways past the dependency pin (decision 0051)
as it stands after attack 9's fixes.  Each test fails while its finding stands.  Real
parts only: real wheel files installed by the real ``pip`` (``--no-index``, from a local
directory, ``--target`` a temporary site), the real registry, trust check and closure.
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.plugins.packages import MANIFEST

pytestmark = pytest.mark.django_db


def _hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(
    out: Path,
    dist: str,
    files: dict[str, str],
    *,
    requires: tuple[str, ...] = (),
    entry_points: dict[str, str] | None = None,
    info_dir: str | None = None,
    metadata: bytes | None = None,
) -> Path:
    """A real ``<dist>-1.0-py3-none-any.whl`` in ``out``: ``files``, and a ``.dist-info``
    (named ``info_dir``, by default for ``dist``) with METADATA (``metadata``, by default
    ``dist`` 1.0 requiring ``requires``), WHEEL, entry points and a truthful RECORD."""
    info = info_dir or f"{dist.replace('-', '_')}-1.0.dist-info"
    if metadata is None:
        lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
        metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n{lines}".encode()
    every = {k: v.encode() for k, v in files.items()}
    every[f"{info}/METADATA"] = metadata
    every[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: attack10\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if entry_points:
        rows = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
        every[f"{info}/entry_points.txt"] = f"[django_webfetch.plugins]\n{rows}".encode()
    record = "".join(f"{n},{_hash(d)},{len(d)}\n" for n, d in every.items())
    every[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    path = out / f"{dist.replace('-', '_')}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in every.items():
            zf.writestr(name, data)
    return path


def pip_install(wheels: Path, site: Path, requirement: str) -> str:
    """``pip install --no-index --find-links wheels --target site requirement`` (the real
    pip, resolving the requirement's dependencies from ``wheels`` only); its output."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheels),
         "--target", str(site), "--no-compile", "--disable-pip-version-check", requirement],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _uses(module: str) -> str:
    return f"def run(plugin, arguments):\n    import {module}\n    return {module}.ANSWER\n\n\n" + (
        MANIFEST % "t"
    ).replace(
        "'tools': []",
        "'tools': [{'name': 't_run', 'description': 'x', 'handler': run}]",
    )


def _trust(site: Path, registry_on):
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance

    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.origin("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds(), instance.trust_problem()
    return instance


@pytest.mark.parametrize(
    "marker",
    [
        # An extra OR a marker true everywhere: pip installs it with no extra asked.
        'extra == "never" or python_version >= "3"',
        # ``extra == "x"`` inside a string literal of another, true, comparison.
        "platform_release != 'extra == \"never\"'",
    ],
)
def test_a_marker_that_names_an_extra_but_holds_without_it_escapes_the_pin(
    tmp_path, registry_on, marker
):
    """Finding 1: ``closure.requirements`` decides whether a dependency's line is for an
    extra by a regular expression over the marker's text (``extra == "X"`` anywhere after
    ``;``), not by evaluating it.  A line whose marker mentions an extra but holds without
    one (``extra == "never" or python_version >= "3"``, or the words inside a string
    literal) is skipped for a dependency asked with no extra, while pip evaluates it true
    and installs the distribution.  Plugin ``t`` requires ``webfetch-mid``, whose line
    ``webfetch-low; <marker>`` pip installs; ``webfetch_low`` runs in the site's process
    under trust and is in no pin: its code rewritten, trust still holds."""
    from django_webfetch.plugins import closure, registry

    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    build_wheel(
        wheels,
        "webfetch-t",
        {"webfetch_t/__init__.py": _uses("webfetch_mid")},
        requires=("webfetch-mid",),
        entry_points={"t": "webfetch_t:manifest"},
    )
    build_wheel(
        wheels,
        "webfetch-mid",
        {"webfetch_mid/__init__.py": "from webfetch_low import ANSWER\n"},
        requires=(f"webfetch-low; {marker}",),
    )
    build_wheel(wheels, "webfetch-low", {"webfetch_low/__init__.py": "ANSWER = 'reviewed'\n"})
    pip_install(wheels, site, "webfetch-t")
    assert (site / "webfetch_low" / "__init__.py").exists(), "pip left webfetch-low out"
    instance = _trust(site, registry_on)
    try:
        (site / "webfetch_low" / "__init__.py").write_text("ANSWER = 'other code'\n")
        registry.reset()
        held = instance.trust_holds()
        deps = closure.dependencies(registry.distribution("t"), str(site))
        assert not held, f"a rewritten dependency kept the trust; pinned: {deps}"
        assert "webfetch-low" in [d.name for d in deps], deps
    finally:
        for name in ("webfetch_low", "webfetch_mid", "webfetch_t"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize(
    "metadata",
    [
        # A whitespace-only line: a header's continuation to the email parser pip and
        # importlib.metadata use; the end of the headers to ``closure._metadata_name``.
        b"Metadata-Version: 2.1\n \nName: webfetch-low\nVersion: 1.0\n",
        # A form feed inside a header's value: no line break to the email parser, a line
        # break to ``str.splitlines`` (so is \x1c, \x1d, \x1e, \x85, \u2028).
        b"Metadata-Version: 2.1\nSummary: x\x0cName: decoy\nName: webfetch-low\nVersion: 1.0\n",
        # A first header longer than the 64 KiB ``_metadata_name`` reads: the ``Name``
        # after it is never seen (the email parser reads the whole file).
        b"Metadata-Version: 2.1\nSummary: " + b"x" * (70 << 10) + b"\nName: webfetch-low\n"
        b"Version: 1.0\n",
    ],
    ids=["blank-continuation", "form-feed", "long-first-header"],
)
def test_metadata_read_otherwise_than_pip_reads_it_hides_an_installed_dependency(
    tmp_path, registry_on, metadata
):
    """Finding 2: ``closure._metadata_name`` reads a METADATA's ``Name`` with its own
    parser (``str.splitlines``, stop at the first blank line), not as pip and
    ``importlib.metadata`` read it (``email.parser``), and a requirement is looked up by
    that name or by the metadata directory's name.  pip accepts a wheel whose
    ``.dist-info`` is named ``webfetch_low_x-1.0.dist-info`` for ``webfetch-low`` (the
    directory's normalized name need only begin with the distribution's), and a METADATA
    whose ``Name`` the email parser reads as ``webfetch-low``; the closure finds it under
    neither name and pins ``webfetch-low`` as "not installed", while its code is installed
    and imported by the plugin in the site's process: rewritten, trust still holds."""
    from django_webfetch.plugins import closure, registry

    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    build_wheel(
        wheels,
        "webfetch-t",
        {"webfetch_t/__init__.py": _uses("webfetch_low")},
        requires=("webfetch-low",),
        entry_points={"t": "webfetch_t:manifest"},
    )
    build_wheel(
        wheels,
        "webfetch-low",
        {"webfetch_low/__init__.py": "ANSWER = 'reviewed'\n"},
        info_dir="webfetch_low_x-1.0.dist-info",
        metadata=metadata,
    )
    pip_install(wheels, site, "webfetch-t")
    assert (site / "webfetch_low" / "__init__.py").exists(), "pip left webfetch-low out"
    assert (site / "webfetch_low_x-1.0.dist-info").is_dir()
    instance = _trust(site, registry_on)
    try:
        (site / "webfetch_low" / "__init__.py").write_text("ANSWER = 'other code'\n")
        registry.reset()
        held = instance.trust_holds()
        deps = closure.dependencies(registry.distribution("t"), str(site))
        assert not held, f"a rewritten dependency kept the trust; pinned: {deps}"
    finally:
        for name in ("webfetch_low", "webfetch_t"):
            sys.modules.pop(name, None)


def test_a_dependency_in_a_zip_on_sys_path_is_pinned_as_not_installed(tmp_path, registry_on):
    """Finding 3: ``closure._search_dirs`` keeps the directories of ``sys.path`` only, so
    a distribution in a zip file on ``sys.path`` (a zipapp or shiv deployment, an egg, a
    ``PYTHONPATH`` entry; ``importlib.metadata`` and the import system both read it) is
    "not installed" to the closure: plugin ``t`` requiring ``webfetch-low`` pins it as
    missing, imports its code from the zip in the site's process under trust (the shadow
    check skips names the closure found no copy of), and a rewritten zip keeps the trust.
    """
    import importlib.metadata

    from django_webfetch.plugins import closure, registry

    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    build_wheel(
        wheels,
        "webfetch-t",
        {"webfetch_t/__init__.py": _uses("webfetch_low")},
        requires=("webfetch-low",),
        entry_points={"t": "webfetch_t:manifest"},
    )
    low = build_wheel(wheels, "webfetch-low", {"webfetch_low/__init__.py": "ANSWER = 'reviewed'\n"})
    pip_install(wheels, site, "webfetch-t")  # finds webfetch-low in wheels: removed below
    for path in sorted(site.glob("webfetch_low*"), reverse=True):
        for file in sorted(path.rglob("*"), reverse=True):
            file.unlink() if file.is_file() else file.rmdir()
        path.rmdir()
    archive = tmp_path / "deps.zip"
    archive.write_bytes(low.read_bytes())  # a wheel is a zip the import system can read
    registry_on.syspath_prepend(str(archive))
    assert importlib.metadata.distribution("webfetch-low").version == "1.0"
    # Fixed (fix 10a, the brief's rule): a distribution in a sys.path entry that is no
    # directory cannot be pinned, so trust never holds, before or after the zip changes.
    from django_webfetch.plugins.models import PluginInstance

    registry_on.syspath_prepend(str(site))
    registry.reset()
    assert registry.origin("t") is not None, registry.problems()
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    try:
        before = closure.dependencies(registry.distribution("t"), str(site))
        assert not instance.trust_holds(), f"a zipped dependency was pinned: {before}"
        assert closure.ARCHIVE in instance.trust_problem()
        assert [d.name for d in before if d.problem.endswith(f"({closure.ARCHIVE})")] == [
            "webfetch-low"
        ], before
        other = tmp_path / "other"
        other.mkdir()
        rebuilt = build_wheel(
            other, "webfetch-low", {"webfetch_low/__init__.py": "ANSWER = 'other code'\n"}
        )
        rebuilt.replace(archive)  # an upgrade of the deployed archive
        registry.reset()
        held = instance.trust_holds()
        assert not held, f"a rewritten dependency kept the trust; pinned: {before}"
    finally:
        for name in ("webfetch_low", "webfetch_t"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize("kind", ["module", "package"])
def test_a_dangling_link_completed_later_is_not_seen_by_the_remembered_resolution(
    tmp_path, registry_on, kind
):
    """Finding 4: the per-call check remembers the resolution of a pinned dependency's name
    by the identity of each ``sys.path`` directory and of its entry named exactly ``top``
    (``registry._shadow_key``).  A symbolic link in an earlier ``sys.path`` directory (the
    working directory ``manage.py`` runs from; a checkout's link, which git keeps) whose
    target does not exist yet (``webfetch_low.py`` -> ``/tmp/...``, or a directory
    ``webfetch_low`` whose ``__init__.py`` is such a link) is passed over by the import
    system; completing it later (anyone who may write where it points) changes neither
    the directory nor the entry ``webfetch_low``, so the remembered verdict stands, and the
    trusted call's first-use import runs the stray module in the site's process.  The
    full check (``_shadow_problem``) sees it: only the memo is stale."""
    import os
    import time

    from django_webfetch.plugins import provenance, registry, tools

    wheels, site, cwd, later = (tmp_path / n for n in ("wheels", "site", "cwd", "later"))
    for d in (wheels, cwd, later):
        d.mkdir()
    build_wheel(
        wheels,
        "webfetch-t",
        {"webfetch_t/__init__.py": _uses("webfetch_low")},
        requires=("webfetch-low",),
        entry_points={"t": "webfetch_t:manifest"},
    )
    build_wheel(wheels, "webfetch-low", {"webfetch_low/__init__.py": "ANSWER = 'reviewed'\n"})
    pip_install(wheels, site, "webfetch-t")
    stray = later / "evil.py"
    if kind == "module":
        (cwd / "webfetch_low.py").symlink_to(stray)
    else:
        (cwd / "webfetch_low").mkdir()
        (cwd / "webfetch_low" / "__init__.py").symlink_to(stray)
    instance = _trust(site, registry_on)
    registry_on.syspath_prepend(str(cwd))  # sys.path[0], as manage.py's directory
    try:
        time.sleep(provenance.SETTLE_NS / 1e9 + 0.2)  # every key settled: remembered
        assert registry.code_problem("t") is None and tools._trust_holds(instance)
        stray.write_text("ANSWER = 'stray'\n")
        assert os.path.isfile(cwd / "webfetch_low.py") or os.path.isfile(
            cwd / "webfetch_low" / "__init__.py"
        )
        import importlib.util

        # What ``import`` loads is the pinned copy (the trusted plugin's claim, decision
        # 0053); what it would load without the claim is the stray, which the per-call
        # check must still report.
        assert str(site) in importlib.util.find_spec("webfetch_low").origin
        origin = registry._unclaimed_spec("webfetch_low").origin
        assert str(cwd) in origin, origin
        assert registry._shadow_problem({"webfetch_low": [str(site)]}), "not a stray?"
        found = registry.code_problem("t")
        assert found is not None and found.reason == "plugin_origin_mismatch", (
            "the completed link is what a first-use import loads, and the trusted call "
            f"still holds: {tools._trust_holds(instance)}"
        )
    finally:
        for name in ("webfetch_low", "webfetch_t"):
            sys.modules.pop(name, None)
