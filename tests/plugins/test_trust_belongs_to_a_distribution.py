"""Issue 30, reopened (s4), finding 7: trust is given to a distribution, never to an
entry point's name.

An operator trusts plugin ``t`` (distribution ``webfetch-t`` 1.0).  Later the entry point
``t`` is provided by something else: a new version of the package (new code), or another
distribution that claims the name after the first is gone.  A trusted instance records
the distribution it was trusted for (name, version, a digest of its plugin's code) when trust
is turned on; while another one provides the entry point the instance is not trusted: its
code is not imported in the site where no sandbox can be built, check W034 and ``webfetch
plugin list`` say so, and confirming again (``webfetch plugin trust``, the admin action,
or untick/tick) restores it.  Real distributions on a ``sys.path`` directory throughout.
"""

from __future__ import annotations

import hashlib
import io
import re
import sys
from typing import Any

import pytest
from django.core.management import call_command

from tests.plugins.packages import child_report

pytestmark = pytest.mark.django_db


def _install(site: Any, dist: str = "webfetch-t", version: str = "1.0", mark: str = "") -> Any:
    """Distribution ``dist`` ``version`` in directory ``site``: package ``webfetch_t``,
    entry point ``t``; its import appends a line to ``mark`` (when given)."""
    package = site / "webfetch_t"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(
        (f"with open({mark!r}, 'a') as f:\n    f.write('imported\\n')\n" if mark else "")
        + "def manifest():\n    return {'name': 't', 'version': "
        + repr(version)
        + ", 'description': 'x', 'egress': [], 'tools': []}\n"
    )
    for old in site.glob("*.dist-info"):
        for file in old.iterdir():
            file.unlink()
        old.rmdir()
    folder = dist.replace("-", "_")
    info = site / f"{folder}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[django_webfetch.plugins]\nt = webfetch_t:manifest\n")
    record = "".join(
        f"{name},,\n"
        for name in (
            "webfetch_t/__init__.py",
            f"{info.name}/METADATA",
            f"{info.name}/entry_points.txt",
            f"{info.name}/RECORD",
        )
    )
    (info / "RECORD").write_text(record)
    # The pin: the SHA-256 over each file of the package, its path and its bytes' SHA-256,
    # with the entry point's value and the files of its metadata that decide what runs
    # (``closure.own_digest``; issue 30, attack 12, findings 2 and 3).
    code = hashlib.sha256((package / "__init__.py").read_bytes()).hexdigest()
    tree = hashlib.sha256(f"webfetch_t/__init__.py\0{code}\n".encode()).hexdigest()
    pin = hashlib.sha256(b"entry\0webfetch_t:manifest\n")
    pin.update(f"code\0webfetch_t\0{tree}\n".encode())
    for name in ("entry_points.txt", "METADATA"):
        pin.update(
            f"meta\0{name}\0{hashlib.sha256((info / name).read_bytes()).hexdigest()}\n".encode()
        )
    return pin.hexdigest()


def _cli(*args: str) -> str:
    out = io.StringIO()
    call_command("webfetch", "plugin", *args, stdout=out)
    return out.getvalue()


def _trust(alias: str) -> str:
    """``webfetch plugin trust ALIAS`` (which shows the distribution and trusts nothing),
    then ``--confirm`` with the fingerprint it printed: what the operator reviewed."""
    from django.core.management.base import CommandError

    out = io.StringIO()
    with pytest.raises(CommandError) as shown:
        call_command("webfetch", "plugin", "trust", alias, stdout=out)
    assert shown.value.returncode == 3
    fingerprint = out.getvalue().splitlines()[-1].rsplit(" ", 1)[1]
    return _cli("trust", alias, "--confirm", fingerprint)


def _w034(alias: str) -> list[str]:
    from django_webfetch import checks

    return [
        m.msg
        for m in checks.check_plugin_instances(databases=["default"])
        if m.id == "django_webfetch.W034" and m.obj.alias == alias
    ]


