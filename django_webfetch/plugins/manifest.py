"""Plugin manifests: untrusted input, parsed strictly and under bounds (DESIGN.md §8).

A plugin package exposes an entry point in the group ``django_webfetch.plugins``; loading it
gives a manifest (a mapping, or a callable returning one)::

    {
        "name": "acme-crm",                       # [a-z0-9][a-z0-9_-]{0,39}
        "version": "1.2.0",
        "egress": ["api.acme.example", "*.tenants.acme.example"],
        "config": {                               # a typed schema, not free JSON Schema
            "base_url": {"type": "string", "pattern": "^https://", "maxLength": 200},
            "token": {"type": "string", "secret": True},
            "page_size": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20},
        },
        "tools": [
            {
                "name": "crm_lookup",
                "description": "Look a customer up in the CRM.",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
                "handler": lookup,                # callable(plugin, arguments) -> str | dict
                "effect": "read",                 # or "write" (always needs approval)
            },
        ],
    }

Everything in it is a request, never a grant.  One bad field or one bound exceeded refuses
the whole plugin with ``ManifestError`` (a clear message and a stable ``reason``); nothing of
a refused plugin is registered.

The ``egress`` declaration uses the host-list grammar of ``net.hosts`` with three more
restrictions: no ``:port`` (plugins speak to the default ports), no bare ``*`` (already
refused by the grammar) and no ``*.suffix`` where ``suffix`` is a public suffix
(``*.com``, ``*.co.uk``, ``*.github.io``, or an unknown TLD such as ``*.internal``) *or has
a public suffix below it* (``*.amazonaws.com`` holds ``s3.amazonaws.com``, every S3 bucket;
``*.windows.net``): the Public Suffix List shipped by the ``publicsuffixlist`` package
decides, ICANN and private sections both, with its default rule that every unlisted TLD is
a public suffix.  Wildcard-DNS services that map any name to any address (``nip.io``,
``sslip.io``...: ``10.0.0.1.nip.io``) are refused the same way (``egress_wildcard_dns``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django_webfetch.net.errors import PolicyError
from django_webfetch.net.hosts import EntryKind, ListEntry, parse_list_entry
from django_webfetch.schemas import MAX_SCHEMA_PROGRAM_BYTES, SchemaRefused, check_tool_schema
from django_webfetch.text.patterns import PatternError, compile_untrusted

__all__ = [
    "MAX_CONFIG_FIELDS",
    "MAX_EGRESS_ENTRIES",
    "MAX_MANIFEST_BYTES",
    "MAX_PATTERN_LENGTH",
    "MAX_MANIFEST_PROGRAM_BYTES",
    "MAX_TOOLS",
    "REASONS",
    "ConfigField",
    "Manifest",
    "ManifestError",
    "ToolSpec",
    "WILDCARD_DNS_DOMAINS",
    "is_plugin_name",
    "is_public_suffix",
    "is_wildcard_dns",
    "owns_group",
    "parse_egress_entry",
    "parse_manifest",
    "tool_group",
    "validate_config",
]

#: Bounds on what a manifest may contain.  Over any one of them the plugin is refused.
MAX_MANIFEST_BYTES = 64 * 1024  # the manifest's data serialised as JSON
MAX_EGRESS_ENTRIES = 32
MAX_TOOLS = 32
#: The most program the patterns of all of a manifest's tools compile to together (each
#: schema's is bounded alone, ``schemas.MAX_SCHEMA_PROGRAM_BYTES``): the host's CPU to
#: accept a manifest stays under ~0.1 s whatever its tools (issue 30, round 30, finding 2).
MAX_MANIFEST_PROGRAM_BYTES = 2 * MAX_SCHEMA_PROGRAM_BYTES
MAX_CONFIG_FIELDS = 32
MAX_PATTERN_LENGTH = 200
MAX_STRING_LENGTH = 4096  # ceiling of a config string's maxLength
MAX_DESCRIPTION = 1024

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}\Z")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,39}\Z")
_FIELD_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}\Z")
_TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")
_TYPES = frozenset({"string", "integer", "number", "boolean"})
_FIELD_KEYS = frozenset(
    {
        "type",
        "description",
        "default",
        "secret",
        "required",
        "pattern",
        "maxLength",
        "minLength",
        "minimum",
        "maximum",
        "enum",
    }
)
_TOOL_KEYS = frozenset({"name", "description", "parameters", "handler", "effect", "group"})
#: Groups a plugin may never join even when the app that adds them is not installed (the
#: registry in ``models.builtin`` holds the installed set).
_RESERVED_GROUPS = frozenset({"web", "system", "code", "rag", "assistant", "content"})
_MANIFEST_KEYS = frozenset({"name", "version", "egress", "config", "tools", "description"})


#: Every ``ManifestError.reason`` this module raises (the registry's refusals add their own:
#: ``registry.REFUSAL_REASONS``; tests/plugins/test_protocol_states_and_problem_reasons.py
#: finds each reason raised here in this set).
REASONS = frozenset(
    {
        "config_pattern",
        "config_schema",
        "egress_entry",
        "egress_port",
        "egress_public_suffix",
        "egress_shape",
        "egress_too_many",
        "egress_wildcard_dns",
        "manifest_load",
        "manifest_name",
        "manifest_shape",
        "manifest_too_large",
        "manifest_version",
        "schema_too_costly",
        "tool",
        "tool_group",
        "tool_group_not_owned",
    }
)


def is_plugin_name(name: object) -> bool:
    """``name`` is a plugin's name as a manifest must give it (``[a-z0-9][a-z0-9_-]{0,39}``):
    what an entry point's name must be before anything quotes it."""
    return isinstance(name, str) and _NAME_RE.match(name) is not None


