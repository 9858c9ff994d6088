"""The learnings purpose (post-run extraction) with a model that answers well, invents, and
answers nonsense: only what the transcript supports is kept, and a broken answer falls back
offline instead of failing the run (seed 003 "Extraction fails gracefully")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from llm.purposes.learnings import MAX_CHUNK_CHARS, extract_learnings, transcript_chunks
from memory_project import retries
from tenants.context import tenant_scope
from tests.llm_fake import FakeLLM, configured_fake_llm

pytestmark = pytest.mark.django_db
TRANSCRIPT = ("Ran pytest: 3 failures in tests/payments.\n\n"
              "The payments tests need STRIPE_FAKE=1, otherwise they call the network.\n\n"
              "Set it in the Makefile; all tests pass now.")


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeLLM]:
    with configured_fake_llm(settings) as server:
        yield server


def learnings(tenant: Any, transcript: str = TRANSCRIPT) -> Any:
    with tenant_scope(tenant.ctx):
        return extract_learnings(tenant.ctx, transcript=transcript)


def test_supported_learnings_are_kept_and_inventions_dropped(tenant_a: Any,
                                                             fake: FakeLLM) -> None:
    fake.then(("json", {"learnings": [
        {"text": "The payments tests need STRIPE_FAKE=1 to stay off the network.",
         "chunks": [2]},
        {"text": "Deploys happen every Friday at noon.", "chunks": [1]},
        {"text": "STRIPE_FAKE=1 is set in the Makefile.", "chunks": [9]},
    ]}))
    result = learnings(tenant_a)
    assert not result.fallback
    assert [(item.text, item.chunk_indexes) for item in result.value] == [
        ("The payments tests need STRIPE_FAKE=1 to stay off the network.", (1,))]


@pytest.mark.parametrize("answer", [("text", "not json at all"), ("status", 500, {}, "boom"),
                                    ("json", {"learnings": "many"}), ("hang", 5)])
def test_a_broken_answer_falls_back_offline(tenant_a: Any, fake: FakeLLM, settings: Any,
                                            monkeypatch: pytest.MonkeyPatch,
                                            answer: tuple[Any, ...]) -> None:
    settings.LLM_TIMEOUTS = '{"learnings": 1}'  # the hang outlasts it
    monkeypatch.setattr(retries, "_sleep", lambda seconds: None)  # the back-off is not tested here
    fake.then(answer)
    result = learnings(tenant_a, TRANSCRIPT + "\n\nNote: always export STRIPE_FAKE in CI.")
    assert result.fallback
    # The fallback keeps what is stated as a learning (a marker or a cue of advice or cause),
    # not every statement of the transcript.
    assert [item.text for item in result.value] == ["always export STRIPE_FAKE in CI."]


def test_an_empty_answer_means_nothing_learned(tenant_a: Any, fake: FakeLLM) -> None:
    fake.then(("json", {"learnings": []}))
    result = learnings(tenant_a)
    assert not result.fallback and result.value == ()


def test_long_transcripts_keep_their_end_in_bounded_chunks() -> None:
    paragraphs = [f"step {i}: " + "x" * 100 for i in range(400)]
    chunks = transcript_chunks("\n\n".join(paragraphs) + "\n\n" + "y\n" * 5000)
    assert len(chunks) == 50 and all(len(c) <= MAX_CHUNK_CHARS for c in chunks)
    assert chunks[-1].endswith("y")
