"""The approval mail's absolute link, its one-line failure log, and the Site domain check
(issue 20: what an integrator following docs/cms.rst meets)."""

from __future__ import annotations

import logging

import pytest
from django.contrib.sites.models import Site
from django.core import mail
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_webfetch import runs
from django_webfetch.cms import checks

pytestmark = pytest.mark.django_db

URL = "http://news.lab.example/story?id=7"


@pytest.fixture
def waiting(group_factory, lab_settings, approver, editor):
    """Request a call that waits for ``approver``, who is mailed once the call's transaction
    has committed (``on_commit``)."""
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    group_factory("web", enabled=True, scope="external_filtered")
    approver.email = "approver@example.org"
    approver.save()

    def request():
        return runs.request_call("fetch_external_url", {"url": URL}, user=editor)

    return request


def set_domain(settings, domain):
    Site.objects.filter(pk=settings.SITE_ID).update(domain=domain)
    Site.objects.clear_cache()


@pytest.mark.parametrize(
    ("domain", "link"),
    [
        ("cms.site.example", "https://cms.site.example/assistant/#approvals"),
        ("127.0.0.1:8000", "http://127.0.0.1:8000/assistant/#approvals"),
        ("localhost:8000", "http://localhost:8000/assistant/#approvals"),
    ],
)
def test_the_mail_links_to_the_site_absolutely(settings, waiting, domain, link):
    set_domain(settings, domain)
    waiting()
    [message] = mail.outbox
    assert f": {link}\n" in message.body + "\n"


def test_a_mail_failure_is_one_line_without_a_traceback(settings, waiting, caplog):
    settings.EMAIL_BACKEND = "tests.cms.test_pages.BrokenBackend"
    with caplog.at_level(logging.ERROR, logger="django_webfetch.cms"):
        call = waiting()
    [record] = [r for r in caplog.records if r.name == "django_webfetch.cms"]
    assert record.exc_info is None and record.exc_text is None
    text = record.getMessage()
    assert "\n" not in text
    assert f"approval notification for tool calls {call.pk} not sent" in text
    assert "OSError: mail server down" in text and "EMAIL_BACKEND" in text


def test_w051_site_domain_still_example_com(settings):
    set_domain(settings, "example.com")
    [warning] = checks.check_site_domain(databases=["default"])
    assert warning.id == "django_webfetch.W051"
    assert "example.com" in warning.msg
    set_domain(settings, "cms.site.example")
    assert checks.check_site_domain(databases=["default"]) == []
    settings.SITE_ID = 999  # no such Site: nothing to warn about
    assert checks.check_site_domain(databases=["default"]) == []


def test_w051_is_a_registered_database_check(settings):
    set_domain(settings, "example.com")
    call_command("check")  # database checks need --database
    with pytest.raises(SystemCheckError, match="django_webfetch.W051"):
        call_command("check", "--database", "default", fail_level="WARNING")
