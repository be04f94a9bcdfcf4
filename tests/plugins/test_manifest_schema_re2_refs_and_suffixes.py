"""Issue 19: a plugin's schema patterns run on RE2, its schema ``$ref`` never fetches, its
tools join no built-in group, and its ``*.suffix`` declarations hold no public suffix."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.plugins.manifest import ManifestError, parse_manifest
from django_webfetch.text.patterns import compile_untrusted, is_linear
from django_webfetch.tools.registry import validate_arguments

EVIL = r"^([A-Za-z]+ ?)+$"


def handler(plugin, arguments):
    return "ok"


def manifest_with(parameters, **tool):
    return parse_manifest(
        {
            "name": "schemas",
            "version": "1",
            "tools": [
                {
                    "name": "t",
                    "description": "A tool.",
                    "handler": handler,
                    "parameters": parameters,
                    **tool,
                }
            ],
        }
    )


def string_with(**keywords):
    return {"type": "object", "properties": {"q": {"type": "string", **keywords}}}


def plugin_tool(manifest):
    from django_webfetch.plugins.tools import PluginTool

    return PluginTool.build(manifest, manifest.tools[0])


# -- 3: a plugin's JSON Schema pattern runs on RE2 -------------------------------------------


def test_catastrophic_schema_pattern_is_validated_in_linear_time():
    """``^([A-Za-z]+ ?)+$`` and a 35-character argument held the request about an hour on
    ``re`` (jsonschema, on every call request, before approval).  On RE2 it is refused at
    once with the keyword named; the engine is RE2."""
    tool = plugin_tool(manifest_with(string_with(pattern=EVIL)))
    assert is_linear(compile_untrusted(EVIL))
    result = validate_arguments(tool, {"q": "A" * 35 + "!"})
    assert result is not None and result.error == "invalid_arguments"
    assert result.meta["errors"] == [{"path": "q", "problem": "pattern"}]
    assert validate_arguments(tool, {"q": "Alpha Beta"}) is None


def test_pattern_properties_and_additional_properties_run_on_re2():
    schema = {
        "type": "object",
        "patternProperties": {EVIL: {"type": "string"}},
        "additionalProperties": False,
    }
    tool = plugin_tool(manifest_with(schema))
    result = validate_arguments(tool, {"A" * 35 + "!": "x"})
    assert result is not None and result.meta["errors"] == [
        {"path": "", "problem": "additionalProperties"}
    ]
    assert validate_arguments(tool, {"Alpha": "x"}) is None
    assert validate_arguments(tool, {"Alpha": 3}).meta["errors"] == [
        {"path": "Alpha", "problem": "type"}
    ]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", "pattern_syntax"),  # backreference
        (r"(?=a)b", "pattern_syntax"),  # look-ahead
        (r"(?<!a)b", "pattern_syntax"),  # look-behind
        (r"\p{Greek}{1000}", "pattern_too_large"),  # past the 256 KiB program
        (r"(\pL{100}){10}", "pattern_too_large"),
        ("a" * 1001, "pattern_too_long"),
    ],
)
def test_a_schema_pattern_that_is_not_re2_or_over_the_limit_refuses_the_manifest(pattern, reason):
    with pytest.raises(ManifestError) as caught:
        manifest_with(string_with(pattern=pattern))
    assert caught.value.reason == reason
    with pytest.raises(ManifestError) as caught:
        manifest_with({"type": "object", "patternProperties": {pattern: {}}})
    assert caught.value.reason == reason


def test_unevaluated_properties_next_to_pattern_properties_is_refused():
    """jsonschema would evaluate ``patternProperties`` with ``re`` for it."""
    with pytest.raises(ManifestError) as caught:
        manifest_with(
            {"type": "object", "patternProperties": {"^a": {}}, "unevaluatedProperties": False}
        )
    assert caught.value.reason == "schema_keyword"


@pytest.mark.parametrize(
    "pattern", ["a*a*a*a*a*a*a*a*b", EVIL, "(a|aa)*$", r"\w+\d+\w+$", "x{0,999}x{0,999}y"]
)
def test_config_patterns_run_on_re2(pattern):
    """The config schema's patterns were refused by a backtracking estimate; now they
    compile on RE2 and run in linear time on the field's longest value."""
    manifest = parse_manifest(
        {"name": "a", "version": "1", "config": {"x": {"type": "string", "pattern": pattern}}}
    )
    compiled = manifest.config["x"].pattern
    assert is_linear(compiled)
    assert manifest.config["x"].check("a" * 4095 + "!") in (None, "does not match the pattern")


