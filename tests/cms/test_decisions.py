"""Decisions and reasons reach the editor in plain words (issue 20): the real reason when
the tools are off, the site's own full URL read as one of its pages, each failure said once
without a code, and the site's own text labelled as the site's."""

from __future__ import annotations

import time

import pytest

from django_webfetch.assistant import services
from django_webfetch.assistant.planner import OFFLINE_PREFIX
from django_webfetch.models import EgressEvent
from tests.cms.conftest import PAGES

# Committed data: runs may advance on other threads (the background runner).
pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.fixture
def site_pages(cms_page_factory, superuser):
    """The home and About pages, created in a transaction (django CMS locks the page tree,
    which needs one; these tests commit)."""
    from django.db import transaction

    with transaction.atomic():
        pages = {
            "home": cms_page_factory("Home", "home", PAGES["home"]),
            "about": cms_page_factory("About us", "about", PAGES["about"]),
        }
        pages["home"].set_as_homepage(superuser)
    return pages


def settled(run, limit=60.0):
    """The run and its last answer once it finished or paused (it may advance in the
    background)."""
    deadline = time.monotonic() + limit
    while True:
        run.refresh_from_db()
        if run.finished or run.state == "waiting_for_approval":
            break
        assert time.monotonic() < deadline, run.state
        time.sleep(0.05)
    answer = run.messages.filter(role="assistant").order_by("-seq").first()
    return run, answer.content if answer else ""


def ask(user, text):
    conversation = services.create_conversation(user)
    return settled(services.post_message(conversation, text, user=user))


def test_with_the_tools_off_a_page_question_says_the_content_tools_are_off(editor):
    run, answer = ask(editor, "What does /about/ say?")
    assert run.state == "completed"
    assert answer.startswith(OFFLINE_PREFIX)
    assert "The content tools are off" in answer
    assert "search_site" not in answer and "no URL" not in answer
    assert services.run_calls(run) == []


def test_the_sites_own_full_url_is_read_as_its_page(settings, editor, site_pages, content_group):
    from django.contrib.sites.models import Site

    Site.objects.filter(pk=settings.SITE_ID).update(domain="127.0.0.1:8000")
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
    run, answer = ask(editor, "What does http://127.0.0.1:8000/about/ say?")
    [call] = services.run_calls(run)
    assert (call.tool, call.arguments) == ("read_page", {"path": "/about/"})
    assert call.state == "succeeded"
    assert "Founded in 1952 by Anna and Karl." in answer
    assert "own_site" not in answer and "[tool error" not in answer
    assert not EgressEvent.objects.exists()  # read from the database, nothing fetched


def test_the_sites_own_url_with_the_content_tools_off_says_so(settings, editor, group_factory):
    group_factory("web", enabled=True)
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
    run, answer = ask(editor, "What does http://127.0.0.1/about/ say?")
    assert services.run_calls(run) == []  # not sent to fetch_external_url to be refused
    assert "The content tools are off" in answer


def test_a_failure_is_said_once_in_plain_words(editor, site_pages, content_group):
    run, answer = ask(editor, "What does /no-such-page/ say?")
    [call] = services.run_calls(run)
    assert call.tool == "read_page" and call.state == "failed"
    assert answer == (
        f"{OFFLINE_PREFIX}\n\nread_page (/no-such-page/) did not give a result: there is no "
        "published page with that id or path that you may view."
    )
    assert "Done." not in answer and "[tool error" not in answer


def test_a_refused_address_names_the_rule_in_words(editor, group_factory, approver):
    from django_webfetch import runs

    group_factory("web", enabled=True)
    run, answer = ask(editor, "What is on http://0x7f.1/admin please?")
    [call] = services.run_calls(run)
    if call.state == "awaiting_approval":  # no request-time pre-flight: refused on running
        runs.approve(call, by=approver)
        run, answer = settled(run)
    assert "numeric host forms like 2130706433 or 0x7f.1 are refused" in answer
    assert "legacy_numeric_host" not in answer and "egress_denied" not in answer
    assert "(rule:" not in answer


def test_the_sites_page_text_is_labelled_as_the_sites(editor, site_pages, content_group):
    run, answer = ask(editor, "What does /about/ say?")
    assert "reference material from one of this site's own pages" in answer
    assert "fetched from an external web page" not in answer
    # Shown once: the page's text appears one time in the answer.
    assert answer.count("Founded in 1952 by Anna and Karl.") == 1
