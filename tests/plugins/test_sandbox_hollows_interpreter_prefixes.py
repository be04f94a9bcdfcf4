"""Issue 30, round 20 fixed (findings 3 and 4): of the interpreter's prefixes the sandbox
shows only what the guest needs (docs/decisions/0061-hollow-what-holds-what-the-guest-needs.rst).

The sandbox binds the system library directories and the standard library's directory
whole.  What the guest never needs that they may hold (the root of the site's virtual
environment, the base interpreter's package directories that are none of the site's, and
the site's code) is hidden: masked where it holds nothing the guest needs, and hollowed
where it does (an empty directory laid over it, what the guest needs bound back beneath
it, so only the way there is listable); the guest's Landlock rules leave out the same
paths.  The property below generates prefix layouts and checks the mounts the sandbox is
built from, in mount order, and the guest's Landlock rules; the other tests read from
inside the real sandbox, with and without Landlock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import bubblewrap
from django_webfetch.plugins.runtime.guest import _excluding
from tests.plugins.packages import open_up

pytestmark = pytest.mark.django_db

_SECRET = "fix20b-the-sites-secret"


def _under(path: str, top: str) -> bool:
    return path.startswith(top.rstrip("/") + "/")


def _at(path: str, top: str) -> bool:
    return path == top or _under(path, top)


@dataclass(frozen=True)
class Prefixes:
    #: The standard library in the system library directory (``/usr/local/lib/python3.X``
    #: of a ``python:3.x`` image) or in a prefix of its own (pyenv).
    stdlib_in_system: bool
    #: The site's virtual environment: none, under the system library directory, or not.
    venv: str
    #: A copied virtual environment (``--copies``): its executable and ``pyvenv.cfg`` are
    #: what the guest runs on.
    copies: bool
    #: The site imports from the base interpreter's ``site-packages`` (no virtual
    #: environment, or ``include-system-site-packages``).
    base_used: bool
    #: Where the plugin's package lies: a package directory of the site's virtual
    #: environment or of the base interpreter, a plugin directory in the virtual
    #: environment's root, under the system library directory, or elsewhere.
    plugin: str
    #: An operator lists the application's directory under the system library directory
    #: (which holds the virtual environment or the plugin) in the hidden paths.
    holder: bool
    #: The site's package installed in the site's package directory (masked inside what a
    #: hollow binds back).
    installed: bool


_LAYOUTS = st.builds(
    Prefixes,
    stdlib_in_system=st.booleans(),
    venv=st.sampled_from(["none", "system", "outside"]),
    copies=st.booleans(),
    base_used=st.booleans(),
    plugin=st.sampled_from(["packages", "base", "venv", "system", "outside"]),
    holder=st.booleans(),
    installed=st.booleans(),
)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class _Tree:
    """A generated prefix layout on disk: what the guest needs, what is hidden, and which
    files hold the site's secret."""

    def __init__(self, root: Path, layout: Prefixes) -> None:
        system = root / "sys"  # a system library directory, bound whole
        stdlib = system / "python3.11" if layout.stdlib_in_system else root / "py/lib/python3.11"
        base = stdlib.parent.parent
        _write(stdlib / "os.py", "")
        _write(stdlib / "json" / "__init__.py", "")
        base_packages = stdlib / "site-packages"
        venv = {"none": None, "system": system / "app" / "venv", "outside": root / "srv/venv"}[
            layout.venv
        ]
        base_used = layout.base_used or venv is None
        # Another site's settings, installed globally: the site's own packages are seen.
        other = f"SECRET_KEY = {_SECRET!r}\n" if not base_used else "VALUE = 1\n"
        _write(base_packages / "othersite" / "settings.py", other)
        executable = base / "bin" / "python3.11"
        _write(executable, "ELF")
        app = system / "app"
        _write(app / "app.env", f"SECRET_KEY={_SECRET}\n" if layout.holder else "X=1\n")
        needed = [stdlib]
        site_dirs: list[Path] = [base_packages] if base_used else []
        hidden: list[Path] = [] if base_used else [base_packages]
        packages = base_packages
        if venv is not None:
            packages = venv / "lib" / "python3.11" / "site-packages"
            _write(packages / "httpx" / "__init__.py", "")
            _write(venv / "bin" / "activate", f'export SECRET_KEY="{_SECRET}"\n')
            _write(venv / "mysite.env", f"SECRET_KEY={_SECRET}\n")
            _write(venv / "lib" / "python3.11" / "stray.txt", _SECRET)
            _write(venv / "pyvenv.cfg", "home = /usr/bin\n")
            (venv / "include").mkdir()
            os.symlink("lib", venv / "lib64")
            if layout.copies:
                executable = venv / "bin" / "python3.11"
                _write(executable, "ELF")
                needed.append(venv / "pyvenv.cfg")
            else:
                os.symlink(executable, venv / "bin" / "python3.11")
            site_dirs.insert(0, packages)
            hidden.append(venv)
        needed.append(executable)
        plugin = {
            "packages": packages,
            "base": base_packages,
            "venv": (venv or root) / "plugins",  # a plugin directory in the venv's root
            "system": app / "plugins",
            "outside": root / "plugins",
        }[layout.plugin] / "fix20b_plugin"
        _write(plugin / "__init__.py", "")
        needed.append(plugin)
        checkout = root / "checkout" / "django_webfetch"
        _write(checkout / "__init__.py", "")
        needed.append(checkout)
        if layout.holder:
            hidden.append(app)
        if layout.installed:
            site = packages / "mysite"
            _write(site / "settings.py", f"SECRET_KEY = {_SECRET!r}\n")
            hidden.append(site)
        self.system = str(system)
        self.needed = [str(p) for p in needed]
        self.site_dirs = [str(p) for p in site_dirs]
        self.hidden = [str(p) for p in hidden]
        # What the guest reads on (``guest.read_paths``): its prefixes, the standard
        # library, the package directories, its own package, ``django_webfetch``.
        prefix = venv if venv is not None and layout.copies else base
        self.read = [str(p) for p in {self.system, str(base), str(prefix), *self.needed}]
        self.read += [*self.site_dirs, str(base_packages)]
        self.files = sorted(
            os.path.join(top, name)
            for top, dirs, names in os.walk(root)
            for name in [*names, *(d for d in dirs if os.path.islink(os.path.join(top, d)))]
        )

    def expected(self, path: str) -> bool:
        """Whether ``path`` is to be seen: under a bound directory, and under what the
        guest needs, bound below each hidden path that holds it."""
        wanted = [*self.needed, *self.site_dirs]
        binds = [self.system, *wanted]
        return any(_at(path, b) for b in binds) and all(
            any(_at(path, w) and _under(w, h) for w in wanted) for h in self.hidden if _at(path, h)
        )