# -- 7: $ref resolves locally or the manifest is refused ------------------------------------


@pytest.mark.parametrize(
    "ref",
    [
        "http://169.254.169.254/latest/meta-data/",
        "https://schemas.example/x.json",
        "file:///etc/passwd",
        "other.json",
        "//host/x",
        "#/$defs/missing",
    ],
)
def test_a_non_local_ref_refuses_the_manifest(ref):
    with pytest.raises(ManifestError) as caught:
        manifest_with({"type": "object", "properties": {"q": {"$ref": ref}}})
    assert caught.value.reason == "schema_ref"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "$id": "http://x.example/s", "properties": {}},
        {"type": "object", "$schema": "http://x.example/meta", "properties": {}},
        {"type": "object", "properties": {"q": {"$dynamicRef": "http://x.example/#a"}}},
    ],
)
def test_rebasing_and_remote_metaschemas_are_refused(schema):
    with pytest.raises(ManifestError) as caught:
        manifest_with(schema)
    assert caught.value.reason == "schema_ref"


def test_a_local_ref_resolves():
    schema = {
        "type": "object",
        "$defs": {"word": {"type": "string", "pattern": "^[a-z]+$"}},
        "properties": {"q": {"$ref": "#/$defs/word"}},
    }
    tool = plugin_tool(manifest_with(schema))
    assert validate_arguments(tool, {"q": "abc"}) is None
    assert validate_arguments(tool, {"q": "ABC"}).meta["errors"] == [
        {"path": "q", "problem": "pattern"}
    ]


@pytest.mark.lab
def test_validation_at_call_time_never_fetches(lab):
    """A tool whose schema names a remote ``$ref`` (one that never went through a manifest,
    e.g. registered by code) is validated without a request: the lab server sees none,
    where jsonschema fetched it with urllib on every call."""
    from django_webfetch.tools.base import Tool

    lab.dns.set("schemas.lab.example", a=[lab.PUBLIC_V4[0]])
    url = lab.url(lab.PUBLIC_V4[0], "/json")

    class Remote(Tool):
        name = "remote_ref"
        group = "remote"
        description = "A tool with a remote $ref."
        parameters = {"type": "object", "properties": {"q": {"$ref": url}}}

    result = validate_arguments(Remote(), {"q": "x"})
    assert result is not None and result.error == "invalid_arguments"
    # Refused before it runs (round 33: only a schema the check accepts is validated).
    assert result.meta["errors"] == [{"path": "", "problem": "schema_ref"}]
    assert lab.accepts() == [] and lab.requests == []
    with pytest.raises(ValueError, match="schema_ref"):
        from django_webfetch.tools.registry import validate_tool

        validate_tool(Remote())


# -- 9: no *.suffix that is, or holds, a public suffix ---------------------------------------


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("*.amazonaws.com", "egress_public_suffix"),  # holds s3.amazonaws.com: every bucket
        ("*.s3.amazonaws.com", "egress_public_suffix"),
        ("*.windows.net", "egress_public_suffix"),  # holds blob.core.windows.net
        ("*.core.windows.net", "egress_public_suffix"),
        ("*.nip.io", "egress_wildcard_dns"),  # 10.0.0.1.nip.io: any address by name
        ("*.sslip.io", "egress_wildcard_dns"),
        ("*.tenant.sslip.io", "egress_wildcard_dns"),
    ],
)
def test_a_suffix_holding_a_public_suffix_is_refused(entry, reason):
    from django_webfetch.plugins.manifest import parse_egress_entry

    with pytest.raises(ManifestError) as caught:
        parse_egress_entry(entry)
    assert caught.value.reason == reason


