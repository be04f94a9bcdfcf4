"""Names the site's own interpreter tries to import as it starts, and plugin packages of
those names.

History: issue 30, round 25, finding 3.  ``copy`` and ``pickle`` (Python <= 3.11) try
``from org.python.core import PyStringMap``; httpx tries ``brotli``, ``brotlicffi``,
``zstandard``, ``h2``, ``socksio``; Django and others ``simplejson``...  A plugin
distribution whose package has such a name, installed where the site imports from, runs
in every process of the site as it starts, before any refusal can run.  Where the docs put
untrusted plugins (``WEBFETCH_PLUGIN_DIRS``, never on ``sys.path``) nothing of it runs in
the site, and its entry point is refused (``entry_point_reserved``:
``registry.IMPLICIT_IMPORTS``); installed among the site's own packages (the interpreter's
``site-packages``) it is the site's code by construction: check
``django_webfetch.W036`` and ``webfetch plugin list`` name it (decision 0065).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.packages import child_report, wheel

pytestmark = pytest.mark.django_db

#: Every standard module but those that open windows, a browser or print at import.
_SEARCH = r"""
import contextlib, importlib, io, json, pkgutil, sys, warnings
warnings.simplefilter("ignore")
tried = set()
def hook(event, args):
    if event == "import":
        tried.add(args[0].split(".")[0])
sys.addaudithook(hook)
import django
django.setup()
import django_webfetch.plugins.client, django_webfetch.plugins.runtime.guest
import django_webfetch.plugins.sandbox
skip = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "__main__",
        "test", "lib2to3", "pydoc_data", "ensurepip", "venv"}
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    for name in sorted(sys.stdlib_module_names - skip):
        try:
            module = importlib.import_module(name)
        except BaseException:
            continue
        for info in pkgutil.walk_packages(getattr(module, "__path__", None) or [], name + ".",
                                          onerror=lambda _name: None):
            if info.name.split(".")[1] in ("test", "tests", "idle_test"):
                continue
            try:
                importlib.import_module(info.name)
            except BaseException:
                pass
print(json.dumps(sorted(tried - {n.split(".")[0] for n in sys.modules})))
"""


def test_every_name_the_site_tries_and_misses_is_reserved():
    """The live search: an audit hook records every name an ``import`` looks for (found or
    not) while a fresh interpreter of the site runs ``django.setup()`` with the test
    settings, imports the plugin client and the guest, and imports every standard module
    (and its submodules); each top-level name tried and not found is in
    ``registry.RESERVED_NAMES`` or ``registry.IMPLICIT_IMPORTS``.  The guest's own
    look-ups in the site's directories (``guest.SITE_PACKAGES``) are all reserved."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import guest

    missed = set(child_report(_SEARCH))
    assert "org" in missed, sorted(missed)  # copy's Jython import: the search works
    assert missed - registry.RESERVED_NAMES - registry.IMPLICIT_IMPORTS == set()
    assert guest.SITE_PACKAGES <= registry.RESERVED_NAMES


#: The plugin's package ``__init__``: a file beside it names the process it ran in (the
#: sandbox's view is read-only, so only a run in the site leaves one).
_MARK_INIT = textwrap.dedent(
    """
    import os

    error = Exception  # what httpx reads of a ``brotli`` it finds
    try:
        with open(os.path.join(os.path.dirname(__file__), f"ran-in-{os.getpid()}"), "w"):
            pass
    except OSError:
        pass
    """
)

_PLUGIN = (
    "def spy(plugin, arguments):\n    return 'spy'\n\n\n"
    "def manifest():\n    return {'name': 'orgspy', 'version': '1.0', 'description': 'x', "
    "'egress': [],\n            'tools': [{'name': 'orgspy_run', 'description': 'x', "
    "'handler': spy}]}\n"
)

#: Of ``registry.IMPLICIT_IMPORTS``: ``org`` (the standard library's), httpx's and
#: Django's optional imports.
_IMPLICIT = ["org", "brotli", "brotlicffi", "zstandard", "socksio", "h2", "simplejson"]


def _install(site: Path, top: str) -> None:
    """The plugin of top-level package ``top`` installed into ``site`` as pip installs it."""
    wheel(site, f"webfetch-{top}spy", {f"{top}spy": f"{top}.webfetch_orgspy:manifest"},
          {f"{top}/__init__.py": _MARK_INIT, f"{top}/webfetch_orgspy.py": _PLUGIN})  # fmt: skip