class ManifestError(PolicyError):
    """A manifest that cannot be accepted.  ``reason`` is a stable code."""

    code = "invalid_manifest"

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        super().__init__(message)


@functools.lru_cache(maxsize=1)
def _psl() -> Any:
    from publicsuffixlist import PublicSuffixList

    # Both sections: a private-section suffix (github.io, herokuapp.com) is shared by
    # unrelated owners just like a TLD.  The default rule makes every unlisted TLD public.
    return PublicSuffixList(only_icann=False)


@functools.lru_cache(maxsize=1)
def _psl_covered() -> frozenset[str]:
    """Every public suffix of the list and every name above one (``amazonaws.com`` for
    ``s3.amazonaws.com``), ASCII (IDN rules in their ``xn--`` form)."""
    covered: set[str] = set()
    for rule in _psl()._publicsuffix:
        name = str(rule).lstrip("!").removeprefix("*.").strip(".").lower()
        if not name.isascii():
            try:
                name = name.encode("idna").decode("ascii")
            except UnicodeError:
                continue
        labels = name.split(".")
        for start in range(len(labels)):
            covered.add(".".join(labels[start:]))
    return frozenset(covered)


#: Services whose DNS answers any name with the address written in it (any public or
#: private address by name), or with loopback: a ``*.`` grant under one is a grant of
#: every address.
WILDCARD_DNS_DOMAINS = frozenset(
    {
        "nip.io",
        "sslip.io",
        "xip.io",
        "traefik.me",
        "localtest.me",
        "lvh.me",
        "vcap.me",
        "localhost.direct",
        # review19 finding 5: the same service by other names (the guard also refuses, by
        # structure, any host under a ``*.`` grant whose labels spell its address).
        "1u.ms",
        "rbndr.us",
        "nip.direct",
        "xip.name",
        "lcl.host",
        "localho.st",
        "fuf.me",
    }
)


def is_public_suffix(name: str) -> bool:
    """Is ``name`` (lower-case, no trailing dot) a public suffix, or above one?"""
    return bool(_psl().is_public(name)) or name in _psl_covered()


def is_wildcard_dns(name: str) -> bool:
    """Is ``name`` a wildcard-DNS service or a name under one?"""
    return any(name == d or name.endswith("." + d) for d in WILDCARD_DNS_DOMAINS)


