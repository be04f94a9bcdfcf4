"""The four error-analysis tools through the registry: admin-only, default-off, guarded.

Logs are produced by Django's own logging setup while a real view raises (through the test
client, and through ``probe_url`` against a live server in the lab namespace)."""

from __future__ import annotations

import re

import pytest

from django_webfetch.models import EgressEvent, ToolGroup
from django_webfetch.tools import ToolContext, run_tool, tools_for_user

from .conftest import ROOT

pytestmark = pytest.mark.django_db

APPROVED = ToolContext(approved=True, call_id="diag")
BEGIN = "<<<BEGIN UNTRUSTED EXTERNAL WEB CONTENT nonce="
CODE_TOOLS = ("read_source", "search_code", "get_last_exception")


@pytest.fixture
def code_group(group_factory, settings):
    settings.WEBFETCH_PROJECT_ROOT = ROOT
    return group_factory("code", enabled=True)


def offered(user):
    return {t.name for t in tools_for_user(user)}


# -- registry rules ---------------------------------------------------------------------------


def test_groups_are_disabled_by_default_and_the_code_group_says_what_it_sends(superuser):
    assert not offered(superuser) & {*CODE_TOOLS, "probe_url"}
    code = ToolGroup.objects.get(slug="code")
    assert (code.enabled, code.scope, code.data_class) == (False, "none", "sourceAndLogs")
    assert "SEND THEM TO THE LLM PROVIDER" in code.data_notice


def test_admin_only(code_group, group_factory, superuser, editor):
    group_factory("system", enabled=True)
    assert offered(superuser) >= {*CODE_TOOLS, "probe_url"}
    assert not offered(editor) & {*CODE_TOOLS, "probe_url"}
    result = run_tool("read_source", {"path": "README.md"}, user=editor)
    assert result.error == "tool_unavailable"


def test_admin_page_shows_the_data_class_notice(admin_client, superuser):
    code = ToolGroup.objects.get(slug="code")
    admin_client.force_login(superuser)
    page = admin_client.get(f"/admin/django_webfetch/toolgroup/{code.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Data leaving the installation" in html
    assert "SEND THEM TO THE LLM PROVIDER" in html


# -- read_source ------------------------------------------------------------------------------


def test_read_source_numbers_and_fences_lines(code_group, superuser):
    result = run_tool(
        "read_source",
        {"path": "tests/diagnostics/views.py", "start_line": 8, "line_count": 4},
        user=superuser,
    )
    assert result.ok, result
    assert result.meta["path"] == "tests/diagnostics/views.py"
    assert (result.meta["start_line"], result.meta["end_line"]) == (8, 11)
    assert " 8 | def compute_total(items: list[int]) -> float:" in result.content
    assert "11 |     return sum(items) / count" in result.content
    assert result.content.count(BEGIN) == 1


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("tests/settings.py", "settings_file"),
        ("../etc/passwd", "dot_segment"),
        ("/etc/passwd", "absolute_path"),
        (".venv/pyvenv.cfg", "dot_segment"),
        (".git/HEAD", "dot_segment"),
        ("tests/diagnostics/views.py\x00", "invalid_path"),
        ("ｔests/diagnostics/views.py", "invalid_path"),
        ("no/such/file.py", "not_found"),
    ],
)
def test_read_source_refusals_name_the_rule_only(code_group, superuser, path, reason):
    result = run_tool("read_source", {"path": path}, user=superuser)
    assert result.error == "path_denied" and result.meta == {"reason": reason}
    assert "passwd" not in result.content and "SECRET" not in result.content


@pytest.mark.parametrize(
    "arguments",
    [
        {"path": "README.md", "line_count": 201},
        {"path": "README.md", "line_count": 0},
        {"path": "README.md", "start_line": 0},
        {"path": "README.md", "bypass": True},
        {"path": ""},
        {},
    ],
)
def test_read_source_argument_bounds(code_group, superuser, arguments):
    assert run_tool("read_source", arguments, user=superuser).error == "invalid_arguments"


def test_read_source_past_the_end_and_without_a_root(code_group, superuser, settings):
    result = run_tool("read_source", {"path": "tests/__init__.py", "start_line": 5}, user=superuser)
    assert result.error == "out_of_range"
    settings.WEBFETCH_PROJECT_ROOT = None
    result = run_tool("read_source", {"path": "README.md"}, user=superuser)
    assert result.meta == {"reason": "no_project_root"}
    settings.WEBFETCH_PROJECT_ROOT = "/"
    result = run_tool("read_source", {"path": "etc/passwd"}, user=superuser)
    assert result.meta == {"reason": "no_project_root"}


