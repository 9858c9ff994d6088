"""Which memories fit a context, and when a summary is worth the memories it pushes out
(``summaries.selection``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from memories.models import Memory
from summaries.markdown import bullet
from summaries.selection import Candidate, candidates_of, displaces_more_relevant, pack
from summaries.tokens import count_tokens


def candidate(cost: int, similarity: float) -> Candidate:
    memory: Any = SimpleNamespace(pk=uuid.uuid4(), content_hash=uuid.uuid4().hex)
    return Candidate(memory, "project", None, cost - 1, cost, similarity)


def test_pack_keeps_rank_order_skips_what_does_not_fit_and_what_it_is_told_to() -> None:
    a, b, c, d = candidate(5, 0.9), candidate(8, 0.8), candidate(3, 0.7), candidate(2, 0.1)
    assert pack([a, b, c, d], 10) == [a, c, d]  # b does not fit after a; c and d do
    assert pack([a, b, c, d], 10, frozenset({str(a.memory.pk)})) == [b, d]
    assert pack([a, b], 4) == []


def test_a_summary_may_only_push_out_memories_less_relevant_than_itself() -> None:
    a, b, c = candidate(5, 0.9), candidate(5, 0.5), candidate(5, 0.3)
    before = pack([a, b, c], 15)
    after = pack([a, b, c], 10)  # a summary of 5 tokens pushes c out
    assert after == [a, b]
    assert not displaces_more_relevant(0.4, before, after, frozenset())
    assert displaces_more_relevant(0.2, before, after, frozenset())
    # a memory the summary quotes whole is in the context through it: not pushed out
    assert not displaces_more_relevant(0.2, before, after, frozenset({str(c.memory.pk)}))


def test_a_line_is_priced_as_its_prefix_plus_its_content() -> None:
    texts = ["Maria moved to Lisbon.", "-leading dash", "tabs\tand\nnew  lines", "emoji 🎉 ok",
             "日本語のテキスト", "non\u00a0breaking", "control\x1cchar", "tab\x0bvertical",
             "next\x85line", "[13 Oct 2023] dated", "café naïve ÉCOLE",
             "word-with-hyphens and 'quotes'", "x" * 300]
    days = [None, datetime(2023, 10, 13, 10, 31, tzinfo=UTC), datetime(2024, 2, 9, 23, 59)]
    rows = [(Memory(content=text, content_hash=f"{i}-{j}", occurred_at=day), "user", 1.0)
            for i, text in enumerate(texts) for j, day in enumerate(days)]
    for candidate in candidates_of(rows, {}):
        memory = candidate.memory
        assert candidate.tokens == count_tokens(memory.content)
        assert candidate.cost == count_tokens(bullet(memory.content, memory.occurred_at))
