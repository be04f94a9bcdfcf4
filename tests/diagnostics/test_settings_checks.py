"""Settings and system checks of the error-analysis tools; the own_site policy exemption."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import call_command

from django_webfetch import checks
from django_webfetch.conf import conf
from django_webfetch.egress import policy_for
from django_webfetch.exceptions import WebFetchConfigurationError
from django_webfetch.net import Scope


def ids(messages):
    return [m.id for m in messages]


def test_defaults(settings):
    assert conf.WEBFETCH_PROJECT_ROOT is None  # tests/settings.py has no BASE_DIR
    assert checks.check_diagnostics() == []
    settings.BASE_DIR = Path("/srv/app")
    assert conf.WEBFETCH_PROJECT_ROOT == "/srv/app"
    settings.WEBFETCH_PROJECT_ROOT = "/srv/other"
    assert conf.WEBFETCH_PROJECT_ROOT == "/srv/other"
    assert conf.WEBFETCH_LOG_FILES == ()
    assert conf.WEBFETCH_LOG_FORMAT == "%(asctime)s %(levelname)s %(name)s %(message)s"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WEBFETCH_PROJECT_ROOT", 3),
        ("WEBFETCH_LOG_FILES", "/var/log/app.log"),
        ("WEBFETCH_LOG_FILES", [3]),
        ("WEBFETCH_LOG_FORMAT", ""),
        ("WEBFETCH_LOG_FORMAT", b"%(message)s"),
    ],
)
def test_wrong_types_are_e001(settings, name, value):
    setattr(settings, name, value)
    with pytest.raises(WebFetchConfigurationError, match=name):
        getattr(conf, name)
    assert "django_webfetch.E001" in ids(checks.check_settings())
    assert checks.check_diagnostics() == []


def test_e020_project_root_not_a_directory(settings, tmp_path):
    settings.WEBFETCH_PROJECT_ROOT = tmp_path / "missing"
    assert ids(checks.check_diagnostics()) == ["django_webfetch.E020"]


def test_e022_project_root_is_the_file_system_root(settings):
    settings.WEBFETCH_PROJECT_ROOT = "/"
    assert ids(checks.check_diagnostics()) == ["django_webfetch.E022"]


def test_e021_unparseable_log_format(settings):
    settings.WEBFETCH_LOG_FORMAT = "%(levelname)s %(message)s"
    [message] = checks.check_diagnostics()
    assert message.id == "django_webfetch.E021" and "asctime" in message.msg


def test_w020_missing_or_unreadable_log_file(settings, tmp_path):
    readable = tmp_path / "ok.log"
    readable.write_text("")
    locked = tmp_path / "locked.log"
    locked.write_text("")
    settings.WEBFETCH_LOG_FILES = [
        str(readable),
        str(tmp_path / "missing.log"),
        str(tmp_path),
        str(locked),
    ]
    os.chmod(locked, 0)
    try:
        messages = checks.check_diagnostics()
    finally:
        os.chmod(locked, 0o600)
    expected = ["does not exist", "is not a file"]
    if os.geteuid() != 0:  # root reads anything
        expected.append("is not readable")
    assert ids(messages) == ["django_webfetch.W020"] * len(expected)
    for message, problem in zip(messages, expected, strict=True):
        assert problem in message.msg


def test_the_check_is_registered(settings, tmp_path):
    settings.WEBFETCH_LOG_FILES = [str(tmp_path / "missing.log")]
    with pytest.raises(Exception) as info:  # noqa: PT011 - warnings fail with --fail-level
        call_command("check", fail_level="WARNING")
    assert "django_webfetch.W020" in str(info.value)


@pytest.mark.django_db
def test_only_the_own_site_policy_gets_the_private_exemption(group_factory):
    group_factory("system", enabled=True)
    group_factory("web", enabled=True)
    assert policy_for("system", require_scope=Scope.OWN_SITE).allow_private_own_site is True
    assert policy_for("web").allow_private_own_site is False
    assert policy_for("web").allow_private_hosts == ()
    group_factory("system", enabled=False)
    disabled = policy_for("system", require_scope=Scope.OWN_SITE)
    assert disabled.scope is Scope.NONE and disabled.allow_private_own_site is False
