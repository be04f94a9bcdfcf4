"""review9: findings of the outside review, end to end (models, tools, audit log).

Every test here failed before its fix.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from django_webfetch.models import ConfiguredEndpoint, EgressEvent, ToolCall
from django_webfetch.tools import run_tool
from tests.django.test_lab_tools import _SearchHandler, rag, search_server  # noqa: F401

pytestmark = pytest.mark.django_db

SECRET = "s3cretTOKENvalue"


# -- F1: the endpoint's auth header value echoed by the HTTP library ---------------------
# A value with a leading/trailing space or a non-ASCII character reached h11/httpx, whose
# refusal quotes it ("Illegal header value b' s3cret...'"); that text became the failed
# hop's EgressEvent.detail, readable by anyone who may view the audit log.


@pytest.mark.parametrize("value", [f"{SECRET} ", f" {SECRET}", f"Bearer {SECRET}\u00e9"])
def test_endpoint_secret_never_reaches_the_audit_log_or_the_result(
    rag,  # noqa: F811
    editor,
    endpoint_factory,
    value,
):
    endpoint = endpoint_factory(
        base_url="http://search.lab.example:9200/search", auth_header_name="Authorization"
    )
    # Stored without the model's validation (a data migration, the shell, an import).
    ConfiguredEndpoint.objects.filter(pk=endpoint.pk).update(auth_header_value=value)
    result = run_tool("search_site", {"query": "x"}, user=editor)
    assert not result.ok
    assert SECRET not in result.content and SECRET not in repr(result.meta)
    assert _SearchHandler.seen == []
    for event in EgressEvent.objects.all():
        assert SECRET not in repr(event.__dict__)
    for call in ToolCall.objects.all():
        assert SECRET not in repr(call.__dict__)


@pytest.mark.parametrize("value", [f"{SECRET} ", f"\t{SECRET}", f"Bearer {SECRET}\u00e9"])
def test_endpoint_refuses_a_header_value_http_cannot_carry(group_factory, endpoint_factory, value):
    group_factory("rag", scope="configured_endpoint")
    endpoint = endpoint_factory(base_url="https://search.example.net/api/search")
    endpoint.auth_header_value = value
    with pytest.raises(ValidationError) as caught:
        endpoint.full_clean()
    assert "auth_header_value" in caught.value.message_dict
    assert SECRET not in str(caught.value)
    endpoint.auth_header_value = f"Bearer  {SECRET}"
    endpoint.full_clean()


# -- F2: a call approved at once ran unapproved after the operator withdrew the exemption --
# A network-group call requested while the group had the skip flag AND an allowlist entry
# was approved at once and queued; execution then ran it with ``approved=True``, so an
# operator who turned the skip flag off (or removed the allowlist) while it waited in the
# queue -- or before a sweep re-queued a lost message -- could not stop it.


@pytest.fixture
def idle_broker(settings):
    settings.WEBFETCH_ASYNC_RUNS = True
    from celery import Celery

    from tests.runs.infra import _current_app

    app = Celery("webfetch-review9-idle", set_as_current=False)
    app.conf.update(broker_url="memory://", task_ignore_result=True)
    with _current_app(app):
        yield app


@pytest.mark.parametrize("withdraw", ["skip_flag", "allowlist"])
def test_a_queued_call_approved_at_once_is_checked_again_at_execution(
    lab_settings,
    idle_broker,
    editor,
    group_factory,
    host_entry_factory,
    django_capture_on_commit_callbacks,
    withdraw,
):
    from django_webfetch import runs
    from django_webfetch.models import CallState, HostListEntry

    group = group_factory("web", enabled=True, skip_approval_with_allowlist=True)
    host_entry_factory(group="web", value="docs.lab.example")
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    url = lab_settings.url("docs.lab.example", "/plain")
    with django_capture_on_commit_callbacks(execute=True):
        call = runs.request_call("fetch_external_url", {"url": url}, user=editor)
    assert call.state == CallState.APPROVED and not call.requires_approval

    if withdraw == "skip_flag":
        group.skip_approval_with_allowlist = False
        group.save()
    else:
        HostListEntry.objects.filter(group=group).delete()
    runs.execute(call.pk)
    call.refresh_from_db()
    assert call.state == CallState.FAILED
    assert call.result["error"] == "approval_required"
    assert lab_settings.requests == []


def test_a_queued_call_approved_at_once_still_runs_while_the_exemption_holds(
    lab_settings, idle_broker, editor, group_factory, host_entry_factory
):
    from django_webfetch import runs
    from django_webfetch.models import CallState

    group_factory("web", enabled=True, skip_approval_with_allowlist=True)
    host_entry_factory(group="web", value="docs.lab.example")
    lab_settings.dns.set("docs.lab.example", a=[lab_settings.PUBLIC_V4[0]])
    url = lab_settings.url("docs.lab.example", "/plain")
    call = runs.request_call("fetch_external_url", {"url": url}, user=editor)
    runs.execute(call.pk)
    call.refresh_from_db()
    assert call.state == CallState.SUCCEEDED, call.result
    assert len(lab_settings.requests) == 1
