"""Tool parameter schemas: JSON Schema (2020-12) that cannot hang the host or reach out.

A tool's ``parameters`` may come from a plugin author, and its arguments from a model that a
web page steers.  jsonschema runs ``pattern`` and ``patternProperties`` with Python's
backtracking ``re`` and resolves a remote ``$ref`` by fetching it with urllib (no timeout,
redirects followed, outside the egress guard).  Here:

- ``pattern``, ``patternProperties`` and the ``additionalProperties`` test that depends on
  them run on RE2 (``text.patterns.compile_untrusted``: linear time, 256 KiB program, 1 MiB
  memory); a pattern that is not RE2 syntax or is over a limit refuses the schema;
- ``$ref`` / ``$dynamicRef`` must be local (``#`` or ``#/json/pointer`` into the same
  schema) and must resolve; ``$id``, ``$schema`` pointing elsewhere and
  ``unevaluatedProperties`` next to ``patternProperties`` (jsonschema would run ``re``
  there) are refused;
- validation uses a ``referencing.Registry`` with no ``retrieve``: nothing is ever fetched;
- the worst-case number of subschema evaluations one instance node can cost (``schema_cost``:
  applicators summed, local ``$ref`` followed, memoised) is capped at ``MAX_SCHEMA_COST``;
  over it, or with a ``$ref`` cycle that does not descend into the instance (``properties``,
  ``items``, ...), the schema is refused before it ever runs (a fan-out of references would
  otherwise validate in exponential time; ``tests/test_schema_cost.py``);
- validation itself stops after ``MAX_EVALUATIONS`` keyword evaluations (a recursive schema
  that descends into a deeply nested instance is bounded too).

``check_tool_schema`` raises ``SchemaRefused`` with a stable ``reason``: ``schema_invalid``,
``schema_ref``, ``schema_keyword``, ``schema_too_costly``, or a ``text.patterns`` reason
(``pattern_syntax``, ``pattern_too_large``, ``pattern_too_long``, ``pattern_type``).
"""

from __future__ import annotations

import functools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from django_webfetch.text.patterns import (
    MAX_PROGRAM_BYTES,
    PatternError,
    compile_untrusted,
    program_bytes,
)

if TYPE_CHECKING:
    from referencing import Registry

    #: Draft 2020-12 with the pattern keywords on RE2 (module ``__getattr__`` builds it).
    ArgumentValidator: Any

# jsonschema and referencing are imported where a schema is first checked or used, not
# with this module: the models import it (plugins.manifest), and the import (jsonschema,
# referencing, their meta-schemas) cost every Django process ~0.1 CPU-s in django.setup(),
# most of which (manage.py commands, workers that run no tool) never check a schema.

__all__ = [
    "MAX_SCHEMA_PROGRAM_BYTES",
    "ArgumentValidator",
    "SchemaRefused",
    "argument_errors",
    "check_tool_schema",
    "schema_cost",
]

#: The most subschema evaluations one instance node may cost (``schema_cost``).
MAX_SCHEMA_COST = 10_000
#: The most keyword evaluations one ``argument_errors`` call runs.
MAX_EVALUATIONS = 50_000
#: The most program all the patterns of one schema compile to together (``program_bytes``:
#: forward and reverse; as much as one pattern may, ``MAX_PROGRAM_BYTES`` each way).  RE2
#: compiles in time linear in it (~0.6 µs an instruction here), so checking a schema costs
#: at most ~40 ms of the host's CPU, whatever their number (issue 30, round 30, finding 2:
#: 1,800 patterns of 14 characters cost 20 s), and validating arguments compiles nothing
#: (``_compiled``).
MAX_SCHEMA_PROGRAM_BYTES = 2 * MAX_PROGRAM_BYTES
#: Compiled patterns kept for validation (``_compiled``), at most this much program.
_COMPILED_MAX_BYTES = 32 * MAX_SCHEMA_PROGRAM_BYTES
#: Subschemas applied to the same instance node.
_IN_PLACE = ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas")
#: Subschemas applied to a part of the instance (a property, an item): they consume depth.
_DESCENDING = (
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "items",
    "prefixItems",
    "contains",
    "unevaluatedItems",
)
_MAX_REF_CHAIN = 256


