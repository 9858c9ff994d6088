"""The reranker of hybrid search: a logistic regression over thirteen features of each
candidate, trained offline on the LoCoMo development set (``manage.py train_reranker``).

Features (one row per candidate, :data:`FEATURES` order; shape ``(candidates, 13)``):

- ``bm25``: the candidate's BM25 divided by the best BM25 of its layer's candidates, [0, 1];
- ``cosine``: cosine similarity of its embedding to the query's;
- ``prev_bm25`` / ``next_bm25``: the same normalised BM25 of the memory written just before /
  after it in its scope (``memories.retrieval.neighbours``; 0 when none);
- ``prev_cosine`` / ``next_cosine``: those neighbours' cosine similarity (0 when none);
- ``speaker``: 1 when the query names the candidate's ``metadata.speaker``;
- ``other_speaker``: 1 when the query names the speaker of another candidate and not this one's;
- ``question``: 1 when its content ends with "?" (it asks rather than tells);
- ``prev_question``: 1 when the memory before it ends with "?" (it may be the answer);
- ``length``: ``ln(1 + words of the content)``;
- ``keyword_miss``: 1 when no query term is in it (found by meaning or as a neighbour only);
- ``time_match``: 1 when the query names a date (``memories.retrieval.when``) and the
  candidate's time (``occurred_at``, else ``created_at``) falls on it. It is 0 for every
  candidate of a query that names none, so it orders only dated queries; its weight is fitted
  after the others, with them held (``bench.reranker_training.fit``).

The score is the regression's probability ``1 / (1 + exp(−(w·x + b)))``. The weights ship in
``reranker.json`` beside this module (feature names, weights, intercept and where they came
from); a feature list that does not match :data:`FEATURES` is refused at load time.
Figures, folds and the training data: ``docs/performance.md``, "Retrieval quality".
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

FEATURES = (
    "bm25", "cosine", "prev_bm25", "next_bm25", "prev_cosine", "next_cosine",
    "speaker", "other_speaker", "question", "prev_question", "length", "keyword_miss",
    "time_match",
)
#: Features that are 0 for every candidate of a query they do not apply to, fitted in a
#: second stage (``bench.reranker_training.fit``): the ranking of other queries stays.
QUERY_CONDITIONAL = ("time_match",)
WEIGHTS_PATH = Path(__file__).with_name("reranker.json")


@dataclass(frozen=True)
class Reranker:
    """Logistic-regression weights over :data:`FEATURES`; ``source`` says what they were
    trained on."""

    weights: tuple[float, ...]
    intercept: float
    source: str = ""

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """``(n,)`` probabilities for a ``(n, len(FEATURES))`` feature matrix."""
        logits = features @ np.asarray(self.weights, dtype=np.float64) + self.intercept
        return 1.0 / (1.0 + np.exp(-logits))

    def to_json(self) -> dict[str, Any]:
        """The artifact's JSON form (what :func:`reranker_from_json` reads)."""
        return {"features": list(FEATURES), "weights": [round(w, 6) for w in self.weights],
                "intercept": round(self.intercept, 6), "source": self.source}


def reranker_from_json(data: dict[str, Any]) -> Reranker:
    """A :class:`Reranker` from its JSON form.

    Raises:
        ValueError: the features are not :data:`FEATURES` in order, or a weight is not a
            finite number.
    """
    if list(data.get("features") or []) != list(FEATURES):
        raise ValueError(f"reranker features must be {list(FEATURES)}")
    weights = tuple(float(w) for w in data["weights"])
    intercept = float(data["intercept"])
    if len(weights) != len(FEATURES) or not all(map(math.isfinite, (*weights, intercept))):
        raise ValueError("reranker weights must be one finite number per feature")
    return Reranker(weights, intercept, str(data.get("source", "")))


@lru_cache(maxsize=4)
def load_reranker(path: Path = WEIGHTS_PATH) -> Reranker:
    """The reranker stored at ``path`` (read once per process)."""
    return reranker_from_json(json.loads(Path(path).read_text(encoding="utf-8")))


_override: ContextVar[Reranker | None] = ContextVar("reranker_override", default=None)
_feature_log: ContextVar[list[tuple[list[Any], np.ndarray]] | None] = ContextVar(
    "reranker_feature_log", default=None)


def current_reranker() -> Reranker:
    """The reranker in force: :func:`using_reranker`'s, else the shipped one."""
    return _override.get() or load_reranker()


@contextmanager
def using_reranker(reranker: Reranker) -> Iterator[None]:
    """Rank with ``reranker`` inside the block (benchmarks: one fold's weights)."""
    token = _override.set(reranker)
    try:
        yield
    finally:
        _override.reset(token)


@contextmanager
def logging_features() -> Iterator[list[tuple[list[Any], np.ndarray]]]:
    """Collect ``(memories, feature matrix)`` of every reranked layer inside the block (the
    training data of ``manage.py train_reranker``)."""
    log: list[tuple[list[Any], np.ndarray]] = []
    token = _feature_log.set(log)
    try:
        yield log
    finally:
        _feature_log.reset(token)


def log_features(memories: list[Any], features: np.ndarray) -> None:
    """Record one layer's candidates and features when :func:`logging_features` is active."""
    log = _feature_log.get()
    if log is not None:
        log.append((memories, features))


def names_in(query: str, names: Sequence[str]) -> set[str]:
    """The ``names`` the query mentions as whole words, case-insensitively (lower case)."""
    lowered = query.lower()
    return {name.lower() for name in names if name and re.search(
        rf"(?<!\w){re.escape(name.lower())}(?!\w)", lowered)}


def is_question(content: str) -> bool:
    """Whether a memory's text asks a question (ends with "?")."""
    return content.rstrip().endswith("?")


def length_feature(content: str) -> float:
    """``ln(1 + words)`` of a text."""
    return math.log1p(len(content.split()))
