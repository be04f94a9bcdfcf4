"""The built-in tools' parameter schemas are ones grammar-constrained servers can follow:
llama.cpp turns a JSON Schema into a grammar and drops what it cannot express
(``minProperties``/``maxProperties``, unanchored patterns, lookarounds), and a model
constrained by what is left writes calls our validation then refuses."""

from __future__ import annotations

import re

import pytest

from django_webfetch.tools.registry import ToolRegistry, validate_arguments

UNSUPPORTED = {"minProperties", "maxProperties", "patternProperties", "dependentRequired"}


def walk(schema, path="$"):
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield path, key, value
            yield from walk(value, f"{path}.{key}")
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from walk(item, f"{path}[{index}]")


def builtin_tools():
    tools = ToolRegistry(discover=True).load()
    found = {n: t for n, t in tools.items() if type(t).__module__.startswith("django_webfetch.")}
    assert {"fetch_external_url", "probe_url", "read_page", "list_pages"} <= set(found)
    return found


def test_builtin_tool_schemas_suit_grammar_constrained_servers():
    problems = []
    for name, tool in builtin_tools().items():
        for path, key, value in walk(tool.parameters):
            if key in UNSUPPORTED:
                problems.append(f"{name} {path}: {key}")
            if key == "pattern" and isinstance(value, str):
                if not (value.startswith("^") and value.endswith("$")):
                    problems.append(f"{name} {path}: pattern {value!r} is not anchored ^...$")
                if re.search(r"\(\?[=!<]", value):
                    problems.append(f"{name} {path}: pattern {value!r} has a lookaround")
    assert problems == []


@pytest.mark.parametrize(
    ("tool", "value", "valid"),
    [
        ("probe_url", "/", True),
        ("probe_url", "/about/", True),
        ("probe_url", "//evil.example/", False),
        ("probe_url", "https://www.example.org/", True),
        ("probe_url", "ftp://x/", False),
        ("fetch_external_url", "https://news.example/page", True),
        ("fetch_external_url", "HTTP://NEWS.EXAMPLE/", True),
        ("fetch_external_url", "javascript:alert(1)//", False),
    ],
)
def test_anchored_patterns_accept_what_they_did(tool, value, valid):
    result = validate_arguments(builtin_tools()[tool], {"url": value})
    assert (result is None) is valid, result
