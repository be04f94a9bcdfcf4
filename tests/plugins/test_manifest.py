"""Manifests are untrusted and bounded; one bad field refuses the whole plugin."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.plugins.grants import difference, intersect
from django_webfetch.plugins.manifest import (
    MAX_EGRESS_ENTRIES,
    MAX_MANIFEST_BYTES,
    ManifestError,
    parse_egress_entry,
    parse_manifest,
    validate_config,
)


def handler(plugin, arguments):
    return "ok"


def manifest(**overrides):
    data = {
        "name": "acme",
        "version": "1.0",
        "egress": ["api.acme.example.org"],
        "tools": [{"name": "acme_tool", "description": "d", "handler": handler}],
    }
    data.update(overrides)
    return data


def test_a_valid_manifest():
    parsed = parse_manifest(manifest(egress=["API.Acme.Example.org.", "*.t.acme.example.org"]))
    assert parsed.egress == ("api.acme.example.org", "*.t.acme.example.org")
    assert parsed.tools[0].handler is handler
    assert parse_manifest(lambda: manifest()).name == "acme"


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("*", "egress_entry"),
        ("*.com", "egress_public_suffix"),
        ("*.co.uk", "egress_public_suffix"),
        ("*.github.io", "egress_public_suffix"),  # PSL private section
        ("*.internal", "egress_public_suffix"),  # unlisted TLD: public by the default rule
        ("*.xn--p1ai", "egress_public_suffix"),
        ("*.*.example.org", "egress_entry"),
        ("a.*.example.org", "egress_entry"),
        ("api.example.org:8443", "egress_port"),
        ("[2001:db8::1]:443", "egress_port"),
        ("10.0.0.0/8", "egress_entry"),
        ("*.10.0.0.1", "egress_entry"),
        ("https://api.example.org/", "egress_entry"),
        ("user@api.example.org", "egress_entry"),
        ("bücher.example.org", "egress_entry"),
        ("api.example.org ", "egress_entry"),
        ("0x7f.1", "egress_entry"),
        ("", "egress_entry"),
        (7, "egress_entry"),
    ],
)
def test_bad_egress_entries(entry, reason):
    with pytest.raises(ManifestError) as caught:
        parse_manifest(manifest(egress=["ok.example.org", entry]))
    assert caught.value.reason == reason


def test_ip_literals_are_exact():
    assert parse_egress_entry("2001:db8::1").value == "2001:db8::1"
    assert parse_egress_entry("[2001:db8::1]").value == "2001:db8::1"
    assert parse_egress_entry("192.0.2.7").value == "192.0.2.7"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        (
            {"egress": [f"h{i}.example.org" for i in range(MAX_EGRESS_ENTRIES + 1)]},
            "egress_too_many",
        ),
        ({"egress": "api.example.org"}, "egress_shape"),
        ({"description": "x" * (MAX_MANIFEST_BYTES + 1)}, "manifest_too_large"),
        ({"name": "Acme!"}, "manifest_name"),
        ({"version": ""}, "manifest_version"),
        ({"extra": 1}, "manifest_shape"),
        ({"tools": [{"name": "t", "description": "d", "handler": "not callable"}]}, "tool"),
        ({"tools": [{"name": "t t", "description": "d", "handler": handler}]}, "tool"),
        ({"config": {"x": {"type": "object"}}}, "config_schema"),
        ({"config": {"x": {"type": "string", "secret": True, "default": "a"}}}, "config_schema"),
        ({"config": {"x": {"type": "string", "pattern": "a" * 201}}}, "config_pattern"),
        # Nested quantifiers ((a+)+$) are fine on RE2
        # (tests/plugins/test_manifest_schema_re2_refs_and_suffixes.py); what RE2 cannot run is
        # refused.
        ({"config": {"x": {"type": "string", "pattern": "(a*)\\1"}}}, "config_pattern"),
        ({"config": {"x": {"type": "string", "pattern": "(?=a)"}}}, "config_pattern"),
        ({"config": {"x": {"type": "string", "pattern": "(unclosed"}}}, "config_pattern"),
        ({"config": {"x": {"type": "integer", "pattern": "a"}}}, "config_schema"),
    ],
)
def test_bounds_refuse_the_whole_plugin(overrides, reason):
    with pytest.raises(ManifestError) as caught:
        parse_manifest(manifest(**overrides))
    assert caught.value.reason == reason
    assert str(caught.value)


def test_safe_patterns_are_accepted_and_checked():
    parsed = parse_manifest(
        manifest(
            config={
                "base": {"type": "string", "pattern": "^https://[a-z0-9.-]+(/[a-z]*)?$"},
                "token": {"type": "string", "secret": True, "required": True},
                "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            }
        )
    )
    assert parsed.secret_fields == {"token"}
    fields = parsed.config
    assert validate_config(fields, {"base": "https://x.example/a", "token": "t"}) == {}
    problems = validate_config(fields, {"base": "ftp://secret-value", "size": 11, "zz": 1})
    assert problems == {
        "base": "does not match the pattern",
        "size": "is above 10",
        "token": "is required",
        "zz": "is not a config field of this plugin",
    }
    assert "secret-value" not in repr(problems)


def test_a_loading_error_is_a_manifest_error():
    def broken():
        raise RuntimeError("boom")

    with pytest.raises(ManifestError) as caught:
        parse_manifest(broken)
    assert caught.value.reason == "manifest_load"


def test_intersection():
    declared = ["api.acme.example.org", "*.cdn.acme.example.org", "192.0.2.7"]
    assert intersect(declared, ["*.acme.example.org"]) == (
        "api.acme.example.org",
        "*.cdn.acme.example.org",
    )
    assert intersect(declared, ["img.cdn.acme.example.org", "other.example.org"]) == (
        "img.cdn.acme.example.org",
    )
    # A suffix never covers its apex; an address never matches a name.
    assert intersect(["*.acme.example.org"], ["acme.example.org"]) == ()
    assert intersect(declared, ["192.0.2.7", "192.0.2.8"]) == ("192.0.2.7",)
    assert intersect(declared, []) == ()
    assert difference(["a.example.org", "x.cdn.acme.example.org"], declared) == ("a.example.org",)


_label = st.from_regex(r"[a-z]{1,3}", fullmatch=True)
_name = st.lists(_label, min_size=2, max_size=4).map(lambda ls: ".".join(ls) + ".example.org")
_entry = st.one_of(_name, _name.map(lambda n: "*." + n))


@settings(max_examples=200, deadline=None)
@given(st.lists(_entry, max_size=4), st.lists(_entry, max_size=4), _name)
def test_intersection_is_exactly_both_sides(declared, granted, host):
    """A host matches the effective grant iff it matches the declaration AND the grant."""
    from django_webfetch.net.hosts import HostList, parse_host

    target = parse_host(host)

    def matches(entries):
        return HostList.parse(entries).match_host(target, 443) is not None

    effective = intersect(declared, granted)
    assert matches(effective) == (matches(declared) and matches(granted))


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "string", "unknown": 1},
        "not a mapping",
        {"type": "string", "secret": "yes"},
        {"type": "string", "description": 5},
        {"type": "string", "maxLength": -1},
        {"type": "string", "minLength": True},
        {"type": "boolean", "minimum": 1},
        {"type": "integer", "minimum": "1"},
        {"type": "number", "maximum": float("nan")},
        {"type": "string", "enum": []},
        {"type": "string", "enum": [1]},
        {"type": "integer", "default": "x"},
        {"type": "string", "pattern": 5},
        {"type": "string", "pattern": "\u00e9"},
    ],
)
def test_bad_config_fields(spec):
    with pytest.raises(ManifestError) as caught:
        parse_manifest(manifest(config={"x": spec}))
    assert caught.value.reason in ("config_schema", "config_pattern", "manifest_shape")


@pytest.mark.parametrize("name", ["X", "1x" * 30, "a-b"])
def test_bad_config_field_names(name):
    with pytest.raises(ManifestError):
        parse_manifest(manifest(config={name: {"type": "string"}}))


def test_config_value_types():
    fields = parse_manifest(
        manifest(
            config={
                "b": {"type": "boolean"},
                "i": {"type": "integer", "minimum": 2},
                "n": {"type": "number"},
                "s": {"type": "string", "minLength": 2, "maxLength": 3, "enum": ["ab", "abc"]},
            }
        )
    ).config
    assert validate_config(fields, {"b": True, "i": 2, "n": 1.5, "s": "ab"}) == {}
    assert validate_config(fields, {"b": 1, "i": True, "n": "1", "s": 5}) == {
        "b": "must be true or false",
        "i": "must be an integer",
        "n": "must be a number",
        "s": "must be a string",
    }
    assert validate_config(fields, {"i": 1, "s": "a"}) == {
        "i": "is below 2",
        "s": "is shorter than 2 characters",
    }
    assert validate_config(fields, {"s": "abcd"}) == {"s": "is longer than 3 characters"}
    assert validate_config(fields, {"s": "xyz"}) == {"s": "is not one of the allowed values"}


@pytest.mark.parametrize(
    "tools",
    [
        "not a list",
        [{"name": "t", "description": "d", "handler": handler}] * 2,
        ["not a mapping"],
        [{"name": "t", "description": "d", "handler": handler, "bad": 1}],
        [{"name": "t", "description": "", "handler": handler}],
        [{"name": "t", "description": "d", "handler": handler, "parameters": {"type": "x"}}],
        [{"name": "t", "description": "d", "handler": handler, "effect": "delete"}],
        [{"name": "t", "description": "d", "handler": handler, "group": "not a slug"}],
        [{"name": f"t{i}", "description": "d", "handler": handler} for i in range(33)],
    ],
)
def test_bad_tools(tools):
    with pytest.raises(ManifestError):
        parse_manifest(manifest(tools=tools))