def parse_egress_entry(raw: object) -> ListEntry:
    """One ``egress`` entry (also used for operator grants).  Raises ``ManifestError``."""
    if not isinstance(raw, str):
        raise ManifestError("egress_entry", "an egress entry must be a string")
    shown = raw[:100]
    try:
        entry = parse_list_entry(raw)
    except PolicyError as exc:
        raise ManifestError("egress_entry", f"egress entry {shown!r}: {exc}") from exc
    if entry.port is not None:
        raise ManifestError(
            "egress_port", f"egress entry {shown!r}: ports are not allowed, only the default"
        )
    if entry.kind is EntryKind.SUFFIX and is_public_suffix(entry.value):
        raise ManifestError(
            "egress_public_suffix",
            f"egress entry {shown!r}: {entry.value!r} is a public suffix or holds one; name "
            "a domain you control (*.tenants.example.org), never a TLD-like suffix",
        )
    if entry.kind is EntryKind.SUFFIX and is_wildcard_dns(entry.value):
        raise ManifestError(
            "egress_wildcard_dns",
            f"egress entry {shown!r}: {entry.value!r} is a wildcard-DNS service (any name "
            "resolves to the address written in it)",
        )
    return entry


# -- the typed config schema -------------------------------------------------------------------


def _check_pattern(pattern: object, where: str) -> Any:
    """A config field's pattern, compiled on RE2 (linear time, explicit limits)."""
    if not isinstance(pattern, str):
        raise ManifestError("config_pattern", f"{where}: pattern must be a string")
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ManifestError(
            "config_pattern",
            f"{where}: pattern is longer than {MAX_PATTERN_LENGTH} characters",
        )
    if not pattern.isascii() or not pattern.isprintable():
        raise ManifestError("config_pattern", f"{where}: pattern must be printable ASCII")
    try:
        return compile_untrusted(pattern)
    except PatternError as exc:
        raise ManifestError("config_pattern", f"{where}: {exc} ({exc.reason})") from exc


@dataclass(frozen=True)
class ConfigField:
    name: str
    type: str
    secret: bool = False
    required: bool = False
    default: Any = None
    description: str = ""
    #: An RE2 pattern (``text.patterns.compile_untrusted``).
    pattern: Any = None
    min_length: int | None = None
    max_length: int = MAX_STRING_LENGTH
    minimum: float | None = None
    maximum: float | None = None
    enum: tuple[Any, ...] | None = None

    def check(self, value: Any) -> str | None:
        """``None`` when ``value`` fits, else a short problem (never the value)."""
        kind = self.type
        if kind == "boolean":
            return None if isinstance(value, bool) else "must be true or false"
        if kind == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                return "must be an integer"
        elif kind == "number":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return "must be a number"
        elif kind == "string":
            if not isinstance(value, str):
                return "must be a string"
            if len(value) > self.max_length:
                return f"is longer than {self.max_length} characters"
            if self.min_length is not None and len(value) < self.min_length:
                return f"is shorter than {self.min_length} characters"
            # RE2: linear in the value, which is bounded by max_length.
            if self.pattern is not None and self.pattern.search(value) is None:
                return "does not match the pattern"
        if kind in ("integer", "number"):
            if self.minimum is not None and value < self.minimum:
                return f"is below {self.minimum}"
            if self.maximum is not None and value > self.maximum:
                return f"is above {self.maximum}"
        if self.enum is not None and value not in self.enum:
            return "is not one of the allowed values"
        return None


def _number(value: object, where: str, *, allow_none: bool = True) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ManifestError("config_schema", f"{where} must be a number")
    if value != value or value in (float("inf"), float("-inf")):
        raise ManifestError("config_schema", f"{where} must be finite")
    return value