def test_trust_is_recorded_for_the_distribution_installed_when_it_is_turned_on(
    tmp_path, monkeypatch
):
    from django_webfetch.plugins.models import PluginInstance

    digest = _install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    trusted = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    trusted.refresh_from_db()
    assert (trusted.trusted_distribution, trusted.trusted_version) == ("webfetch-t", "1.0")
    assert trusted.trusted_record == digest
    assert trusted.trust_holds() and _w034("t") == []
    # Turned on later (admin, ORM): recorded then; turned off: forgotten.
    other = PluginInstance.objects.create(plugin="t", alias="t2")
    assert other.trusted_distribution == "" and not other.trust_holds()
    other.trusted = True
    other.save()
    assert other.trusted_for() == trusted.trusted_for()
    other.trusted = False
    other.save()
    other.refresh_from_db()
    assert (other.trusted_distribution, other.trusted_record) == ("", "")
    # Nothing provides the name: trust is recorded for nothing and holds for nothing.
    ghost = PluginInstance.objects.create(plugin="ghost", alias="ghost", trusted=True)
    assert ghost.trusted_for() is None and not ghost.trust_holds()
    assert "trusted for no installed distribution" in _w034("ghost")[0]


def test_a_new_version_or_another_distribution_under_the_name_is_not_trusted(tmp_path, monkeypatch):
    """Trusted for webfetch-t 1.0; then 2.0 is installed, then webfetch-t is replaced by
    webfetch-other 2.0 claiming the same entry point: neither is trusted (W034, ``plugin
    list`` says so, the tools run isolated), until the operator confirms again."""
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    _install(site)
    monkeypatch.syspath_prepend(str(site))
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    assert instance.trust_holds()

    _install(site, version="2.0")
    instance.refresh_from_db()
    assert not instance.trust_holds()
    problem = instance.trust_problem()
    assert problem == "trusted for webfetch-t 1.0, installed is webfetch-t 2.0: confirm again"
    assert problem in _w034("t")[0]
    listed = _cli("list")
    assert f"NOT trusted now: {problem}" in listed
    assert "isolation: trusted" not in listed  # it runs as an untrusted instance does

    moved = tmp_path / "moved"
    _install(moved, dist="webfetch-other", version="2.0")
    monkeypatch.syspath_prepend(str(moved))
    sys.path.remove(str(site))  # webfetch-t uninstalled
    problem = instance.trust_problem()
    assert problem == "trusted for webfetch-t 1.0, installed is webfetch-other 2.0: confirm again"
    assert problem in _w034("t")[0]
    # An edit of anything else confirms nothing.
    instance.note = "edited"
    instance.save()
    assert not instance.trust_holds()

    out = _trust("t")
    assert "trusted for webfetch-other 2.0" in out
    instance.refresh_from_db()
    assert instance.trust_holds() and _w034("t") == []
    assert "isolation: trusted" in _cli("list")

    # The same name and version with other code (a file added to its package) is another
    # distribution; its RECORD alone is no code (decision 0050).
    record = next(moved.glob("*.dist-info")) / "RECORD"
    record.write_text(record.read_text() + "webfetch_t/listed.py,,\n")
    assert instance.trust_holds()
    (moved / "webfetch_t" / "extra.py").write_text("X = 1\n")
    assert instance.trust_problem().endswith("with other code: confirm again")
    # Untick and tick again (the admin's way): trusted for what is installed now.
    instance.trusted = False
    instance.save()
    instance.trusted = True
    instance.save()
    assert instance.trust_holds()


def test_the_admin_shows_the_trusted_distribution_and_confirms_again(
    tmp_path, monkeypatch, admin_client
):
    from django_webfetch.plugins.models import PluginInstance

    site = tmp_path / "site"
    _install(site)
    monkeypatch.syspath_prepend(str(site))
    instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
    untrusted = PluginInstance.objects.create(plugin="t", alias="u")
    url = f"/admin/django_webfetch/plugininstance/{instance.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert "webfetch-t 1.0" in page and "NOT trusted now" not in page
    assert 'name="trusted_distribution"' not in page  # shown, never edited
    _install(site, version="2.0")
    page = admin_client.get(url).content.decode()
    assert "NOT trusted now: trusted for webfetch-t 1.0, installed is webfetch-t 2.0" in page
    selected = {"action": "confirm_trust", "_selected_action": [instance.pk, untrusted.pk]}
    page = admin_client.post("/admin/django_webfetch/plugininstance/", selected)
    shown = re.search(rf'name="shown_{instance.pk}" value="([0-9a-f]+)"', page.content.decode())
    assert "webfetch-t 2.0" in page.content.decode() and shown is not None
    admin_client.post(
        "/admin/django_webfetch/plugininstance/",
        {**selected, "post": "yes", f"shown_{instance.pk}": shown[1]},
    )
    instance.refresh_from_db()
    untrusted.refresh_from_db()
    assert instance.trust_holds() and instance.trusted_version == "2.0"
    assert not untrusted.trusted  # the action confirms; it never turns trust on


