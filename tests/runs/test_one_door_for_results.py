"""Review round 4 (issue 29), finding 1 as a class: a call's result (and a page's stored text) is
read for a
principal through one door, ``runs.results`` (DESIGN.md §10).

Round 3 fixed "approvers read every user's results" on the API and the admin; the MCP
server, written beside them, read ``call.tool_result()`` itself and reopened it.  This test
reads the package's source: a module that touches ``ToolCall.result`` (the attribute,
``tool_result()``, a ``"result"`` lookup or key next to ``ToolCall``) or ``StoredText``,
other than the door and the writers named below, fails here, whoever remembers what.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import django_webfetch

PACKAGE = Path(django_webfetch.__file__).parent

#: Who may touch ``ToolCall.result`` directly, and why.
RESULT_ALLOWED = {
    "runs/results.py": "the door: the one reader for a principal",
    "runs/state.py": "the writer: transition() stores a result",
    "runs/decide.py": "the writer: a denial's or cancellation's outcome",
    "runs/recover.py": "the writer: expiry's and a lost worker's outcome (transition())",
    "retention.py": "retention: prunes the content of old results",
    "models/calls.py": "the field itself",
    "plugins/runtime/host.py": "no call result: a Future's result() on the spawner thread",
}
#: Who may touch ``StoredText`` (a page's whole text), and why.
STORED_TEXT_ALLOWED = {
    "models/texts.py": "the model",
    "models/__init__.py": "the re-export",
    "tools/paging.py": "the one reader: the same tool, conversation and user only",
    "retention.py": "retention: deletes texts past their time (no reader)",
}
_QUERY_METHODS = frozenset(
    {"values", "values_list", "only", "defer", "update", "filter", "exclude", "get", "order_by"}
)


def _modules() -> list[tuple[str, ast.Module, str]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith("migrations/"):
            continue
        source = path.read_text()
        found.append((relative, ast.parse(source), source))
    return found


def _result_touches(tree: ast.Module, mentions_call: bool) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("result", "tool_result"):
            lines.append(node.lineno)
        if not mentions_call:
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _QUERY_METHODS
        ):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and str(arg.value).split("__")[0] == "result":
                    lines.append(node.lineno)
            for keyword in node.keywords:
                if (keyword.arg or "").split("__")[0] == "result":
                    lines.append(node.lineno)
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "result"
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_door_and_the_writers_touch_a_calls_result():
    offenders = []
    for relative, tree, source in _modules():
        if relative in RESULT_ALLOWED:
            continue
        mentions_call = "ToolCall" in source
        for line in _result_touches(tree, mentions_call):
            offenders.append(f"{relative}:{line}")
    assert offenders == [], (
        "read a call's result through runs.results (read_result/result_dict/withheld): "
        + ", ".join(offenders)
    )


def test_only_the_paging_store_touches_stored_text():
    offenders = [
        relative
        for relative, tree, _source in _modules()
        if relative not in STORED_TEXT_ALLOWED
        and any(
            isinstance(node, ast.Name | ast.Attribute)
            and (getattr(node, "id", None) or getattr(node, "attr", None))
            in ("StoredText", "stored_texts")
            for node in ast.walk(tree)
        )
    ]
    assert offenders == []


def test_the_check_finds_a_direct_read():
    """The walk is not vacuous: the shapes a surface would use are found."""
    for code in (
        "x = call.result",
        "x = call.tool_result()",
        "ToolCall.objects.values_list('pk', 'result')",
        "ToolCall.objects.filter(result__icontains='a')",
        "row['result']",
    ):
        assert _result_touches(ast.parse(code), True), code


@pytest.mark.django_db
def test_no_serializer_or_admin_shows_the_result_field_itself():
    """A ``ModelSerializer`` of ``ToolCall`` reads ``result`` through a method (the door);
    a ``ModelAdmin`` of ``ToolCall`` never names the raw field."""
    from django.contrib import admin
    from rest_framework import serializers

    import django_webfetch.api.serializers  # noqa: F401 - the serializers are defined
    from django_webfetch.models import ToolCall

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    checked = 0
    for serializer in subclasses(serializers.ModelSerializer):
        meta = getattr(serializer, "Meta", None)
        if getattr(meta, "model", None) is not ToolCall:
            continue
        field = serializer().fields.get("result")
        assert field is None or isinstance(field, serializers.SerializerMethodField), serializer
        checked += 1
    assert checked >= 1
    model_admin = admin.site._registry[ToolCall]
    named = [
        *model_admin.list_display,
        *model_admin.readonly_fields,
        *model_admin.search_fields,
        *[f for _name, options in model_admin.fieldsets for f in options["fields"]],
    ]
    assert "result" not in named
