"""Training data and fitting of hybrid search's reranker (``memories.retrieval.rerank``).

Training data: every LoCoMo question of categories 1–4 of the chosen conversations, asked
as ``eval_locomo --mode hybrid`` asks it (its conversation's project, the tenant's default
threshold, limit 10). Each candidate the reranker sees is one example, labelled 1 when it is
a turn the question cites as evidence. The fit is a logistic regression with classes
weighted to equal total weight and an L2 penalty on the standardised weights (L-BFGS,
scipy); the weights are then expressed on the raw features, so serving needs no scaler.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from bench.locomo import Question, cited_turns
from memories.retrieval.rerank import FEATURES, Reranker, logging_features
from memories.retrieval.search import Fusion, Mode, SearchRequest, search_candidates
from tenants.context import TenantContext
from tenants.layers import LayerIdentifiers

#: The L2 penalty of :func:`fit`; 0.1 to 100 moved LoCoMo cross-fold R@10 by ±1 point.
L2 = 1.0


@dataclass(frozen=True)
class Examples:
    """``features``: ``(n, len(FEATURES))``; ``labels``: ``(n,)`` of 0/1; ``questions``: how
    many questions they came from."""

    features: np.ndarray
    labels: np.ndarray
    questions: int


def collect(ctx: TenantContext, asked: Iterable[Question], threshold: float | None = None,
            limit: int = 10) -> Examples:
    """The reranker's candidates and features for each question (run inside the tenant's
    scope), labelled by the question's evidence."""
    rows: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    count = 0
    for q in asked:
        with logging_features() as log:
            search_candidates(ctx, SearchRequest(
                query=q.question, identifiers=LayerIdentifiers(projectId=q.sample_id),
                layers=("project",), limit=limit, threshold=threshold, mode=Mode.HYBRID,
                fusion=Fusion.RERANK,
            ))
        count += 1
        for memories, features in log:
            rows.append(features)
            labels.append(np.array([float(bool(set(cited_turns(m.metadata or {}))
                                                & set(q.evidence))) for m in memories]))
    if not rows:
        return Examples(np.zeros((0, len(FEATURES))), np.zeros(0), count)
    return Examples(np.concatenate(rows), np.concatenate(labels), count)


def fit(examples: Examples, l2: float = L2, source: str = "") -> Reranker:
    """A class-balanced, L2-penalised logistic regression on ``examples``.

    Raises:
        ValueError: the examples hold no positive or no negative label.
    """
    x, y = examples.features, examples.labels
    positives = float(y.sum())
    if positives == 0 or positives == len(y):
        raise ValueError("training needs both evidence and other candidates")
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    weight = np.where(y > 0, 0.5 / positives, 0.5 / (len(y) - positives)) * len(y)

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        logits = z @ w
        penalty = np.r_[w[:-1], 0.0]
        value = float((weight * (np.logaddexp(0.0, logits) - y * logits)).sum()
                      + l2 * penalty @ penalty)
        grad = z.T @ (weight * (1.0 / (1.0 + np.exp(-logits)) - y)) + 2 * l2 * penalty
        return value, grad

    w = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B").x
    raw = w[:-1] / scale
    return Reranker(tuple(float(v) for v in raw), float(w[-1] - mean @ raw), source)


def describe(examples: Examples, samples: list[str], path: Any, l2: float) -> str:
    """The ``source`` line of a trained artifact: data, size and penalty."""
    return (f"LoCoMo {getattr(path, 'name', path)} conversations {', '.join(samples)}: "
            f"{examples.questions} questions (categories 1-4), {len(examples.labels)} "
            f"candidates, {int(examples.labels.sum())} evidence; class-balanced logistic "
            f"regression, L2 {l2}")