@pytest.mark.long
def test_read_source_redacts_and_refuses_binary(code_group, superuser, settings, tmp_path):
    settings.WEBFETCH_PROJECT_ROOT = tmp_path
    (tmp_path / "config.py").write_text(
        "DEBUG = False\nSECRET_KEY = 'abc-very-secret'\nDATABASES = {'default': "
        "{'PASSWORD': 'hunter2'}}\nKEY = '''\n-----BEGIN PRIVATE KEY-----\nMIIEv\n"
        "-----END PRIVATE KEY-----\n'''\n"
    )
    (tmp_path / "blob.py").write_bytes(b"x = 1\x00\x00")
    (tmp_path / "huge.py").write_text("x = 1\n" * 1_000_000)
    result = run_tool("read_source", {"path": "config.py"}, user=superuser)
    assert "abc-very-secret" not in result.content and "hunter2" not in result.content
    assert "MIIEv" not in result.content and "DEBUG = False" in result.content
    # A window that starts inside the key block is blanked too.
    inside = run_tool(
        "read_source", {"path": "config.py", "start_line": 6, "line_count": 1}, user=superuser
    )
    assert "MIIEv" not in inside.content and "[redacted]" in inside.content
    assert run_tool("read_source", {"path": "blob.py"}, user=superuser).meta == {
        "reason": "binary_file"
    }
    huge = run_tool(
        "read_source", {"path": "huge.py", "start_line": 999_990, "line_count": 5}, user=superuser
    )
    assert huge.error == "out_of_range" and huge.meta["cut"] is True


# -- search_code ------------------------------------------------------------------------------


def test_search_code_finds_project_lines(code_group, superuser):
    result = run_tool(
        "search_code",
        # A path glob: the search reads the matching files only.
        {"query": "return sum(items) / count", "glob": "tests/diagnostics/*.py"},
        user=superuser,
    )
    assert result.ok, result
    assert "tests/diagnostics/views.py:11: return sum(items) / count" in result.content
    assert result.meta["exhausted"] is None
    # settings files are never searched
    result = run_tool("search_code", {"query": "PASSWORD_HASHERS"}, user=superuser)
    assert "tests/settings.py" not in result.content


def test_search_code_regex_and_refusals(code_group, superuser):
    result = run_tool(
        "search_code",
        # A path glob, as in the test above.
        {"query": r"def compute_\w+\(", "regex": True, "glob": "tests/diagnostics/*.py"},
        user=superuser,
    )
    assert result.ok and result.meta["exhausted"] is None, result
    assert "tests/diagnostics/views.py:8:" in result.content
    result = run_tool("search_code", {"query": "(", "regex": True}, user=superuser)
    assert result.error == "search_refused" and result.meta == {"reason": "invalid_pattern"}


def test_search_code_runs_a_catastrophic_pattern_in_linear_time(
    code_group, superuser, settings, tmp_path
):
    # (a|aa)+$ on "a" * N + "!" backtracks exponentially on a backtracking engine (it held
    # the old 5 s clock at N = 40); on RE2 the whole file is searched, nothing runs out.
    settings.WEBFETCH_PROJECT_ROOT = tmp_path
    (tmp_path / "evil.txt").write_text("a" * 40_000 + "!\n" + "aaa\n")
    result = run_tool("search_code", {"query": "(?m)(a|aa)+$", "regex": True}, user=superuser)
    assert result.ok and result.meta["exhausted"] is None
    assert result.meta["files_scanned"] == 1 and result.meta["hits"] == 1
    assert "evil.txt:2" in result.content


def test_search_code_refuses_what_re2_cannot_run(code_group, superuser, settings, tmp_path):
    settings.WEBFETCH_PROJECT_ROOT = tmp_path
    (tmp_path / "a.txt").write_text("aa\n")
    for query, code in [
        ("(a)\\1", "invalid_pattern"),  # a backreference
        ("a(?=b)", "invalid_pattern"),  # look-ahead
        ("(?:(?:a{1000}){1000}){1000}", "pattern_too_complex"),
    ]:
        result = run_tool("search_code", {"query": query, "regex": True}, user=superuser)
        assert not result.ok and code in (result.error or "") + str(result.meta), (query, result)


# -- get_last_exception -----------------------------------------------------------------------