_START = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
os.environ["DJANGO_SETTINGS_MODULE"] = "fix25_settings"
import django
django.setup()
import django_webfetch.plugins.client
from django_webfetch.plugins import registry
top = sys.argv[2]
print(json.dumps({"imported": top in sys.modules, "problems": registry.problems(),
                  "manifests": [m.name for m in registry.manifests()]}))
"""


@pytest.mark.parametrize("top", _IMPLICIT)
def test_a_plugin_package_of_a_name_the_site_tries_to_import_never_runs_in_the_host(tmp_path, top):
    """Severity: High (fixed where the docs put untrusted plugins).

    History: issue 30, round 25, finding 3 (3a).  A plugin whose package is ``org``
    (``copy`` tries it) or an optional import of httpx or Django, installed where the site
    imports from, ran in a fresh ``django.setup()`` + plugin client import.  Installed as
    the docs say (``pip install --no-deps --target`` into a directory of
    ``WEBFETCH_PLUGIN_DIRS``, never on ``sys.path``), nothing of it runs in the site's
    process, and its entry point is refused before anything of it is looked up
    (``entry_point_reserved``: ``registry.IMPLICIT_IMPORTS``)."""
    target = tmp_path / "srv" / "plugins" / top
    _install(target, top)
    project = tmp_path / "project"
    project.mkdir()
    (project / "fix25_settings.py").write_text(
        f"from tests.settings import *  # noqa: F403\nWEBFETCH_PLUGIN_DIRS = [{str(target)!r}]\n"
    )
    report = child_report(_START, str(project), top)
    assert sorted(p.name for p in (target / top).glob("ran-in-*")) == []
    assert report["imported"] is False
    refused = [p for p in report["problems"] if f"{top}spy" in p]
    assert refused and "(entry_point_reserved)" in refused[0], report["problems"]
    assert "orgspy" not in report["manifests"]


_SITE_RUN = r"""
import io, json, os, sys
import django
django.setup()
from django.core import checks
from django.core.management import call_command
call_command("migrate", verbosity=0)
messages = [m for m in checks.run_checks() if m.id == "django_webfetch.W036"]
out = io.StringIO()
call_command("webfetch", "plugin", "list", stdout=out)
print(json.dumps({"w036": [str(m.msg) for m in messages],
                  "hints": [str(m.hint) for m in messages],
                  "list": out.getvalue(),
                  "own": sys.modules["site"].getsitepackages()}))
"""


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    """A virtual environment of this interpreter (no pip), whose ``site-packages`` reaches
    the test environment's packages through a ``.pth`` file: (its python, its
    site-packages)."""
    from django_webfetch.plugins.runtime import bubblewrap

    env = tmp_path / "venv"
    subprocess.run([bubblewrap.interpreter_path(), "-m", "venv", "--without-pip", str(env)],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = env / "lib" / version / "site-packages"
    (site / "test-environment.pth").write_text("\n".join(bubblewrap.site_dirs()) + "\n")
    return env / "bin" / "python", site


def test_a_plugin_installed_among_the_sites_own_packages_is_w036_and_listed(tmp_path):
    """Installed into the interpreter's own ``site-packages`` (``pip install`` into the
    site's environment), a plugin distribution is the site's own package: the site's
    interpreter imports from there every name it tries, before any check can run (here
    ``org``'s ``__init__`` ran in the site's own process, as it does for any package the
    site has installed: the limit).  Check ``django_webfetch.W036`` names each such
    distribution and says where to install it instead, and ``webfetch plugin list`` shows
    the same."""
    import django_webfetch

    python, site = _venv(tmp_path)
    for top in ("org", "zstandard"):
        _install(site, top)
    root = os.path.dirname(os.path.dirname(os.path.abspath(django_webfetch.__file__)))
    done = subprocess.run(
        [str(python), "-c", _SITE_RUN], capture_output=True, text=True, timeout=300, cwd=root,
        env={**os.environ, "PYTHONPATH": root, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert str(site) in report["own"]
    assert list((site / "org").glob("ran-in-*")), "the limit: org ran in the site's process"
    assert len(report["w036"]) == 2, report
    for name, message in zip(("webfetch-orgspy", "webfetch-zstandardspy"),
                             sorted(report["w036"]), strict=True):  # fmt: skip
        assert name in message and str(site) in message, message
        assert "whatever its instance's trust" in message
    assert all("WEBFETCH_PLUGIN_DIRS" in hint for hint in report["hints"])
    listed = [line for line in report["list"].splitlines() if line.startswith("site package:")]
    assert len(listed) == 2 and "webfetch-orgspy" in listed[0], report["list"]
    assert "W036" in listed[0] and "WEBFETCH_PLUGIN_DIRS" in listed[0]
