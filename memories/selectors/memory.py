"""Reads of the memories app: get and list (seed 001); search lives in
``memories.retrieval.search``."""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from memories.models import UNSERVED_COLUMNS, Memory, MemoryHistory, State
from memories.restrictions import check_layer
from memories.retrieval.filters import MetadataFilter
from memories.retrieval.partition import (
    layer_queryset,
    partition_lexeme,
    resolve_identifiers,
    searchable_count,
)
from memories.services.history import history_list
from memories.telemetry import results_observed
from memory_project.errors import InvalidInput, MemoryNotFound
from tenants.audit import audit_cross_tenant_probe, parse_uuid
from tenants.context import TenantContext
from tenants.entry import run_in_scope
from tenants.layers import LayerIdentifiers, parse_layer

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
#: Memories read per query (and per short transaction) while streaming an export.
EXPORT_CHUNK_SIZE = 500


@dataclass(frozen=True)
class MemoryPage:
    """Seed 001 ``ListMemoriesOutput``."""

    memories: list[Memory]
    next_cursor: str | None
    total_count: int



def memory_get(ctx: TenantContext, *, memory_id: Any) -> Memory | None:
    """The memory ``memory_id`` of the caller's tenant, or ``None`` (seed 001 "Get Memory").

    Missing, malformed, deleted and other tenants' ids all give ``None``.
    """
    pk = parse_uuid(memory_id)
    if pk is None:
        return None
    return Memory.objects.exclude(state=State.DELETED).filter(pk=pk).first()


def encode_cursor(memory_id: uuid.UUID) -> str:
    """An opaque cursor pointing after ``memory_id``."""
    return base64.urlsafe_b64encode(memory_id.bytes).decode().rstrip("=")


def decode_cursor(cursor: str) -> uuid.UUID:
    """The id a cursor points after.

    Raises:
        InvalidInput: the cursor is not one this service issued.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return uuid.UUID(bytes=raw)
    except (ValueError, binascii.Error):
        raise InvalidInput("Invalid cursor.", operation="memory.list") from None


def memory_list(
    ctx: TenantContext,
    *,
    layer: str,
    identifiers: LayerIdentifiers,
    cursor: str | None = None,
    limit: int = DEFAULT_PAGE_SIZE,
    metadata_filter: MetadataFilter | None = None,
) -> MemoryPage:
    """One page of a layer's memories, newest first (seed 001 "List Memories").

    Keyset pagination on the time-ordered id: stable under concurrent inserts.

    Args:
        limit: page size, 1..100 (default 50).

    Raises:
        InvalidLayer, MissingIdentifier: as for add.
        InvalidInput: ``limit`` out of range or a malformed cursor.
    """
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidInput(f"limit must be within 1..{MAX_PAGE_SIZE}.", operation="memory.list")
    parsed = parse_layer(layer)
    check_layer(ctx, parsed)
    resolved = resolve_identifiers(ctx, identifiers)
    scoped = layer_queryset(parsed, resolved)
    filtered = metadata_filter is not None and metadata_filter != MetadataFilter()
    if metadata_filter is not None:
        scoped = metadata_filter.apply(scoped)
    page_qs = scoped.order_by("-id")
    if cursor:
        page_qs = page_qs.filter(id__lt=decode_cursor(cursor))
    rows = list(page_qs.defer(*UNSERVED_COLUMNS)[: limit + 1])
    next_cursor = encode_cursor(rows[limit - 1].id) if len(rows) > limit else None
    results_observed(layers=[layer], result_layers=[m.layer for m in rows[:limit]])
    # Unfiltered, the scope's document postings count it without reading its memories.
    total = (scoped.count() if filtered
             else searchable_count(partition_lexeme(ctx.tenant_id, parsed, resolved)))
    return MemoryPage(memories=rows[:limit], next_cursor=next_cursor, total_count=total)


def memory_history(ctx: TenantContext, *, memory_id: Any) -> list[MemoryHistory]:
    """The history of a memory of the caller's tenant, oldest first.

    Readable in every state, soft-deleted included; after a hard erase the rows remain with
    their content blanked. A memory stored before history existed has an empty history.

    Raises:
        MemoryNotFound: neither a memory nor any history row with this id in the caller's
            tenant (missing, malformed, or another tenant's id — the last is audited).
    """
    pk = parse_uuid(memory_id)
    if pk is not None:
        rows = history_list(pk)
        visible = Memory.objects.filter(pk=pk).exists()
        # A restricted key reads the history of memories it can see, never of erased ones.
        if visible or (rows and not ctx.is_restricted):
            return rows
        audit_cross_tenant_probe(ctx, model=Memory, object_id=pk)
    raise MemoryNotFound(operation="memory.history", details={"id": str(memory_id)})


def _export_chunk(last: uuid.UUID | None, size: int, include_deleted: bool) -> list[Memory]:
    qs = Memory.objects.all()
    if not include_deleted:
        qs = qs.exclude(state=State.DELETED)
    if last is not None:
        qs = qs.filter(id__gt=last)
    return list(qs.order_by("id").defer(*UNSERVED_COLUMNS)[:size])


def memory_export_chunks(ctx: TenantContext, *, include_deleted: bool = False,
                         chunk_size: int | None = None) -> Iterator[list[Memory]]:
    """Every memory of ``ctx``'s tenant in id order, as lists of up to ``chunk_size``
    (default :data:`EXPORT_CHUNK_SIZE`); soft-deleted ones only with ``include_deleted``.

    Each chunk is read by keyset pagination (``id > last``) in a short transaction of its own
    inside :func:`tenants.entry.run_in_scope`, and handed out after that scope is left: the
    iterator can be consumed after the request's transaction and tenant scope have ended (a
    streaming response) and never holds a transaction open while the client reads.
    Embeddings and the search vector are not loaded.
    """
    size = chunk_size or EXPORT_CHUNK_SIZE
    last: uuid.UUID | None = None
    while True:
        chunk = run_in_scope(ctx, _export_chunk, last, size, include_deleted)
        if not chunk:
            return
        yield chunk
        if len(chunk) < size:
            return
        last = chunk[-1].pk
