"""Which summaries and memories go into a context (``summaries.context``).

Memories are packed greedily in rank order: each is added when its line still fits, else
skipped for the next. A layer's summary is worth its tokens only if it is at least as
relevant to the query as every memory it pushes out of the context: with a query, a
summary (deepest depth first) is added when the memories it cites are on average at least as
similar to the query (cosine) as each memory that fits without the summary but not with it
(memories it quotes whole are not pushed out: they are in it). On the LoCoMo dev
conversations this keeps a summary for 10–20 % of questions and the evidence recall of
plain top-k memories at the same budget, where a fixed relevance cut-off kept one for 97 %
and lost 1.7–3.4 points (docs/summaries.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memories.models import Memory
from summaries.markdown import bullet, one_line, summary_heading
from summaries.selectors import ServedSummary
from summaries.tokens import count_many, count_tokens


@dataclass(frozen=True)
class Candidate:
    """A memory that may go into the context: its rank score, its line's tokens (``cost``),
    its content's tokens and its cosine similarity to the query (0 without one)."""

    memory: Memory
    layer: str
    score: float | None
    tokens: int
    cost: int
    similarity: float


def candidates_of(rows: Sequence[tuple[Memory, str, float | None]],
                  similarities: dict[str, float]) -> list[Candidate]:
    """The rows (memory, layer, score) in rank order as candidates, priced; a memory whose
    content repeats an earlier one is left out."""
    seen: set[str] = set()
    kept = []
    for memory, layer, score in rows:
        if memory.content_hash in seen:
            continue
        seen.add(memory.content_hash)
        kept.append((memory, layer, score))
    contents = [m.content for m, _, _ in kept]
    tokens = count_many(contents)
    lines = _line_tokens(contents, tokens)
    prefixes: dict[str, int] = {}
    costs = [n + _prefix_cost(m, prefixes) for (m, _, _), n in zip(kept, lines, strict=True)]
    return [Candidate(m, layer, score, t, c, similarities.get(str(m.pk), 0.0))
            for (m, layer, score), t, c in zip(kept, tokens, costs, strict=True)]


#: Characters Python splits at (so ``one_line`` makes them a space) that BERT's normalizer
#: deletes instead: a content holding one may count otherwise on its line.
_SPLIT_APART = frozenset("\x0b\x0c\x1c\x1d\x1e\x1f\x85")


def _line_tokens(contents: list[str], tokens: list[int]) -> list[int]:
    """Tokens of each content as its line writes it (``one_line``): its own count, but for
    the rare content holding a character of :data:`_SPLIT_APART`, counted again."""
    odd = [i for i, content in enumerate(contents) if not _SPLIT_APART.isdisjoint(content)]
    lines = list(tokens)
    for i, n in zip(odd, count_many([one_line(contents[i]) for i in odd]), strict=True):
        lines[i] = n
    return lines


def _prefix_cost(memory: Memory, seen: dict[str, int]) -> int:
    """Tokens of a memory's line before its content (``- `` and its day, if dated). WordPiece
    splits at whitespace and punctuation, so a line's count is this plus its content's: one
    tokenizer call prices every candidate (``tests/summaries/test_selection.py`` checks the
    sum against whole lines)."""
    prefix = bullet("", memory.occurred_at)
    if prefix not in seen:
        seen[prefix] = count_tokens(prefix)
    return seen[prefix]


def pack(candidates: Sequence[Candidate], budget: int, skip: frozenset[str] = frozenset()
         ) -> list[Candidate]:
    """The candidates that fit ``budget`` tokens, greedily in rank order (one that does not
    fit is skipped for the next); ids in ``skip`` are left out."""
    chosen = []
    for candidate in candidates:
        if str(candidate.memory.pk) in skip or candidate.cost > budget:
            continue
        chosen.append(candidate)
        budget -= candidate.cost
    return chosen


def summary_cost(served: ServedSummary) -> int:
    """Tokens a summary's heading and text take in the rendering."""
    return count_tokens(summary_heading(served)) + count_tokens(one_line(served.summary.content))


def quoted_whole(served: ServedSummary, contents: dict[str, str]) -> frozenset[str]:
    """Ids of memories the summary quotes whole: a sentence that cites only that memory and
    is its entire content (an offline summary of short memories); ``contents`` maps the
    candidates' ids to their content (other memories cannot be in the context anyway)."""
    return frozenset(str(s["sourceIds"][0]) for s in served.summary.sentences
                     if len(s["sourceIds"]) == 1
                     and contents.get(str(s["sourceIds"][0])) == one_line(s["text"]))


def mean_relevance(served: ServedSummary, query: np.ndarray) -> float:
    """How relevant what a summary says is to the query: the mean cosine similarity of the
    query to the memories its sentences cite (like for like with the memories it would push
    out). Its own ``context_vector`` is not used here: a mean of the whole scope, it is close
    to most queries about the scope (it ranks layers); the best cited memory alone let a
    500-token summary in for 97 % of LoCoMo questions and lost evidence recall."""
    ids = list({i for s in served.summary.sentences for i in s["sourceIds"]})
    stored = Memory.objects.filter(pk__in=ids).exclude(embedding__isnull=True).values_list(
        "embedding", flat=True)
    sims = [float(np.dot(query, np.asarray(v, dtype=np.float32))) for v in stored]
    return sum(sims) / len(sims) if sims else 0.0


def displaces_more_relevant(score: float, before: Sequence[Candidate],
                            after: Sequence[Candidate], quoted: frozenset[str]) -> bool:
    """Whether a summary of relevance ``score`` would push out a memory more relevant than
    itself: one packed ``before`` it, not ``after`` it, and not quoted whole by it."""
    kept = {str(c.memory.pk) for c in after}
    return any(c.similarity > score for c in before
               if str(c.memory.pk) not in kept and str(c.memory.pk) not in quoted)
