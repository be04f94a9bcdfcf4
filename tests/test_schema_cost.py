"""A tool schema's validation cost is bounded before it runs (``schemas.schema_cost``).

``check_tool_schema`` refuses a schema whose worst case over one instance node exceeds
``MAX_SCHEMA_COST`` evaluations, or whose ``$ref`` cycle does not descend into the instance.
The property: for any accepted schema (random, with local references), validating any
instance runs at most ``schema_cost * keywords per schema * instance nodes`` keyword
evaluations, counted by wrapping every keyword of the real validator.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.validators import extend

from django_webfetch.schemas import (
    MAX_EVALUATIONS,
    ArgumentValidator,
    SchemaRefused,
    argument_errors,
    check_tool_schema,
    schema_cost,
)

DEFS = [f"d{i}" for i in range(4)]

leaf = st.one_of(
    st.just({}),
    st.sampled_from(["string", "integer", "array", "object", "number"]).map(lambda t: {"type": t}),
    st.sampled_from(DEFS).map(lambda d: {"$ref": f"#/$defs/{d}"}),
    st.booleans(),
)


def _extend(children):
    lists = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda xs: {"allOf": xs}, lists),
        st.builds(lambda xs: {"anyOf": xs}, lists),
        st.builds(lambda xs: {"oneOf": xs}, lists),
        st.builds(lambda x: {"not": x}, children),
        st.builds(lambda a, b: {"if": a, "then": b}, children, children),
        st.builds(lambda x: {"items": x}, children),
        st.builds(lambda xs: {"prefixItems": xs}, lists),
        st.builds(lambda x: {"contains": x}, children),
        st.builds(lambda a, b: {"properties": {"a": a, "b": b}}, children, children),
        st.builds(lambda x: {"additionalProperties": x}, children),
        st.builds(lambda x: {"dependentSchemas": {"a": x}}, children),
    )


subschema = st.recursive(leaf, _extend, max_leaves=8)
schemas = st.builds(
    lambda defs, top: {
        "type": "object",
        "$defs": dict(zip(DEFS, defs, strict=True)),
        "properties": top,
    },
    st.lists(subschema, min_size=len(DEFS), max_size=len(DEFS)),
    st.dictionaries(st.sampled_from(["a", "b"]), subschema, max_size=2),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3)),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(st.sampled_from("abc"), inner, min_size=1, max_size=3),
    ),
    max_leaves=10,
)
instances = st.dictionaries(st.sampled_from("abc"), json_values, max_size=3)


def _nodes(value):
    if isinstance(value, dict):
        return 1 + sum(_nodes(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_nodes(v) for v in value)
    return 1


def _keywords_per_schema(node, most=1):
    if isinstance(node, dict):
        most = max(most, len(node))
        for value in node.values():
            most = _keywords_per_schema(value, most)
    elif isinstance(node, list):
        for item in node:
            most = _keywords_per_schema(item, most)
    return most


def _counting_validator(counter):
    def wrap(keyword):
        def run(validator, value, instance, schema):
            counter[0] += 1
            return keyword(validator, value, instance, schema)

        return run

    return extend(
        ArgumentValidator,
        validators={word: wrap(fn) for word, fn in ArgumentValidator.VALIDATORS.items()},
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas, instances)
def test_an_accepted_schema_validates_within_its_computed_bound(schema, instance):
    try:
        check_tool_schema(schema)
    except SchemaRefused as exc:
        assert exc.reason in {"schema_too_costly", "schema_invalid", "schema_ref"}
        return
    bound = schema_cost(schema) * _keywords_per_schema(schema) * _nodes(instance)
    counter = [0]
    list(_counting_validator(counter)(schema).iter_errors(instance))
    assert counter[0] <= bound


def _fan_out(levels, width=2):
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * width} for i in range(levels)}
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "$defs": defs, "properties": {"q": {"$ref": "#/$defs/d0"}}}


def test_the_cost_of_a_fan_out_is_exact_and_the_cap_refuses_it():
    # d_i costs 1 + 2 * (1 + d_(i+1)) (itself, two {"$ref"} schemas and their target), so
    # d_0 = 4 * 2**levels - 3; plus the root and the schema of "q".
    for levels in (0, 3, 10):
        assert schema_cost(_fan_out(levels)) == 4 * 2**levels - 3 + 2
    check_tool_schema(_fan_out(10))  # 4095 evaluations: accepted
    with pytest.raises(SchemaRefused) as refused:
        check_tool_schema(_fan_out(14))
    assert refused.value.reason == "schema_too_costly"


def test_a_reference_cycle_in_place_is_refused_and_a_descending_one_accepted():
    cycle = {
        "type": "object",
        "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
        "properties": {"x": {"$ref": "#/$defs/a"}},
    }
    with pytest.raises(SchemaRefused) as refused:
        check_tool_schema(cycle)
    assert refused.value.reason == "schema_too_costly"
    tree = {"type": "object", "properties": {"children": {"items": {"$ref": "#"}}}}
    check_tool_schema(tree)
    assert argument_errors(tree, {"children": [{"children": []}]}) == []


def test_validation_stops_at_its_budget_on_a_deep_recursive_instance():
    # Accepted (the recursion descends), but each level applies the root twice: 2**depth.
    schema = {
        "type": "object",
        "properties": {"n": {"allOf": [{"$ref": "#"}, {"$ref": "#"}]}},
    }
    check_tool_schema(schema)
    value: dict = {}
    for _ in range(40):
        value = {"n": value}
    errors = argument_errors(schema, value)
    assert [e.validator for e in errors] == ["schema_too_costly"]
    assert str(MAX_EVALUATIONS) in errors[0].message


def test_a_schema_whose_references_fan_out_exponentially_is_refused():
    # d0..d40, each allOf two references to the next: 2**40 evaluations of one string, from
    # a schema of 41 small entries, refused when the manifest is read, without running it.
    with pytest.raises(SchemaRefused):
        check_tool_schema(_fan_out(40))


def test_a_schema_checked_again_gets_the_same_verdict_and_a_changed_one_is_checked_anew():
    """``check_tool_schema`` keeps its verdict by the schema's canonical JSON (a registry
    load checks every tool again): the same schema, in any key order, gets the same verdict
    (a refusal with the same reason), and a schema changed since is checked anew."""
    from django_webfetch import schemas

    good = {"type": "object", "properties": {"q": {"type": "string", "maxLength": 5}}}
    bad = {"type": "object", "properties": {"q": {"type": "string", "pattern": "(a"}}}
    for _ in range(2):
        schemas.check_tool_schema(good)
        schemas.check_tool_schema(dict(reversed(list(good.items()))))
        with pytest.raises(schemas.SchemaRefused) as first:
            schemas.check_tool_schema(bad)
        assert first.value.reason == "pattern_syntax"
    good["properties"]["q"]["pattern"] = "(a"  # the same object, changed: refused now
    with pytest.raises(schemas.SchemaRefused) as changed:
        schemas.check_tool_schema(good)
    assert changed.value.reason == "pattern_syntax"
    bad["properties"]["q"]["pattern"] = "a+"
    schemas.check_tool_schema(bad)
    # bounded: the memo never holds more than its bound
    for n in range(schemas._VERDICTS_MAX + 10):
        schemas.check_tool_schema({"type": "object", "properties": {f"p{n}": {"type": "string"}}})
    assert len(schemas._VERDICTS) <= schemas._VERDICTS_MAX
