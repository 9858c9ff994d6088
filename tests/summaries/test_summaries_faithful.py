"""Summaries of a real conversation say only what their sources say.

The first three sessions of the LoCoMo dev set's first conversation are imported as project
memories (one per turn, as ``import_locomo`` does) and the project's summaries generated:
offline, every sentence is a source sentence word for word, cites the memory it comes from,
and every depth stays within its target length. With a language model (a fake
OpenAI-compatible server), an invented sentence is dropped and a faithful one kept; a model
answering garbage leaves the offline summary, written as a whole set or not at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.context_eval import first_sessions
from bench.locomo import load_samples, turns
from llm import cache as llm_cache
from llm.models import LlmUsage
from llm.purposes.base import content_words, supported
from llm.purposes.summarize import DEPTHS
from memories.models import Kind
from memories.services.memory import MemoryInput, memory_bulk_add
from summaries import generation
from summaries.generation import OFFLINE_MODEL, summary_generate
from summaries.models import LayerSummary
from summaries.scopes import ScopeRef, scope_for, source_hash, sources
from summaries.tokens import count_tokens
from tenants.context import tenant_scope
from tenants.layers import Layer, LayerIdentifiers
from tests.llm_fake import FakeLLM, configured_fake_llm

pytestmark = pytest.mark.django_db

#: Sessions 1-3 of LoCoMo's conversation conv-26, verbatim, with the questions they answer.
DEV_FILE = (Path(__file__).resolve().parents[1] / "summaries" / "data"
            / "locomo_conv26_sessions_1_3.json")
SESSIONS = 3
INVENTED = "Caroline won the Nobel Prize in chemistry at a ceremony in Stockholm."
_LISTED = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)


@pytest.fixture
def conversation(tenant_a: Any) -> ScopeRef:
    """The first sessions of the dev set's first conversation, one project memory per turn;
    returns the project's scope."""
    sample = first_sessions(load_samples(DEV_FILE)[0], SESSIONS)
    identifiers = LayerIdentifiers(projectId=str(sample["sample_id"]))
    items = [MemoryInput(content=t.content, layer="project", identifiers=identifiers,
                         metadata=t.metadata(), context=t.context, kind=Kind.EPISODE)
             for t in turns(sample)]
    with tenant_scope(tenant_a.ctx):
        memory_bulk_add(tenant_a.ctx, items=items)
    return scope_for(Layer.PROJECT, identifiers)


def generate(tenant: Any, scope: ScopeRef) -> list[LayerSummary]:
    with tenant_scope(tenant.ctx):
        return summary_generate(tenant.ctx, scope=scope, trigger="manual")


def stored(tenant: Any) -> dict[str, LayerSummary]:
    with tenant_scope(tenant.ctx):
        return {s.depth: s for s in LayerSummary.objects.all()}


def _flat(text: str) -> str:
    return " ".join(text.split())


# --- offline: extractive -----------------------------------------------------------------

def test_every_offline_sentence_is_traceable_to_a_memory_of_the_scope(
        tenant_a: Any, conversation: ScopeRef) -> None:
    summaries = generate(tenant_a, conversation)
    assert [s.depth for s in summaries] == list(DEPTHS)
    with tenant_scope(tenant_a.ctx):
        contents = {str(pk): content for pk, content in
                    sources(conversation).values_list("id", "content")}
    assert len(contents) > 50
    for summary in summaries:
        assert summary.model == OFFLINE_MODEL and summary.sentences
        for sentence in summary.sentences:
            text, cited = sentence["text"], [str(i) for i in sentence["sourceIds"]]
            assert len(cited) >= 1, (summary.depth, text)
            assert set(cited) <= set(contents), (summary.depth, text)
            # extractive: the text is a cited memory's, word for word (whitespace folded)
            assert any(text in _flat(contents[i]) for i in cited), (summary.depth, text)
            # and, checked on its own, no content word that the cited sources lack
            known = set().union(*(content_words(contents[i]) for i in cited))
            assert content_words(text) <= known, (summary.depth, text)
        assert sorted(map(str, summary.source_ids)) == sorted(
            {str(i) for s in summary.sentences for i in s["sourceIds"]})
        assert summary.content == " ".join(s["text"] for s in summary.sentences)


def test_offline_token_counts_are_exact_and_within_each_depth(
        tenant_a: Any, conversation: ScopeRef) -> None:
    summaries = generate(tenant_a, conversation)
    lengths = {}
    for summary in summaries:
        assert summary.token_count == count_tokens(summary.content)
        assert 0 < summary.token_count <= DEPTHS[summary.depth], summary.depth
        lengths[summary.depth] = summary.token_count
    assert lengths["sentence"] < lengths["paragraph"] < lengths["detailed"]
    with tenant_scope(tenant_a.ctx):
        digest = source_hash(conversation)
    assert {s.source_hash for s in summaries} == {digest}


# --- with a language model ----------------------------------------------------------------

def _listing(request: dict[str, Any]) -> dict[int, str]:
    """The numbered sources of a ``summarize`` request: ``{number: text}``."""
    return {int(n): text for n, text in _LISTED.findall(request["messages"][1]["content"])}


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeLLM]:
    with configured_fake_llm(settings) as server:
        settings.SUMMARY_GENERATOR = "llm"
        yield server


def forget_answers(tenant: Any) -> None:
    """Drop the cached model answers of ``tenant`` (the same sources would get the last
    answer again without asking the model)."""
    llm_cache.invalidate_tenant(tenant.ctx.tenant_id)
    llm_cache.clear_local()


