"""Issue 9 item 12: ``python -m build`` makes a wheel and an sdist, and the wheel installs
into a clean virtual environment and imports there.

Offline by construction (the test runs inside the lab namespace): the build runs without
isolation, with the hatchling of the test environment, and pip installs the wheel with
``--no-index --no-deps``; the clean environment borrows the dependencies from the test
environment only *after* its own site-packages, so the package itself comes from the wheel.
"""

from __future__ import annotations

import os
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


@pytest.mark.packaging
def test_the_built_wheel_installs_into_a_clean_venv(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
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
    venv.EnvBuilder(with_pip=True, clear=True).create(env)
    python = env / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--no-deps", "-q", str(wheel)],
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
