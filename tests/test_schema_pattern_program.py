"""The patterns of a tool's parameter schema are bounded together, not only one by one, and
a call's validation compiles none of them again (issue 30, round 30, finding 2, High,
availability).

Each untrusted pattern was bounded alone (``text.patterns.compile_untrusted``: 1,000
characters, a 256 KiB program), but not their number: about 1,800 distinct patterns of 14
characters (``(?i)[ǅ-ᾼ]{400}N``, ~15 ms of RE2 compilation each) fit in a plugin's 64 KiB
manifest, which cost the host ~20 s of CPU to accept, and as much again at every call of the
tool, since validation compiled each pattern anew (RE2's own cache holds 128).

Now a schema's patterns compile to at most ``MAX_SCHEMA_PROGRAM_BYTES`` together, checked as
each is compiled (refused ``schema_too_costly`` as soon as the sum is past it), a manifest's
to at most ``MAX_MANIFEST_PROGRAM_BYTES``, and validation takes the patterns compiled once
(``schemas._compiled``).  The bounds are counted in program bytes and compilations, never
in seconds.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch import schemas
from django_webfetch.plugins.manifest import (
    MAX_MANIFEST_BYTES,
    MAX_MANIFEST_PROGRAM_BYTES,
    ManifestError,
    parse_manifest,
)
from django_webfetch.schemas import (
    MAX_SCHEMA_PROGRAM_BYTES,
    SchemaRefused,
    argument_errors,
    check_tool_schema,
)
from django_webfetch.text.patterns import compile_untrusted, program_bytes

#: Short to write, slow to compile: RE2 builds ~24,400 instructions each way for it.
_SLOW = "(?i)[\u01c5-\u1fbc]{400}"


def _handler(*_args: Any) -> None:
    return None


def _manifest(tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "s16slow", "version": "1.0", "description": "x", "egress": [], "tools": tools}


def _slow_manifest() -> dict[str, Any]:
    """As many distinct slow patterns as a manifest's bytes let a plugin send."""
    import json

    patterns: dict[str, Any] = {}
    while True:
        for _ in range(50):
            patterns[f"{_SLOW}{len(patterns)}"] = {}
        tool = {
            "name": "slow",
            "description": "x",
            "handler": _handler,
            "parameters": {"type": "object", "patternProperties": patterns},
        }
        if len(json.dumps(_manifest([tool]), default=lambda _: "<object>")) > MAX_MANIFEST_BYTES:
            for _ in range(50):
                patterns.popitem()
            return _manifest([tool])


