"""The offline summarizer: a budgeted choice of source sentences that covers the scope.

Every sentence of an offline summary is a sentence of a source memory, word for word, so it
is faithful by construction and cites exactly one memory. Which sentences: the greedy
maximisation of a monotone submodular coverage function under a length budget (Lin & Bilmes,
"A Class of Submodular Functions for Document Summarization", ACL 2011):

    F(S) = Σ_i w_i · max_{j ∈ S} sim(i, j)          (facility location)

over the candidate sentences i, with ``sim`` the cosine similarity of their embeddings
(clipped at 0) and ``w_i`` the weight of a sentence (1, or more when it is close to what a
personalized summary is written for). Each step adds the sentence with the best gain per
token, ``ΔF / tokens^r`` with r = 0.3 (the paper's scaled cost), among those that still
fit. The chosen sentences are shown in source order (oldest memory first), so a summary
reads in the order things were said.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: Cost scaling ``r`` of the gain per token (Lin & Bilmes 2011, §4: r = 0.3 worked best).
COST_SCALING = 0.3
#: A sentence longer than this many tokens is not a candidate (it would fill a short depth).
MAX_SENTENCE_TOKENS = 120
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


@dataclass(frozen=True)
class Candidate:
    """A source sentence: its text, the memory it comes from, its position in the sources,
    its token count."""

    text: str
    source_id: str
    position: int
    tokens: int


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split after ``.``, ``!`` or ``?`` before a capital or a
    digit); whitespace collapsed, empty pieces dropped."""
    cleaned = " ".join(text.split())
    return [part for part in _SENTENCE_END.split(cleaned) if part]


def leading(text: str, limit: int, count: Callable[[str], int]) -> tuple[str, int]:
    """The leading sentences of ``text`` that fit in ``limit`` tokens (at least the first),
    and their token count; ``count(text) -> int`` counts tokens."""
    kept: list[str] = []
    total = 0
    for sentence in split_sentences(text):
        tokens = count(sentence)
        if kept and total + tokens > limit:
            break
        kept.append(sentence)
        total += tokens
    return " ".join(kept), total


def select(candidates: Sequence[Candidate], vectors: np.ndarray, budget: int,
           weights: np.ndarray | None = None) -> list[Candidate]:
    """The candidates that maximise coverage within ``budget`` tokens, in source order.

    Args:
        candidates: the sentences, ``vectors`` their L2-normalised embeddings (one row
            each, shape ``(n, d)``), ``weights`` their weights (shape ``(n,)``, default 1).
        budget: the most tokens the chosen sentences may hold together (at least one
            sentence is chosen when any fits).

    Returns:
        The chosen candidates, ordered by ``position``.
    """
    n = len(candidates)
    if n == 0:
        return []
    sims = np.clip(vectors @ vectors.T, 0.0, None).astype(np.float32)
    w = np.ones(n, dtype=np.float32) if weights is None else weights.astype(np.float32)
    costs = np.array([max(1, c.tokens) for c in candidates], dtype=np.float32) ** COST_SCALING
    covered = np.zeros(n, dtype=np.float32)
    chosen: list[int] = []
    available = np.array([c.tokens <= budget for c in candidates])
    used = 0
    while available.any():
        gains = (w[:, None] * np.maximum(sims - covered[:, None], 0.0)).sum(axis=0)
        scores = np.where(available, gains / costs, -1.0)
        best = int(np.argmax(scores))
        if scores[best] <= 0 and chosen:
            break
        chosen.append(best)
        used += candidates[best].tokens
        covered = np.maximum(covered, sims[:, best])
        available[best] = False
        available &= np.array([c.tokens <= budget - used for c in candidates])
    return sorted((candidates[i] for i in chosen), key=lambda c: c.position)
