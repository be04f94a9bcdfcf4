"""Finding: a plugin tool's ``parameters`` schema can make argument validation take
exponential time with local references only.

``check_tool_schema`` accepts local ``$ref`` and bounds nesting depth (64), but not the
number of evaluations: ``$defs`` d0..dN where each ``d_i`` is ``allOf: [$ref d_{i+1},
$ref d_{i+1}]`` is a schema of N small entries whose validation of one string evaluates
2**N subschemas (measured here: N=10 0.14 s, N=12 0.54 s, N=14 1.9 s — x4 per +2; N=40 is
years).  ``argument_errors`` runs on every call request of the tool, before approval, so a
published plugin (an untrusted author in the threat model) hangs a web/worker process on
any call a model makes.  Issue 19 items 3/7 fixed the pattern engine and remote refs, not
this.  The safe behaviour: such a schema is refused when the manifest is validated
(or evaluation is bounded), without running it.
"""

from __future__ import annotations

import pytest

from django_webfetch.schemas import SchemaRefused, check_tool_schema


def fan_out_schema(levels: int) -> dict:
    defs = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "$defs": defs, "properties": {"q": {"$ref": "#/$defs/d0"}}}


def test_a_schema_whose_references_fan_out_exponentially_is_refused():
    with pytest.raises(SchemaRefused):
        check_tool_schema(fan_out_schema(40))
