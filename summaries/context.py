"""Context assembly: what an agent reads before it acts, within a token budget (issue
"Layer summaries and context assembly"; seed 001 "Query relevant layers by vector").

1. The layers the identifiers grant (a restricted key's only), and their summaries with
   freshness (``summaries.selectors.summaries_for``).
2. Each layer's relevance: the cosine similarity of the query's embedding to the layer's
   ``context_vector`` (the best of its depths). Without a query, layers go by precedence.
3. Summaries, most relevant layer first, each at the deepest depth that fits the summary
   share of the budget (:data:`SUMMARY_SHARE`, 30 %) and is worth its tokens: with a query,
   a summary may not push out of the context a memory more relevant to the query than
   itself (``summaries.selection``); a layer under :data:`MIN_LAYER_RELEVANCE` is left out
   at once. Budget the summaries do not use goes to memories.
4. Memories: hybrid search for the query (without a query: the most important, then newest,
   memories of each layer), highest score first; a memory an included summary quotes whole,
   or whose content repeats one already included, is skipped; each is added while its line
   fits.
5. The token count is that of the Markdown rendering (``summaries.markdown``), which is never
   over the budget; JSON carries the same items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import numpy as np

from memories.api.serializers.representation import iso_datetime
from memories.embedding.embedders import embed_query
from memories.models import UNSERVED_COLUMNS, Memory
from memories.restrictions import allowed_layers_of
from memories.retrieval.partition import layer_queryset, resolve_identifiers
from memories.retrieval.search import Mode, SearchRequest, search_candidates, validate_query
from memory_project.errors import InvalidInput, MemoryServiceError
from summaries.markdown import MEMORIES_HEADING, SUMMARIES_HEADING, one_line, render_markdown
from summaries.models import Depth
from summaries.selection import (
    Candidate,
    candidates_of,
    displaces_more_relevant,
    mean_relevance,
    pack,
    quoted_whole,
    summary_cost,
)
from summaries.selectors import ServedSummary, parse_depth, summaries_for
from summaries.tokens import TOKENIZER_NAME, count_tokens
from tenants.context import TenantContext
from tenants.layers import PRECEDENCE, Layer, LayerIdentifiers, accessible_layers

#: Smallest and largest token budget of one context.
MIN_BUDGET = 50
MAX_BUDGET = 32_000
DEFAULT_BUDGET = 2000
#: Share of the budget summaries may take (the rest, and whatever they leave, is memories').
SUMMARY_SHARE = 0.3
#: A layer whose summary is less similar to the query than this is left out at once.
MIN_LAYER_RELEVANCE = 0.2
#: Memories considered at most (search ``limit``).
MAX_CANDIDATES = 100


@dataclass(frozen=True)
class ContextRequest:
    """What an agent asks for: its identifiers, an optional query, a budget in tokens, and
    optionally one depth for every summary (else the deepest that fits)."""

    identifiers: LayerIdentifiers
    query: str | None = None
    budget: int = DEFAULT_BUDGET
    depth: str | None = None
    summary_share: float = SUMMARY_SHARE

    def validated(self) -> ContextRequest:
        """Raises InvalidInput / QueryTooLong: a budget outside 50..32000, a summary share
        outside [0, 1], an unknown depth, a blank or over-long query."""
        if (isinstance(self.budget, bool) or not isinstance(self.budget, int)
                or not MIN_BUDGET <= self.budget <= MAX_BUDGET):
            raise InvalidInput(f"budget must be an integer number of tokens within "
                               f"{MIN_BUDGET}..{MAX_BUDGET}.", operation="context.assemble",
                               details={"field": "budget", "min": MIN_BUDGET,
                                        "max": MAX_BUDGET})
        if (isinstance(self.summary_share, bool)
                or not isinstance(self.summary_share, int | float)
                or not 0.0 <= self.summary_share <= 1.0):
            raise InvalidInput("summaryShare must be within [0, 1].",
                               operation="context.assemble", details={"field": "summaryShare"})
        if self.depth is not None:
            parse_depth(self.depth)
        if self.query is not None:
            try:
                validate_query(self.query)
            except MemoryServiceError as err:
                err.operation = "context.assemble"
                raise
        return self


@dataclass(frozen=True)
class LayerScore:
    """A layer's relevance to the query (``None`` without a query or a context vector) and
    the depth of its summary that was included (``None``: left out, ``reason`` says why)."""

    layer: str
    scope: str
    score: float | None
    depth: str | None
    reason: str = ""


@dataclass(frozen=True)
class ContextMemory:
    """A memory in the context, with its search score and tokens."""

    memory: Memory
    layer: str
    score: float | None
    tokens: int


@dataclass
class AssembledContext:
    """The assembled context: included summaries and memories, every layer's score, the
    token count of the Markdown rendering and the budget."""

    budget: int
    query: str | None
    summaries: list[tuple[ServedSummary, float | None]] = field(default_factory=list)
    memories: list[ContextMemory] = field(default_factory=list)
    layer_scores: list[LayerScore] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    token_count: int = 0
    tokenizer: str = TOKENIZER_NAME

    @property
    def memory_ids(self) -> list[str]:
        """Ids of the included memories, in order."""
        return [str(m.memory.pk) for m in self.memories]

    @property
    def summary_ids(self) -> list[str]:
        """Ids of the included summaries, in order."""
        return [str(s.summary.pk) for s, _ in self.summaries]

    def markdown(self) -> str:
        """The context as Markdown, ready to drop into a prompt."""
        return render_markdown(self)


def _cosine(query: np.ndarray | None, served: list[ServedSummary]) -> float | None:
    if query is None:
        return None
    scores = [float(np.dot(query, np.asarray(s.summary.context_vector, dtype=np.float32)))
              for s in served if s.summary.context_vector is not None]
    return max(scores) if scores else None


#: A candidate: its memory, layer, search score and cosine similarity to the query (the last
#: two ``None`` without a query).
Row = tuple[Memory, str, float | None, float | None]


def _rows(ctx: TenantContext, request: ContextRequest, identifiers: LayerIdentifiers,
          layers: list[Layer]) -> list[Row]:
    """Memories in rank order: hybrid search for the query, else importance then recency."""
    if request.query:
        found = search_candidates(ctx, SearchRequest(
            query=request.query, identifiers=request.identifiers,
            layers=tuple(layer.value for layer in layers), limit=MAX_CANDIDATES,
            threshold=0.0, mode=Mode.HYBRID))
        hits = sorted(found.results, key=lambda h: (-h.score, PRECEDENCE[h.layer]))
        return [(h.memory, h.layer.value, h.score, h.similarity) for h in hits]
    rows: list[Row] = []
    for layer in layers:
        queryset = layer_queryset(layer, identifiers).defer(*UNSERVED_COLUMNS)
        rows.extend((m, layer.value, None, None) for m in queryset.order_by(
            "-importance", "-id")[:MAX_CANDIDATES])
    return rows[:MAX_CANDIDATES]


def _similarities(vector: np.ndarray | None, rows: list[Row]) -> dict[str, float]:
    """Cosine similarity of each row's memory to the query: the search's own (every hybrid
    candidate has one), else from the stored embeddings (one query for those missing)."""
    if vector is None or not rows:
        return {}
    known = {str(m.pk): sim for m, _, _, sim in rows if sim is not None}
    missing = [m.pk for m, _, _, sim in rows if sim is None]
    if missing:
        stored = Memory.objects.filter(pk__in=missing).exclude(
            embedding__isnull=True).values_list("pk", "embedding")
        known.update({str(pk): float(np.dot(vector, np.asarray(e, dtype=np.float32)))
                      for pk, e in stored})
    return known


def _add_summaries(result: AssembledContext, served: list[ServedSummary],
                   vector: np.ndarray | None, candidates: list[Candidate],
                   request: ContextRequest) -> tuple[int, frozenset[str]]:
    """Add the summaries worth their tokens (``summaries.selection``), most relevant layer
    first; returns the tokens they take and the memories they quote whole."""
    by_layer: dict[str, list[ServedSummary]] = {}
    for item in served:
        by_layer.setdefault(item.summary.layer, []).append(item)
    scored = [(layer, items, _cosine(vector, items)) for layer, items in by_layer.items()]
    # By relevance; a layer without a context vector (cleared by an erasure until its
    # regeneration) after the scored ones; without a query, by precedence alone.
    scored.sort(key=lambda x: (x[2] is None, -(x[2] or 0.0), PRECEDENCE[Layer(x[0])]))
    allowance = int(request.budget * request.summary_share)
    heading = count_tokens(SUMMARIES_HEADING)
    memories_heading = count_tokens(MEMORIES_HEADING)
    contents = {str(c.memory.pk): one_line(c.memory.content) for c in candidates}
    used, quoted = 0, frozenset[str]()
    packed = pack(candidates, request.budget - memories_heading)
    for layer, items, score in scored:
        scope = items[0].scope.key
        if score is not None and score < MIN_LAYER_RELEVANCE:
            result.layer_scores.append(LayerScore(layer, scope, score, None, "not relevant"))
            continue
        options = sorted((s for s in items if s.summary.content and (
            request.depth is None or s.summary.depth == request.depth)),
            key=lambda s: -Depth.values.index(s.summary.depth))
        reason = f"no {request.depth} summary" if request.depth and not options else \
            "over budget"
        for option in options:
            cost = summary_cost(option) + (0 if used else heading)
            if used + cost > allowance:
                continue
            also = quoted | quoted_whole(option, contents)
            after = pack(candidates, request.budget - used - cost - memories_heading, also)
            if vector is not None and displaces_more_relevant(
                    mean_relevance(option, vector), packed, after, also):
                reason = "displaces more relevant memories"
                continue
            used, quoted, packed = used + cost, also, after
            result.summaries.append((option, score))
            result.layer_scores.append(LayerScore(layer, scope, score, option.summary.depth))
            if option.freshness.stale:
                result.warnings.append(
                    f"The {layer} summary is stale ({', '.join(option.freshness.reasons)}); "
                    "it is being regenerated.")
            break
        else:
            result.layer_scores.append(LayerScore(layer, scope, score, None, reason))
    return used, quoted


def context_assemble(ctx: TenantContext, request: ContextRequest, *, observe: bool = True
                     ) -> AssembledContext:
    """One context for an agent (module docstring). ``observe=False`` for a preview that
    only shows what an agent would get: summary reads are then not counted or acted on.

    Returns:
        The included summaries (with relevance scores), memories, every layer's score and
        why a layer was left out, warnings (stale summaries), and ``token_count`` of the
        Markdown rendering, which is at most ``request.budget``.

    Raises:
        InvalidInput / QueryTooLong: see :meth:`ContextRequest.validated`.
        MissingIdentifier, Unauthorized: the identifiers grant no layer, or go against a
            restricted key's pins. EmbeddingFailed: the query could not be embedded.
    """
    request.validated()
    identifiers = resolve_identifiers(ctx, request.identifiers)
    layers = allowed_layers_of(ctx, accessible_layers(identifiers))
    result = AssembledContext(budget=request.budget, query=request.query)
    if not layers:
        result.warnings.append("These identifiers reach no layer this key may read.")
        return result
    vector = embed_query(ctx.tenant_id, request.query) if request.query else None
    served = summaries_for(ctx, identifiers=request.identifiers, observe=observe)
    rows = _rows(ctx, request, identifiers, layers)
    candidates = candidates_of([row[:3] for row in rows], _similarities(vector, rows))
    used, quoted = _add_summaries(result, served, vector, candidates, request)
    for candidate in pack(candidates, request.budget - used - count_tokens(MEMORIES_HEADING),
                          quoted):
        result.memories.append(ContextMemory(candidate.memory, candidate.layer,
                                             candidate.score, candidate.tokens))
    _fit(result)
    return result


def _fit(result: AssembledContext) -> None:
    """Count the Markdown rendering; drop the last memory (then summary) while it is over
    the budget (a safety net: every line was priced before it was added)."""
    while True:
        result.token_count = count_tokens(result.markdown())
        if result.token_count <= result.budget:
            return
        if result.memories:
            result.memories.pop()
        elif result.summaries:
            result.summaries.pop()
        else:
            return


def context_as_dict(result: AssembledContext) -> dict[str, Any]:
    """The JSON form of a context (``POST /api/v1/context``)."""
    return {
        "query": result.query,
        "budget": result.budget,
        "tokenCount": result.token_count,
        "tokenizer": result.tokenizer,
        "summaries": [{
            "id": str(s.summary.pk), "layer": s.summary.layer, "scope": s.scope.key,
            "personalized": s.summary.personalized, "depth": s.summary.depth,
            "score": None if score is None else round(score, 4),
            "content": s.summary.content, "tokenCount": s.summary.token_count,
            "sourceIds": [str(i) for i in s.summary.source_ids],
            "generatedAt": iso_datetime(s.summary.generated_at, UTC),
            **s.freshness.as_dict(),
        } for s, score in result.summaries],
        "memories": [{
            "id": str(m.memory.pk), "layer": m.layer, "content": m.memory.content,
            "score": None if m.score is None else round(m.score, 6), "tokenCount": m.tokens,
            "occurredAt": iso_datetime(m.memory.occurred_at, UTC),
            "createdAt": iso_datetime(m.memory.created_at, UTC),
        } for m in result.memories],
        "layerScores": [{
            "layer": s.layer, "scope": s.scope,
            "score": None if s.score is None else round(s.score, 4),
            "includedDepth": s.depth, "reason": s.reason or None,
        } for s in result.layer_scores],
        "included": {"summaryIds": result.summary_ids, "memoryIds": result.memory_ids},
        "warnings": result.warnings,
    }
