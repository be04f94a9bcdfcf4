"""The assistant page, the approvals fragment, the toolbar, the admin counter and the
approvers' e-mail, through Django's test client against the real views and templates."""

from __future__ import annotations

import pytest
from django.core import mail
from django.urls import reverse

from django_webfetch import runs
from django_webfetch.models import CallState

pytestmark = pytest.mark.django_db

URL = "http://news.lab.example/story?id=7&ref=home"


@pytest.fixture
def web_group(group_factory, lab_settings):
    """Group ``web`` enabled; the lab's DNS answers for URL's host, so a call to it passes
    the request-time pre-flight and waits for an approver."""
    lab_settings.dns.set("news.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    return group_factory("web", enabled=True, scope="external_filtered")


def login(client, user):
    client.force_login(user)
    return client


def test_the_page_needs_a_login(client):
    response = client.get(reverse("webfetch_cms:assistant"))
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_the_banner_tells_where_to_enable_the_tools(client, superuser, site_pages):
    response = login(client, superuser).get(reverse("webfetch_cms:assistant"))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="tools-disabled"' in html
    assert reverse("admin:django_webfetch_toolgroup_changelist") in html
    assert '<label for="chat-input">' in html
    assert 'aria-live="polite"' in html


def test_the_banner_links_the_tool_groups_only_for_who_may_change_them(
    client, superuser, editor, user_factory, site_pages
):
    """The editor (staff, without "Can change tool group") would get a 403 from the admin's
    Tool groups: the banner names the place as plain text; a staff user holding the
    permission, and a superuser, get the link, which opens for them."""
    from django.contrib.auth.models import Permission

    changelist = reverse("admin:django_webfetch_toolgroup_changelist")
    delegate = user_factory(staff=True)
    delegate.user_permissions.add(
        Permission.objects.get(
            codename="change_toolgroup", content_type__app_label="django_webfetch"
        )
    )
    for user, linked in ((superuser, True), (delegate, True), (editor, False)):
        client.force_login(user)
        html = client.get(reverse("webfetch_cms:assistant")).content.decode()
        assert 'id="tools-disabled"' in html
        assert "Tool groups" in html
        assert (f'href="{changelist}"' in html) is linked, user
        assert client.get(changelist).status_code == (200 if linked else 403), user


def test_no_banner_once_a_group_is_enabled(client, editor, content_group):
    html = login(client, editor).get(reverse("webfetch_cms:assistant")).content.decode()
    assert 'id="tools-disabled"' not in html
    assert 'id="approvals"' not in html  # the editor may not approve


def test_ask_about_this_page_prefills_the_page(client, editor, site_pages, content_group):
    about = site_pages["about"]
    url = reverse("webfetch_cms:assistant") + f"?page={about.pk}"
    html = login(client, editor).get(url).content.decode()
    assert "Asking about the page “About us” (/about/)" in html
    assert f'data-page="{about.pk}"' in html
    hidden = site_pages["staff"].pk  # view-restricted: not even its title is shown
    html = client.get(reverse("webfetch_cms:assistant") + f"?page={hidden}").content.decode()
    assert "page-context" not in html and "Staff" not in html


def test_the_toolbar_has_the_assistant_menu_and_the_counter(
    client, editor, approver, site_pages, web_group
):
    login(client, approver)
    html = client.get("/about/?toolbar_on").content.decode()
    assert "Assistant" in html
    assert reverse("webfetch_cms:assistant") + f"?page={site_pages['about'].pk}" in html
    assert "0 calls wait for your approval" in html
    runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    html = client.get("/about/?toolbar_on").content.decode()
    assert "1 call waits for your approval" in html
    # The editor sees the menu, not the approvers' counter.
    client.force_login(editor)
    html = client.get("/about/?toolbar_on").content.decode()
    assert "Ask about this page" in html
    assert "wait for your approval" not in html and "waits for your approval" not in html


def test_the_admin_shows_the_counter(client, editor, approver, web_group):
    runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    html = login(client, approver).get(reverse("admin:index")).content.decode()
    assert "1 call waits for your approval" in html
    assert reverse("webfetch_cms:assistant") + "#approvals" in html


def test_the_approval_card_is_inline_for_approvers(
    client, editor, approver, web_group, lab_settings
):
    call = runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    html = login(client, approver).get(reverse("webfetch_cms:approvals")).content.decode()
    assert f'data-call="{call.pk}"' in html
    assert "news.lab.example" in html
    assert "<code>id</code> = <code>7</code>" in html
    assert f"calls/{call.pk}/approve/" in html and f"calls/{call.pk}/deny/" in html
    # The guard's pre-flight verdict, from the lab's DNS.
    assert "Guard pre-flight" in html
    assert (
        "allowed when it was requested (checked again when it runs) "
        f"(resolves to {lab_settings.PUBLIC_V4[0]})" in html
    )
    # The requester never gets a card for their own call (self-approval is off).
    assert (
        f'data-call="{call.pk}"'
        not in login(client, editor).get(reverse("webfetch_cms:approvals")).content.decode()
    )


def test_approvers_are_mailed_when_a_call_starts_waiting(
    editor, approver, approver_factory, web_group
):
    approver.email = "approver@example.org"
    approver.save()
    silent = approver_factory(username="silent")  # no address: not mailed
    assert silent.email == ""
    editor.email = "editor@example.org"
    editor.save()
    # The mail goes once the call's transaction has committed (``on_commit``).
    call = runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    assert call.state == CallState.AWAITING_APPROVAL
    assert [m.to for m in mail.outbox] == [["approver@example.org"]]
    message = mail.outbox[0]
    assert "fetch_external_url" in message.subject and "editor" in message.subject
    assert URL in message.body
    assert "/assistant/#approvals" in message.body
    # Approving does not mail again.
    runs.deny(call, by=approver)
    assert len(mail.outbox) == 1


def test_a_mail_failure_does_not_touch_the_call(settings, editor, approver, web_group, caplog):
    settings.EMAIL_BACKEND = "tests.cms.test_pages.BrokenBackend"
    approver.email = "approver@example.org"
    approver.save()
    call = runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    call.refresh_from_db()
    assert call.state == CallState.AWAITING_APPROVAL
    assert "approval notification" in caplog.text


class BrokenBackend:
    def __init__(self, *args, **kwargs):
        pass

    def send_messages(self, messages):
        raise OSError("mail server down")

    def open(self):
        pass

    def close(self):
        pass


def test_the_german_catalog_translates_the_page(client, editor):
    from django.utils import translation

    login(client, editor)
    with translation.override("de"):
        html = client.get(reverse("webfetch_cms:assistant")).content.decode()
    assert '<label for="chat-input">Ihre Nachricht</label>' in html
    assert ">Senden</button>" in html
    assert "Die Werkzeuge des Assistenten sind ausgeschaltet." in html
    assert "wartet auf" in html or "warten auf" in html  # the script's strings, too


def test_e050_django_cms_missing(settings):
    from django_webfetch.cms import checks

    assert checks.check_cms_installed() == []
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a not in ("cms", "menus")]
    messages = checks.check_cms_installed()
    assert [m.id for m in messages] == ["django_webfetch.E050"]
    assert "cms, menus" in messages[0].msg


