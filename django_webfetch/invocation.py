"""How the operator reached ``manage.py``: the commands the CLI prints run as they are.

A prompt that says "run this" (``plugin trust``'s confirmation, a check's hint) prints the
command with the prefix the operator used, not a guessed ``python manage.py``:

1. ``WEBFETCH_MANAGE_COMMAND`` in the environment, as it is: a wrapper that runs
   ``manage.py`` for the operator says how it is typed (``example_project/run.sh`` sets
   ``sh example_project/run.sh manage``);
2. otherwise ``sys.argv[0]`` when it is a ``manage.py``-like script or ``python -m django``:
   the interpreter that runs now (``python`` when that is what ``python`` on the ``PATH``
   is, else its path, relative to the current directory when under it) and the script as
   it was typed; ``django-admin`` as it is;
3. otherwise (a server, a test runner) ``python manage.py``.

Pure Python (no Django import).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence

__all__ = ["ENV_VAR", "manage_command"]

#: The environment variable a wrapper sets to the command that runs ``manage.py``.
ENV_VAR = "WEBFETCH_MANAGE_COMMAND"
_FALLBACK = "python manage.py"


def _same_file(a: str, b: str) -> bool:
    # Not resolved through symlinks: a virtualenv's ``bin/python`` links to the base
    # interpreter, and running that one would miss the virtualenv's packages.
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


def _interpreter(executable: str, path: str | None) -> str:
    if not executable:
        return "python"
    for name in ("python", "python3"):
        found = shutil.which(name, path=path)
        if found is not None and _same_file(found, executable):
            return name
    try:
        relative = os.path.relpath(executable)
    except (ValueError, OSError):  # another drive (Windows), or no working directory
        relative = executable
    if not relative.startswith(os.pardir):
        return shlex.quote(relative if os.sep in relative else os.path.join(os.curdir, relative))
    return shlex.quote(executable)


def _prefix(argv: Sequence[str], executable: str, environ: Mapping[str, str]) -> str:
    hint = environ.get(ENV_VAR, "").strip()
    if hint and "\n" not in hint and "\r" not in hint:
        return hint
    script = argv[0] if argv else ""
    base = os.path.basename(script)
    if base in ("django-admin", "django-admin.py"):
        return base
    if base == "__main__.py" and os.path.basename(os.path.dirname(script)) == "django":
        return f"{_interpreter(executable, environ.get('PATH'))} -m django"
    if base.endswith(".py") and base != "__main__.py":
        return f"{_interpreter(executable, environ.get('PATH'))} {shlex.quote(script)}"
    return _FALLBACK


def manage_command(
    *words: str,
    argv: Sequence[str] | None = None,
    executable: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The command line that runs ``manage.py`` with ``words``, as the operator types it
    (``argv``, ``executable`` and ``environ`` default to this process's)."""
    prefix = _prefix(
        sys.argv if argv is None else argv,
        sys.executable if executable is None else executable,
        os.environ if environ is None else environ,
    )
    return " ".join([prefix, *words])