def test_get_last_exception_from_a_view_that_raised(code_group, superuser, django_log_file):
    from django.test import Client

    response = Client(raise_request_exception=False).get("/boom/")
    assert response.status_code == 500
    log = django_log_file.read_text()
    assert "ERROR django.request Internal Server Error: /boom/" in log

    result = run_tool("get_last_exception", {}, user=superuser)
    assert result.ok, result
    assert result.meta["exception"] == "ZeroDivisionError"
    assert result.meta["count"] == 1
    content = result.content
    assert "Message: Internal Server Error: /boom/" in content
    assert "Exception: ZeroDivisionError: division by zero" in content
    # The two project frames are expanded with ±6 lines, the raising line marked.
    assert 'File "tests/diagnostics/views.py", line 11, in compute_total [project]' in content
    assert 'File "tests/diagnostics/views.py", line 15, in boom [project]' in content
    assert re.search(r">\s+11 \|     return sum\(items\) / count", content)
    assert re.search(r" \s+5 \| ", content)  # 11 - 6
    # Library frames are listed, not expanded.
    assert re.search(
        r'File "[^"]*site-packages/django/[^"]+", line \d+, in \w+ \[library\]', content
    )
    project_frames = [f for f in result.meta["frames"] if f["project"]]
    assert len(project_frames) == 2


def test_get_last_exception_index_and_search(code_group, superuser, django_log_file):
    from django.test import Client

    client = Client(raise_request_exception=False)
    client.get("/boom/")
    client.get("/boom/?second=1")
    assert run_tool("get_last_exception", {"index": 1}, user=superuser).meta["count"] == 2
    assert run_tool("get_last_exception", {"index": 2}, user=superuser).content.startswith(
        "No error entry at index 2"
    )
    assert (
        run_tool("get_last_exception", {"search": "nothing-like-this"}, user=superuser).meta[
            "count"
        ]
        == 0
    )
    assert (
        run_tool("get_last_exception", {"search": "ZeroDivision"}, user=superuser).meta["count"]
        == 2
    )


def test_get_last_exception_without_log_files(code_group, superuser, settings):
    settings.WEBFETCH_LOG_FILES = []
    result = run_tool("get_last_exception", {}, user=superuser)
    assert result.meta == {"reason": "no_log_files"}
    settings.WEBFETCH_LOG_FILES = ["/nonexistent.log"]
    settings.WEBFETCH_LOG_FORMAT = "%(message)s"
    assert run_tool("get_last_exception", {}, user=superuser).meta == {"reason": "log_format"}


# -- probe_url --------------------------------------------------------------------------------


@pytest.fixture
def system_group(group_factory):
    return group_factory("system", enabled=True)


def test_probe_url_correlates_a_real_500_with_its_log_entry(live_site, system_group, superuser):
    pending = run_tool("probe_url", {"url": "/boom/"}, user=superuser)
    assert pending.error == "approval_required"
    assert pending.meta["preview"]["resolved_url"] == "http://site.lab.example:8000/boom/"

    result = run_tool("probe_url", {"url": "/boom/"}, user=superuser, context=APPROVED)
    assert result.ok, result
    assert result.meta["status"] == 500 and result.meta["log_entries"] >= 1
    content = result.content
    head, _, fenced = content.partition(BEGIN)
    assert "Status: HTTP 500" in head
    assert "Server Error (500)" in fenced
    assert "Internal Server Error: /boom/" in fenced
    assert "Exception: ZeroDivisionError: division by zero" in fenced
    assert "return sum(items) / count" in fenced  # the traceback's own source line
    events = list(EgressEvent.objects.order_by("pk").values_list("decision", "url_host", "port"))
    assert events == [("allowed", "site.lab.example", 8000), ("fetched", "site.lab.example", 8000)]


def test_probe_url_reports_headers_and_a_short_excerpt(live_site, system_group, superuser):
    result = run_tool(
        "probe_url",
        {"url": "http://site.lab.example:8000/fine/"},
        user=superuser,
        context=APPROVED,
    )
    assert result.ok, result
    assert result.meta["status"] == 200 and "log_entries" not in result.meta
    assert "content-type: text/html; charset=utf-8" in result.content
    assert "All good" in result.content and "hidden()" not in result.content
    assert "Error log" not in result.content


def test_probe_url_does_not_follow_a_redirect(live_site, system_group, superuser):
    live_site.dns.set("docs.lab.example", a=[live_site.PUBLIC_V4[0]])
    result = run_tool("probe_url", {"url": "/away/"}, user=superuser, context=APPROVED)
    assert result.ok, result
    assert result.meta["status"] == 302 and result.meta["redirect_reported"]
    head, _, fenced = result.content.partition(BEGIN)
    assert "redirect reported, not followed" in head
    assert "docs.lab.example" not in head
    assert "Not followed: redirect target (an untrusted URL chosen by the server)" in fenced
    assert "http://docs.lab.example/landing?token=[masked]" in fenced
    assert not live_site.accepts(live_site.PUBLIC_V4[0])
    assert not live_site.dns.lookups("docs.lab.example")


