"""What one keyword of a plugin's parameter schema costs the host is counted, not only how
many keywords run (issue 30, round 32, finding 1, High, availability; decision 0067
amended).  The outside attacker's tests, and the rule over generated schemas.

``schema_cost`` counted subschemas per instance node and validation counted keyword
evaluations, but one ``enum`` is one evaluation whatever its length: 4,096 evaluations (a
fan-out of local references) of an enum of 15,000 elements fit in a 64 KiB manifest, and
each call's validation of ``{}`` took 30 to 60 s of the host's CPU; a long ``required``
made one error per missing name in every branch (gigabytes).  Now every value of an
``enum``, ``const``, ``required`` and ``dependentRequired`` counts in ``schema_cost`` (the
manifest is refused ``schema_too_costly``), and at validation each of these keywords is
charged its length, ``uniqueItems`` the square of the array's (``schemas._work``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch import schemas
from django_webfetch.plugins.manifest import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    _size,
    parse_manifest,
)
from django_webfetch.schemas import MAX_EVALUATIONS, argument_errors


def _handler(*_args: Any) -> None:
    return None


def _names(count: int) -> list[str]:
    """``count`` distinct short property names (``required`` must not repeat one)."""
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    found: list[str] = []
    width = 1
    while len(found) < count:
        total = len(alphabet) ** width
        for number in range(total):
            name = ""
            for _ in range(width):
                number, digit = divmod(number, len(alphabet))
                name += alphabet[digit]
            found.append(name)
            if len(found) == count:
                break
        width += 1
    return found


#: The keyword of the leaf and its value: each costs the validator work in proportion to
#: its length at every evaluation, counted as one evaluation.
LEAVES = {
    "enum": lambda: {"enum": [0] * 15_000},
    "required": lambda: {"required": _names(8_000)},
}


def _enum_fan_out_manifest(leaf: str = "enum", fan: int = 8, levels: int = 4) -> dict:
    """One tool whose parameters are a 64 KiB manifest's worth of JSON Schema: an ``enum``
    of ``values`` zeros (two bytes each), reached through ``levels`` of ``anyOf`` of
    ``fan`` local references to the level below: ``fan ** levels`` (4,096) evaluations of
    the enum for one instance node, under ``MAX_SCHEMA_COST`` (``schema_cost`` counts
    subschemas, not what one keyword costs), each comparing the value with every element
    of the enum (jsonschema's ``enum``: ``equal`` in Python per element) and building a
    message with the enum's ``repr``."""
    defs: dict[str, Any] = {"e": LEAVES[leaf]()}
    below = "e"
    for level in range(levels):
        defs[f"d{level}"] = {"anyOf": [{"$ref": f"#/$defs/{below}"}] * fan}
        below = f"d{level}"
    parameters = {"type": "object", "$defs": defs, "allOf": [{"$ref": f"#/$defs/{below}"}]}
    return {
        "name": "a32enum",
        "version": "1.0",
        "description": "x",
        "egress": [],
        "tools": [
            {"name": "probe", "description": "x", "handler": _handler, "parameters": parameters}
        ],
    }


class _TooManyComparisons(Exception):
    pass


def _count_keyword_work(monkeypatch: pytest.MonkeyPatch, count: list[int], bound: int) -> None:
    """Count each enum element compared and each error the ``required`` keyword makes;
    raise ``_TooManyComparisons`` past ``bound`` (so a failing test ends at once)."""
    import jsonschema._keywords as keywords

    real_equal = keywords.equal
    real_error = keywords.ValidationError

    def step() -> None:
        count[0] += 1
        if count[0] > bound:
            raise _TooManyComparisons

    def equal(one: Any, two: Any) -> bool:
        step()
        return real_equal(one, two)

    def error(*args: Any, **kwargs: Any) -> Any:
        step()
        return real_error(*args, **kwargs)

    monkeypatch.setattr(keywords, "equal", equal)
    monkeypatch.setattr(keywords, "ValidationError", error)


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_a_calls_argument_validation_is_bounded_whatever_one_keyword_of_the_schema_costs(
    monkeypatch: pytest.MonkeyPatch, leaf: str
) -> None:
    """History: issue 30, round 32, finding 1 (High, availability; round 30 finding 2's class).

    A tool's
    ``parameters`` come from the plugin's manifest, and the host validates every call's
    arguments against them (``tools.registry.validate_arguments`` ->
    ``schemas.argument_errors``) in the web or worker process, before any plugin process
    and outside every bound of the call.  The bounds count subschema evaluations
    (``MAX_SCHEMA_COST`` per instance node at check time, ``MAX_EVALUATIONS`` keywords at
    validation), but one ``enum`` keyword is one evaluation whatever its length: 4,096
    evaluations of an ``enum`` of 28,000 elements fit in the 64 KiB manifest and compare
    ~115 million elements for the arguments ``{}``.  Measured on the project's machine:
    the schema's check 0.11 s, accepted; each call's validation of ``{}`` 63.7 s of the
    host's CPU.  Counted here without a clock: the element comparisons of one validation
    must stay within the evaluation budget (or the schema be refused).  ``required`` is
    worse: each name missing from the arguments is a ``ValidationError`` kept in the
    ``anyOf``'s context, so 8,000 names under the same fan-out make 32 million of them
    (measured with 1,000 names and 512 evaluations: 8.5 s and 1.5 GiB of the host's
    memory; the full manifest's would take tens of GiB: the web or worker process is
    killed for memory).  Counted: comparisons (``enum``) and errors made (``required``)."""
    manifest = _enum_fan_out_manifest(leaf)
    assert _size(manifest) <= MAX_MANIFEST_BYTES
    try:
        parsed = parse_manifest(manifest)
    except ManifestError as refused:
        assert refused.reason == "schema_too_costly", refused
        return  # refused before any call: the containment holds
    parameters = parsed.tools[0].parameters

    count = [0]
    bound = MAX_EVALUATIONS

    _count_keyword_work(monkeypatch, count, bound)
    schemas._argument_validator.cache_clear()
    try:
        started = time.process_time()
        try:
            argument_errors(parameters, {})
        except _TooManyComparisons:
            pytest.fail(
                f"validating the arguments {{}} did over {bound} steps of {leaf!r} "
                f"(stopped after {time.process_time() - started:.2f} s of CPU; unstopped, "
                "tens of seconds of the host's CPU per call, and for 'required' tens of GiB)"
            )
    finally:
        schemas._argument_validator.cache_clear()


_ENUM_PLUGIN = """
def run(plugin, arguments):
    return 'x'


def manifest():
    defs = {'e': LEAF}
    below = 'e'
    for level in range(4):
        defs['d%d' % level] = {'anyOf': [{'$ref': '#/$defs/' + below}] * 8}
        below = 'd%d' % level
    parameters = {'type': 'object', '$defs': defs, 'allOf': [{'$ref': '#/$defs/' + below}]}
    return {'name': 'a32enum', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'probe', 'description': 'x', 'parameters': parameters,
                       'handler': run}]}
"""


@pytest.mark.django_db
@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_an_untrusted_plugins_manifest_read_in_the_sandbox_sets_the_hosts_per_call_cost(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, leaf: str
) -> None:
    """History: issue 30, round 32, finding 1, through the real path.

    The manifest above, read in the sandbox
    by the guest and sent on the channel (within ``MAX_VALUES`` and ``READY_BYTES``), is
    accepted by the registry, and the host's validation of one call of its tool with the
    arguments ``{}`` (``tools.registry.validate_arguments``, what ``ToolRegistry.run``
    does before the plugin process is asked for anything) compares more enum elements
    than the whole evaluation budget allows (``enum``: 28 s of the host's CPU measured,
    uncounted; ``required``: memory past what the host has).
    It should be refused when the manifest is read (``schema_too_costly``), or the
    validation stopped within its budget."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime.host import capabilities
    from django_webfetch.tools import default_registry
    from django_webfetch.tools.registry import validate_arguments
    from tests.plugins.packages import dist_info

    if not capabilities().get("isolated"):
        pytest.skip("no sandbox on this host")
    package = tmp_path / "webfetch_a32enum"
    package.mkdir()
    (package / "__init__.py").write_text(f"LEAF = {LEAVES[leaf]()!r}\n" + _ENUM_PLUGIN)
    dist_info(tmp_path, "webfetch-a32enum", {"a32enum": "webfetch_a32enum:manifest"})
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reset()
    default_registry.reset()
    try:
        names = [m.name for m in registry.manifests()]
        if "a32enum" not in names:
            problems = registry.problems()
            assert any("schema_too_costly" in p for p in problems), problems
            return  # refused when its manifest was read: the containment holds
        tools = [t for t in default_registry.load().values() if "$defs" in t.parameters]
        assert tools, sorted(default_registry.load())

        _count_keyword_work(monkeypatch, [0], MAX_EVALUATIONS)
        schemas._argument_validator.cache_clear()
        try:
            validate_arguments(tools[0], {})
        except _TooManyComparisons:
            pytest.fail(
                f"one call's validation of {{}} did over {MAX_EVALUATIONS} steps of "
                f"{leaf!r}, in the host, before any plugin process"
            )
    finally:
        schemas._argument_validator.cache_clear()
        monkeypatch.undo()
        registry.reset()
        default_registry.reset()


def test_a_long_enum_costs_its_length_at_each_evaluation() -> None:
    """History: issue 30, round 32, finding 1.  At validation an ``enum`` is charged its
    length: an array of 20 items each against an enum of 5,000 elements goes past the
    budget (one ``schema_too_costly`` error) instead of comparing 100,000 elements; 5
    items are validated as before."""
    from django_webfetch.schemas import check_tool_schema

    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"enum": list(range(5000))}}},
    }
    check_tool_schema(schema)  # one instance node costs 5,002: accepted
    [error] = argument_errors(schema, {"xs": [-1] * 20})
    assert error.validator == "schema_too_costly"
    assert argument_errors(schema, {"xs": [1, 2, 3, 4, 4999]}) == []
    assert len(argument_errors(schema, {"xs": [1, -1]})) == 1


def test_unique_items_costs_the_square_of_the_array() -> None:
    """History: issue 30, round 32, finding 1.  ``uniqueItems`` compares the items with
    each other: charged the square of the array's length."""
    schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True}}}
    [error] = argument_errors(schema, {"xs": [[i] for i in range(300)]})
    assert error.validator == "schema_too_costly"
    assert argument_errors(schema, {"xs": [[i] for i in range(100)]}) == []


