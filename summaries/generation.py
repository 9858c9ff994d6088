"""Generating a layer scope's summaries (seed 001 "Layer Summary Storage", "Context Vector
Storage", "Tiered model selection").

One generation writes every configured depth of one scope in one transaction, or nothing:

1. The scope's sources: its active memories, the newest :data:`MAX_SOURCES` when it holds
   more, and the SHA-256 of all of them (``scopes.source_hash``).
2. The sentences. Offline (the default: ``SUMMARY_GENERATOR=auto`` without
   ``LLM_BASE_URL``, or ``offline``): ``summaries.extractive`` picks whole source sentences
   that cover the scope, per depth. With a model (``llm``, or ``auto`` with a model
   server): one call of the ``summarize`` purpose writes the deepest configured depth with a
   cited source per sentence, and the shallower depths are chosen from its sentences the
   same way — one model call per scope instead of one per depth. A model that fails, times
   out or answers garbage falls back to the offline summary; a spent budget refuses.
3. Token counts (``summaries.tokens``), the ``context_vector`` of each depth (the
   normalised mean of its sentences' embeddings: the sources' stored ones offline), and the
   rows.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from llm.budgets import period_budget, refuse_when_spent
from llm.purposes.summarize import DEPTHS, Source, summarize
from memories.embedding.embedders import embed_texts
from memories.models import Memory, State
from summaries import extractive
from summaries.config import summary_settings
from summaries.metrics import GENERATION_MS, GENERATIONS
from summaries.models import Depth, LayerSummary, Priority, SummaryScope
from summaries.scopes import ScopeRef, scope_row, source_hash, sources
from summaries.tokens import count_many, count_tokens
from tenants.context import TenantContext
from tenants.layers import IDENTIFIER_FIELDS

#: Sources one generation reads at most: the scope's newest memories (CPU stays bounded).
MAX_SOURCES = 1500
#: Personalization reads the newest memories of the user or session, at most this many.
PERSONAL_SAMPLE = 200
#: A model reads the sources that cover the scope best, up to this many tokens and sources.
MODEL_INPUT_TOKENS = 2500
MAX_MODEL_SOURCES = 60
OFFLINE_MODEL = "offline:extractive"


@dataclass(frozen=True)
class Draft:
    """One depth's sentences ``[(text, (source id, …))]``, before it is stored."""

    depth: str
    sentences: tuple[tuple[str, tuple[str, ...]], ...]
    model: str
    #: The context vector: the L2-normalised mean of the sentences' embeddings, so that it
    #: covers the whole summary (the embedding model reads only its first 256 word pieces).
    vector: np.ndarray

    @property
    def content(self) -> str:
        """The sentences joined by spaces."""
        return " ".join(text for text, _ in self.sentences)


def uses_model() -> bool:
    """Whether summaries are written by a language model: ``SUMMARY_GENERATOR`` ``llm``
    always, ``offline`` never, ``auto`` (default) when a model server is configured
    (``LLM_BASE_URL``). On ``auto`` the local default model is not used: it wrote unfaithful
    sentences and took minutes per scope on two cores (README "Language model")."""
    choice = str(settings.SUMMARY_GENERATOR).lower()
    return choice == "llm" or (choice == "auto" and bool(settings.LLM_BASE_URL))


def check_budget(ctx: TenantContext) -> None:
    """Refuse summarization when the tenant's ``summaries.budget`` is spent (only when a model
    would be called; the offline summarizer costs nothing).

    Raises:
        BudgetExceeded: ``details`` name the budget, limit, usage and period.
    """
    if not uses_model():
        return
    cap = summary_settings(ctx).budget
    refuse_when_spent(ctx, period_budget(cap.period, cap.tokens, cap.cost),
                      operation="summary.generate", purpose="summarize",
                      setting="summaries.budget", label="summarization budget")


def _candidates(rows: list[tuple[Any, str, Any]]) -> tuple[list[extractive.Candidate],
                                                         np.ndarray]:
    kept: list[extractive.Candidate] = []
    vectors: list[np.ndarray] = []
    for position, (pk, content, vector) in enumerate(rows):
        if vector is None:
            continue
        text, tokens = extractive.leading(content, extractive.MAX_SENTENCE_TOKENS, count_tokens)
        kept.append(extractive.Candidate(text, str(pk), position, tokens))
        vectors.append(np.asarray(vector, dtype=np.float32))
    matrix = np.vstack(vectors) if vectors else np.zeros((0, 1), dtype=np.float32)
    return kept, matrix


def _personal_weights(scope: ScopeRef, vectors: np.ndarray) -> np.ndarray | None:
    """1 + cosine similarity (≥ 0) of each source to the centroid of the user's or session's
    own newest memories: what a personalized summary dwells on."""
    if scope.personal is None or not len(vectors):
        return None
    own = [np.asarray(v, dtype=np.float32) for v in Memory.objects.filter(
        **{IDENTIFIER_FIELDS[scope.personal[0]]: scope.personal[1]}, state=State.ACTIVE,
        embedding__isnull=False,
    ).order_by("-id").values_list("embedding", flat=True)[:PERSONAL_SAMPLE]]
    if not own:
        return None
    centroid = np.mean(np.vstack(own), axis=0)
    norm = float(np.linalg.norm(centroid)) or 1.0
    return np.asarray(1.0 + np.clip(vectors @ (centroid / norm), 0.0, None), dtype=np.float32)


