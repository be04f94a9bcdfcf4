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
class Recorder:  # every top-level look-up, importlib.import_module's too (no audit event)
    def find_spec(self, name, path=None, target=None):
        if path is None:
            tried.add(name.split(".")[0])
        return None
sys.meta_path.insert(0, Recorder())
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
    # Every module of Django (its backends' optional imports), then what it tries lazily.
    for info in pkgutil.walk_packages(django.__path__, "django.", onerror=lambda _name: None):
        if ".tests" not in info.name and not info.name.endswith(".tests"):
            with contextlib.suppress(BaseException):
                importlib.import_module(info.name)
    _django_lazy_tries()
print(json.dumps(sorted(tried - {n.split(".")[0] for n in sys.modules})))
"""

#: What Django's own code imports only when it is used (issue 30, round 26, finding 4):
#: the serializers (``dumpdata``, ``loaddata``, the test runner), the password hashers (a
#: login), ``manage.py shell``, the cache backends' clients and the image reader.
_DJANGO_LAZY = r"""
import contextlib, io, sys
def _django_lazy_tries():
    from django.core import serializers
    serializers.get_public_serializer_formats()
    from django.contrib.auth import hashers
    for hasher in (hashers.Argon2PasswordHasher, hashers.BCryptSHA256PasswordHasher,
                   hashers.BCryptPasswordHasher, hashers.ScryptPasswordHasher):
        with contextlib.suppress(BaseException):
            hasher().encode("x", "saltsaltsalt")
    from django.core.management.commands.shell import Command
    for shell in ("ipython", "bpython"):  # ``manage.py shell`` tries each in turn
        with contextlib.suppress(BaseException):
            getattr(Command(), shell)({"no_startup": True})
    from django.core.cache.backends import memcached, redis
    for client in (lambda: memcached.PyLibMCCache("127.0.0.1:1", {})._lib,
                   lambda: memcached.PyMemcacheCache("127.0.0.1:1", {})._lib,
                   lambda: redis.RedisCache("redis://127.0.0.1:1", {})._cache._lib):
        with contextlib.suppress(BaseException):
            client()
    from django.core.files.images import get_image_dimensions
    with contextlib.suppress(BaseException):
        get_image_dimensions(io.BytesIO(b"x"))
"""


def test_every_name_the_site_tries_and_misses_is_reserved():
    """The live search: an audit hook and a first ``sys.meta_path`` finder record every
    name an import looks for (found or not; ``importlib.import_module`` raises no audit
    event) while a fresh interpreter of the site runs ``django.setup()`` with the test
    settings, imports the plugin client and the guest, every standard module (and its
    submodules) and every module of Django, and makes the calls of Django that import
    lazily (``_DJANGO_LAZY``); each top-level name tried and not found is in
    ``registry.RESERVED_NAMES`` or ``registry.IMPLICIT_IMPORTS``.  The guest's own
    look-ups in the site's directories (``guest.SITE_PACKAGES``) are all reserved."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime import guest

    missed = set(child_report(_DJANGO_LAZY + _SEARCH))
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
from tests import dbshare
dbshare.migrate()  # the run's migrated copy when there is one
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


_DJANGO_TRIES = r"""
import json, sys
tried = []
class Recorder:  # every top-level name looked up, whether by a statement or import_module
    def find_spec(self, name, path=None, target=None):
        if path is None:
            tried.append(name)
        return None
import django
django.setup()
# As on a site without PyYAML installed: the serializers not loaded yet.
loaded = ("yaml", "yaml.", "django.core.serializers")
for name in [n for n in sys.modules if n.startswith(loaded)]:
    del sys.modules[name]
sys.meta_path.insert(0, Recorder())
from django.core import serializers
serializers.get_public_serializer_formats()  # dumpdata, loaddata, the test runner
from django.contrib.auth.hashers import Argon2PasswordHasher
try:
    Argon2PasswordHasher().encode("x", "saltsaltsalt")  # a default PASSWORD_HASHERS entry
except Exception:
    pass
from django.contrib.auth.hashers import BCryptSHA256PasswordHasher
try:
    BCryptSHA256PasswordHasher().encode("x", "saltsaltsalt")  # another default entry
except Exception:
    pass
from django.core.management.commands.shell import Command
for shell in ("ipython", "bpython"):  # ``manage.py shell`` tries each in turn
    try:
        getattr(Command(), shell)({"no_startup": True})
    except ImportError:
        pass
print(json.dumps(tried))
"""


@pytest.fixture(scope="module")
def django_tries() -> list[str]:
    """Every top-level name Django's own code looked up in one fresh interpreter of the site
    (``_DJANGO_TRIES``): the same run for each name asked about, so made once a module."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    run = subprocess.run(
        [sys.executable, "-c", _DJANGO_TRIES],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    tried: list[str] = json.loads(run.stdout.strip().splitlines()[-1])
    return tried


@pytest.mark.parametrize("top", ["yaml", "argon2", "bcrypt", "IPython", "bpython"])
def test_a_name_djangos_own_commands_try_is_refused_as_a_plugins_module(
    top: str, django_tries: list[str]
) -> None:
    """Django tries the name (found or not: a ``sys.meta_path`` recorder) and an entry point
    whose module has it is refused (``entry_point_reserved``).

    History: issue 30, round 26, finding 4 (Low).  ``registry.IMPLICIT_IMPORTS`` was
    measured over ``django.setup()``, the plugin client and guest and the standard library
    (decision 0065), not over what Django's own code tries later: its serializers
    (``dumpdata``, ``loaddata``, the test runner's database serialisation) try ``yaml``, the
    default ``PASSWORD_HASHERS`` try ``argon2`` at a login, ``manage.py shell`` tries
    ``IPython`` then ``bpython``.  An entry point named so was accepted: no
    ``entry_point_reserved``, so W036 (a warning) is all that stands between a plugin
    ``yaml`` among the site's packages and the operator's next ``manage.py dumpdata`` (run
    as the site, with its secrets), and the docs' promise "a plugin named ``zstandard`` (or
    any name of ``IMPLICIT_IMPORTS``) is refused wherever it is installed" did not reach
    Django's own tries.

    Gain was code of an untrusted plugin running in the site's management commands,
    outside any sandbox, where the site installed it among its packages (W036's case)."""
    from importlib.metadata import EntryPoint

    from django_webfetch.plugins import registry

    assert top in django_tries, "Django tries the name"
    ep = EntryPoint(name="attack26", value=f"{top}:manifest", group=registry.ENTRY_POINT_GROUP)
    problem = registry._entry_point_problem(ep)
    assert problem is not None and problem.reason == "entry_point_reserved", (
        f"a plugin's module may be named {top!r}, a name Django's own code tries"
    )
