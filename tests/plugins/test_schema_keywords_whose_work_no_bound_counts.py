"""Issue 30, round 33 (outside attack): what a plugin's parameter schema costs the host.

Finding 1 (High, availability; the class of round 30 finding 2 and round 32 finding 1): a
local *anchor* reference (``{"$ref": "#x"}`` with ``{"$anchor": "x"}`` in the schema) is
allowed (``check_tool_schema`` takes any reference that starts with ``#``), and
``referencing`` resolves an anchor by crawling the whole schema (``Registry.anchor`` ->
``Registry.crawl``) each time it is looked up from a resolver whose registry is not
crawled yet: the root resolver ``check_tool_schema`` makes (one lookup per reference of
the schema) and the one ``argument_errors``' validator starts with (one lookup per
``$ref`` evaluated at the schema's own resolver: every ``allOf`` member, every
property).  ``schema_cost`` counts each reference as one evaluation and validation
charges it one keyword, but each costs a walk of every subschema: K references cost
K x (K + ...) subresource steps, quadratic in the manifest.  Measured on this machine
(jsonschema 4.x, referencing of the venv): K = 1,000 (16 KiB, 3,011 values) cost 9.3 s of
the host's CPU to check and 4.1 s to validate ``{}`` each call; K = 5,000 (80 KiB, 15,011
values, under ``MAX_VALUES`` and ``MAX_MANIFEST_BYTES``; schema cost 5,001, under
``MAX_SCHEMA_COST``) extrapolates to about 4 min to check and 1.5-2 min per call.

Counted here without a clock: the subresource steps ``referencing`` walks while checking
the schema and while validating ``{}`` must stay within ``MAX_EVALUATIONS`` (a schema of
this size has ~1,000 subschemas: one crawl of it is fine, one per reference is not), or
the schema be refused.
"""

from __future__ import annotations

from typing import Any

import pytest

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


def _anchor_fan_manifest(count: int = 1_000) -> dict[str, Any]:
    parameters = {
        "type": "object",
        "$defs": {"x": {"$anchor": "x"}},
        "allOf": [{"$ref": "#x"} for _ in range(count)],
    }
    return {
        "name": "a33anchor",
        "version": "1.0",
        "description": "x",
        "egress": [],
        "tools": [
            {"name": "probe", "description": "x", "handler": _handler, "parameters": parameters}
        ],
    }


class _TooManySteps(Exception):
    pass


def _count_crawl_steps(monkeypatch: pytest.MonkeyPatch, count: list[int], bound: int) -> None:
    """Count every subresource ``referencing`` walks (``Resource.subresources``: what one
    crawl does per subschema); raise past ``bound`` so a failing test ends at once."""
    from referencing._core import Resource

    real = Resource.subresources

    def subresources(self: Any) -> Any:
        count[0] += 1
        if count[0] > bound:
            raise _TooManySteps
        return real(self)

    monkeypatch.setattr(Resource, "subresources", subresources)


