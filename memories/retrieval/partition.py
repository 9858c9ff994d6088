"""From a call's identifiers to the rows of a layer, within the caller's tenant.

:func:`resolve_identifiers` also applies a restricted key's pinned identifiers (the other
checks of a restricted key are in ``memories.restrictions``).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.contrib.postgres.search import SearchQuery
from django.db import connection
from django.db.models import Q, QuerySet

from memories.models import Memory, State, TermImpact
from memory_project.errors import InvalidInput, Unauthorized
from tenants.context import TenantContext
from tenants.layers import (
    Layer,
    LayerIdentifiers,
    require_identifiers,
)
from tenants.selectors import project_ancestry, team_ancestry


def resolve_identifiers(ctx: TenantContext, identifiers: LayerIdentifiers) -> LayerIdentifiers:
    """Fill in what the tenant's hierarchy implies.

    ``companyId`` is always the caller's tenant; a registered ``projectId`` brings its
    ``teamId`` and ``orgId``, a registered ``teamId`` its ``orgId`` (seed 001: userId +
    projectId grant user, project, team, org, company).

    A restricted key's pinned identifiers are filled in when absent.

    Raises:
        InvalidInput: ``companyId`` names another company than the caller's tenant.
        Unauthorized: an identifier differs from the value the caller's key is pinned to.
    """
    for name, value in ctx.pinned_identifiers:
        given = getattr(identifiers, name)
        if given is not None and given != value:
            raise Unauthorized(f"This API key is restricted to {name}={value!r}.",
                               details={"pinnedIdentifiers": dict(ctx.pinned_identifiers)})
    if ctx.pinned_identifiers:
        identifiers = identifiers.with_values(**dict(ctx.pinned_identifiers))
    if identifiers.companyId is not None and identifiers.companyId != ctx.tenant_slug:
        raise InvalidInput(
            "companyId must be the authenticated tenant's slug "
            f"({ctx.tenant_slug!r}) or be left out."
        )
    resolved = identifiers.with_values(companyId=ctx.tenant_slug)
    if resolved.projectId is not None:
        team_id, org_id = project_ancestry(resolved.projectId)
        resolved = resolved.with_values(teamId=team_id, orgId=org_id)
    if resolved.teamId is not None and resolved.orgId is None:
        resolved = resolved.with_values(orgId=team_ancestry(resolved.teamId))
    return resolved


def layer_queryset(
    layer: Layer, identifiers: LayerIdentifiers, *, states: tuple[str, ...] = (State.ACTIVE,)
) -> QuerySet[Memory]:
    """The active tenant's memories of ``layer`` for ``identifiers`` (already resolved).

    Only ``states`` (default: active), and never a pruned memory (``pruned_at`` set, seed 001
    "Memory-R1 Pruning": pruned memories leave the search index), so search, recall and list
    all skip deleted, archived and pruned memories.

    Raises:
        MissingIdentifier: the layer's required identifiers are not all present.
    """
    columns: dict[str, Any] = require_identifiers(layer, identifiers)
    return Memory.objects.filter(layer=layer.value, state__in=states, pruned_at__isnull=True,
                                 **columns)


def partition_lexeme(tenant_id: uuid.UUID, layer: Layer, identifiers: LayerIdentifiers) -> str:
    """The ``scope_key`` lexeme of ``layer``'s rows for ``identifiers`` (already resolved):
    ``'s' + sha256(tenant, layer, the layer's required identifiers)`` in hex, joined by
    ``chr(31)``, as the SQL function ``memory_scope_key`` computes it (migration
    ``memories.0010``).

    Raises:
        MissingIdentifier: the layer's required identifiers are not all present.
    """
    columns = require_identifiers(layer, identifiers)
    raw = "\x1f".join([str(tenant_id), layer.value, *columns.values()])
    return "s" + hashlib.sha256(raw.encode()).hexdigest()


def keyword_partition(tenant_id: uuid.UUID, layer: Layer, identifiers: LayerIdentifiers) -> Q:
    """``scope_key`` matches :func:`partition_lexeme`: AND-ed to a keyword query's term, the
    ``mem_keyword_gin`` index finds the partition's memories holding the term in one scan
    (with ``tenant_id`` alone, PostgreSQL intersected the term's index entries with all of the
    tenant's btree entries; figures: ``docs/performance.md``, "Keyword search"). It narrows
    :func:`layer_queryset`, whose column filters stay.
    """
    return partition_is(partition_lexeme(tenant_id, layer, identifiers))


class LexemeQuery(SearchQuery):
    """``text::tsquery``: a query in ``tsquery`` input syntax whose lexemes are taken as they
    are. ``to_tsquery`` would run the parser on them again, which splits a hyphenated
    compound (the lexeme ``self-car`` of "self-care") into a phrase of its parts that no
    memory's vector matches; a cast keeps it one lexeme, as ``to_tsvector`` stored it."""

    template = "(%(expressions)s)::tsquery"

    def __init__(self, text: str) -> None:
        super().__init__(text, search_type="raw")


def partition_is(lexeme: str) -> Q:
    """:func:`keyword_partition` for an already computed :func:`partition_lexeme`."""
    return Q(scope_key=SearchQuery(lexeme, search_type="raw", config="simple"))


_POPULATED_SQL = """
SELECT h FROM unnest(%s::bigint[]) AS h
WHERE EXISTS (SELECT 1 FROM memories_termimpact WHERE scope = h AND lexeme = %s)
"""


def populated_layers(tenant_id: uuid.UUID, layers: list[Layer],
                     identifiers: LayerIdentifiers) -> set[Layer]:
    """Which of ``layers`` hold at least one memory of :func:`layer_queryset` (default
    states) for ``identifiers`` (already resolved): one statement probing each layer scope's
    document postings (migration ``memories.0019``: one per active, unpruned memory, keyed by
    :func:`scope_hash` of its ``scope_key``), one index-only lookup each. Row-level security
    keeps the probes to the caller's tenant.

    A search skips the lists of the other layers: two empty lists of a hybrid search still
    cost milliseconds, their jobs competing with the populated layers' for the cores
    (``docs/performance.md``, "Semantic search"). Probing the postings instead of the
    memories spares compiling a query per layer (~1.4 → ~0.4 ms for two layers,
    ``docs/performance.md``, "Caches of the request path").

    Raises:
        MissingIdentifier: a layer's required identifiers are not all present.
    """
    if not layers:
        return set()
    by_hash = {scope_hash(partition_lexeme(tenant_id, layer, identifiers)): layer
               for layer in layers}
    with connection.cursor() as cursor:
        cursor.execute(_POPULATED_SQL, [list(by_hash), DOCUMENT_LEXEME])
        return {by_hash[row[0]] for row in cursor.fetchall()}


#: The lexeme of a memory's document posting, whose ``impact`` is the memory's length
#: (migration 0019): ``to_tsvector`` never yields it, so no query term reads those postings.
DOCUMENT_LEXEME = ""


def scope_hash(lexeme: str) -> int:
    """``memories_termimpact.scope`` of a scope lexeme (:func:`partition_lexeme`): its first
    16 hex digits as a signed 64-bit integer, as the SQL function ``memory_scope_hash``
    computes it (migration 0012)."""
    value = int(lexeme[1:17], 16)
    return value - (1 << 64) if value >= 1 << 63 else value


def searchable_count(lexeme: str) -> int:
    """How many memories :func:`layer_queryset` (default states) holds for the layer scope
    whose ``scope_key`` lexeme is ``lexeme``: its document postings, one per active, unpruned
    memory (migration ``memories.0019``), counted by one index-only scan of
    ``termimpact_champions`` (the 1M bench tenant: ~0.15 s, against ~2.5 s counting its
    memories, which reads their rows for the state)."""
    return TermImpact.objects.filter(scope=scope_hash(lexeme), lexeme=DOCUMENT_LEXEME).count()
