"""The code search: literal and regex hits, skipped directories, the budgets, a catastrophic
regular expression that must not hang the worker."""

from __future__ import annotations

import os
import time

import pytest

from django_webfetch.diagnostics.paths import SourcePathGuard
from django_webfetch.diagnostics.search import (
    MAX_BYTES,
    MAX_ENTRIES,
    MAX_FILES,
    MAX_PATTERN_CHARS,
    MAX_SECONDS,
    CodeSearch,
    SearchRefused,
)


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "project"
    files = {
        "shop/views.py": "def cart(request):\n    total = price * qty\n    return total\n",
        "shop/templates/cart.html": "<p>{{ total }}</p>\n",
        "shop/settings_local.py": "total = 'settings are never searched'\n",
        "shop/secrets.py": "total = 'never'\n",
        "node_modules/lib/index.js": "total\n",
        "venv/lib/python3.11/site-packages/pkg/mod.py": "total\n",
        "media/upload.txt": "total\n",
        "static/app.js": "total\n",
        ".git/config": "total\n",
        ".venv/x.py": "total\n",
        "shop/__pycache__/views.cpython-311.pyc": "total\n",
        "data/db.sqlite3": "total\n",
        "keys/server.pem": "total\n",
        "conf.py": "API_TOKEN = 'total-secret-value'\n",
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "shop" / "blob.bin").write_bytes(b"total\x00\x01\x02")
    (root / "big.txt").write_bytes(b"total\n" * 200_000)  # > 1 MiB: skipped
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.py").write_text("total = 'outside'\n")
    (root / "linked-dir").symlink_to(outside)
    (root / "linked-file.py").symlink_to(outside / "leak.py")
    (root / "etc-link").symlink_to("/etc")
    return root


def test_literal_hits_skip_every_denied_place(tree):
    outcome = CodeSearch(SourcePathGuard(str(tree))).search("total")
    hits = {(h.path, h.line) for h in outcome.hits}
    assert hits == {
        ("shop/views.py", 2),
        ("shop/views.py", 3),
        ("shop/templates/cart.html", 1),
    }
    # The search runs on the redacted text ("total" is inside a redacted value).
    tokens = CodeSearch(SourcePathGuard(str(tree))).search("API_TOKEN")
    conf = next(h for h in tokens.hits if h.path == "conf.py")
    assert conf.text == "API_TOKEN = [redacted]"
    assert outcome.exhausted is None
    assert outcome.files_skipped >= 4  # settings, secrets, binary, big, symlink out


def test_regex_and_glob(tree):
    search = CodeSearch(SourcePathGuard(str(tree)))
    outcome = search.search(r"price\s*\*\s*qty", use_regex=True)
    assert [(h.path, h.line, h.text) for h in outcome.hits] == [
        ("shop/views.py", 2, "total = price * qty")
    ]
    assert {h.path for h in search.search("total", glob="*.html").hits} == {
        "shop/templates/cart.html"
    }
    assert {h.path for h in search.search("total", glob="shop/*.py").hits} == {"shop/views.py"}


@pytest.mark.parametrize(
    ("query", "use_regex", "reason"),
    [
        ("", False, "invalid_query"),
        ("a\x00b", False, "invalid_query"),
        ("a\nb", False, "invalid_query"),
        (None, False, "invalid_query"),
        ("x" * 501, False, "invalid_query"),
        ("(", True, "invalid_pattern"),
        ("a{1001}", True, "pattern_too_complex"),
        ("a" * (MAX_PATTERN_CHARS + 1), True, "pattern_too_long"),
    ],
)
def test_refused_queries(tree, query, use_regex, reason):
    with pytest.raises(SearchRefused) as info:
        CodeSearch(SourcePathGuard(str(tree))).search(query, use_regex=use_regex)
    assert info.value.reason == reason


@pytest.mark.parametrize("glob", ["", "x" * 201, "a\x00", 5])
def test_refused_globs(tree, glob):
    with pytest.raises(SearchRefused) as info:
        CodeSearch(SourcePathGuard(str(tree))).search("total", glob=glob)
    assert info.value.reason == "invalid_glob"


def test_hit_limit(tmp_path):
    (tmp_path / "many.py").write_text("needle\n" * 500)
    outcome = CodeSearch(SourcePathGuard(str(tmp_path))).search("needle")
    assert len(outcome.hits) == 100 and outcome.exhausted == "hits"


def test_a_generated_tree_of_25000_files_reports_exhaustion(tmp_path):
    root = tmp_path / "big"
    for d in range(50):
        directory = root / f"pkg{d:02d}"
        directory.mkdir(parents=True)
        for f in range(500):
            (directory / f"m{f:03d}.py").write_text("x = 1\n")
    # A budget of work, not of seconds: the same answer on any machine, busy or not.  The far
    # safety net (30 s) reads this process's CPU time here, not the wall clock: a CI machine
    # loaded ten times over its cores once took 40 s of wall for these 20,000 files, and the
    # net, not the budget, ended the walk.
    outcome = CodeSearch(SourcePathGuard(str(root)), clock=time.process_time).search(
        "needle-not-there"
    )
    assert outcome.exhausted == "files"
    assert outcome.files_scanned + outcome.files_skipped == MAX_FILES
    assert outcome.hits == []


