"""The bounds of what the model is sent: one tool result (the fence survives the cut) and
the context of one request (oldest results replaced by a note; then a clear failure)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.assistant.bounds import MIN_RESULT_BYTES, bound_result, utf8_len
from django_webfetch.text.fence import BEGIN_MARKER, END_MARKER, fence

MARKER = re.compile(r"<<<(BEGIN|END) UNTRUSTED EXTERNAL WEB CONTENT nonce=([0-9A-Za-z_-]+)>>>")
CLOSER = re.compile(r"\n<<<END UNTRUSTED EXTERNAL WEB CONTENT nonce=[0-9A-Za-z_-]+>>>$")
PARTIAL = re.compile(r"<<<(?:B|BE|BEG|BEGI|BEGIN|E|EN|END)[^>]*$")


def balanced(text: str) -> bool:
    open_: list[str] = []
    for match in MARKER.finditer(text):
        kind, nonce = match.groups()
        if kind == "BEGIN":
            open_.append(nonce)
        elif not open_ or open_[-1] != nonce:
            return False
        else:
            open_.pop()
    return not open_


def test_small_results_pass_unchanged():
    assert bound_result("short", 50_000) == "short"


def test_a_fenced_page_cut_keeps_its_fence():
    page = fence(
        "word " * 4000 + "é" * 5000, source_url="https://a.example/", status_line="HTTP 200"
    )
    text = page + "\n" + page
    out = bound_result(text, 30_000)
    assert utf8_len(out) <= 30_000
    assert balanced(out)
    assert out.count("<<<BEGIN") == 2 and out.count("<<<END") == 2
    assert out.endswith(f"[result cut to fit 30000 bytes; it had {utf8_len(text)} bytes]")


def test_the_default_bound_is_50000_bytes(settings):
    from django_webfetch.conf import conf

    assert conf.WEBFETCH_ASSISTANT_MAX_RESULT_BYTES == 50_000
    settings.WEBFETCH_ASSISTANT_MAX_RESULT_BYTES = 10**9
    assert conf.WEBFETCH_ASSISTANT_MAX_RESULT_BYTES == 50_000


def test_a_bound_too_small_is_refused():
    with pytest.raises(ValueError):
        bound_result("x" * 5000, MIN_RESULT_BYTES - 1)


_nonce = st.text("0123456789abcdef", min_size=1, max_size=32)
_chunk = st.one_of(
    st.text(max_size=400),
    st.text("é€😀x\n<>", max_size=300),
    _nonce.map(lambda n: BEGIN_MARKER.format(nonce=n)),
    _nonce.map(lambda n: END_MARKER.format(nonce=n)),
    _nonce.map(
        lambda n: (
            BEGIN_MARKER.format(nonce=n) + "\n" + "p" * 900 + "\n" + END_MARKER.format(nonce=n)
        )
    ),
)


@settings(max_examples=400, deadline=None)
@given(chunks=st.lists(_chunk, max_size=40), limit=st.integers(MIN_RESULT_BYTES, 6000))
def test_property_within_the_bound_and_no_fence_left_open(chunks, limit):
    text = "".join(chunks)
    out = bound_result(text, limit)
    assert utf8_len(out) <= limit
    if utf8_len(text) <= limit:
        assert out == text
        return
    # A prefix of the input, then only closing markers and our note.
    head, _, note = out.rpartition("\n[result cut to fit ")
    assert note.startswith(f"{limit} bytes; it had ")
    positions = [len(head)]
    while (m := CLOSER.search(head[: positions[-1]])) is not None:
        positions.append(m.start())
    assert any(text.startswith(head[:p]) for p in positions)
    # Every fence the kept text opened is closed (when the input's fences were well formed).
    if balanced(text):
        assert balanced(head)
    # Never half a marker at the cut.
    assert PARTIAL.search(head) is None


# -- the context budget -------------------------------------------------------------------------


def _history(results):
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    history = [ModelRequest(parts=[UserPromptPart("question")])]
    for i, size in enumerate(results):
        history.append(ModelResponse(parts=[ToolCallPart("t", {}, tool_call_id=f"c{i}")]))
        history.append(ModelRequest(parts=[ToolReturnPart("t", "r" * size, tool_call_id=f"c{i}")]))
    return history


def test_oldest_results_are_replaced_past_the_context_budget(settings):
    from pydantic_ai.messages import ToolReturnPart

    from django_webfetch.assistant.history import within_context_budget

    settings.WEBFETCH_ASSISTANT_CONTEXT_BYTES = 25_000
    history = _history([10_000, 10_000, 10_000])
    sent = within_context_budget(history)
    contents = [p.content for m in sent for p in m.parts if isinstance(p, ToolReturnPart)]
    assert contents[0] == "[result omitted: 10000 bytes]"
    assert contents[1:] == ["r" * 10_000, "r" * 10_000]
    # What is stored is untouched.
    assert history[2].parts[0].content == "r" * 10_000


def test_a_context_that_cannot_fit_fails_clearly(settings):
    from django_webfetch.assistant.history import within_context_budget
    from django_webfetch.assistant.providers import ProviderFailure

    settings.WEBFETCH_ASSISTANT_CONTEXT_BYTES = 5_000
    with pytest.raises(ProviderFailure) as info:
        within_context_budget(_history([20_000]))
    assert info.value.code == "context_exceeded"


@pytest.mark.django_db(transaction=True, serialized_rollback=True)
def test_context_exceeded_fails_the_run(editor, settings):
    from django_webfetch.assistant import services
    from tests.settle import settled_run

    settings.WEBFETCH_ASSISTANT_CONTEXT_BYTES = 100
    conversation = services.create_conversation(editor)
    run = settled_run(services.post_message(conversation, "x" * 2000, user=editor))
    assert (run.state, run.error_code) == ("failed", "context_exceeded")
    assert "too long" in run.error_message