def _mounted(layout: list[tuple[str, ...]]) -> list[tuple[str, str]]:
    """The mounts in force after ``layout`` is applied in order: a mount laid over a path
    hides every mount made before at or below it."""
    active: list[tuple[str, str]] = []
    for entry in layout:
        kind, path = entry[0], entry[-1]
        active = [m for m in active if not _at(m[1], path)]
        active.append((kind, path))
    return active


def _shown(path: str, active: list[tuple[str, str]]) -> bool:
    """Whether a file of the host is seen at ``path``: the deepest mount holding it is a
    bind (a mask or a hollow is an empty directory, or an unreadable file)."""
    holding = [m for m in active if _at(path, m[1])]
    return bool(holding) and max(holding, key=lambda m: len(m[1]))[0] == "bind"


def _names(directory: str, active: list[tuple[str, str]]) -> list[str]:
    """What listing ``directory`` shows in the sandbox: the host's entries where a bind
    holds it, else (in a hollow) only the mount points made beneath it."""
    names = {m[1][len(directory) + 1 :].split("/")[0] for m in active if _under(m[1], directory)}
    if _shown(directory, active) and os.path.isdir(directory):
        names |= set(os.listdir(directory))
    return sorted(names)


@hypothesis_settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(layout=_LAYOUTS)
@example(Prefixes(False, "system", False, False, "outside", False, False))  # finding 3
@example(Prefixes(True, "outside", False, False, "outside", False, False))  # finding 4
@example(Prefixes(True, "system", True, False, "system", True, True))  # nested hollows
@example(Prefixes(False, "none", False, True, "base", True, True))
@example(Prefixes(True, "system", True, False, "venv", True, True))  # needed in the venv's root
def test_of_the_prefixes_only_what_the_guest_needs_and_the_way_to_it_is_visible(
    tmp_path_factory, layout
):
    """Over generated prefix layouts (the standard library in the system library directory
    or in a prefix of its own, holding the base interpreter's ``site-packages``; a virtual
    environment inside or outside a system library directory, linked or copied, or none;
    the base packages used by the site or not; the plugin's package in either package
    directory, under a system library directory or elsewhere; an operator's hidden path
    holding the virtual environment or the plugin; the site's package installed in its
    package directory): mounted in the sandbox's order, a file is seen exactly when it is
    under a bound directory and, below each hidden path that holds it, under what the guest
    needs; listing a hidden path shows only the way to what the guest needs; no file
    holding the site's secret is seen; the guest's Landlock rules give the same files,
    without the mounts."""
    tree = _Tree(Path(tmp_path_factory.mktemp("prefixes")), layout)
    wanted = [*tree.needed, *tree.site_dirs]
    kept = bubblewrap._collapse(wanted)
    visible = [*kept, tree.system]
    refused, hollows, masked = bubblewrap._shape(visible, wanted, tree.hidden)
    assert refused == [], refused  # nothing hidden is what the guest needs
    layout_ = [("bind", tree.system), *bubblewrap._arranged(kept, hollows, masked, wanted, [])]
    active = _mounted(layout_)
    for path in tree.files:
        assert _shown(path, active) is tree.expected(path), (path, layout_)
        if _SECRET.encode() in (Path(path).read_bytes() if os.path.isfile(path) else b""):
            assert not _shown(path, active), (path, layout_)
    for need in wanted:
        assert _shown(need, active), (need, layout_)
    for hollow in hollows:  # walk the view: only the way to what the guest needs
        pending = [hollow]
        while pending:
            directory = pending.pop()
            for name in _names(directory, active):
                path = os.path.join(directory, name)
                assert any(_at(w, path) or _under(path, w) for w in wanted), (path, layout_)
                if not any(_at(path, w) for w in wanted):
                    pending.append(path)
    # Landlock alone, in what the binds show: the rules the guest makes, on the host's
    # tree, with what it leaves out (its prefixes' rules are wider than the binds).
    read, _listed = _excluding(
        sorted(p for p in set(tree.read) if os.path.exists(p)),
        bubblewrap._left_out(layout_, wanted),
    )
    for path in tree.files:
        if any(_at(path, b) for b in visible) and any(_at(path, r) for r in tree.read):
            assert any(_at(path, r) for r in read) is tree.expected(path), (path, read)