def test_attack33_finding_1_anchor_references_cost_a_crawl_of_the_schema_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Severity: High (availability of the site: the host's CPU at the registry's check,
    in every web and worker process, and at each call's argument validation, outside every
    bound of the call).  Fails while checking or validating walks the schema once per
    anchor reference."""
    manifest = _anchor_fan_manifest()
    assert _size(manifest) <= MAX_MANIFEST_BYTES
    schemas._VERDICTS.clear()
    count = [0]
    _count_crawl_steps(monkeypatch, count, MAX_EVALUATIONS)
    try:
        parsed = parse_manifest(manifest)
    except ManifestError as refused:
        assert refused.reason in ("schema_too_costly", "schema_ref", "schema_keyword"), refused
        return  # refused before any call, cheaply: the containment holds
    except _TooManySteps:
        pytest.fail(
            f"checking the schema walked over {MAX_EVALUATIONS} subschemas (one crawl of "
            "the whole schema per anchor reference; the full-size manifest: minutes of CPU)"
        )
    finally:
        schemas._VERDICTS.clear()
    parameters = parsed.tools[0].parameters
    count[0] = 0
    try:
        argument_errors(parameters, {})
    except _TooManySteps:
        pytest.fail(
            f"validating the arguments {{}} walked over {MAX_EVALUATIONS} subschemas (one "
            "crawl per anchor reference evaluated, every call)"
        )


def test_attack33_finding_1b_validation_alone_crawls_once_per_anchor_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 1, the per-call half alone (the schema as ``parse_manifest`` would keep it,
    the check skipped): each call's ``argument_errors`` of ``{}`` must not walk the schema
    once per anchor reference it evaluates (4.1 s of CPU at 1,000 references, 12.8 s at
    2,000 measured here; quadratic)."""
    parameters = _anchor_fan_manifest()["tools"][0]["parameters"]
    count = [0]
    _count_crawl_steps(monkeypatch, count, MAX_EVALUATIONS)
    try:
        errors = argument_errors(parameters, {})
    except _TooManySteps:
        pytest.fail(
            f"validating the arguments {{}} walked over {MAX_EVALUATIONS} subschemas (one "
            "crawl per anchor reference evaluated, every call)"
        )
    # Within the budget: valid, or stopped as too costly (never a crawl per reference).
    assert errors == [] or [e.validator for e in errors] in (
        ["schema_too_costly"],
        ["schema_keyword"],
        ["schema_ref"],
    )


@pytest.mark.parametrize("count", [1, 50])
def test_attack33_control_pointer_references_are_cheap(
    monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """Control: the same fan of ``#/$defs/x`` pointers walks nothing per reference."""
    parameters = {
        "type": "object",
        "$defs": {"x": {}},
        "allOf": [{"$ref": "#/$defs/x"} for _ in range(count)],
    }
    steps = [0]
    _count_crawl_steps(monkeypatch, steps, MAX_EVALUATIONS)
    schemas._VERDICTS.clear()
    try:
        schemas.check_tool_schema(parameters)
        assert argument_errors(parameters, {}) == []
    finally:
        schemas._VERDICTS.clear()


_ANCHOR_PLUGIN = """
def run(plugin, arguments):
    return 'x'


def manifest():
    parameters = {'type': 'object', '$defs': {'x': {'$anchor': 'x'}},
                  'allOf': [{'$ref': '#x'} for _ in range(COUNT)]}
    return {'name': 'a33anchor', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'probe', 'description': 'x', 'parameters': parameters,
                       'handler': run}]}
"""


@pytest.mark.django_db
def test_attack33_finding_1_through_the_sandbox_and_the_registry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Finding 1 through the real path: the manifest above, built by the plugin's
    ``manifest()`` in the sandbox and sent on the channel (500 references, 1,511 values,
    8 KiB: a tenth of what fits, for a short test), is read
    by the registry (``parse_manifest`` -> ``check_tool_schema``: one crawl of the schema
    per reference) and each call's ``validate_arguments`` (one crawl per reference
    evaluated).  It should be refused when the manifest is read, or checked and validated
    within the budget."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime.host import capabilities
    from django_webfetch.tools import default_registry
    from django_webfetch.tools.registry import validate_arguments
    from tests.plugins.packages import dist_info

    if not capabilities().get("isolated"):
        pytest.skip("no sandbox on this host")
    package = tmp_path / "webfetch_a33anchor"
    package.mkdir()
    (package / "__init__.py").write_text("COUNT = 500\n" + _ANCHOR_PLUGIN)
    dist_info(tmp_path, "webfetch-a33anchor", {"a33anchor": "webfetch_a33anchor:manifest"})
    monkeypatch.syspath_prepend(str(tmp_path))
    schemas._VERDICTS.clear()
    registry.reset()
    default_registry.reset()
    steps = [0]
    # Counted, not stopped, while the registry reads it (the registry would report the
    # counter's exception as a manifest it could not read): the real path's verdict.
    _count_crawl_steps(monkeypatch, steps, 1 << 62)
    try:
        names = [m.name for m in registry.manifests()]
        assert steps[0] <= MAX_EVALUATIONS, (
            f"reading the plugin's manifest walked {steps[0]} subschemas in the host (one "
            f"crawl of the schema per anchor reference; accepted: {'a33anchor' in names})"
        )
        if "a33anchor" not in names:
            problems = registry.problems()
            assert any(
                "schema_too_costly" in p or "schema_ref" in p or "schema_keyword" in p
                for p in problems
            ), f"refused for another reason (the counter stopped its check?): {problems}"
            return  # refused when its manifest was read: the containment holds
        tools = [t for t in default_registry.load().values() if "$defs" in t.parameters]
        assert tools, sorted(default_registry.load())
        monkeypatch.undo()
        _count_crawl_steps(monkeypatch, steps, MAX_EVALUATIONS)
        steps[0] = 0
        try:
            validate_arguments(tools[0], {})
        except _TooManySteps:
            pytest.fail(
                f"one call's validation of {{}} walked over {MAX_EVALUATIONS} subschemas, "
                "in the host, before any plugin process"
            )
    finally:
        monkeypatch.undo()
        schemas._VERDICTS.clear()
        registry.reset()
        default_registry.reset()


