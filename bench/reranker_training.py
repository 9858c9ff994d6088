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
from memories.retrieval.rerank import FEATURES, QUERY_CONDITIONAL, Reranker, logging_features
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


def _logistic(z: np.ndarray, y: np.ndarray, weight: np.ndarray, l2: float,
              offset: np.ndarray | float = 0.0, intercept: bool = True) -> np.ndarray:
    """Weights (the intercept last when ``intercept``) minimising the weighted logistic loss
    of ``offset + z @ w`` plus ``l2`` times the squared weights (not the intercept)."""
    columns = z.shape[1]
    design = np.hstack([z, np.ones((len(z), 1))]) if intercept else z

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        logits = offset + design @ w
        penalty = np.r_[w[:columns], np.zeros(len(w) - columns)]
        value = float((weight * (np.logaddexp(0.0, logits) - y * logits)).sum()
                      + l2 * penalty @ penalty)
        grad = design.T @ (weight * (1.0 / (1.0 + np.exp(-logits)) - y)) + 2 * l2 * penalty
        return value, grad

    return minimize(loss, np.zeros(design.shape[1]), jac=True, method="L-BFGS-B").x


def fit(examples: Examples, l2: float = L2, source: str = "") -> Reranker:
    """A class-balanced, L2-penalised logistic regression on ``examples``, in two stages.

    First the features that apply to every query, with the intercept; then the
    query-conditional ones (``rerank.QUERY_CONDITIONAL``: 0 for every candidate of a query
    they do not apply to) on top, the first stage's weights held. Fitted jointly, a feature
    that only a few questions light up shifts every other weight a little: on LoCoMo,
    ``time_match`` fitted with the rest lost a single-hop question at R@1 that no date was
    involved in; fitted after them, the ranking of a query that names no date is the
    first stage's.

    Raises:
        ValueError: the examples hold no positive or no negative label.
    """
    x, y = examples.features, examples.labels
    positives = float(y.sum())
    if positives == 0 or positives == len(y):
        raise ValueError("training needs both evidence and other candidates")
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = (x - mean) / scale
    weight = np.where(y > 0, 0.5 / positives, 0.5 / (len(y) - positives)) * len(y)
    late = np.array([name in QUERY_CONDITIONAL for name in FEATURES])
    first = _logistic(z[:, ~late], y, weight, l2)
    w = np.zeros(len(FEATURES))
    w[~late] = first[:-1]
    if late.any():
        w[late] = _logistic(z[:, late], y, weight, l2, offset=z[:, ~late] @ first[:-1]
                            + first[-1], intercept=False)
    raw = w / scale
    return Reranker(tuple(float(v) for v in raw), float(first[-1] - mean @ raw), source)


def describe(examples: Examples, samples: list[str], path: Any, l2: float) -> str:
    """The ``source`` line of a trained artifact: data, size and penalty."""
    return (f"LoCoMo {getattr(path, 'name', path)} conversations {', '.join(samples)}: "
            f"{examples.questions} questions (categories 1-4), {len(examples.labels)} "
            f"candidates, {int(examples.labels.sum())} evidence; class-balanced logistic "
            f"regression, L2 {l2}")
