"""Issue 30, round 27 (outside attack): what gets through the plugin sandbox.

Each test fails on the code it was written against (that is the proof of its finding);
its docstring gives the severity, the route and what an attacker gains.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from django_webfetch.plugins.runtime import bubblewrap
from tests.plugins.packages import open_up, read_all, wheel
from tests.plugins.test_sandbox_kernel_memory_cpu_inodes_and_bytecode import _warm_pid
from tests.settle import SAFETY_NET

pytestmark = pytest.mark.django_db

_SECRET = "attack27-the-sites-secret"


def test_a_plugin_dependency_whose_record_names_a_copy_unmasks_the_copy(
    probe: Any,
    system_library_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
) -> None:
    """Medium-low.  Route: decision 0058 amended for round 26 keeps visible every sibling
    of the site's package that another distribution's ``RECORD`` lists
    (``bubblewrap._directory_entries``/``_installed``), and a ``RECORD`` is whatever the
    wheel pip installed holds.  A plugin (or a dependency it declares, which the operator
    installs into ``site-packages``) ships one harmless file under the name of the copy
    an operator keeps of the previous release (``mysite_old/__init__.py``...); pip writes
    it into the existing copy and lists ``mysite_old/...`` in the plugin's ``RECORD``:
    the whole copy, ``settings.py`` with ``SECRET_KEY`` included, is then shown in every
    plugin process.  Gain: the site's settings, secrets and code through any backup copy
    whose name the wheel guessed (a wheel may ship many names).  Suggested fix: an entry
    is another distribution's only when that distribution's ``RECORD`` accounts for every
    file in it (or: never keep visible what holds a copy of a masked file)."""
    deps = system_library_dir / "venv" / "lib" / "site-packages"
    deps.mkdir(parents=True)
    settings_text = f"SECRET_KEY = '{_SECRET}'\n"
    wheel(deps, "attack27-site", {}, {"attack27_site/__init__.py": "",
                                      "attack27_site/settings.py": settings_text})  # fmt: skip
    shutil.copytree(deps / "attack27_site", deps / "attack27_site_old")
    # The plugin's dependency, installed over the copy by pip: one marker file there.
    wheel(deps, "attack27-helper", {}, {"attack27_helper/__init__.py": "",
                                        "attack27_site_old/zz_marker.py": ""})  # fmt: skip
    open_up(system_library_dir)
    monkeypatch.syspath_prepend(str(deps))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack27_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    seen = read_all(probe, [str(deps)], _SECRET)
    assert str(deps / "attack27_helper" / "__init__.py") in seen["read"], seen  # control
    assert str(deps / "attack27_site" / "settings.py") not in seen["read"], seen
    assert seen["leaked"] == [], f"the site's settings are readable: {seen['leaked']}"


def test_a_copy_dated_without_a_separator_beside_the_sites_package_is_shown(
    system_library_dir: Path, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """Low.  Route: a directory's copies are its siblings holding its name as a whole word
    (``bubblewrap._of_directory``): a letter or digit right after the name makes a
    neighbour, never a copy.  The copy a deploy script makes with the date appended
    directly (``cp -a mysite mysite$(date +%F)``: ``mysite2026-12-07``;
    ``mysite$(date +%Y%m%d)``; a versioned ``mysitev41``) lies in the bound package
    directory unmasked, ``settings.py`` with ``SECRET_KEY`` in it (this sits on the rule's
    stated boundary, ``media2`` being a neighbour; a date or a version is the copy the
    amendment meant to catch).  Gain: the site's
    settings and code from an ordinary backup naming.  Suggested fix: a digit run of a
    date or a version (``\\d{4,}``, ``v\\d+``) after the name makes a copy too, or mask
    every sibling holding a file identical to a masked one (its ``settings.py``)."""
    package = system_library_dir / "attack27_site"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(f"SECRET_KEY = '{_SECRET}'\n")
    names = ["attack27_site2026-12-07", "attack27_site20261207", "attack27_siteOLD"]
    for name in names:
        shutil.copytree(package, system_library_dir / name)
    monkeypatch.syspath_prepend(str(system_library_dir))
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "attack27_site.settings")
    settings.WEBFETCH_PLUGIN_HIDDEN_PATHS = []
    hidden = bubblewrap.hidden_paths([os.path.realpath(system_library_dir)], [])
    real = os.path.realpath(system_library_dir)
    assert os.path.join(real, "attack27_site") in hidden, hidden  # the control
    shown = [name for name in names if os.path.join(real, name) not in hidden]
    assert shown == [], f"copies of the site's package shown in the sandbox: {shown}"


#: A call whose request's name the lab's DNS never answers (the plugin's own slow
#: authoritative server, or a dropped packet: the resolver waits and asks again).
_DNS_CALL = """\
try:
    plugin.http.get('http://granted.lab.example/page', timeout=15)
except Exception:
    pass
result = 'answered'
"""


def test_a_call_that_ended_goes_on_asking_dns_questions_for_its_request(
    probe: Any, lab_settings: Any, settings: Any
) -> None:
    """Low.  Route: decision 0066 ends a call's requests by shutting their connections and
    refusing any hop before its DNS question, and accepts that a question already asked
    is not interrupted; but the lookup under way when the call ends is not ended
    (``net.resolve.DnsResolver._ask`` has no cancellation): with the usual two
    nameservers it asks A and AAAA again, server after server every 2 s, for the
    request's whole budget (up to ``WEBFETCH_TIMEOUT``, 15 s here), after the plugin
    process is dead; and the host's thread stays in the lookup that long, so the call's
    end (its failure, its process's uid and pool slot) comes at the lookup's budget, not
    "at once" as the decision says.  Gain: egress (DNS questions naming what the plugin
    chose) after its call ended and its process was killed; a call held 15 s past its
    end.  Suggested fix: ``_ask`` checks the call's ``Cancellation`` between exchanges
    and its ``select`` waits also on a wake-up descriptor the cancel writes to (or the
    exchange's socket is held and shut as connections are)."""
    from django_webfetch.plugins.runtime.host import RuntimeFailure, shutdown

    settings.WEBFETCH_DNS_NAMESERVERS = (lab_settings.DNS_V4, lab_settings.DNS_V6)
    settings.WEBFETCH_PLUGIN_WALL_SECONDS = 20
    settings.WEBFETCH_TIMEOUT = 15
    failures: list[BaseException] = []
    killed: list[int] = []

    def asked() -> list[Any]:
        return [q for q in lab_settings.dns.queries if q.name.startswith("granted.lab.example")]

    def end_the_call(pid: int) -> None:
        try:
            assert lab_settings.wait_for(asked, SAFETY_NET), "no DNS question was asked"
            killed.append(len(asked()))
            os.kill(pid, signal.SIGKILL)
        except BaseException as exc:
            failures.append(exc)

    try:
        pid = _warm_pid(probe)
        lab_settings.dns.drop("granted.lab.example")
        ender = threading.Thread(target=end_the_call, args=(pid,), daemon=True)
        ender.start()
        with pytest.raises(RuntimeFailure) as ended:
            probe(_DNS_CALL)
        ender.join(SAFETY_NET)
    finally:
        shutdown()
    assert not failures, failures
    assert ended.value.code == "plugin_crashed", ended.value
    # The first exchange (A and AAAA to the first server) was asked while the call ran;
    # every question after it was asked for a call whose process was already dead.
    after = [(q.qtype, q.server) for q in asked()[2:]]
    assert killed and killed[0] <= 2, killed
    assert after == [], f"DNS questions asked after the call ended: {after}"