def test_the_base_interpreters_packages_and_the_venv_root_are_hidden_here():
    """On this machine's interpreter: the base interpreter's package directories that are
    none of the site's, and the root of the site's virtual environment, are what the
    sandbox hides of the prefixes; the site's own package directories never are."""
    hidden = bubblewrap._prefix_hidden()
    for path in bubblewrap.site_dirs():
        assert path not in hidden, (path, hidden)
    if sys.prefix != sys.base_prefix:
        assert os.path.realpath(sys.prefix) in hidden
    for path in bubblewrap._base_packages((os.path.realpath(sys.base_prefix),)):
        if not os.path.isdir(path):
            continue
        assert (path in hidden) is (path not in bubblewrap.site_dirs()), (path, hidden)


#: Walks each root from inside the sandbox: every directory's listing and every file's
#: first bytes (or the error opening it).
_WALKER = """
import json, os

ROOTS = {roots!r}


def read(plugin, arguments):
    seen = {{}}
    for root in ROOTS:
        for top, dirs, files in os.walk(root):
            seen[top + "/"] = sorted(dirs + files)
            for name in files:
                path = os.path.join(top, name)
                try:
                    with open(path, "rb") as fh:
                        seen[path] = fh.read(512).decode("utf-8", "replace")
                except OSError as exc:
                    seen[path] = type(exc).__name__
    return seen
"""