def test_w050_approval_mail_without_a_sender(settings):
    from django_webfetch.cms import checks

    assert checks.check_approver_mail() == []  # the locmem backend of the tests
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.DEFAULT_FROM_EMAIL = "webmaster@localhost"
    assert [m.id for m in checks.check_approver_mail()] == ["django_webfetch.W050"]
    settings.DEFAULT_FROM_EMAIL = "assistant@example.org"
    assert checks.check_approver_mail() == []


def test_the_card_shows_the_verdict_stored_at_request_time(client, editor, approver, web_group):
    from django_webfetch.models import ToolCall

    call = runs.request_call("fetch_external_url", {"url": URL}, user=editor)
    preview = dict(call.approval_preview)
    preview["preflight"] = {"verdict": "allowed", "addresses": ["11.0.0.10"]}
    ToolCall.objects.filter(pk=call.pk).update(approval_preview=preview)
    html = login(client, approver).get(reverse("webfetch_cms:approvals")).content.decode()
    # A list may have changed since: the card says when the verdict was made.
    assert (
        "allowed when it was requested (checked again when it runs) (resolves to 11.0.0.10)" in html
    )
    assert "allowed now" not in html
    preview["preflight"] = {"verdict": "unchecked", "reason": "dns_error"}
    ToolCall.objects.filter(pk=call.pk).update(approval_preview=preview)
    html = client.get(reverse("webfetch_cms:approvals")).content.decode()
    assert "could not be checked" in html
    assert "the name server did not answer properly" in html


def test_every_refusal_code_of_a_budget_or_limit_reads_in_plain_words(client, editor, site_pages):
    from django_webfetch.budgets.models import BUDGET_KINDS
    from django_webfetch.runs.reasons import plain_reason

    codes = [f"budget_exceeded:{kind}" for kind, _usage, _period in BUDGET_KINDS]
    codes += ["budget_exceeded", "too_many_calls", "destination_busy"]
    codes += ["destination_limit_unavailable"]
    html = login(client, editor).get(reverse("webfetch_cms:assistant")).content.decode()
    for code in codes:
        words = plain_reason(code)
        assert words != code and ":" not in words, code
        # The page's table of reasons (what it shows on a refused call) holds the words.
        assert words.replace("'", "&#x27;") in html or words in html, code


def test_every_reason_is_a_refusal_or_a_failure_and_the_page_knows_which(
    client, editor, site_pages
):
    """The page says "refused" only for a refusal (the guard, an approver, a bound) and
    "failed" with what failed otherwise (README trial 8: a network failure read "refused"):
    each reason code is classified exactly once, and the page's strings carry both."""
    import json
    import re

    from django_webfetch.net.failures import FAILURES
    from django_webfetch.runs.reasons import FAILURE_CODES, REASONS, REFUSALS, is_refusal

    heads = {code.split(":", 1)[0] for code in REASONS}
    assert not REFUSALS & FAILURE_CODES
    assert heads <= REFUSALS | FAILURE_CODES, heads - (REFUSALS | FAILURE_CODES)
    assert is_refusal("failed", "address_class:private")
    assert is_refusal("failed", "budget_exceeded:cost_per_day")
    assert is_refusal("denied", "approval_denied") and is_refusal("expired", "")
    assert not is_refusal("failed", "fetch_error") and not is_refusal("failed", "http_404")
    assert not is_refusal("cancelled", "cancelled") and not is_refusal("succeeded", "")
    html = login(client, editor).get(reverse("webfetch_cms:assistant")).content.decode()
    strings = json.loads(
        re.search(r'<script id="webfetch-strings"[^>]*>(.*?)</script>', html, re.S).group(1)
    )
    assert strings["refusals"] == sorted(REFUSALS)
    assert strings["failures"] == dict(FAILURES)
    assert strings["failures"]["network_unreachable"] == (
        "There is no route to the server's address."
    )
    assert strings["states"]["refused"] == "refused" and "refused" not in strings
