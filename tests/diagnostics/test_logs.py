"""The log reader against files written by Python's logging (and Django's own setup)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import time

import pytest

from django_webfetch.diagnostics.logs import (
    MAX_TAIL_BYTES,
    LogExceptionReader,
    LogFormatError,
    compile_format,
)


def write_log(path, fmt, records, *, name="shop"):
    """Write ``records`` through a real ``logging.FileHandler``."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(fmt))
    logger = logging.getLogger(f"webfetch-test.{name}.{os.path.basename(path)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        for level, message, exc in records:
            if exc is None:
                logger.log(level, message)
            else:
                try:
                    raise exc
                except Exception:
                    logger.log(level, message, exc_info=True)
    finally:
        logger.removeHandler(handler)
        handler.close()


def nested_failure():
    try:
        {}["missing"]
    except KeyError as exc:
        raise RuntimeError("while handling") from exc


DEFAULT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def test_error_records_newest_first_with_traceback(tmp_path):
    path = tmp_path / "app.log"
    write_log(
        path,
        DEFAULT,
        [
            (logging.INFO, "started", None),
            (logging.ERROR, "first failure", ValueError("bad value")),
            (logging.WARNING, "just a warning", None),
            (logging.CRITICAL, "second failure\nwith a second line", ZeroDivisionError("x")),
        ],
    )
    records = LogExceptionReader([str(path)]).records()
    assert [r.level for r in records] == ["CRITICAL", "ERROR"]
    newest, older = records
    assert newest.message == "second failure"
    assert newest.text.startswith("with a second line")
    assert newest.exception == "ZeroDivisionError" and newest.exception_message == "x"
    assert older.exception == "ValueError" and older.exception_message == "bad value"
    assert older.logger.startswith("webfetch-test.shop")
    assert older.frames and older.frames[-1].file == __file__
    assert older.frames[-1].function == "write_log"
    assert "raise exc" in older.frames[-1].code
    assert newest.timestamp >= older.timestamp
    assert abs(newest.timestamp - dt.datetime.now()) < dt.timedelta(minutes=5)


def test_chained_exception_reports_the_last_one(tmp_path):
    path = tmp_path / "app.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(DEFAULT))
    logger = logging.getLogger("webfetch-test.chained")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        try:
            nested_failure()
        except RuntimeError:
            logger.exception("chained")
    finally:
        logger.removeHandler(handler)
        handler.close()
    [record] = LogExceptionReader([str(path)]).records()
    assert record.exception == "RuntimeError" and record.exception_message == "while handling"
    assert record.frames[-1].function == "nested_failure"
    assert "KeyError" in record.text


def test_other_formats(tmp_path):
    fmt = "[%(asctime)s] %(levelname)-8s %(process)d %(name)s:%(lineno)d %(message)s"
    path = tmp_path / "custom.log"
    write_log(path, fmt, [(logging.ERROR, "custom format", KeyError("k"))])
    [record] = LogExceptionReader([str(path)], fmt).records()
    assert (record.level, record.message, record.exception) == (
        "ERROR",
        "custom format",
        "KeyError",
    )
    # The default format does not read it.
    assert LogExceptionReader([str(path)]).records() == []


@pytest.mark.parametrize(
    ("fmt", "problem"),
    [
        ("%(levelname)s %(message)s", "asctime"),
        ("%(asctime)s %(message)s", "levelname"),
        ("%(asctime)s %(levelname)s %(levelname)s", "twice"),
        ("", "non-empty"),
        (None, "non-empty"),
        ("x" * 501, "non-empty"),
        ("%(asctime)s %(levelname)s %(name", "understand"),
    ],
)
def test_unusable_formats(fmt, problem):
    with pytest.raises(LogFormatError, match=problem):
        compile_format(fmt)


def test_two_files_merge_newest_first_and_search(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(
        "2026-12-01 03:00:00,100 ERROR a alpha one\n"
        "2026-12-01 03:00:02,100 ERROR a alpha two\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app/x.py", line 1, in f\n'
        "ValueError: v\n"
    )
    b.write_text("2026-12-01 03:00:01,100 ERROR b beta one\n")
    reader = LogExceptionReader([str(a), str(b), str(tmp_path / "missing.log")])
    assert [r.message for r in reader.records()] == ["alpha two", "beta one", "alpha one"]
    assert reader.problems == [(str(tmp_path / "missing.log"), "FileNotFoundError")]
    assert [r.message for r in reader.records(search="BETA")] == ["beta one"]
    assert [r.message for r in reader.records(search="ValueError")] == ["alpha two"]


def test_only_the_last_2_mib_is_read(tmp_path):
    path = tmp_path / "big.log"
    write_log(path, DEFAULT, [(logging.ERROR, "ancient " + "x" * 1000, None)] * 3000)
    write_log(path, DEFAULT, [(logging.ERROR, "recent", None)], name="recent")
    assert path.stat().st_size > MAX_TAIL_BYTES
    records = LogExceptionReader([str(path)]).records()
    assert records[0].message == "recent"
    assert len(records) < 3000
    line_bytes = len(path.read_bytes().split(b"\n", 1)[0]) + 1
    assert len(records) <= MAX_TAIL_BYTES // line_bytes + 1
    # A smaller tail for the test of the cut: the first (partial) line is dropped.
    small = LogExceptionReader([str(path)], max_tail_bytes=1500).records()
    assert [r.message for r in small][0] == "recent"
    assert all(r.message.startswith(("ancient", "recent")) for r in small)


def test_garbage_and_binary_lines_are_tolerated(tmp_path):
    path = tmp_path / "mixed.log"
    path.write_bytes(
        b"\xff\xfe garbage\x00\n"
        b"2026-12-01 03:00:00,123 ERROR shop boom\n"
        b"continuation \xc3\x28\n"
        b"2026-13-45 99:00:00,000 ERROR shop impossible date\n"
        b"2026-12-01 03:00:01,5 ERROR shop later\n"
    )
    records = LogExceptionReader([str(path)]).records()
    assert [r.message for r in records] == ["later", "boom"]
    assert records[0].timestamp.microsecond == 500000
    assert "continuation" in records[1].text


def test_a_huge_traceback_is_bounded(tmp_path):
    path = tmp_path / "deep.log"
    frames = "".join(
        f'  File "/srv/app/m{i}.py", line {i}, in f{i}\n    call()\n' for i in range(3000)
    )
    path.write_text(
        "2026-12-01 03:00:00,000 ERROR shop recursion\n"
        "Traceback (most recent call last):\n" + frames + "RecursionError: too deep\n"
    )
    [record] = LogExceptionReader([str(path)]).records()
    assert len(record.frames) <= 60
    assert len(record.text.split("\n")) <= 400


def test_a_line_shaped_to_backtrack_does_not_hang_the_reader(tmp_path):
    # A format with several lazy fields and a literal tail; attacker-chosen request data
    # (a path with an encoded newline) can start a line that looks like a record.
    fmt = "%(asctime)s %(levelname)s %(module)s %(funcName)s %(message)s :: %(threadName)s end"
    path = tmp_path / "evil.log"
    evil = "2026-12-01 03:00:00,000 ERROR " + "a " * 3000
    good = "2026-12-01 03:00:01,000 ERROR views cart it failed :: MainThread end"
    path.write_text("\n".join([good] + [evil] * 20) + "\n")
    started = time.monotonic()
    reader = LogExceptionReader([str(path)], fmt)
    records = reader.records()
    assert time.monotonic() - started < 30
    # Header matching is linear (RE2): the shaped lines cost their length, no budget runs
    # out on any machine, and the real record is kept.
    assert [r.message for r in records] == ["it failed"]
    assert reader.problems == []


def test_the_read_budget_stops_and_says_so(tmp_path):
    path = tmp_path / "app.log"
    path.write_text("2026-12-01 03:00:00,000 ERROR a one\n2026-12-01 03:00:01,000 ERROR a two\n")
    ticks = iter([0.0, 0.0, 0.0])
    reader = LogExceptionReader([str(path)], clock=lambda: next(ticks, 99.0))
    records = reader.records()
    assert reader.problems == [(str(path), "time")]
    # "one" was complete when "two" began; "two" was being read when the budget ran out.
    assert [r.message for r in records] == ["two", "one"]


@pytest.mark.parametrize(
    "fmt", ["%(asctime)25s|%(levelname)s|%(message)s", "[%(asctime)s] %(levelname)s %(message)s"]
)
def test_padded_or_bracketed_timestamps(tmp_path, fmt):
    path = tmp_path / "pad.log"
    write_log(path, fmt, [(logging.ERROR, "padded", None)])
    assert [r.message for r in LogExceptionReader([str(path)], fmt).records()] == ["padded"]


def test_window_limit_and_matched(tmp_path):
    path = tmp_path / "app.log"
    path.write_text(
        "".join(
            f"2026-12-01 03:00:{second:02d},000 ERROR a entry {second}\n" for second in range(60)
        )
    )
    reader = LogExceptionReader([str(path)])
    since = dt.datetime(2026, 12, 1, 3, 0, 10)
    until = dt.datetime(2026, 12, 1, 3, 0, 20)
    records = reader.records(since=since, until=until, limit=3)
    assert [r.message for r in records] == ["entry 20", "entry 19", "entry 18"]
    assert reader.matched == 11
    assert reader.records(search="ENTRY 5", limit=0) == [] and reader.matched == 11