def _parse_field(name: object, spec: object) -> ConfigField:
    if not isinstance(name, str) or not _FIELD_RE.match(name):
        raise ManifestError("config_schema", f"config field name {str(name)[:50]!r} is invalid")
    where = f"config field {name!r}"
    if not isinstance(spec, Mapping):
        raise ManifestError("config_schema", f"{where} must be a mapping")
    unknown = set(spec) - _FIELD_KEYS
    if unknown:
        raise ManifestError(
            "config_schema", f"{where} has unknown keys {sorted(map(str, unknown))[:5]}"
        )
    kind = spec.get("type")
    if kind not in _TYPES:
        raise ManifestError("config_schema", f"{where}: type must be one of {sorted(_TYPES)}")
    for flag in ("secret", "required"):
        if not isinstance(spec.get(flag, False), bool):
            raise ManifestError("config_schema", f"{where}: {flag} must be true or false")
    description = spec.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise ManifestError("config_schema", f"{where}: description must be a short string")
    pattern = None
    min_length = None
    max_length = MAX_STRING_LENGTH
    if kind == "string":
        if "pattern" in spec:
            pattern = _check_pattern(spec["pattern"], where)
        if "maxLength" in spec:
            value = spec["maxLength"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ManifestError("config_schema", f"{where}: maxLength must be an integer")
            max_length = min(value, MAX_STRING_LENGTH)
        if "minLength" in spec:
            value = spec["minLength"]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ManifestError("config_schema", f"{where}: minLength must be an integer")
            min_length = value
    elif any(k in spec for k in ("pattern", "maxLength", "minLength")):
        raise ManifestError("config_schema", f"{where}: string keywords on a {kind} field")
    if kind not in ("integer", "number") and any(k in spec for k in ("minimum", "maximum")):
        raise ManifestError("config_schema", f"{where}: minimum/maximum on a {kind} field")
    enum = spec.get("enum")
    if enum is not None:
        if not isinstance(enum, (list, tuple)) or not 0 < len(enum) <= 64:
            raise ManifestError("config_schema", f"{where}: enum must be a list of 1..64 values")
        enum = tuple(enum)
    field_ = ConfigField(
        name=name,
        type=kind,
        secret=bool(spec.get("secret", False)),
        required=bool(spec.get("required", False)),
        description=description,
        pattern=pattern,
        min_length=min_length,
        max_length=max_length,
        minimum=_number(spec.get("minimum"), f"{where}: minimum"),
        maximum=_number(spec.get("maximum"), f"{where}: maximum"),
        enum=enum,
    )
    if enum is not None:
        for item in enum:
            problem = field_.check(item)
            if problem is not None:
                raise ManifestError("config_schema", f"{where}: an enum value {problem}")
    if "default" in spec:
        if field_.secret:
            raise ManifestError("config_schema", f"{where}: a secret cannot have a default")
        problem = field_.check(spec["default"])
        if problem is not None:
            raise ManifestError("config_schema", f"{where}: the default {problem}")
        field_ = ConfigField(**{**field_.__dict__, "default": spec["default"]})
    return field_


def validate_config(
    fields: Mapping[str, ConfigField], values: Mapping[str, Any], *, partial: bool = False
) -> dict[str, str]:
    """Problems of ``values`` against the schema, by field name (empty: valid).

    Messages never quote a value (a secret must not end up in an error message).
    """
    problems: dict[str, str] = {}
    for name in values:
        if name not in fields:
            problems[str(name)[:50]] = "is not a config field of this plugin"
    for name, spec in fields.items():
        if name not in values:
            if spec.required and spec.default is None and not partial:
                problems[name] = "is required"
            continue
        problem = spec.check(values[name])
        if problem is not None:
            problems[name] = problem
    return problems


# -- tools and the manifest --------------------------------------------------------------------


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    effect: str = "read"
    group: str = ""


@dataclass(frozen=True)
class Manifest:
    """A parsed, bounded manifest.  ``egress`` holds the declaration's raw entries."""

    name: str
    version: str
    egress: tuple[str, ...] = ()
    config: Mapping[str, ConfigField] = field(default_factory=dict)
    tools: tuple[ToolSpec, ...] = ()
    description: str = ""

    @property
    def egress_entries(self) -> tuple[ListEntry, ...]:
        return tuple(parse_egress_entry(e) for e in self.egress)

    @property
    def secret_fields(self) -> frozenset[str]:
        return frozenset(n for n, f in self.config.items() if f.secret)


def _size(data: object) -> int:
    def default(obj: object) -> str:
        # Handlers and other objects count as a short placeholder.
        return "<object>"

    try:
        text = json.dumps(data, default=default, allow_nan=False)
    except (ValueError, TypeError, RecursionError) as exc:
        raise ManifestError("manifest_shape", "the manifest is not plain data") from exc
    return len(text.encode("utf-8"))


def _parse_tool(raw: object, index: int, spent: list[int] | None = None) -> ToolSpec:
    """One tool of a manifest; ``spent``: the program the manifest's schemas compiled to so
    far (``MAX_MANIFEST_PROGRAM_BYTES``), this tool's added."""
    if not isinstance(raw, Mapping):
        raise ManifestError("tool", f"tool #{index} must be a mapping")
    unknown = set(raw) - _TOOL_KEYS
    if unknown:
        raise ManifestError("tool", f"tool #{index} has unknown keys {sorted(map(str, unknown))}")
    name = raw.get("name")
    if not isinstance(name, str) or not _TOOL_NAME_RE.match(name):
        raise ManifestError("tool", f"tool #{index}: the name must match [a-zA-Z0-9_-]{{1,64}}")
    description = raw.get("description")
    if not isinstance(description, str) or not 0 < len(description) <= MAX_DESCRIPTION:
        raise ManifestError("tool", f"tool {name!r}: a description of 1..1024 characters")
    parameters = raw.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        raise ManifestError("tool", f"tool {name!r}: parameters must be a JSON Schema object")
    try:
        # Local references only, nothing fetched; every pattern on RE2 under limits.
        program = check_tool_schema(parameters)
    except SchemaRefused as exc:
        raise ManifestError(exc.reason, f"tool {name!r}: {exc}") from exc
    if spent is not None:
        spent[0] += program
        if spent[0] > MAX_MANIFEST_PROGRAM_BYTES:
            raise ManifestError(
                "schema_too_costly",
                f"tool {name!r}: the patterns of the plugin's tools compile to over "
                f"{MAX_MANIFEST_PROGRAM_BYTES // 1024} KiB of program together",
            )
    handler = raw.get("handler")
    if not callable(handler):
        raise ManifestError("tool", f"tool {name!r}: handler must be callable")
    effect = raw.get("effect", "read")
    if effect not in ("read", "write"):
        raise ManifestError("tool", f"tool {name!r}: effect must be 'read' or 'write'")
    group = raw.get("group", "")
    if not isinstance(group, str) or (group and not re.match(r"^[-a-zA-Z0-9_]{1,64}\Z", group)):
        raise ManifestError("tool", f"tool {name!r}: group must be a slug")
    if group in _builtin_groups():
        # A plugin's tools never join a built-in group (and its operator settings).
        raise ManifestError("tool_group", f"tool {name!r}: {group!r} is a built-in group")
    return ToolSpec(name, description, dict(parameters), handler, effect, group)


def _builtin_groups() -> frozenset[str]:
    from django_webfetch.models.builtin import builtin_group_slugs

    return _RESERVED_GROUPS | builtin_group_slugs()


def parse_manifest(raw: object) -> Manifest:
    """Validate a manifest (a mapping, or a callable returning one).  ``ManifestError``."""
    if callable(raw) and not isinstance(raw, Mapping):
        try:
            raw = raw()
        except Exception as exc:
            raise ManifestError(
                "manifest_load", f"the manifest callable raised {type(exc).__name__}"
            ) from exc
    if not isinstance(raw, Mapping):
        raise ManifestError("manifest_shape", "a manifest must be a mapping")
    size = _size(raw)
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(
            "manifest_too_large",
            f"the manifest is {size} bytes; at most {MAX_MANIFEST_BYTES} are accepted",
        )
    unknown = set(raw) - _MANIFEST_KEYS
    if unknown:
        raise ManifestError(
            "manifest_shape", f"unknown manifest keys {sorted(map(str, unknown))[:5]}"
        )
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ManifestError("manifest_name", "the name must match [a-z0-9][a-z0-9_-]{0,39}")
    version = raw.get("version")
    if not isinstance(version, str) or not _VERSION_RE.match(version):
        raise ManifestError("manifest_version", f"plugin {name!r}: invalid version")
    description = raw.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise ManifestError("manifest_shape", f"plugin {name!r}: description too long")

    egress_raw = raw.get("egress", ())
    if isinstance(egress_raw, (str, bytes)) or not isinstance(egress_raw, (list, tuple)):
        raise ManifestError("egress_shape", f"plugin {name!r}: egress must be a list of hosts")
    if len(egress_raw) > MAX_EGRESS_ENTRIES:
        raise ManifestError(
            "egress_too_many",
            f"plugin {name!r} declares {len(egress_raw)} destinations; at most "
            f"{MAX_EGRESS_ENTRIES} are accepted",
        )
    egress: list[str] = []
    for entry in egress_raw:
        parsed = parse_egress_entry(entry)
        canonical = _canonical(parsed)
        if canonical not in egress:
            egress.append(canonical)

    config_raw = raw.get("config", {})
    if not isinstance(config_raw, Mapping):
        raise ManifestError("config_schema", f"plugin {name!r}: config must be a mapping")
    if len(config_raw) > MAX_CONFIG_FIELDS:
        raise ManifestError(
            "config_schema", f"plugin {name!r}: more than {MAX_CONFIG_FIELDS} config fields"
        )
    config = {str(k): _parse_field(k, v) for k, v in config_raw.items()}

    tools_raw = raw.get("tools", ())
    if isinstance(tools_raw, (str, bytes, Mapping)) or not isinstance(tools_raw, (list, tuple)):
        raise ManifestError("tool", f"plugin {name!r}: tools must be a list")
    if len(tools_raw) > MAX_TOOLS:
        raise ManifestError("tool", f"plugin {name!r}: more than {MAX_TOOLS} tools")
    spent = [0]
    tools = tuple(_parse_tool(t, i, spent) for i, t in enumerate(tools_raw))
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        raise ManifestError("tool", f"plugin {name!r}: two tools share a name")
    if name in _builtin_groups() and any(not t.group for t in tools):
        # A tool without a group joins the group named after its plugin.
        raise ManifestError("tool_group", f"plugin {name!r} is named like a built-in group")
    for tool in tools:
        if tool.group and not owns_group(name, tool.group):
            # Another plugin's group (and its operator settings: enabled, approval) is
            # never joined (tests/plugins/test_owned_tool_names_and_groups.py).
            raise ManifestError(
                "tool_group_not_owned",
                f"plugin {name!r}: tool {tool.name!r} joins group {tool.group!r}; a plugin's "
                f"tools join only its own groups: {name!r} or {name + '-'!r} followed by more",
            )
    return Manifest(
        name=name,
        version=version,
        egress=tuple(egress),
        config=config,
        tools=tools,
        description=description,
    )


def _canonical(entry: ListEntry) -> str:
    """The canonical text of a parsed entry (lower case, no trailing dot, IPv6 bare)."""
    if entry.kind is EntryKind.SUFFIX:
        return f"*.{entry.value}"
    return entry.value


def canonical_entry(raw: object) -> str:
    """Parse and canonicalise one egress entry (manifest or grant)."""
    return _canonical(parse_egress_entry(raw))


def owns_group(plugin: str, group: str) -> bool:
    """Plugin ``plugin`` may put tools in ``group``: its default group (its own name) or a
    group whose slug is its name, a hyphen and more (``acme-admin`` for ``acme``).  A group
    two loaded plugins claim this way (``acme-admin`` of plugin ``acme`` and plugin
    ``acme-admin``) is served by neither (``plugins.tools``)."""
    return group == plugin or (group.startswith(plugin + "-") and len(group) > len(plugin) + 1)


def tool_group(manifest: Manifest, spec: ToolSpec) -> str:
    """The tool group of a plugin tool: its declared group, else the plugin's name."""
    return spec.group or manifest.name
