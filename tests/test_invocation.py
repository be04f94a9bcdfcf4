"""``django_webfetch.invocation``: the command the CLI prints starts as the operator
started it (README trial 8: ``python manage.py`` ran nothing from the checkout)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_webfetch.invocation import ENV_VAR, manage_command


@pytest.fixture
def venv(tmp_path):
    """A directory with an executable ``python`` (an interpreter's path, as in a venv)."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    return python


def test_the_hint_wins_as_it_is(venv):
    environ = {ENV_VAR: "sh example_project/run.sh manage", "PATH": "/usr/bin"}
    assert (
        manage_command(
            "webfetch",
            "plugin",
            "list",
            argv=["x/manage.py"],
            executable=str(venv),
            environ=environ,
        )  # fmt: skip
        == "sh example_project/run.sh manage webfetch plugin list"
    )


@pytest.mark.parametrize("hint", ["", "   ", "sh run.sh manage\nrm -rf /", "a\rb"])
def test_an_empty_or_multi_line_hint_is_ignored(venv, hint):
    environ = {ENV_VAR: hint, "PATH": str(venv.parent)}
    assert manage_command("check", argv=["manage.py"], executable=str(venv), environ=environ) == (
        "python manage.py check"
    )


def test_the_interpreter_is_python_only_when_python_on_the_path_is_this_one(venv, tmp_path):
    on_path = {"PATH": f"{venv.parent}{os.pathsep}/usr/bin"}
    off_path = {"PATH": "/usr/bin:/bin"}
    argv = ["example_project/manage.py", "webfetch"]
    assert manage_command("x", argv=argv, executable=str(venv), environ=on_path) == (
        "python example_project/manage.py x"
    )
    # Another ``python`` first on the PATH (the system's): this interpreter's own path.
    other = tmp_path / "other"
    other.mkdir()
    (other / "python").write_text("")
    (other / "python").chmod(0o755)
    shadowed = {"PATH": f"{other}{os.pathsep}{venv.parent}"}
    assert manage_command("x", argv=argv, executable=str(venv), environ=shadowed) == (
        f"{venv} example_project/manage.py x"
    )
    assert manage_command("x", argv=argv, executable=str(venv), environ=off_path) == (
        f"{venv} example_project/manage.py x"
    )


def test_an_interpreter_under_the_current_directory_is_shown_relative(venv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        manage_command("x", argv=["manage.py"], executable=str(venv), environ={"PATH": "/usr/bin"})
        == "venv/bin/python manage.py x"
    )
    # One in the current directory itself keeps its ./ (a bare name would be looked up).
    assert (
        manage_command(
            "x", argv=["manage.py"], executable=str(tmp_path / "py"), environ={"PATH": "/usr/bin"}
        )
        == "./py manage.py x"
    )


def test_django_admin_and_python_m_django(venv):
    environ = {"PATH": str(venv.parent)}
    assert (
        manage_command(
            "check", argv=["/usr/local/bin/django-admin"], executable=str(venv), environ=environ
        )
        == "django-admin check"
    )
    main = os.path.join(os.path.dirname(__import__("django").__file__), "__main__.py")
    assert manage_command("check", argv=[main], executable=str(venv), environ=environ) == (
        "python -m django check"
    )


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["/usr/bin/uvicorn", "example_project.asgi:application"],
        ["-c"],
        [os.path.join("site-packages", "pytest", "__main__.py")],
    ],
)
def test_anything_else_says_python_manage_py(venv, argv):
    assert manage_command("x", argv=argv, executable=str(venv), environ={"PATH": ""}) == (
        "python manage.py x"
    )


@given(
    st.text(min_size=1, max_size=40).filter(
        lambda s: (
            "\0" not in s and os.path.basename(f"{s}.py") not in ("__main__.py", "django-admin.py")
        )
    )
)
def test_a_script_path_is_quoted_so_the_shell_reads_it_back(name):
    """Whatever the script's path, the printed command splits back into that path."""
    import shlex

    script = f"{name}.py"
    printed = manage_command("webfetch", argv=[script], executable="/opt/py/bin/python",
                             environ={"PATH": ""})  # fmt: skip
    words = shlex.split(printed)
    assert words == ["/opt/py/bin/python", script, "webfetch"]


def test_a_real_manage_py_prints_the_prefix_it_was_started_with(tmp_path):
    """A real process: ``sys.argv[0]`` and ``sys.executable`` as Python sets them."""
    script = tmp_path / "manage.py"
    script.write_text(
        "from django_webfetch.invocation import manage_command\n"
        "print(manage_command('webfetch', 'plugin', 'list'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["PATH"] = "/usr/bin:/bin"
    env["PYTHONPATH"] = os.getcwd()
    done = subprocess.run(
        [sys.executable, "manage.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    interpreter = os.path.relpath(sys.executable, tmp_path)
    if interpreter.startswith(os.pardir):
        interpreter = sys.executable
    assert done.stdout.strip() == f"{interpreter} manage.py webfetch plugin list"