def _run_site(python: str, origin: Any, kernel: str, hidden: str = "") -> dict[str, Any]:
    """The site run by ``python`` (a virtual environment's, or this one's), with or without
    Landlock, calling the plugin of ``origin`` once (tests/plugins/
    test_hostile_plugin_at_run_time.py's host); what it reported."""
    import django_webfetch
    from tests.plugins.test_hostile_plugin_at_run_time import _VENV_HOST

    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    env = {**os.environ, "PYTHONPATH": ":".join([root, *bubblewrap.site_dirs()])}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    if hidden:
        env["S6_HIDDEN"] = hidden
    done = subprocess.run(
        [python, "-c", _VENV_HOST, origin.path, origin.top_level, kernel],
        capture_output=True, text=True, timeout=180, cwd=root, start_new_session=True,
        env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["kind"] == "json", report
    assert bool(report["landlock"]) is (kernel == "landlock"), report
    return report


@pytest.mark.parametrize("kernel", ["landlock", "no-landlock"])
def test_a_copied_virtualenv_under_a_system_library_directory_shows_only_what_the_guest_runs_on(
    system_library_dir, kernel
):
    """A virtual environment made with ``--copies`` under ``/usr/local/lib``: the guest
    runs its copied executable, which finds the standard library through ``pyvenv.cfg``;
    both are bound back into the hollowed root with the ``site-packages``, and nothing
    else of the root is seen (``bin/activate``, the env file, ``lib64``, ``include``), with
    and without Landlock."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    venv = system_library_dir / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(venv)],
                   check=True, timeout=120)  # fmt: skip
    with open(venv / "bin" / "activate", "a") as fh:
        fh.write(f'\nexport DJANGO_SECRET_KEY="{_SECRET}"\n')
    (venv / "mysite.env").write_text(f"SECRET_KEY={_SECRET}\n")
    packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    (packages / "site-packages" / "fix20b_control.py").write_text("VALUE = 1\n")
    origin = _plugin(system_library_dir / "plugins", "webfetch_f20b_walker", "f20bwalker",
                     _WALKER.format(roots=[str(venv)]), {"read": "read"})  # fmt: skip
    open_up(system_library_dir, keep_exec=True)
    report = _run_site(str(venv / "bin" / "python"), origin, kernel)
    assert report["prefix"] == str(venv), report
    seen = json.loads(report["text"])
    assert _SECRET not in report["text"], seen
    real = os.path.realpath(venv)
    executable = os.path.realpath(venv / "bin" / "python")
    site = os.path.realpath(packages / "site-packages")
    allowed = {real, os.path.dirname(executable), executable, os.path.join(real, "pyvenv.cfg")}
    allowed |= {os.path.dirname(site), os.path.dirname(os.path.dirname(site))}
    for path in seen:
        shown = os.path.realpath(path.rstrip("/"))
        assert shown in allowed or _at(shown, site), (path, sorted(seen))
    assert seen[str(venv) + "/"] == sorted(["bin", "lib", "pyvenv.cfg"]), seen
    assert seen[str(venv / "bin") + "/"] == [os.path.basename(executable)], seen
    assert seen[str(packages / "site-packages" / "fix20b_control.py")] == "VALUE = 1\n"
    assert "home = " in seen[str(venv / "pyvenv.cfg")]


@pytest.mark.parametrize("kernel", ["landlock", "no-landlock"])
def test_a_hidden_path_holding_the_plugins_package_is_hollowed_not_refused(
    system_library_dir, kernel
):
    """An application directory under ``/usr/local/lib`` that an operator lists in
    ``WEBFETCH_PLUGIN_HIDDEN_PATHS`` and that holds the plugin's package (round 19 refused
    the sandbox: ``site_code_unmaskable``): the plugin runs, and sees of the directory
    only the way to its own package, with and without Landlock."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    app = system_library_dir / "app"
    (app / "deep").mkdir(parents=True)
    (app / "app.env").write_text(f"SECRET_KEY={_SECRET}\n")
    (app / "deep" / "settings.py").write_text(f"SECRET_KEY = {_SECRET!r}\n")
    origin = _plugin(app / "plugins", "webfetch_f20b_holder", "f20bholder",
                     _WALKER.format(roots=[str(app)]), {"read": "read"})  # fmt: skip
    (app / "plugins" / "beside.env").write_text(f"SECRET_KEY={_SECRET}\n")
    open_up(system_library_dir, keep_exec=True)
    report = _run_site(sys.executable, origin, kernel, hidden=str(app))
    seen = json.loads(report["text"])
    assert _SECRET not in report["text"], seen
    package = app / "plugins" / "webfetch_f20b_holder"
    assert seen[str(app) + "/"] == ["plugins"], seen
    assert seen[str(app / "plugins") + "/"] == ["webfetch_f20b_holder"], seen
    assert "def read" in seen[str(package / "__init__.py")]
    assert all(_at(p.rstrip("/"), str(package)) or p in (f"{app}/", f"{app}/plugins/")
               for p in seen), sorted(seen)  # fmt: skip