def _psl_names():
    from django_webfetch.plugins.manifest import _psl

    names = []
    for rule in sorted(_psl()._publicsuffix):
        name = rule.lstrip("!").removeprefix("*.")
        if name.isascii() and "." in name:
            names.append((name, rule.startswith("*.")))
    return names


_PSL_NAMES = _psl_names()


def test_the_psl_copy_has_the_rules_the_examples_name():
    names = {name for name, _ in _PSL_NAMES}
    assert {"s3.amazonaws.com", "blob.core.windows.net", "github.io"} <= names


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_PSL_NAMES), st.data())
def test_every_psl_entry_and_every_name_above_it_is_refused(psl_name, data):
    """A property over the PSL's own entries (ICANN and private): ``*.S`` is refused for
    the entry and for every shorter suffix of it; a domain registered under a plain entry
    (``zz9q7.<entry>``) is accepted unless a rule sits below it."""
    from django_webfetch.plugins.manifest import _psl_covered, parse_egress_entry

    name, wildcard = psl_name
    labels = name.split(".")
    start = data.draw(st.integers(min_value=0, max_value=len(labels) - 1))
    with pytest.raises(ManifestError) as caught:
        parse_egress_entry("*." + ".".join(labels[start:]))
    assert caught.value.reason in ("egress_public_suffix", "egress_wildcard_dns")
    registered = f"zz9q7.{name}"
    if not wildcard and registered not in _psl_covered():
        assert parse_egress_entry(f"*.{registered}").value == registered


# -- 8: built-in groups come from one registry; install prints every group ---------------


@pytest.mark.parametrize("group", ["web", "system", "code", "rag", "content", "assistant"])
def test_a_plugin_tool_joins_no_built_in_group(group):
    """``content`` and ``assistant`` passed before: a plugin tool in ``content`` was offered
    to every editor without approval once the CMS content tools were on."""
    with pytest.raises(ManifestError) as caught:
        manifest_with({"type": "object"}, group=group)
    assert caught.value.reason == "tool_group"


def test_optional_apps_add_their_groups_to_the_one_registry(monkeypatch):
    from django_webfetch.models import builtin

    # The CMS integration (installed in the test settings) registered ``content``.
    assert {"web", "system", "code", "rag", "assistant", "content"} <= (
        builtin.builtin_group_slugs()
    )
    monkeypatch.setitem(builtin._REGISTERED, "reports", {"slug": "reports"})
    with pytest.raises(ManifestError) as caught:
        manifest_with({"type": "object"}, group="reports")
    assert caught.value.reason == "tool_group"


def test_a_plugin_named_like_a_built_in_group_has_no_ungrouped_tools():
    """A tool without a group joins the group named after its plugin."""
    with pytest.raises(ManifestError) as caught:
        parse_manifest(
            {
                "name": "content",
                "version": "1",
                "tools": [{"name": "t", "description": "d", "handler": handler}],
            }
        )
    assert caught.value.reason == "tool_group"


@pytest.mark.django_db
def test_install_prints_every_group_the_plugins_tools_join(example):
    import io

    from django.core.management import call_command

    example.set_state(
        extra_tools=[
            {
                "name": "example_admin_tool",
                "description": "A tool in a second group.",
                "group": "example-admin",
            }
        ]
    )
    out = io.StringIO()
    call_command("webfetch", "plugin", "install", "example", stdout=out)
    lines = out.getvalue().splitlines()
    assert (
        "  tool groups:           example, example-admin (enable each to offer its tools:"
        " admin: Web fetch > Tool groups)"
    ) in lines