_NO_SANDBOX_SITE = r"""
import errno, json, os, pathlib, sys

import pyseccomp as sc

# A host where seccomp cannot be installed (as tests/plugins/test_runtime.py plays it).
rules = sc.SyscallFilter(sc.ALLOW)
rules.add_rule(sc.ERRNO(errno.ENOSYS), "seccomp")
rules.add_rule(sc.ERRNO(errno.EINVAL), "prctl", sc.Arg(0, sc.EQ, 22))  # PR_SET_SECCOMP
rules.load()

site, mark = sys.argv[1], sys.argv[2]
sys.path.insert(0, site)
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
import django

django.setup()

from tests import dbshare
dbshare.migrate()  # the run's migrated copy when there is one
from django_webfetch.plugins import registry, services
from django_webfetch.plugins.models import PluginInstance

def state():
    registry.reset()
    sys.modules.pop("webfetch_t", None)
    loaded = [m.name for m in registry.manifests()]
    text = pathlib.Path(mark).read_text() if os.path.exists(mark) else ""
    return {"loaded": loaded, "problems": registry.problems(), "imports": text.count("imported")}

report = {"untrusted": state()}
PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
report["trusted"] = state()
# The package changes under the operator: version 2.0, new code.
new_info = os.path.join(site, "webfetch_t-2.0.dist-info")
os.rename(os.path.join(site, "webfetch_t-1.0.dist-info"), new_info)
metadata = os.path.join(new_info, "METADATA")
with open(metadata, "w") as f:
    f.write("Metadata-Version: 2.1\nName: webfetch-t\nVersion: 2.0\n")
record = os.path.join(new_info, "RECORD")  # as an installer writes it: its own dist-info
with open(record) as f:
    listed = f.read().replace("webfetch_t-1.0.dist-info", "webfetch_t-2.0.dist-info")
with open(record, "w") as f:
    f.write(listed)
import importlib

importlib.invalidate_caches()
report["changed"] = state()
services.confirm_trust("t", shown=services.trust_preview("t")[2])
report["confirmed"] = state()
print(json.dumps(report))
"""


def test_without_a_sandbox_a_changed_distribution_is_not_imported_in_the_site(tmp_path):
    """The no-sandbox fallback imports a trusted plugin in the site: only while the
    distribution providing it is the one trusted.  A new version is refused
    (``plugin_isolation_unavailable``) and nothing of it is imported, until confirmed."""
    site = tmp_path / "site"
    mark = tmp_path / "imports"
    _install(site, mark=str(mark))
    report = child_report(_NO_SANDBOX_SITE, str(site), str(mark))
    refused = "'t' refused (plugin_isolation_unavailable)"
    assert report["untrusted"]["imports"] == 0, report
    assert any(refused in p for p in report["untrusted"]["problems"]), report
    assert report["trusted"]["loaded"] == ["t"] and report["trusted"]["imports"] == 1, report
    assert report["changed"]["loaded"] == [], report
    assert any(refused in p for p in report["changed"]["problems"]), report
    assert report["changed"]["imports"] == 1, report  # the new code was not imported
    assert report["confirmed"]["loaded"] == ["t"] and report["confirmed"]["imports"] == 2, report


def test_a_tool_call_runs_in_process_only_while_the_trusted_distribution_is_installed(
    tmp_path, monkeypatch
):
    """The runner's decision (``plugins.tools._trust_holds``): looked up again in each
    registry generation, before that generation's first in-process import."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.models import PluginInstance
    from django_webfetch.plugins.tools import _trust_holds

    site = tmp_path / "site"
    _install(site)
    monkeypatch.syspath_prepend(str(site))
    try:
        registry.reset()
        instance = PluginInstance.objects.create(plugin="t", alias="t", trusted=True)
        assert _trust_holds(instance)
        _install(site, version="2.0")
        registry.reset()  # what a deploy of the new package does (a restart, or reset())
        assert not _trust_holds(instance)
        assert not _trust_holds(PluginInstance.objects.create(plugin="t", alias="u"))
        _trust("t")
        instance.refresh_from_db()
        assert _trust_holds(instance)
    finally:
        monkeypatch.undo()
        registry.reset()