@pytest.mark.parametrize(
    ("url", "error", "reason"),
    [
        ("http://docs.lab.example/", "host_not_allowed", "not_own_site"),
        ("http://10.0.0.10:8000/boom/", "host_not_allowed", "not_own_site"),
        ("http://169.254.169.254/latest/", "host_not_allowed", "not_own_site"),
        ("http://127.0.0.1/", "host_not_allowed", "not_own_site"),
        ("http://site.lab.example.evil.example/", "host_not_allowed", "not_own_site"),
        ("http://site.lab.example:8001/", "port_not_allowed", "port"),
        ("http://user@site.lab.example:8000/", "invalid_url", "userinfo"),
        ("ftp://site.lab.example/", "invalid_arguments", None),
        ("//docs.lab.example/x", "invalid_arguments", None),
        ("site.lab.example/x", "invalid_arguments", None),
    ],
)
def test_probe_url_refuses_every_non_own_host(
    live_site, system_group, superuser, url, error, reason
):
    live_site.dns.set("docs.lab.example", a=[live_site.PUBLIC_V4[0]])
    result = run_tool("probe_url", {"url": url}, user=superuser, context=APPROVED)
    assert result.error == error, result
    if reason is not None:
        assert result.meta["reason"] == reason
    assert not live_site.accepts(live_site.PUBLIC_V4[0])
    assert not live_site.accepts("169.254.169.254")
    assert not live_site.accepts("127.0.0.1")


def test_probe_url_masks_credentials_of_a_failed_probe(live_site, system_group, superuser):
    live_site.dns.set("site.lab.example", a=["11.0.0.99"])  # nothing listens: refused at once
    result = run_tool(
        "probe_url",
        {"url": "/fine/?api_key=sk-123&page=2&session_token=zz"},
        user=superuser,
        context=APPROVED,
    )
    assert result.error == "fetch_error"
    assert "sk-123" not in result.content and "zz" not in result.content
    assert "api_key=[masked]&page=2&session_token=[masked]" in result.content
    assert result.meta["url"].endswith("?api_key=[masked]&page=2&session_token=[masked]")


def test_probe_url_group_disabled_or_wrong_scope(live_site, group_factory, superuser):
    group_factory("system", enabled=False)
    assert run_tool("probe_url", {"url": "/fine/"}, user=superuser).error == "tool_unavailable"
    group_factory("system", enabled=True, scope="external_filtered")
    assert run_tool("probe_url", {"url": "/fine/"}, user=superuser).error == "tool_unavailable"


# -- edges ------------------------------------------------------------------------------------


def test_first_site_base_sources(settings, site_host_factory):
    from django.contrib.sites.models import Site

    from django_webfetch.tools.probe_url import first_site_base

    Site.objects.filter(pk=1).update(domain="https://www.site.example/")
    assert first_site_base() == "https://www.site.example"
    Site.objects.filter(pk=1).update(domain="not a host")
    settings.ALLOWED_HOSTS = ["*", ".wild.example", "first.example", "second.example"]
    assert first_site_base() == "https://first.example"
    settings.ALLOWED_HOSTS = ["*"]
    assert first_site_base() is None
    site_host_factory("cms.site.example", port=8443)
    assert first_site_base() == "https://cms.site.example:8443"


def test_probe_url_without_any_site_host_is_refused_and_audited(group_factory, superuser, settings):
    from django.contrib.sites.models import Site

    group_factory("system", enabled=True)
    Site.objects.all().delete()
    settings.ALLOWED_HOSTS = []
    result = run_tool("probe_url", {"url": "/x"}, user=superuser, context=APPROVED)
    assert result.meta == {"reason": "no_site_host"}
    assert EgressEvent.objects.get().reason == "no_site_host"
    pending = run_tool("probe_url", {"url": "/x"}, user=superuser)
    assert pending.meta["preview"]["refused_by"] == "no_site_host"


def test_probe_url_skips_approval_only_with_an_allowlist(
    group_factory, host_entry_factory, superuser
):
    from django_webfetch.tools import default_registry
    from django_webfetch.tools.base import ToolInvocation

    tool = default_registry.get("probe_url")
    call = ToolInvocation(tool="probe_url", arguments={"url": "/"})
    group_factory("system", enabled=True, skip_approval_with_allowlist=True)
    assert tool.requires_approval(call) is True
    host_entry_factory(group="system", value="site.example")
    assert tool.requires_approval(call) is False
    assert tool.approval_preview(ToolInvocation(tool="probe_url", arguments={"url": 5})) == {
        "tool": "probe_url",
        "group": "system",
        "url": "",
        "refused_by": "invalid_url",
    }
    preview = tool.approval_preview(
        ToolInvocation(tool="probe_url", arguments={"url": "http://site.example/a?b=c"})
    )
    assert (preview["host"], preview["port"], preview["path"], preview["query_raw"]) == (
        "site.example",
        80,
        "/a",
        "b=c",
    )