def test_the_directory_entries_budget_counts_what_the_walk_looks_at(tmp_path):
    # Skipped entries (dot directories, skipped names, other files) cost work too.
    for index in range(30):
        (tmp_path / f".hidden{index}").mkdir()
    for index in range(30):
        (tmp_path / f"data{index}.py").write_text("nothing\n")
    outcome = CodeSearch(SourcePathGuard(str(tmp_path)), max_entries=40).search("needle")
    assert outcome.exhausted == "entries"
    assert outcome.entries_seen == 41


def test_the_read_budget_counts_bytes_across_files(tmp_path):
    for index in range(10):
        (tmp_path / f"m{index}.py").write_text("x" * 999 + "\n")
    outcome = CodeSearch(SourcePathGuard(str(tmp_path)), max_bytes=4500).search("needle")
    assert outcome.exhausted == "bytes"
    assert outcome.files_scanned == 4 and outcome.bytes_read == 5000


def test_the_work_budgets_are_capped_by_the_module_bounds(tmp_path):
    search = CodeSearch(SourcePathGuard(str(tmp_path)), max_entries=10**9, max_bytes=10**12)
    assert (search.max_entries, search.max_bytes) == (MAX_ENTRIES, MAX_BYTES)


def test_a_deep_tree_does_not_recurse(tmp_path):
    path = tmp_path
    for _ in range(300):
        path = path / "d"
    path.mkdir(parents=True)
    (path / "deep.py").write_text("needle\n")
    outcome = CodeSearch(SourcePathGuard(str(tmp_path))).search("needle")
    assert len(outcome.hits) == 1 and outcome.hits[0].path.endswith("d/deep.py")


def test_catastrophic_regex_does_not_hang(tmp_path):
    (tmp_path / "evil.txt").write_text("a" * 60_000 + "!\n")
    search = CodeSearch(SourcePathGuard(str(tmp_path)), max_seconds=0.5)
    outcome = search.search(r"(a|aa)+$", use_regex=True)
    # Python's re would run for years on this; RE2 reads the file once: the whole tree is
    # searched, no budget runs out.
    assert outcome.exhausted is None and outcome.files_scanned == 1 and outcome.hits == []


def test_time_budget_on_the_walk(tmp_path):
    (tmp_path / "a.py").write_text("x\n")
    (tmp_path / "b.py").write_text("x\n")
    ticks = iter([0.0, 0.0])
    # The far safety net: a clock that jumps past MAX_SECONDS (a stalled machine).
    search = CodeSearch(
        SourcePathGuard(str(tmp_path)), clock=lambda: next(ticks, MAX_SECONDS + 1.0)
    )
    assert search.search("x").exhausted == "time"


def test_unreadable_directory_is_skipped(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (tmp_path / "ok.py").write_text("needle\n")
    os.chmod(locked, 0)
    try:
        outcome = CodeSearch(SourcePathGuard(str(tmp_path))).search("needle")
    finally:
        os.chmod(locked, 0o700)
    assert [h.path for h in outcome.hits] == ["ok.py"]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(?:a{1000}){1000}", "pattern_too_complex"),  # past RE2's program limit
        (r"((a{100}){100}){100}", "pattern_too_complex"),
        (r"x{65535}", "pattern_too_complex"),
        (r"a{2000}", "pattern_too_complex"),  # RE2 counts at most 1,000
        (r"(a)?(?(1)b{30000}|c)", "invalid_pattern"),  # conditionals: not RE2
        (r"(?=a{10})b", "invalid_pattern"),  # look-around: not RE2
        (r"(?>a{5}){5}", "invalid_pattern"),  # atomic groups: not RE2
        (r"a*+b", "invalid_pattern"),  # possessive: not RE2
        (r"(a)\1", "invalid_pattern"),  # backreferences: not RE2
    ],
)
def test_patterns_that_would_explode_at_compile_time(tree, pattern, reason):
    started = time.monotonic()
    with pytest.raises(SearchRefused) as info:
        CodeSearch(SourcePathGuard(str(tree))).search(pattern, use_regex=True)
    assert info.value.reason == reason
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "pattern",
    [r"a{1000}", r"(?:[a-z]{40}){10}", r"\p{L}+", "(" * 60 + "a" + ")" * 60, r"(?i)def\s+\w+"],
)
def test_ordinary_counted_patterns_compile(tree, pattern):
    CodeSearch.compile(pattern, use_regex=True)


def test_a_huge_directory_is_not_listed_whole(tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    for index in range(300):
        (flat / f"f{index:03d}.txt").write_text("x\n")
    search = CodeSearch(SourcePathGuard(str(tmp_path)), max_files=50)
    outcome = search.search("needle")
    assert outcome.exhausted == "files"
    assert outcome.files_scanned + outcome.files_skipped == 50