@pytest.fixture
def base_site_packages() -> Iterator[Path]:
    """A directory made in the base interpreter's ``site-packages``, which this site (run
    from a virtual environment) does not import from; removed after the test."""
    import sysconfig

    if sys.prefix == sys.base_prefix:
        pytest.skip("the site runs from no virtual environment")
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    purelib = os.path.realpath(base["purelib"])
    if not os.path.isdir(purelib) or purelib in bubblewrap.site_dirs():
        pytest.skip("no base site-packages apart from the site's")
    top = tempfile.mkdtemp(prefix="webfetch_fix20b_", dir=purelib)
    try:
        yield Path(top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("kernel", ["landlock", "no-landlock"])
def test_the_base_interpreters_site_packages_is_not_seen_from_a_virtualenv_site(
    base_site_packages, tmp_path, kernel
):
    """The base interpreter's ``site-packages`` (in the bound standard library's directory)
    is masked: with and without Landlock nothing of it is seen, while the standard library
    beside it is read (round 20, finding 4, which read it with Landlock on)."""
    from tests.plugins.test_hostile_plugin_at_run_time import _plugin

    package = base_site_packages / "othersite"
    package.mkdir()
    (package / "settings.py").write_text(f"SECRET_KEY = {_SECRET!r}\n")
    open_up(base_site_packages, keep_exec=True)
    purelib = os.path.dirname(base_site_packages)
    stdlib_json = os.path.join(os.path.dirname(os.path.realpath(os.__file__)), "json")
    origin = _plugin(tmp_path / "plugins", "webfetch_f20b_base", "f20bbase",
                     _WALKER.format(roots=[purelib, stdlib_json]), {"read": "read"})  # fmt: skip
    open_up(tmp_path, keep_exec=True)
    report = _run_site(sys.executable, origin, kernel)
    seen = json.loads(report["text"])
    assert _SECRET not in report["text"], seen
    assert not any(_under(path.rstrip("/"), purelib) for path in seen), sorted(seen)
    assert seen.get(purelib + "/", []) == [], seen  # masked: an empty directory
    assert "JSON" in seen[os.path.join(stdlib_json, "__init__.py")]