@hypothesis_settings(max_examples=40, deadline=None)
@given(
    length=st.integers(1, 3000),
    fan=st.integers(1, 8),
    levels=st.integers(0, 4),
    nested=st.booleans(),
)
def test_a_schema_whose_enums_could_cost_past_the_bound_is_refused(
    length: int, fan: int, levels: int, nested: bool
) -> None:
    """History: issue 30, round 32, finding 1.  Over generated fan-outs of references to
    an enum (of numbers, or of small objects): refused ``schema_too_costly`` exactly when
    the enum's values, times the evaluations one instance node makes of it, pass
    ``MAX_SCHEMA_COST``; accepted, a validation of ``{}`` compares at most that many."""
    from django_webfetch.schemas import MAX_SCHEMA_COST, SchemaRefused, check_tool_schema

    member = (lambda i: {"k": i}) if nested else (lambda i: i)
    defs: dict[str, Any] = {"e": {"enum": [member(i) for i in range(length)]}}
    below = "e"
    for level in range(levels):
        defs[f"d{level}"] = {"anyOf": [{"$ref": f"#/$defs/{below}"}] * fan}
        below = f"d{level}"
    schema = {"type": "object", "$defs": defs, "allOf": [{"$ref": f"#/$defs/{below}"}]}
    values = length * (2 if nested else 1)
    # The enum's node (1 + its values), each level's anyOf (1 + fan times the level
    # below, its $ref node 1 more), the allOf and the root.
    cost = 1 + values
    for _ in range(levels):
        cost = 1 + fan * (1 + cost)
    cost = 1 + 1 + (1 + cost)
    if cost > MAX_SCHEMA_COST:
        with pytest.raises(SchemaRefused) as refused:
            check_tool_schema(schema)
        assert refused.value.reason == "schema_too_costly"
    else:
        check_tool_schema(schema)
