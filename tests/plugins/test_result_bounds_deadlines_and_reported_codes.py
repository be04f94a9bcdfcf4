"""Issue 30, the sixth outside attack: properties of the fixes of findings 3, 6, 7 and 8
(the attacker's own tests are in ``test_hostile_plugin_at_run_time.py``).

Finding 3: every JSON text the guest sends is read by ``protocol.parse``, bounded as a
message (bytes, depth, values; strict UTF-8 and JSON), whether it is a message or a
``json`` result a message carries.  Searched here with hypothesis: any text as a result
is a value within the bounds or ``plugin_protocol_error`` (never another exception), and,
through the real runtime, a process that sent a bad one is never pooled.

Finding 6: the host-owned client ends a request at the call's deadline.

Finding 8: no code a plugin reports becomes a call's code.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from django_webfetch.plugins.runtime import protocol
from django_webfetch.plugins.runtime.host import CallOutcome, ProtocolViolation, _outcome

pytestmark = pytest.mark.django_db

_CAP = 1 << 18

#: Pieces JSON texts are made of, so that the search reaches valid, nearly valid and
#: pathological texts (deep, wide, unterminated strings, escapes, constants).
_TOKENS = st.sampled_from(
    ["[", "]", "{", "}", ",", ":", '"', "\\", '\\"', "\\\\", "0", "-1.5e300", "1e999",
     "true", "null", "NaN", "Infinity", '"k"', "\\ud800", "\ud800", "é", "\x00", " "]
)  # fmt: skip
_TEXTS = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.lists(_TOKENS, max_size=300).map("".join),
    st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 20000).map(lambda n: "[" + ",".join(["0"] * n) + "]"),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
        max_leaves=30,
    ).map(lambda v: json.dumps(v, ensure_ascii=False)),
)


def _depth_and_values(value: Any, level: int = 0) -> tuple[int, int]:
    """The nesting and the number of values (keys counted) of a parsed JSON value."""
    if isinstance(value, list):
        found = [_depth_and_values(item, level + 1) for item in value]
        return max([level + 1, *(d for d, _ in found)]), 1 + sum(n for _, n in found)
    if isinstance(value, dict):
        found = [_depth_and_values(item, level + 1) for item in value.values()]
        return max([level + 1, *(d for d, _ in found)]), 1 + len(value) + sum(n for _, n in found)
    return level, 1


@hypothesis_settings(max_examples=400, deadline=None)
@given(text=_TEXTS)
@example(text="[" * 65 + "]" * 65)
@example(text="[" + "[]," * 16384 + "[]]")
@example(text='["\\ud800"]')
@example(text="NaN")
def test_any_json_result_text_is_a_bounded_value_or_a_protocol_error(text):
    """Finding 3's property, on the host's reader of a result: a value that round-trips
    and holds at most ``MAX_DEPTH`` levels and ``MAX_VALUES`` values, or
    ``plugin_protocol_error``; nothing else is raised."""
    try:
        outcome = _outcome({"op": "result", "kind": "json", "text": text}, _CAP)
    except ProtocolViolation as exc:
        assert exc.code == "plugin_protocol_error"
        return
    assert isinstance(outcome, CallOutcome)
    depth, values = _depth_and_values(outcome.value)
    assert depth <= protocol.MAX_DEPTH and values <= protocol.MAX_VALUES, (depth, values)
    assert json.loads(json.dumps(outcome.value, allow_nan=False)) == outcome.value


@hypothesis_settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300) | _TEXTS.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_are_a_bounded_value_or_a_protocol_error(body):
    """The one reader itself (messages and results): any bytes."""
    try:
        value = protocol.parse(body)
    except protocol.ProtocolError:
        return
    depth, values = _depth_and_values(value)
    assert depth <= protocol.MAX_DEPTH and values <= protocol.MAX_VALUES


_FORGE = """
import django_webfetch.plugins.runtime.guest as guest
text = {text!r}
guest._serialise = lambda outcome, cap: {{"kind": "json", "text": text}}
result = "forged"
"""


def _sendable(text: str) -> bool:
    """A text the guest's channel can carry (UTF-8: no lone surrogate), not too long."""
    try:
        return len(text.encode("utf-8")) < 60_000
    except UnicodeEncodeError:
        return False


@hypothesis_settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=_TEXTS.filter(_sendable))
@example(text="[" * 65 + "]" * 65)
@example(text='{"a": [1, 2, {"b": null}]}')
def test_through_the_runtime_a_bad_result_ends_its_process(probe, text):
    """Finding 3's property through the real sandbox and pool: the plugin makes its guest
    send ``text`` as its next result; the call returns the value read, from a process the
    pool keeps, or fails ``plugin_protocol_error`` and its process is gone."""
    from types import SimpleNamespace

    from django_webfetch.plugins.isolated import run_isolated
    from django_webfetch.plugins.runtime import host
    from django_webfetch.tools.base import ToolContext

    tool = SimpleNamespace(plugin="codeprobe", group="codeprobe", name="codeprobe_run")
    try:
        first = run_isolated(
            tool, probe.instance, {"code": _FORGE.format(text=text)}, ToolContext()
        )
        assert first == (False, {"result": "forged"}), first
        (worker,) = [w for idle in host._pool._idle.values() for w in idle]
        failed, value = run_isolated(tool, probe.instance, {"code": "result = 1"}, ToolContext())
        pooled = host.idle_processes()
    finally:
        host.shutdown()
    try:
        expected = protocol.parse(text.encode("utf-8", "surrogatepass"), "a json result")
    except protocol.ProtocolError:
        assert failed is True and value.error == "plugin_protocol_error", value
        assert pooled == 0
        assert worker.process.poll() is not None, "the process that broke the protocol runs"
        return
    assert (failed, value) == (False, expected)
    assert pooled == 1