class _Compilations:
    """Every pattern compiled for a schema from now on (``schemas``' own compile)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.programs: list[int] = []
        real = schemas.compile_untrusted

        def counted(pattern: Any) -> Any:
            compiled = real(pattern)
            self.programs.append(program_bytes(compiled))
            return compiled

        monkeypatch.setattr(schemas, "compile_untrusted", counted)


def test_a_manifest_of_many_slow_patterns_is_refused_after_compiling_a_bounded_few(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """History: issue 30, round 30, finding 2 (High, availability).  The attacker's
    manifest (1,800 distinct slow patterns in one tool's ``patternProperties``) is refused
    ``schema_too_costly``, after compiling no more than the bound and one pattern."""
    manifest = _slow_manifest()
    count = len(manifest["tools"][0]["parameters"]["patternProperties"])
    assert count > 1000  # what the manifest's bytes let through
    compiled = _Compilations(monkeypatch)
    with pytest.raises(ManifestError) as refused:
        parse_manifest(manifest)
    assert refused.value.reason == "schema_too_costly", refused.value
    assert sum(compiled.programs[:-1]) <= MAX_SCHEMA_PROGRAM_BYTES
    assert len(compiled.programs) <= 3, len(compiled.programs)  # not 1,800


def test_the_patterns_of_all_tools_of_a_manifest_are_bounded_together() -> None:
    """History: issue 30, round 30, finding 2.  Each tool's schema under its own bound, 32
    of them (``MAX_TOOLS``) past the manifest's: refused ``schema_too_costly`` naming the
    tool where the sum went over; a manifest under it is accepted."""
    one = compile_untrusted(f"{_SLOW}0")
    per_tool = max(1, MAX_SCHEMA_PROGRAM_BYTES // program_bytes(one))
    tools = [
        {
            "name": f"t{i}",
            "description": "x",
            "handler": _handler,
            "parameters": {
                "type": "object",
                "properties": {
                    f"p{j}": {"type": "string", "pattern": f"{_SLOW}{i}-{j}"}
                    for j in range(per_tool)
                },
            },
        }
        for i in range(32)
    ]
    with pytest.raises(ManifestError) as refused:
        parse_manifest(_manifest(tools))
    assert refused.value.reason == "schema_too_costly", refused.value
    assert "together" in str(refused.value)
    spent = per_tool * program_bytes(one)
    fits = MAX_MANIFEST_PROGRAM_BYTES // spent
    assert fits < 32
    assert len(parse_manifest(_manifest(tools[:fits])).tools) == fits


def test_a_calls_validation_compiles_no_pattern_its_schema_check_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """History: issue 30, round 30, finding 2.  Once a schema is accepted, validating
    arguments (``{}``, keys matching the patterns, additional ones) compiles nothing: 300
    calls, 0 compilations.  Before, each call compiled every pattern again."""
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": "^[a-z]{1,20}$"}},
        "patternProperties": {f"^x{i}_[0-9]+$": {"type": "integer"} for i in range(40)},
        "additionalProperties": False,
    }
    check_tool_schema(schema)
    compiled = _Compilations(monkeypatch)
    for arguments in ({}, {"q": "abc", "x3_1": 4}, {"q": "ABC", "other": 1}) * 100:
        argument_errors(schema, arguments)
    assert compiled.programs == []
    assert len(argument_errors(schema, {"q": "ABC", "other": 1})) == 2  # it still validates


@st.composite
def _patterns(draw: Any) -> list[str]:
    templates = ["[a-z]{%d}", "(?i)[\u01c5-\u1fbc]{%d}", "(ab|cd){%d}", "\\w{%d}x"]
    count = draw(st.integers(1, 12))
    return [
        draw(st.sampled_from(templates)) % draw(st.integers(1, 300)) + f"#{i}" for i in range(count)
    ]


@hypothesis_settings(max_examples=60, deadline=None)
@given(patterns=_patterns())
def test_a_schema_is_refused_exactly_when_its_patterns_compile_past_the_bound(
    patterns: list[str],
) -> None:
    """History: issue 30, round 30, finding 2.  Over generated schemas (1 to 12 patterns,
    as ``pattern`` and ``patternProperties``): refused ``schema_too_costly`` exactly when
    their programs, each compiled alone, sum past ``MAX_SCHEMA_PROGRAM_BYTES``; accepted,
    the check returns that sum."""
    half = len(patterns) // 2
    schema = {
        "type": "object",
        "properties": {
            f"p{i}": {"type": "string", "pattern": p} for i, p in enumerate(patterns[:half])
        },
        "patternProperties": {p: {} for p in patterns[half:]},
    }
    total = sum(program_bytes(compile_untrusted(p)) for p in patterns)
    if total > MAX_SCHEMA_PROGRAM_BYTES:
        with pytest.raises(SchemaRefused) as refused:
            check_tool_schema(schema)
        assert refused.value.reason == "schema_too_costly"
    else:
        assert check_tool_schema(schema) == total


def test_the_compiled_patterns_kept_are_bounded_in_program() -> None:
    """History: issue 30, round 30, finding 2.  The patterns kept for validation hold at
    most ``_COMPILED_MAX_BYTES`` of program, the least recently used dropped first."""
    memo = schemas._Compiled()
    one = program_bytes(compile_untrusted(f"{_SLOW}x"))
    for i in range(schemas._COMPILED_MAX_BYTES // one + 20):
        memo(f"{_SLOW}{i}")
    assert memo._bytes <= schemas._COMPILED_MAX_BYTES
    assert memo._bytes == sum(size for _compiled, size in memo._held.values())
    assert f"{_SLOW}0" not in memo._held  # the first, least recently used, dropped
