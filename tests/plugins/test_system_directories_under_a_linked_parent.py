"""A system library directory the sandbox binds, reached through a linked parent (an
OSTree host's ``/usr/local -> ../var/usrlocal``: Fedora Silverblue, CoreOS, RHEL for
Edge; a ``/usr/local`` linked to a larger disk), is bound where it resolves, its name a
link to it, so the site's code and data under it are masked as anywhere else, and the
guest's Landlock rules are each where their path resolves (issue 30, round 28, finding 5;
decision 0058 amended).

Every path the sandbox hides is resolved (``realpath``); the bind used the name given, so
under a linked parent nothing under ``/usr/local/lib`` was masked, and the guest's rule for
``/usr/local/lib`` was not split either.  The real-sandbox test makes ``/usr`` as an
OSTree host has it in a child process's own mount namespace
(``tests/plugins/linked_usr_child.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.plugins.conftest import PROBE_SITE
from tests.plugins.packages import open_up

_SECRET = "s16-linked-usr-local-secret"  # with the test's own id: the tests run side by side

_READER = """\
import os


def run(plugin, arguments):
    found, read = [], 0
    for top, dirs, files in os.walk(%r):
        for name in files:
            path = os.path.join(top, name)
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            read += 1
            if %r in data:
                found.append(path)
    return {"leaked": found, "read": read}


def manifest():
    return {"name": "webfetch_linked_reader", "version": "1.0", "description": "x",
            "egress": [], "tools": [{"name": "webfetch_linked_reader_run",
            "description": "x", "handler": run}]}
"""


@pytest.mark.parametrize("mode", ["plain", "link"])
def test_on_a_host_whose_usr_local_is_a_link_the_sites_code_under_it_is_not_readable(
    system_library_dir: Path, tmp_path: Path, mode: str
) -> None:
    """History: issue 30, round 28, finding 5 (Medium).

    A child process makes ``/usr`` as an OSTree host has it (``link``) or leaves it as it
    is (``plain``, the control), runs a site whose settings package lies under
    ``/usr/local/lib`` (imported by that name) and calls a plugin that reads every file of
    the test's directory there: the settings module is read nowhere, in either mode.  Before the
    fix, in ``link`` mode, it was read whole, ``SECRET_KEY`` and all."""
    secret = f"{_SECRET}-{uuid.uuid4().hex}"
    package = system_library_dir / "webfetch_linked_site"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(
        f"SECRET_KEY = '{secret}'\nINSTALLED_APPS = []\nUSE_TZ = True\n"
        "ROOT_URLCONF = 'webfetch_linked_site.settings'\nurlpatterns = []\nDATABASES = {}\n"
    )
    (system_library_dir / "control.txt").write_text("control\n")
    plugins = tmp_path / "plugins"
    (plugins / "webfetch_linked_reader").mkdir(parents=True)
    (plugins / "webfetch_linked_reader" / "__init__.py").write_text(
        _READER % (str(system_library_dir), secret.encode())
    )
    # Where the child's ``/usr/local`` lives then (``/var/usrlocal`` on OSTree), reachable
    # by the plugin's uid.
    var = Path(tempfile.mkdtemp(prefix="webfetch-linked-var-", dir="/var/tmp"))
    os.chmod(var, 0o755)
    open_up(system_library_dir)
    open_up(tmp_path)
    os.chmod(tmp_path.parent, 0o755)
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            [
                sys.executable,
                str(Path(__file__).with_name("linked_usr_child.py")),
                str(system_library_dir),
                str(plugins),
                str(var),
                mode,
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(root)},
            start_new_session=True,
            check=False,
        )
    finally:
        shutil.rmtree(var, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["kind"] == "json", report
    seen = json.loads(report["text"])
    assert seen["read"] > 0, seen  # the control file at least: the walk read something
    assert seen["leaked"] == [], f"the site's settings under /usr/local/lib are read: {seen}"
    system = [tuple(entry) for entry in report["system"]]
    binds = [entry[1] for entry in system if entry[0] == "bind"]
    assert all(os.path.isabs(path) for path in binds), system
    if mode == "link":
        # Bound where it resolves, its name a link to it.
        [(kind, real, name)] = [e for e in system if e[-1] == "/usr/local/lib"]
        assert kind == "symlink" and real in binds and real.startswith(str(var)), system
    else:
        assert "/usr/local/lib" in binds, system


def test_each_system_bind_is_where_it_resolves() -> None:
    """History: issue 30, round 28, finding 5.  Every directory ``_system`` binds is bound
    at its resolved path (what every hidden path is compared with); a name that differs is
    a link to it in the sandbox."""
    from django_webfetch.plugins.runtime import bubblewrap

    system = bubblewrap._system()
    for entry in system:
        if entry[0] == "bind":
            assert os.path.realpath(entry[1]) == entry[1], entry
    for entry in system:
        if entry[0] == "symlink" and entry[2] in ("/usr/lib", "/usr/lib64", "/usr/local/lib"):
            assert ("bind", entry[1]) in system, system


def test_no_landlock_rule_of_the_guest_reaches_a_hidden_path_through_a_link() -> None:
    """History: issue 30, round 28, finding 5.  The guest's Landlock read rules are each
    where their path resolves: a rule through a link (``/lib -> usr/lib`` on Debian, an
    OSTree host's ``/usr/local``) lands on its target whole, and would grant what the
    split of the target's own rule leaves out.  Here a hidden path lies under ``/usr/lib``;
    no read rule, resolved, holds it."""
    from django_webfetch.plugins.runtime import guest

    if not os.path.isdir("/usr/lib") or os.path.islink("/usr/lib"):
        pytest.skip("no /usr/lib directory")
    top = tempfile.mkdtemp(prefix="webfetch-linked-rule-", dir="/usr/lib")
    try:
        hidden = os.path.join(top, "mysite")
        os.mkdir(hidden)
        read, split = guest.read_paths(PROBE_SITE, "webfetch_code_probe", [hidden])
        for path in read:
            real = os.path.realpath(path)
            assert not (hidden == real or hidden.startswith(real.rstrip("/") + "/")), (
                f"the rule {path} ({real}) grants the hidden {hidden}"
            )
        assert "/usr/lib" in split  # split around it, listable only
    finally:
        shutil.rmtree(top, ignore_errors=True)