@pytest.fixture
def public_site(lab_settings, group_factory, site_host_factory):
    """An own host on a public-looking lab server (the lab's /status/500 answers 500)."""
    lab_settings.dns.set("www.site.example", a=[lab_settings.PUBLIC_V4[3]])
    site_host_factory("www.site.example", scheme="http")
    group_factory("system", enabled=True)
    return lab_settings


def test_probe_url_5xx_without_log_files(public_site, superuser, settings):
    settings.WEBFETCH_LOG_FILES = []
    result = run_tool("probe_url", {"url": "/status/503"}, user=superuser, context=APPROVED)
    assert result.meta["status"] == 503 and result.meta["log_entries"] == 0
    assert "Error log: not available (no_log_files)." in result.content


def test_probe_url_5xx_with_no_error_in_the_window(public_site, superuser, settings, tmp_path):
    log = tmp_path / "old.log"
    log.write_text("2001-01-01 00:00:00,000 ERROR django.request Internal Server Error: /\n")
    settings.WEBFETCH_LOG_FILES = [str(log)]
    result = run_tool("probe_url", {"url": "/status/500"}, user=superuser, context=APPROVED)
    assert result.meta["log_entries"] == 0
    assert "no error entries within 30 s of the probe" in result.content
    # The lab's 500 page is text/html: its excerpt is there, tag-stripped.
    assert "status 500" in result.content


def test_read_source_refuses_media_and_static_roots(code_group, superuser, settings, tmp_path):
    settings.WEBFETCH_PROJECT_ROOT = tmp_path
    for name in ("media", "assets", "collected", "extra"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.txt").write_text("x\n")
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.STATIC_ROOT = str(tmp_path / "collected")
    settings.STATICFILES_DIRS = [tmp_path / "assets", ("prefix", str(tmp_path / "extra"))]
    for name in ("media", "assets", "collected", "extra"):
        result = run_tool("read_source", {"path": f"{name}/f.txt"}, user=superuser)
        assert result.meta == {"reason": "media_root"}, name


def test_get_last_exception_lists_frames_without_a_project_root(
    code_group, superuser, settings, tmp_path
):
    log = tmp_path / "app.log"
    log.write_text(
        # Append order decides which entry is the newest (issue 19).
        "2026-12-01 02:00:00,000 ERROR shop with traceback\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app/shop/views.py", line 3, in cart\n'
        "    api_key = 'sk-live-abc'\n"
        "KeyError: 'x'\n"
        "2026-12-01 03:00:00,000 ERROR shop plain error without traceback\n"
        "  detail line with SECRET_KEY = 'leaked'\n"
    )
    settings.WEBFETCH_LOG_FILES = [str(log)]
    settings.WEBFETCH_PROJECT_ROOT = None
    newest = run_tool("get_last_exception", {}, user=superuser)
    assert "plain error without traceback" in newest.content
    assert "leaked" not in newest.content and "[redacted]" in newest.content
    older = run_tool("get_last_exception", {"index": 1}, user=superuser)
    assert 'File "/srv/app/shop/views.py", line 3, in cart [library]' in older.content
    assert "sk-live-abc" not in older.content


def test_a_tool_time_budget_lowers_the_global_one(public_site, superuser, tool_registry):
    import time

    from django_webfetch.tools.probe_url import ProbeUrl

    class QuickProbe(ProbeUrl):
        name = "quick_probe"
        time_budget = 1.0

    tool_registry.register(QuickProbe)
    started = time.monotonic()
    result = run_tool("quick_probe", {"url": "/slow"}, user=superuser, context=APPROVED)
    elapsed = time.monotonic() - started
    assert result.error == "timeout"
    assert elapsed < 15  # the global budget is 20 s; the lab's /slow takes 120 s
    assert ProbeUrl.time_budget == 15.0


@pytest.mark.parametrize("budget", [0, -1, True, "15"])
def test_a_bad_time_budget_is_rejected(tool_registry, budget):
    from django_webfetch.tools.probe_url import ProbeUrl

    class BadBudget(ProbeUrl):
        name = "bad_budget"
        time_budget = budget

    with pytest.raises(ValueError, match="time_budget"):
        tool_registry.register(BadBudget)