def answer_one_invented_one_faithful(fake: FakeLLM) -> dict[str, str]:
    """Script ``fake`` to answer every summarize call with an invented sentence citing
    source 1 and, citing source n, source n's own text (the first short source after the
    first); returns what it answered last (``{"invented", "faithful"}``)."""
    said: dict[str, str] = {}

    def respond() -> tuple[Any, ...]:
        listed = _listing(fake.requests[-1])
        number, text = next((n, t) for n, t in sorted(listed.items())
                            if n > 1 and count_tokens(t) <= 30)
        said.update(invented=INVENTED, faithful=text)
        return ("json", {"sentences": [{"text": INVENTED, "sources": [1]},
                                       {"text": text, "sources": [number]}]})

    fake.next = respond  # type: ignore[method-assign]
    return said


def test_a_model_summary_keeps_the_faithful_sentence_and_drops_the_invented_one(
        tenant_a: Any, conversation: ScopeRef, fake: FakeLLM) -> None:
    said = answer_one_invented_one_faithful(fake)
    summaries = generate(tenant_a, conversation)
    assert len(fake.requests) == 1  # one call for every depth
    listed = _listing(fake.requests[0])
    assert len(listed) > 1 and not supported(INVENTED, [listed[1]])
    assert [s.depth for s in summaries] == list(DEPTHS)  # in depth order, as documented
    with tenant_scope(tenant_a.ctx):
        contents = {str(pk): c for pk, c in sources(conversation).values_list("id", "content")}
    for summary in summaries:
        assert summary.model == "fake-model"
        assert [s["text"] for s in summary.sentences] == [said["faithful"]]
        assert "Nobel" not in summary.content and "Stockholm" not in summary.content
        [sentence] = summary.sentences
        [cited] = sentence["sourceIds"]
        assert said["faithful"] in _flat(contents[str(cited)])
        assert summary.token_count == count_tokens(summary.content) <= DEPTHS[summary.depth]


def test_a_garbage_answer_falls_back_offline_as_one_complete_set(
        tenant_a: Any, conversation: ScopeRef, fake: FakeLLM) -> None:
    answer_one_invented_one_faithful(fake)
    generate(tenant_a, conversation)
    previous = stored(tenant_a)
    assert {s.model for s in previous.values()} == {"fake-model"}

    fake.requests.clear()
    fake.then(("text", "Sure! Here is a summary: they talked."), ("text", "{not json"))
    del fake.next  # the scripted behaviours again
    forget_answers(tenant_a)
    summaries = generate(tenant_a, conversation)
    assert len(fake.requests) == 2  # the answer and its one repair
    now = stored(tenant_a)
    assert set(now) == set(DEPTHS) == set(previous)
    assert {s.model for s in now.values()} == {OFFLINE_MODEL}
    assert len({s.generated_at for s in now.values()}) == 1
    assert {s.pk for s in now.values()} == {s.pk for s in previous.values()}  # replaced in place
    assert [s.content for s in summaries] == [now[d].content for d in DEPTHS]
    assert all(s.content != previous[s.depth].content for s in now.values())


def test_a_failure_while_writing_leaves_the_previous_set_whole(
        tenant_a: Any, conversation: ScopeRef, fake: FakeLLM,
        monkeypatch: pytest.MonkeyPatch) -> None:
    answer_one_invented_one_faithful(fake)
    generate(tenant_a, conversation)
    previous = {d: (s.content, s.model, s.generated_at) for d, s in stored(tenant_a).items()}
    fake.then(("text", "garbage"), ("text", "more garbage"))
    del fake.next
    forget_answers(tenant_a)
    real_store = generation._store
    written: list[str] = []

    def store_then_fail(*args: Any, **kwargs: Any) -> LayerSummary:
        if written:
            raise RuntimeError("the database went away")
        summary = real_store(*args, **kwargs)
        written.append(summary.depth)
        return summary

    monkeypatch.setattr(generation, "_store", store_then_fail)
    with pytest.raises(RuntimeError):
        generate(tenant_a, conversation)
    assert written == ["sentence"]  # one depth was written, then rolled back with the rest
    after = {d: (s.content, s.model, s.generated_at) for d, s in stored(tenant_a).items()}
    assert after == previous


def test_the_company_layer_uses_its_cheaper_model_and_the_usage_row_names_it(
        tenant_a: Any, fake: FakeLLM, settings: Any) -> None:
    settings.LLM_MODELS = '{"summarize": {"default": "big-model", "company": "small-model"}}'
    for text in ("Globex: expense reports are due on Fridays.",
                 "Globex: the office closes at 6 pm.", "Globex: badges are checked daily."):
        tenant_a.add(text, layer="company", identifiers={})
    fake.then(("json", {"sentences": [{"text": "Globex: the office closes at 6 pm.",
                                       "sources": [1, 2, 3]}]}))
    company = scope_for(Layer.COMPANY, LayerIdentifiers(companyId=tenant_a.tenant.slug))
    summaries = generate(tenant_a, company)
    assert {s.model for s in summaries} == {"small-model"}
    assert fake.requests[0]["model"] == "small-model"
    with tenant_scope(tenant_a.ctx):
        usage = LlmUsage.objects.get(purpose="summarize")
    assert (usage.model, usage.layer) == ("small-model", "company")