# -- Finding 2: unevaluatedProperties re-walks the in-place subschemas, uncharged ------------


def _unevaluated_chain(levels: int = 240, width: int = 7_200) -> dict[str, Any]:
    """``levels`` schemas, each ``{"$ref": <the one below>, "unevaluatedProperties":
    true}``, over one ``allOf`` of ``width`` empty schemas: 44 KiB, 15,851 values (under
    ``MAX_VALUES``), ``schema_cost`` 7,682 (under ``MAX_SCHEMA_COST``)."""
    defs: dict[str, Any] = {"big": {"allOf": [{}] * width}}
    below = "big"
    for level in range(levels):
        defs[f"x{level}"] = {"$ref": f"#/$defs/{below}", "unevaluatedProperties": True}
        below = f"x{level}"
    return {"type": "object", "$defs": defs, "$ref": f"#/$defs/{below}"}


def _count_descents(monkeypatch: pytest.MonkeyPatch, count: list[int], bound: int) -> None:
    """Count every subschema the argument validator applies (``descend``), charged or not;
    raise ``_TooManySteps`` past ``bound``."""
    validator = schemas._argument_validator()
    real = validator.descend

    def descend(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        if count[0] > bound:
            raise _TooManySteps
        return real(self, *args, **kwargs)

    monkeypatch.setattr(validator, "descend", descend)


def test_attack33_finding_2_unevaluated_properties_rewalks_uncharged_subschemas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Severity: High (availability: 9.7 s of the host's CPU per call measured here for the
    arguments ``{}``; the schema's check 1.8 s, accepted).

    ``unevaluatedProperties`` (jsonschema's ``find_evaluated_property_keys_by_schema``)
    walks the schema it sits in again (following ``$ref``, descending into every ``allOf``
    member) at each evaluation: a chain of ``levels`` of them over one ``allOf`` of
    ``width`` members walks ``levels x width`` subschemas (1.7 million here).
    ``schema_cost`` counts each subschema once per instance node and the budget charges
    keyword evaluations, and an empty member (``{}``) has none: what validation charged
    here is ~500 evaluations, within ``MAX_EVALUATIONS``.  Fails while one validation
    applies more subschemas than the evaluation budget (or the schema is not refused)."""
    parameters = _unevaluated_chain()
    schemas._VERDICTS.clear()
    try:
        schemas.check_tool_schema(parameters)
    except schemas.SchemaRefused as refused:
        assert refused.reason in ("schema_too_costly", "schema_keyword"), refused
        return  # refused before any call: the containment holds
    finally:
        schemas._VERDICTS.clear()
    count = [0]
    _count_descents(monkeypatch, count, MAX_EVALUATIONS)
    try:
        argument_errors(parameters, {})
    except _TooManySteps:
        pytest.fail(
            f"validating the arguments {{}} applied over {MAX_EVALUATIONS} subschemas, "
            "uncharged (unevaluatedProperties walks its in-place subschemas again at each "
            "level: ~10 s of the host's CPU per call)"
        )


_UNEVALUATED_PLUGIN = """
def run(plugin, arguments):
    return 'x'


def manifest():
    defs = {'big': {'allOf': [{}] * 7200}}
    below = 'big'
    for level in range(240):
        defs['x%d' % level] = {'$ref': '#/$defs/' + below, 'unevaluatedProperties': True}
        below = 'x%d' % level
    parameters = {'type': 'object', '$defs': defs, '$ref': '#/$defs/' + below}
    return {'name': 'a33uneval', 'version': '1.0', 'description': 'x', 'egress': [],
            'tools': [{'name': 'probe', 'description': 'x', 'parameters': parameters,
                       'handler': run}]}
"""


@pytest.mark.django_db
def test_attack33_finding_2_through_the_sandbox_and_the_registry(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Finding 2 through the real path: the plugin's ``manifest()`` in the sandbox builds
    the chain above, the registry accepts it, and one call's ``validate_arguments`` of
    ``{}`` applies more subschemas than the whole evaluation budget (~10 s of CPU)."""
    from django_webfetch.plugins import registry
    from django_webfetch.plugins.runtime.host import capabilities
    from django_webfetch.tools import default_registry
    from django_webfetch.tools.registry import validate_arguments
    from tests.plugins.packages import dist_info

    if not capabilities().get("isolated"):
        pytest.skip("no sandbox on this host")
    package = tmp_path / "webfetch_a33uneval"
    package.mkdir()
    (package / "__init__.py").write_text(_UNEVALUATED_PLUGIN)
    dist_info(tmp_path, "webfetch-a33uneval", {"a33uneval": "webfetch_a33uneval:manifest"})
    monkeypatch.syspath_prepend(str(tmp_path))
    schemas._VERDICTS.clear()
    registry.reset()
    default_registry.reset()
    try:
        names = [m.name for m in registry.manifests()]
        if "a33uneval" not in names:
            problems = registry.problems()
            assert any("schema_too_costly" in p or "schema_keyword" in p for p in problems), (
                problems
            )
            return  # refused when its manifest was read: the containment holds
        tools = [t for t in default_registry.load().values() if "$defs" in t.parameters]
        assert tools, sorted(default_registry.load())
        count = [0]
        _count_descents(monkeypatch, count, MAX_EVALUATIONS)
        try:
            validate_arguments(tools[0], {})
        except _TooManySteps:
            pytest.fail(
                f"one call's validation of {{}} applied over {MAX_EVALUATIONS} subschemas "
                "in the host, uncharged, before any plugin process"
            )
    finally:
        monkeypatch.undo()
        schemas._VERDICTS.clear()
        registry.reset()
        default_registry.reset()


def test_attack33_control_a_short_unevaluated_chain_is_cheap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control, now refused: ``unevaluatedProperties`` is no keyword of a tool's
    parameters (its re-walk is counted by no bound), short chain or long; the arguments
    get one error naming the keyword, and nothing of the schema runs."""
    parameters = _unevaluated_chain(levels=5, width=10)
    count = [0]
    _count_descents(monkeypatch, count, MAX_EVALUATIONS)
    for arguments in ({}, {"a": 1}):
        [error] = argument_errors(parameters, arguments)
        assert error.validator == "schema_keyword", error
    assert count[0] == 0
