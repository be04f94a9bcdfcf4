"""Issue 9 item 12: ``python -m build`` makes a wheel and an sdist, and the wheel installs
into a clean virtual environment and imports there.

Offline by construction (the test runs inside the lab namespace): the build runs without
isolation, with the hatchling of the test environment, and pip installs the wheel with
``--no-index --no-deps``; the clean environment borrows the dependencies from the test
environment only *after* its own site-packages, so the package itself comes from the wheel.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

import django_webfetch

ROOT = Path(__file__).resolve().parents[1]


def clean_venv(directory: Path) -> Path:
    """A new virtual environment with nothing in it (not even pip); its interpreter."""
    venv.EnvBuilder(with_pip=False, clear=True).create(directory)
    return directory / "bin" / "python"


def pip_into(python: Path) -> list[str]:
    """The test environment's pip, installing into the environment of ``python`` (pip's
    ``--python``: it runs under that interpreter): the clean environment needs no pip of its
    own (``ensurepip`` cost 3 s of CPU per environment)."""
    return [sys.executable, "-m", "pip", "--python", str(python)]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` of the checkout, once per run (issue 28: each test built its
    own, ~3 CPU-s): the sdist, and the wheel built from it, as a release makes them.  The
    tests only read what it made.  The first xdist worker that needs it builds it into the
    run's shared directory (``WEBFETCH_TEST_SHARED_DIR``, tests/run.sh) under a file lock;
    the other finds it there.  Without that directory the module builds its own."""
    shared = os.environ.get("WEBFETCH_TEST_SHARED_DIR", "")
    if not shared or not os.path.isdir(shared):
        dist = tmp_path_factory.mktemp("dist")
        _build(dist)
        return dist
    dist = Path(shared) / "dist"
    with open(f"{dist}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not dist.exists():
            part = Path(shared) / "dist.part"
            shutil.rmtree(part, ignore_errors=True)
            _build(part)
            os.replace(part, dist)
    return dist


def _build(outdir: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(outdir), str(ROOT)],
        check=True,
        capture_output=True,
    )


@pytest.mark.packaging
def test_the_built_wheel_installs_into_a_clean_venv(dist, tmp_path):
    version = django_webfetch.__version__
    [wheel] = dist.glob(f"django_webfetch-{version}-py3-none-any.whl")
    [sdist] = dist.glob(f"django_webfetch-{version}.tar.gz")

    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "django_webfetch/py.typed",
        "django_webfetch/migrations/0001_initial.py",
        "django_webfetch/templates/django_webfetch/calls/decision.html",
        "django_webfetch/net/guard.py",
    ):
        assert needed in names, needed
    assert not any(n.startswith(("tests/", "example_project/")) for n in names)
    with tarfile.open(sdist) as archive:
        members = {m.name.split("/", 1)[1] for m in archive.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "django_webfetch/__init__.py"} <= members
    assert not any(m.startswith(".venv/") for m in members)

    env = tmp_path / "venv"
    python = clean_venv(env)
    subprocess.run(
        [*pip_into(python), "install", "--no-index", "--no-deps", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    deps = sysconfig.get_paths()["purelib"]
    probe = (
        "import sys; sys.path.append(sys.argv[1]);"
        "import django_webfetch, django_webfetch.net;"
        "print(django_webfetch.__version__, django_webfetch.__file__)"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out = subprocess.run(
        [str(python), "-c", probe, deps],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean,
    ).stdout.split()
    assert out[0] == version
    assert out[1].startswith(str(env))  # imported from the wheel, not from the checkout


# A django CMS site as docs/cms.rst sets it up, reduced to what ``check`` needs.
_CMS_SETTINGS = """
import os
SECRET_KEY = "clean-venv"
INSTALLED_APPS = [
    "django_webfetch.cms",
    "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
    "django.contrib.sessions", "django.contrib.messages", "django.contrib.sites",
    "cms", "menus", "treebeard", "sekizai",
    "rest_framework",
    "django_webfetch",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [os.path.join(os.path.dirname(__file__), "templates")],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
        "sekizai.context_processors.sekizai",
        "cms.context_processors.cms_settings",
    ]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
SITE_ID = 1
LANGUAGES = [("en", "English")]
CMS_TEMPLATES = [("base.html", "Base")]
ROOT_URLCONF = "cleanurls"
USE_TZ = True
"""

_CMS_URLS = """
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("django_webfetch.api.urls")),
    path("assistant/", include("django_webfetch.cms.urls")),
    path("", include("cms.urls")),
]
"""

_CMS_PROBE = """
import django, sys
from django.core.management import call_command
django.setup()
import cms, cms.admin, cms.utils.compat, django_webfetch.cms.views
from django.urls import reverse
call_command("check", fail_level="ERROR")
print(cms.__version__, cms.__file__, reverse("admin:index"))
"""


@pytest.mark.long
@pytest.mark.packaging
def test_the_cms_extra_installs_a_django_cms_that_imports(dist, tmp_path):
    """Issue 31 item 2: ``pip install ".[cms]"`` into a fresh venv gives a django CMS that
    imports and passes ``check`` (django CMS 5.1.3 imports ``packaging`` without declaring it).

    pip resolves the dependencies itself (no ``--no-deps``), offline, from a local index packed
    from the test environment's own distributions (tests/wheelhouse.py): only what the metadata
    declares reaches the clean environment.
    """
    from tests.wheelhouse import build_wheelhouse

    [wheel] = dist.glob("django_webfetch-*-py3-none-any.whl")
    house = tmp_path / "wheelhouse"
    house.mkdir()
    packed = {p.name.split("-")[0].lower() for p in build_wheelhouse(wheel, {"cms"}, house)}
    assert {"django_cms", "django", "packaging"} <= packed, packed
    assert "djangocms_text" not in packed  # the example's extra app is not what makes it work

    env = tmp_path / "venv"
    python = clean_venv(env)
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    clean["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    pip = subprocess.run(
        [
            *pip_into(python),
            "install",
            "-q",
            "--no-compile",
            "--no-index",
            "--find-links",
            str(house),
            f"{wheel}[cms]",
        ],
        capture_output=True,
        text=True,
        env=clean,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    site = tmp_path / "site"
    site.mkdir()
    (site / "cleansettings.py").write_text(_CMS_SETTINGS)
    (site / "cleanurls.py").write_text(_CMS_URLS)
    (site / "templates").mkdir()
    (site / "templates" / "base.html").write_text("{% load cms_tags %}{% placeholder 'c' %}")
    clean["DJANGO_SETTINGS_MODULE"] = "cleansettings"
    clean["PYTHONPATH"] = str(site)
    done = subprocess.run(
        [str(python), "-c", _CMS_PROBE],
        capture_output=True,
        text=True,
        cwd=site,
        env=clean,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    version, location, admin_url = done.stdout.split()
    assert version.startswith("5.")
    assert location.startswith(str(env))  # django CMS of the clean venv, not of the test env
    assert admin_url == "/admin/"