def _offline(depths: tuple[str, ...], rows: list[tuple[Any, str, Any]], scope: ScopeRef
             ) -> list[Draft]:
    candidates, vectors = _candidates(rows)
    weights = _personal_weights(scope, vectors)
    index = {c.position: i for i, c in enumerate(candidates)}
    drafts = []
    for depth in depths:
        chosen = extractive.select(candidates, vectors, DEPTHS[depth], weights)
        drafts.append(Draft(depth, tuple((c.text, (c.source_id,)) for c in chosen),
                            OFFLINE_MODEL, _mean(vectors, [index[c.position] for c in chosen])))
    return drafts


def _mean(vectors: np.ndarray, rows: list[int]) -> np.ndarray:
    """The L2-normalised mean of ``vectors[rows]`` (zeros for no row)."""
    if not rows:
        return np.zeros(vectors.shape[1] if vectors.ndim == 2 else 1, dtype=np.float32)
    mean = vectors[rows].mean(axis=0)
    return np.asarray(mean / (float(np.linalg.norm(mean)) or 1.0), dtype=np.float32)


def _with_model(ctx: TenantContext, depths: tuple[str, ...], rows: list[tuple[Any, str, Any]],
                scope: ScopeRef) -> list[Draft]:
    """The drafts of one model call (none when the model's answer fell back; a shallower
    depth none of whose sentences fits is left out)."""
    deepest = depths[-1]
    candidates, vectors = _candidates(rows)
    picked = extractive.select(candidates, vectors, MODEL_INPUT_TOKENS,
                               _personal_weights(scope, vectors))[:MAX_MODEL_SOURCES]
    summary = summarize(ctx, depth=deepest, sources=[Source(c.source_id, c.text)
                                                     for c in picked],
                        subject=scope.describe(), layer=scope.layer.value)
    if summary.fallback:
        return []
    said = [(s.text, s.source_ids) for s in summary.sentences]
    vectors = np.vstack([v for v, _ in embed_texts(ctx.tenant_id, [t for t, _ in said],
                                                   kind="summary")])
    counts = count_many([t for t, _ in said])
    candidates = [extractive.Candidate(text, ",".join(ids), i, counts[i])
                  for i, (text, ids) in enumerate(said)]
    drafts = [Draft(deepest, tuple(said), summary.model,
                    _mean(vectors, list(range(len(said)))))]
    for depth in depths[:-1]:
        chosen = [c.position for c in extractive.select(candidates, vectors, DEPTHS[depth])]
        drafts.append(Draft(depth, tuple(said[i] for i in chosen), summary.model,
                            _mean(vectors, chosen)))
    return [d for d in drafts if d.sentences]


def summary_generate(ctx: TenantContext, *, scope: ScopeRef, trigger: str
                     ) -> list[LayerSummary]:
    """Write the configured depths of ``scope``'s summary (or delete them when the scope has
    no active memory left). Runs in a Celery task or a command (a model call may take
    minutes).

    Returns:
        The stored summaries, in depth order (empty when the scope has no sources).

    Raises:
        BudgetExceeded: a model would be called and the summarization or language-model
            budget is spent; nothing is written and the previous summaries stay.
        EmbeddingFailed: a model's sentences could not be embedded; nothing is written.
    """
    started = time.perf_counter()
    config = summary_settings(ctx).for_layer(scope.layer)
    depths = tuple(d for d in Depth.values if d in config.depths)
    digest = source_hash(scope)
    rows = list(reversed(sources(scope).order_by("-id").values_list(
        "id", "content", "embedding")[:MAX_SOURCES]))
    state = scope_row(ctx, scope)
    seen_changes = state.changes
    drafts: list[Draft] = []
    if rows:
        if uses_model():
            check_budget(ctx)
            drafts = _with_model(ctx, depths, rows, scope)
        missing = tuple(d for d in depths if d not in {x.depth for x in drafts})
        if missing:  # offline: the default, a model that fell back, a depth it could not fill
            drafts += _offline(missing, rows, scope)
        drafts = sorted((d for d in drafts if d.sentences), key=lambda d: depths.index(d.depth))
    tokens = count_many([d.content for d in drafts])
    now = timezone.now()
    with transaction.atomic():
        LayerSummary.objects.filter(scope=state).exclude(
            depth__in=[d.depth for d in drafts]).delete()
        stored = [_store(ctx, state, scope, draft, count, digest, trigger, now)
                  for draft, count in zip(drafts, tokens, strict=True)]
        SummaryScope.objects.filter(pk=state.pk).update(
            changes=Greatest(F("changes") - seen_changes, 0), first_change_at=None,
            pending_since=None, priority=Priority.NORMAL, trigger=trigger,
            last_generated_at=now, last_error="", last_error_at=None)
    elapsed_ms = (time.perf_counter() - started) * 1000
    for summary in stored:
        GENERATION_MS.labels(scope.layer.value, summary.depth).observe(
            elapsed_ms / max(1, len(stored)))
        GENERATIONS.labels(scope.layer.value, summary.depth, trigger).inc()
    return stored


def _store(ctx: TenantContext, state: SummaryScope, scope: ScopeRef, draft: Draft,
           tokens: int, digest: str, trigger: str, now: Any
           ) -> LayerSummary:
    sentences = [{"text": text, "sourceIds": list(ids)} for text, ids in draft.sentences]
    cited = sorted({i for _, ids in draft.sentences for i in ids})
    summary, _ = LayerSummary.objects.update_or_create(
        scope=state, depth=draft.depth,
        defaults={"tenant_id": ctx.tenant_id, "layer": scope.layer.value,
                  "content": draft.content, "sentences": sentences, "source_ids": cited,
                  "source_count": len(cited), "token_count": tokens,
                  "source_hash": digest, "generated_at": now, "model": draft.model,
                  "personalized": scope.personal is not None,
                  "personalization_context": dict([scope.personal]) if scope.personal else {},
                  "trigger": trigger, "invalidated_at": None, "context_vector": draft.vector})
    return summary