def _plugin(site: Path, body: str) -> Any:
    from django_webfetch.plugins.runtime.host import Origin

    package = site / "webfetch_s6_values"
    package.mkdir(parents=True)
    manifest = (
        "\n\ndef manifest():\n"
        "    return {'name': 's6values', 'version': '1.0', 'description': 'x', 'egress': [],\n"
        "            'tools': [{'name': 'many', 'description': 'x', 'handler': many}]}\n"
    )
    (package / "__init__.py").write_text(textwrap.dedent(body) + manifest)
    os.chmod(site, 0o755)
    return Origin("webfetch_s6_values:manifest", str(site), "webfetch_s6_values")


@pytest.mark.parametrize(
    ("value", "code"),
    [("[0] * 100", None), ("[0] * 20000", "plugin_limit"), ("[[[0]]] * 6000", "plugin_limit")],
)
def test_an_honest_result_past_the_bounds_is_the_tools_limit(tmp_path, value, code):
    """The guest checks the value it sends against the reader's bounds: an honest tool
    whose result is past them gets ``plugin_limit`` (``output values``), never a protocol
    error, and a result within them reaches the host whole."""
    from django_webfetch.plugins.runtime.host import Limits, RuntimeFailure, execute, shutdown

    origin = _plugin(tmp_path / "site", f"def many(plugin, arguments):\n    return {value}\n")
    call = {"tool": "many", "arguments": {}, "config": {}, "plugin": "s6values", "alias": "x",
            "reference": "x"}  # fmt: skip
    limits = Limits(5, 20, 1 << 30, 1 << 18, 5, 1)
    try:
        if code is None:
            outcome = execute(origin, ("s6-values", 1), call, None, limits=limits)
            assert outcome.kind == "json" and outcome.value == [0] * 100
        else:
            with pytest.raises(RuntimeFailure) as failed:
                execute(origin, ("s6-values", 1), call, None, limits=limits)
            assert (failed.value.code, failed.value.detail) == (code, "output values")
    finally:
        shutdown()


# -- finding 6: the client ends a request at the call's deadline --------------------------


def test_a_request_past_its_deadline_is_refused_before_it_is_sent(probe, lab_settings):
    from django_webfetch.models import EgressEvent
    from django_webfetch.net.errors import FetchTimeout
    from django_webfetch.plugins.client import PluginHttp

    http = PluginHttp(probe.instance.pk, group="codeprobe", tool="codeprobe_run")
    with pytest.raises(FetchTimeout):
        http.get("http://granted.lab.example/plain", deadline=time.monotonic() - 0.01)
    assert lab_settings.requests == []
    # A refused call is recorded.
    assert [e.decision for e in EgressEvent.objects.all()] == ["failed"]


def test_a_slow_response_is_read_until_the_deadline_only(probe, lab_settings, settings):
    """A one-byte-per-second body with a 20 s ``timeout`` and a deadline 1 s away: the
    request ends at the deadline (counted in the bytes the server sent)."""
    from django_webfetch.net.errors import FetchTimeout
    from django_webfetch.plugins.client import PluginHttp

    settings.WEBFETCH_TIMEOUT = 20
    http = PluginHttp(probe.instance.pk, group="codeprobe", tool="codeprobe_run")
    with pytest.raises(FetchTimeout):
        http.get("http://granted.lab.example/slow", timeout=20, deadline=time.monotonic() + 1)
    lab = lab_settings
    records = lab.wait_for(lambda: [r for r in lab.requests if r.path == "/slow"])
    lab.wait_for(lambda: records[0].aborted, timeout=3)
    assert records[0].bytes_sent <= 3, records[0].bytes_sent


# -- finding 8: no code a plugin reports becomes a call's code ----------------------------


@hypothesis_settings(max_examples=300, deadline=None)
@given(
    code=st.text(max_size=200)
    | st.sampled_from(["timeout", "too_large", "fetch_error", "approval_required", "egress_denied"])
)
def test_a_reported_code_is_never_the_calls_code(code):
    """``reported_failure`` (both paths: the plugin process's report and a trusted
    plugin's exception): the code is ``plugin_error``; the message names the plugin's
    code only from the client's own list."""
    from django_webfetch.models import ToolCall
    from django_webfetch.plugins.client import REQUEST_FAILURES, reported_failure

    result = reported_failure(code)
    assert result.error == "plugin_error"
    assert len(result.error) <= ToolCall._meta.get_field("reason").max_length
    named = code if code in REQUEST_FAILURES else "other"
    assert result.content == f"The plugin's tool failed: a request of it failed ({named})."


@given(reason=st.text(max_size=200) | st.sampled_from(["egress_not_granted", "denylist"]))
def test_a_reported_refusal_names_only_a_reason_a_plugin_is_told(reason):
    from django_webfetch.plugins.client import PLUGIN_REASONS, reported_refusal

    result = reported_refusal(reason)
    assert result.error == "egress_denied"
    said = result.meta["reason"]
    assert said == (reason if reason in PLUGIN_REASONS else "egress_denied")
