"""Purpose: summarise memories at a depth, every sentence traceable to the memories it comes
from (seed 001 "Layer Summary Storage": sentence ~50 tokens, paragraph ~200, detailed ~500).

The model numbers its sources (``[1]``, ``[2]``, …) and each sentence it writes lists the
numbers it rests on; :meth:`SummarizePurpose.accept` drops any sentence whose cited sources
do not hold most of its content words, so a summary never states what no source says.
Offline fallback: extractive — the sources most central to the set (TF-IDF cosine to the
centroid, ties by order), each becoming one cited sentence, until the depth's budget.

An exhausted budget refuses (``BUDGET_EXCEEDED``; seed 001 "Per-tenant summarization
budget"): a summary is not silently degraded.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from llm.purposes.base import InvalidOutput, Purpose, Schema, chat, cited_claim, content_words
from llm.runner import run
from memory_project.errors import InvalidInput
from tenants.context import TenantContext

#: Depth → target length in tokens (seed 001 "Store summary with depth levels").
DEPTHS = {"sentence": 50, "paragraph": 200, "detailed": 500}
#: Sources given to the model at most (the rest are summarised by the fallback's choice).
MAX_SOURCES = 60


@dataclass(frozen=True)
class Source:
    """One memory to summarise."""

    id: str
    text: str


@dataclass(frozen=True)
class SummarySentence:
    """A sentence of a summary and the ids of the memories it rests on."""

    text: str
    source_ids: tuple[str, ...]


@dataclass(frozen=True)
class SummaryInput:
    """What to summarise, how deep, and what it is about (``subject``: "user alice", …)."""

    depth: str
    sources: tuple[Source, ...]
    subject: str = ""


class _Sentence(Schema):
    text: str = Field(min_length=1, max_length=600)
    sources: list[int] = Field(min_length=1, max_length=10)


class _Output(Schema):
    sentences: list[_Sentence] = Field(min_length=1, max_length=30)


def approx_tokens(text: str) -> int:
    """A quick token estimate (words × 1.3) for trimming; stored summaries are counted with
    a real tokenizer by their caller."""
    return math.ceil(len(text.split()) * 1.3)


class SummarizePurpose(Purpose[SummaryInput, tuple[SummarySentence, ...]]):
    """A cited summary of ``sources`` at ``depth``."""

    name = "summarize"
    version = "1"
    output_model = _Output
    max_tokens = 700
    fallback_on_budget = False
    fallback_name = "extractive"

    def messages(self, payload: SummaryInput) -> list[dict[str, str]]:
        target = DEPTHS[payload.depth]
        listing = "\n".join(f"[{i}] {s.text}" for i, s in enumerate(
            payload.sources[:MAX_SOURCES], start=1))
        system = (
            f"You summarise numbered notes{' about ' + payload.subject if payload.subject else ''}"
            f" in about {target} words. Write short factual sentences. State only what the "
            "notes say; invent nothing. After each sentence list the numbers of the notes it "
            "comes from. ")
        return chat(system, listing)

    def accept(self, payload: SummaryInput, output: Any) -> tuple[SummarySentence, ...]:
        sources = payload.sources[:MAX_SOURCES]
        texts = [s.text for s in sources]
        kept: list[SummarySentence] = []
        budget = DEPTHS[payload.depth]
        used = 0
        for sentence in output.sentences:
            claim = cited_claim(sentence.text, sentence.sources, texts)
            if claim is None:
                continue
            text, indexes = claim
            cost = approx_tokens(text)
            if kept and used + cost > budget * 1.2:
                break
            kept.append(SummarySentence(text, tuple(sources[i].id for i in indexes)))
            used += cost
        if not kept:
            raise InvalidOutput("no sentence is supported by the sources it cites")
        return tuple(kept)

    def fallback(self, payload: SummaryInput) -> tuple[SummarySentence, ...]:
        ranked = central_first(payload.sources)
        budget = DEPTHS[payload.depth]
        kept: list[SummarySentence] = []
        used = 0
        for source in ranked:
            text = _as_sentence(source.text)
            cost = approx_tokens(text)
            if kept and used + cost > budget:
                continue
            kept.append(SummarySentence(text, (source.id,)))
            used += cost
            if used >= budget:
                break
        return tuple(kept)

    def cache_identity(self, payload: SummaryInput) -> Any:
        return [payload.depth, payload.subject, [[s.id, s.text] for s in payload.sources]]

    def dump(self, result: tuple[SummarySentence, ...]) -> Any:
        return [[s.text, list(s.source_ids)] for s in result]

    def load(self, data: Any) -> tuple[SummarySentence, ...]:
        return tuple(SummarySentence(text, tuple(ids)) for text, ids in data)

    def redacted(self, payload: SummaryInput, redact: Any) -> SummaryInput:
        return SummaryInput(payload.depth, tuple(Source(s.id, redact(s.text))
                                                 for s in payload.sources), payload.subject)


def central_first(sources: tuple[Source, ...]) -> list[Source]:
    """Sources by TF-IDF cosine similarity to the set's centroid, highest first (ties keep
    the given order): the ones that say most of what the set says."""
    docs = [Counter(content_words(s.text)) for s in sources]
    frequency = Counter(word for doc in docs for word in doc)
    n = len(docs) or 1
    weights = [{w: c * math.log(1 + n / frequency[w]) for w, c in doc.items()} for doc in docs]
    centroid: Counter[str] = Counter()
    for vector in weights:
        centroid.update(vector)

    def score(vector: dict[str, float]) -> float:
        norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
        return sum(v * centroid[w] for w, v in vector.items()) / norm

    order = sorted(range(len(sources)), key=lambda i: (-score(weights[i]), i))
    return [sources[i] for i in order]


def _as_sentence(text: str) -> str:
    cleaned = " ".join(text.split())
    return cleaned if re.search(r"[.!?]$", cleaned) else cleaned + "."


PURPOSE = SummarizePurpose()


@dataclass(frozen=True)
class Summary:
    """A summary's sentences, the model that wrote it, and whether the fallback did."""

    sentences: tuple[SummarySentence, ...]
    model: str
    fallback: bool

    @property
    def text(self) -> str:
        """The sentences joined."""
        return " ".join(s.text for s in self.sentences)


def summarize(ctx: TenantContext, *, depth: str, sources: list[Source], subject: str = "",
              layer: str | None = None) -> Summary:
    """A cited summary of ``sources`` at ``depth`` for ``ctx``'s tenant (``layer`` picks the
    model: seed 001 "Tiered model selection").

    Raises:
        InvalidInput: an unknown depth, or no sources.
        BudgetExceeded: the tenant's budget for the period is spent (no model call made).
    """
    if depth not in DEPTHS:
        raise InvalidInput(f"Unknown depth {depth!r}; one of {', '.join(DEPTHS)}.")
    if not sources:
        raise InvalidInput("Nothing to summarise.")
    result = run(ctx, PURPOSE, SummaryInput(depth, tuple(sources), subject), layer=layer)
    return Summary(result.value, result.model, result.fallback)
