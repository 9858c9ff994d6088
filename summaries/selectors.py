"""Reads of layer summaries, each with its freshness (seed 001 "Summary Retrieval", "Summary
Staleness Detection", "Staleness check on retrieval").

A summary is stale when a source it was written from changed (the scope's source hash no
longer matches ``source_hash``; the current hash comes from the cache between changes,
``summaries.source_hashes``), when a source it cites was deleted or replaced
(``invalidated_at``), or when it is older than the layer's ``maxAge``. A stale summary is
still served, flagged, logged and counted (``memory_summary_stale_served_total``), and its
scope is marked for regeneration.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from django.db.models import F, QuerySet
from django.utils import timezone

from memories.restrictions import allowed_layers_of, check_layer
from memories.retrieval.partition import resolve_identifiers
from memory_project.errors import InvalidInput
from summaries.config import summary_settings
from summaries.metrics import RETRIEVAL_MS, RETRIEVALS, STALE_SERVED
from summaries.models import Depth, LayerSummary, SummaryScope
from summaries.scopes import (
    PERSONAL_IDENTIFIERS,
    ScopeRef,
    has_memories,
    scope_for,
    scope_of_row,
)
from summaries.services import summary_scope_wanted
from summaries.source_hashes import current_source_hash
from tenants.audit import parse_uuid
from tenants.context import TenantContext
from tenants.layers import Layer, LayerIdentifiers, accessible_layers, parse_layer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Freshness:
    """Whether a summary still says what its sources say (seed 001 freshness metadata)."""

    stale: bool
    needs_regeneration: bool
    age_seconds: float
    reasons: tuple[str, ...]  # sources_changed, invalidated, max_age

    def as_dict(self) -> dict[str, Any]:
        """The response form: ``{"stale", "needsRegeneration", "ageSeconds", "reasons"}``."""
        return {"stale": self.stale, "needsRegeneration": self.needs_regeneration,
                "ageSeconds": round(self.age_seconds, 1), "reasons": list(self.reasons)}


@dataclass(frozen=True)
class ServedSummary:
    """A summary as served: the row, the scope it covers and its freshness."""

    summary: LayerSummary
    scope: ScopeRef
    freshness: Freshness


def parse_depth(value: Any) -> str:
    """``value`` as a depth.

    Raises:
        InvalidInput: not one of sentence, paragraph, detailed (``details.allowed``).
    """
    if value not in Depth.values:
        raise InvalidInput(f"Unknown depth {value!r}.",
                           details={"field": "depth", "allowed": list(Depth.values)})
    return str(value)


def personal_for(ctx: TenantContext, layer: Layer, identifiers: LayerIdentifiers
                 ) -> tuple[str, str] | None:
    """The personalization of ``layer``'s summary for these identifiers: ``("userId", …)``
    or ``("sessionId", …)`` when the layer is configured to personalize and the identifier
    is given, else ``None``."""
    kind = summary_settings(ctx).for_layer(layer).personalize
    if not kind:
        return None
    name = PERSONAL_IDENTIFIERS[kind]
    value = getattr(identifiers, name)
    return (name, value) if value else None


def _rows(scope: ScopeRef) -> QuerySet[LayerSummary]:
    return LayerSummary.objects.filter(
        scope__layer=scope.layer.value, scope__scope_key=scope.key,
        scope__personal_key=scope.personal_key).select_related("scope")


def _freshness(ctx: TenantContext, summary: LayerSummary, current_hash: str) -> Freshness:
    age = (timezone.now() - summary.generated_at).total_seconds()
    reasons = []
    if summary.source_hash != current_hash:
        reasons.append("sources_changed")
    if summary.invalidated_at is not None:
        reasons.append("invalidated")
    if age > summary_settings(ctx).for_layer(summary.layer).max_age:
        reasons.append("max_age")
    return Freshness(bool(reasons), bool(reasons), age, tuple(reasons))


def _served(ctx: TenantContext, scope: ScopeRef, summaries: list[LayerSummary],
            current_hash: str, *, observe: bool = True) -> list[ServedSummary]:
    """The summaries with their freshness; with ``observe`` (an agent's read, not a page
    that only shows them), stale ones are logged, counted and their scope marked pending."""
    served = []
    stale_scope: SummaryScope | None = None
    for summary in summaries:
        freshness = _freshness(ctx, summary, current_hash)
        if freshness.stale and observe:
            STALE_SERVED.labels(summary.layer).inc()
            logger.warning("stale summary served: tenant %s, %s %s %s (%s)", ctx.tenant_id,
                           summary.layer, scope.key, summary.depth, ",".join(freshness.reasons))
            stale_scope = summary.scope
        served.append(ServedSummary(summary, scope, freshness))
    if stale_scope is not None and stale_scope.pending_since is None:
        summary_scope_wanted(ctx, scope=scope, trigger="stale")
    return served


def _scope_summaries(ctx: TenantContext, layer: Layer, identifiers: LayerIdentifiers,
                     depths: list[str], observe: bool = True) -> list[ServedSummary]:
    personal = personal_for(ctx, layer, identifiers)
    scope = scope_for(layer, identifiers, personal)
    rows = list(_rows(scope).filter(depth__in=depths))
    if not rows and personal is not None:  # not written yet: the shared summary answers
        if observe and has_memories(personal):  # not for any name a caller makes up
            summary_scope_wanted(ctx, scope=scope, trigger="personalization")
        scope = scope.shared()
        rows = list(_rows(scope).filter(depth__in=depths))
    if not rows:
        return []
    rows.sort(key=lambda s: Depth.values.index(s.depth))
    return _served(ctx, scope, rows, current_source_hash(ctx.tenant_id, scope.shared()),
                   observe=observe)


def summary_get(ctx: TenantContext, *, layer: Any, identifiers: LayerIdentifiers,
                depth: Any) -> ServedSummary | None:
    """The summary of ``layer``'s scope for ``identifiers`` at ``depth`` (personalized when
    the layer is configured so and the identifier is given), with its freshness; ``None``
    when there is none (seed 001 "Get summary by layer and depth").

    Raises:
        InvalidLayer: unknown layer. InvalidInput: unknown depth. MissingIdentifier: the
        layer's identifiers are missing. Unauthorized: a restricted key's layer or pin.
    """
    started = time.perf_counter()
    parsed = parse_layer(layer)
    depth = parse_depth(depth)
    check_layer(ctx, parsed)
    resolved = resolve_identifiers(ctx, identifiers)
    found = _scope_summaries(ctx, parsed, resolved, [depth])
    RETRIEVALS.labels(parsed.value, depth, "true" if found else "false").inc()
    RETRIEVAL_MS.observe((time.perf_counter() - started) * 1000)
    return found[0] if found else None


def summaries_for(ctx: TenantContext, *, identifiers: LayerIdentifiers,
                  depths: list[str] | None = None, observe: bool = True
                  ) -> list[ServedSummary]:
    """The summaries of every layer the identifiers grant (a restricted key's layers only), in
    layer precedence order (agent, user, session, project, team, org, company), each layer's
    depths shortest first, with freshness (seed 001 "Get all summaries for context").
    ``observe=False`` (the console's preview): no metrics, stale log or pending marks.

    Raises:
        InvalidInput: an unknown depth. Unauthorized: an identifier against a key's pin.
    """
    started = time.perf_counter()
    wanted = [parse_depth(d) for d in depths] if depths else list(Depth.values)
    resolved = resolve_identifiers(ctx, identifiers)
    served: list[ServedSummary] = []
    for layer in allowed_layers_of(ctx, accessible_layers(resolved)):
        found = _scope_summaries(ctx, layer, resolved, wanted, observe)
        served.extend(found)
        for depth in wanted if observe else []:
            RETRIEVALS.labels(layer.value, depth, "true" if any(
                s.summary.depth == depth for s in found) else "false").inc()
    if observe:
        RETRIEVAL_MS.observe((time.perf_counter() - started) * 1000)
    return served


def scope_list(ctx: TenantContext, *, layer: str | None = None, limit: int = 200
               ) -> list[SummaryScope]:
    """The tenant's summarised scopes (for the console), newest generation first."""
    rows = SummaryScope.objects.all()
    if layer:
        rows = rows.filter(layer=layer)
    return list(rows.order_by(F("last_generated_at").desc(nulls_last=True), "layer",
                              "scope_key")[:limit])


def scope_summaries(ctx: TenantContext, *, scope_id: Any) -> tuple[SummaryScope,
                                                                   list[ServedSummary]] | None:
    """One scope row and its summaries with freshness, or ``None`` for an unknown id."""
    pk = parse_uuid(scope_id)
    row = SummaryScope.objects.filter(pk=pk).first() if pk else None
    if row is None:
        return None
    scope = scope_of_row(row)
    rows = sorted(LayerSummary.objects.filter(scope=row).select_related("scope"),
                  key=lambda s: Depth.values.index(s.depth))
    return row, _served(ctx, scope, rows, current_source_hash(ctx.tenant_id, scope.shared()),
                        observe=False) if rows else []