@functools.cache
def _no_retrieval() -> Registry[Any]:
    """The only place references resolve: the schema itself (no retrieve, nothing fetched)."""
    from referencing import Registry

    return Registry()


_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
#: Refused in a tool's parameters: what they cost is counted by no bound here.
_UNCOUNTED = (
    "$anchor",
    "$dynamicAnchor",
    "$dynamicRef",
    "$recursiveAnchor",
    "$recursiveRef",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_DRAFT = "https://json-schema.org/draft/2020-12/schema"


class SchemaRefused(ValueError):
    """A tool schema refused by ``check_tool_schema``; ``reason`` is a stable code."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


class _Compiled:
    """Untrusted patterns compiled once (``compile_untrusted``), the least recently used
    dropped past ``_COMPILED_MAX_BYTES`` of program: a tool's validation compiles nothing
    its registration did not (RE2's own cache holds 128 patterns, any size)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self._bytes = 0

    def __call__(self, pattern: Any) -> Any:
        if not isinstance(pattern, str):
            return compile_untrusted(pattern)  # refused, with its reason
        with self._lock:
            held = self._held.get(pattern)
            if held is not None:
                self._held.move_to_end(pattern)
                return held[0]
        compiled = compile_untrusted(pattern)
        size = program_bytes(compiled)
        with self._lock:
            if pattern not in self._held:
                self._held[pattern] = (compiled, size)
                self._bytes += size
                while self._bytes > _COMPILED_MAX_BYTES and len(self._held) > 1:
                    self._bytes -= self._held.popitem(last=False)[1][1]
        return compiled


_compiled = _Compiled()


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and _compiled(pattern).search(instance) is None:
        from jsonschema import ValidationError

        yield ValidationError(f"the value does not match {str(pattern)[:100]!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = _compiled(pattern)
        for key, value in instance.items():
            if compiled.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _extras(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = [_compiled(p) for p in schema.get("patternProperties", {})]
    return [
        key
        for key in instance
        if key not in properties and not any(p.search(key) is not None for p in patterns)
    ]


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = _extras(instance, schema)
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        from jsonschema import ValidationError

        yield ValidationError(f"{len(extras)} additional properties are not allowed")


class _Budget:
    """Keyword evaluations left in the current ``argument_errors`` call."""

    def __init__(self) -> None:
        self.left: ContextVar[list[int] | None] = ContextVar("schema_budget", default=None)


class EvaluationBudgetExceeded(Exception):
    """Validation of one set of arguments ran over ``MAX_EVALUATIONS``."""


_BUDGET = _Budget()


def _counted(keyword: Callable[..., Any], word: str = "") -> Callable[..., Any]:
    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        left = _BUDGET.left.get()
        if left is not None:
            left[0] -= _work(word, value, instance)
            if left[0] < 0:
                raise EvaluationBudgetExceeded
        return keyword(validator, value, instance, schema)

    return run


def _work(word: str, value: Any, instance: Any) -> int:
    """What one evaluation of keyword ``word`` costs, in comparisons: 1, but for ``enum``
    (the instance compared with each element, and the elements written in its message),
    ``const``, ``required`` and ``dependentRequired`` (one error per name missing) and
    ``uniqueItems`` (the items compared with each other), whose one evaluation is not
    bounded by a constant (issue 30, round 32, finding 1: 4,096 evaluations of an enum of
    15,000 elements took a minute of the host's CPU for the arguments ``{}``)."""
    if word == "enum" and isinstance(value, (list, tuple)):
        return 1 + len(value)
    if word in ("const", "required") and isinstance(value, (list, tuple, Mapping)):
        return 1 + len(value)  # a required name missing is one error each
    if word == "dependentRequired" and isinstance(value, Mapping):
        return 1 + sum(len(v) for v in value.values() if isinstance(v, (list, tuple)))
    if word == "uniqueItems" and value is True and isinstance(instance, list):
        return 1 + len(instance) * len(instance)
    # Applicators: one subschema applied per member (an ``allOf`` of 7,200 empty schemas
    # is 7,200 descents whose own keywords charge nothing), per item or per property.
    if word in ("allOf", "anyOf", "oneOf", "prefixItems", "dependentSchemas", "properties"):
        return 1 + (len(value) if isinstance(value, (list, tuple, Mapping)) else 0)
    if word in ("items", "contains", "additionalProperties", "propertyNames"):
        return 1 + (len(instance) if isinstance(instance, (list, Mapping)) else 0)
    if word == "patternProperties" and isinstance(value, Mapping):
        return 1 + len(value) * (1 + (len(instance) if isinstance(instance, Mapping) else 0))
    return 1


@functools.cache
def _argument_validator() -> Any:
    """Draft 2020-12 with the pattern keywords on RE2, every keyword counted against a budget
    (``ArgumentValidator``; built once, on first use)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    keywords: dict[str, Callable[..., Any]] = {
        **Draft202012Validator.VALIDATORS,
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    }
    return extend(  # type: ignore[no-untyped-call]
        Draft202012Validator,
        validators={word: _counted(keyword, word) for word, keyword in keywords.items()},
    )


def __getattr__(name: str) -> Any:
    # ``ArgumentValidator``, built on first use (see the imports above).
    if name == "ArgumentValidator":
        return _argument_validator()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _walk(node: Any, depth: int = 0) -> Iterator[Mapping[str, Any]]:
    """Every mapping in the schema (conservatively: a ``const`` or ``enum`` value that
    looks like a schema is checked too)."""
    if depth > 64:
        raise SchemaRefused("schema_invalid", "the schema is nested more than 64 levels deep")
    if isinstance(node, Mapping):
        yield node
        for value in node.values():
            yield from _walk(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, depth + 1)


_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAPS = ("properties", "patternProperties", "dependentSchemas")


def _applied(node: Mapping[str, Any], words: tuple[str, ...]) -> Iterator[Any]:
    for word in words:
        value = node.get(word)
        if value is None:
            continue
        if word in _LISTS and isinstance(value, list):
            yield from value
        elif word in _MAPS and isinstance(value, Mapping):
            yield from value.values()
        else:
            yield value


def schema_cost(schema: Mapping[str, Any]) -> int:
    """The worst-case number of subschema evaluations one instance node costs under
    ``schema``: 1 per schema plus the cost of every subschema it applies (in place or to a
    part of the instance, where a recursive reference counts once per level), following
    local references, memoised.  Raises ``SchemaRefused("schema_too_costly")`` for a
    reference cycle that does not descend into the instance (it would never end)."""
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    resolver = _no_retrieval().resolver_with_root(DRAFT202012.create_resource(dict(schema)))

    def in_place(node: Any) -> list[Any]:
        if not isinstance(node, Mapping):
            return []
        found = list(_applied(node, _IN_PLACE))
        for ref_key in _REF_KEYS:
            ref = node.get(ref_key)
            if isinstance(ref, str):
                try:
                    found.append(resolver.lookup(ref).contents)
                except Unresolvable as exc:
                    raise SchemaRefused(
                        "schema_ref", f"{ref_key} {ref[:100]!r} does not resolve"
                    ) from exc
        return found

    def descending(node: Any) -> list[Any]:
        return list(_applied(node, _DESCENDING)) if isinstance(node, Mapping) else []

    # 1. No cycle of in-place steps (iterative: a long chain must not exhaust the stack).
    state: dict[int, int] = {}  # 1: on the path, 2: done
    pending = [schema]
    while pending:
        start = pending.pop()
        if state.get(id(start)) == 2:
            continue
        state[id(start)] = 1
        stack: list[tuple[Any, Iterator[Any]]] = [(start, iter(in_place(start)))]
        while stack:
            node, children = stack[-1]
            child = next(children, _END)
            if child is _END:
                state[id(node)] = 2
                stack.pop()
                pending.extend(descending(node))
                continue
            mark = state.get(id(child))
            if mark == 1:
                raise SchemaRefused(
                    "schema_too_costly",
                    "a $ref cycle applies a schema to the same value it came from",
                )
            if mark is None:
                state[id(child)] = 1
                stack.append((child, iter(in_place(child))))
    # 2. The cost, memoised; a schema already on the path (a recursion that descends, by
    # step 1) costs 1 here: it is paid again at the next level of the instance.
    memo: dict[int, int] = {}
    on_path: set[int] = set()

    def cost(node: Any) -> int:
        key = id(node)
        if key in memo:
            return memo[key]
        if key in on_path or len(on_path) > _MAX_REF_CHAIN:
            return 1 if key in on_path else MAX_SCHEMA_COST + 1
        on_path.add(key)
        total = 1 + _values_work(node)
        for sub in in_place(node) + descending(node):
            total += cost(sub)
            if total > MAX_SCHEMA_COST:
                break
        on_path.discard(key)
        memo[key] = total
        return total

    return cost(schema)


_END = object()


def _values_work(node: Any) -> int:
    """What the ``enum``, ``const``, ``required`` and ``dependentRequired`` of ``node``
    cost one instance node, counted with its subschemas (``schema_cost``): every value of
    them, at any depth, may be compared with the instance or be one error (a fan-out of
    references to a long enum or a long ``required`` costs its length each time: issue
    30, round 32, finding 1)."""
    if not isinstance(node, Mapping):
        return 0
    found = []
    if isinstance(node.get("enum"), (list, tuple)):
        found.extend(node["enum"])
    if "const" in node:
        found.append(node["const"])
    # A name missing from the instance is one error each (an ``anyOf`` keeps them all).
    if isinstance(node.get("required"), (list, tuple)):
        found.extend(node["required"])
    if isinstance(node.get("dependentRequired"), Mapping):
        found.extend(node["dependentRequired"].values())
    total = 0
    while found and total <= MAX_SCHEMA_COST:
        value = found.pop()
        total += 1
        if isinstance(value, Mapping):
            found.extend(value.values())
        elif isinstance(value, (list, tuple)):
            found.extend(value)
    return total


#: Verdicts of :func:`check_tool_schema` by the schema's canonical JSON (a pure function of
#: it): a registry load checks every tool's schema again, and the meta-schema check costs
#: about 40 ms a schema.  Bounded; the oldest verdict goes first.
_VERDICTS: OrderedDict[str, tuple[str, str] | int] = OrderedDict()
_VERDICTS_MAX = 512
_VERDICTS_LOCK = threading.Lock()


def check_tool_schema(schema: object) -> int:
    """Refuse a ``parameters`` schema that could fetch, hang or is not valid; see above.
    Returns the program its patterns compile to together (``program_bytes``: what a caller
    checking several schemas sums, ``plugins.manifest``).  The verdict of a schema seen
    before (the same canonical JSON) is given again."""
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        key = None  # not plain JSON: checked every time (and refused below, or not)
    if key is not None:
        with _VERDICTS_LOCK:
            if key in _VERDICTS:
                _VERDICTS.move_to_end(key)
                verdict = _VERDICTS[key]
                if isinstance(verdict, int):
                    return verdict
                raise SchemaRefused(*verdict)
    try:
        verdict = _check_tool_schema(schema)
    except SchemaRefused as exc:
        verdict = (exc.reason, str(exc))
    if key is not None:
        with _VERDICTS_LOCK:
            _VERDICTS[key] = verdict
            while len(_VERDICTS) > _VERDICTS_MAX:
                _VERDICTS.popitem(last=False)
    if isinstance(verdict, int):
        return verdict
    raise SchemaRefused(*verdict)


def _check_tool_schema(schema: object) -> int:
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise SchemaRefused("schema_invalid", "parameters must be a JSON Schema of type object")
    has_pattern_properties = False
    program = 0
    for node in _walk(schema):
        for key in _REF_KEYS:
            ref = node.get(key)
            if isinstance(ref, str) and not ref.startswith("#"):
                raise SchemaRefused(
                    "schema_ref",
                    f"{key} {ref[:100]!r} is not local: only '#/...' references are resolved",
                )
        for key in _REF_KEYS:
            ref = node.get(key)
            if isinstance(ref, str) and ref.startswith("#") and ref != "#" and ref[1] != "/":
                raise SchemaRefused(
                    "schema_ref",
                    f"{key} {ref[:100]!r} is not a JSON pointer: only '#' and '#/...' "
                    "references are resolved",
                )
        # Keywords whose work no bound here counts (issue 30, round 33): an anchor is
        # found by crawling the whole schema at each reference, and ``unevaluated*``
        # walk their neighbours' subschemas again at each evaluation.
        refused = sorted(word for word in _UNCOUNTED if word in node)
        if refused:
            raise SchemaRefused(
                "schema_keyword", f"{refused[0]} is not accepted in a tool's parameters"
            )
        if isinstance(node.get("$id"), str):
            raise SchemaRefused("schema_ref", "$id is not allowed (it re-bases references)")
        if isinstance(node.get("$schema"), str) and node["$schema"] != _DRAFT:
            raise SchemaRefused("schema_ref", f"$schema must be {_DRAFT!r} or absent")
        patterns: list[Any] = []
        if isinstance(node.get("pattern"), str):
            patterns.append(node["pattern"])
        if isinstance(node.get("patternProperties"), Mapping):
            has_pattern_properties = True
            patterns.extend(node["patternProperties"])
        for pattern in patterns:
            try:
                program += program_bytes(_compiled(pattern))
            except PatternError as exc:
                raise SchemaRefused(exc.reason, f"pattern {str(pattern)[:100]!r}: {exc}") from exc
            if program > MAX_SCHEMA_PROGRAM_BYTES:
                # Refused as soon as the sum is past it: checking costs no more than it.
                raise SchemaRefused(
                    "schema_too_costly",
                    f"its patterns compile to over {MAX_SCHEMA_PROGRAM_BYTES // 1024} KiB "
                    "of program together",
                )
    if has_pattern_properties and any("unevaluatedProperties" in n for n in _walk(schema)):
        raise SchemaRefused(
            "schema_keyword", "unevaluatedProperties cannot be combined with patternProperties"
        )
    from jsonschema.exceptions import SchemaError
    from referencing.exceptions import Unresolvable
    from referencing.jsonschema import DRAFT202012

    try:
        _argument_validator().check_schema(schema)
    except SchemaError as exc:
        raise SchemaRefused("schema_invalid", "parameters are not a valid JSON Schema") from exc
    resolver = _no_retrieval().resolver_with_root(DRAFT202012.create_resource(dict(schema)))
    for node in _walk(schema):
        for key in _REF_KEYS:
            ref = node.get(key)
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except Unresolvable as exc:
                    raise SchemaRefused(
                        "schema_ref", f"{key} {ref[:100]!r} does not resolve in this schema"
                    ) from exc
    total = schema_cost(schema)
    if total > MAX_SCHEMA_COST:
        raise SchemaRefused(
            "schema_too_costly",
            f"one value could cost over {MAX_SCHEMA_COST} subschema evaluations",
        )
    return program


def argument_errors(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[Any]:
    """The validation errors of ``arguments`` (never fetches; patterns on RE2).

    A schema that slipped past ``check_tool_schema`` (a tool never registered) gives one
    error naming the keyword (``$ref`` or ``pattern``) instead of a fetch or a crash.
    """
    from jsonschema import ValidationError
    from referencing.exceptions import Unresolvable

    # Only a schema the check accepts is run (its verdict is remembered): one that never
    # went through it would run keywords no bound counts (issue 30, round 33).
    try:
        check_tool_schema(schema)
    except SchemaRefused as exc:
        return [ValidationError(f"the schema is refused: {exc}", validator=exc.reason)]
    validator = _argument_validator()(dict(schema), registry=_no_retrieval())
    token = _BUDGET.left.set([MAX_EVALUATIONS])
    try:
        return list(validator.iter_errors(dict(arguments)))
    except EvaluationBudgetExceeded:
        return [
            ValidationError(
                f"validating these arguments takes over {MAX_EVALUATIONS} evaluations",
                validator="schema_too_costly",
            )
        ]
    except Unresolvable:
        return [ValidationError("a reference does not resolve locally", validator="$ref")]
    except PatternError:
        return [ValidationError("a pattern is not accepted", validator="pattern")]
    finally:
        _BUDGET.left.reset(token)
