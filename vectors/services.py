"""Copying a tenant's vectors from one backend to another, and checking the copy.

:func:`vectors_copy` pages through the source's ids (``scan``), reads each page (``get``)
and writes it to the target (``upsert``). :func:`vectors_verify` then checks that the target
holds every copied id (count) and that a random sample of the copied vectors finds the same
neighbours in both backends (overlap of the top 10, averaged: 1.0 when identical; ANN
indexes may differ slightly, so the default floor is 0.9).

Both run from synchronous code (``vectors.runner``): pgvector needs the caller's tenant
scope, which the management command enters.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from vectors.base import SearchQuery, VectorBackend
from vectors.errors import BackendRequestFailed
from vectors.runner import call

#: Neighbours compared per sampled vector.
NEIGHBOURS = 10


@dataclass
class CopyResult:
    """What a copy did: ids seen in the source, records written to the target (pgvector
    writes only the vectors of memories it has), and the copied ids."""

    seen: int = 0
    written: int = 0
    ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Verification:
    """The check of a copy: ids the target holds of the copied ones, the mean overlap of
    the top-``NEIGHBOURS`` lists over ``sampled`` vectors, and whether both passed."""

    copied: int
    found: int
    sampled: int
    overlap: float
    ok: bool


def vectors_copy(*, tenant_id: str, source: VectorBackend, target: VectorBackend,
                 batch: int = 500, on_progress: Callable[[int], None] | None = None
                 ) -> CopyResult:
    """Copy every vector of ``tenant_id`` from ``source`` to ``target``.

    Args:
        batch: ids per page (and records per upsert), 1..1000.
        on_progress: called with the number of records of each page written.

    Raises:
        BackendRequestFailed: the source cannot list its vectors (Vertex AI).
        BackendUnavailable, BackendCircuitOpen, RateLimited: a backend failed; what was
            copied so far stays copied (running the command again is safe: upserts).
    """
    if not call(source.capabilities).supports_scan:
        raise BackendRequestFailed(
            f"The {source.name} backend cannot list its vectors; copy from another backend.",
            details={"backend": source.name})
    result = CopyResult()
    cursor: str | None = None
    while True:
        ids, cursor = call(source.scan, tenant_id, cursor=cursor, limit=batch)
        if ids:
            records = call(source.get, tenant_id, ids)
            result.seen += len(ids)
            result.written += call(target.upsert, tenant_id, records)
            result.ids.extend(r.id for r in records)
            if on_progress:
                on_progress(len(records))
        if cursor is None:
            return result


def vectors_verify(*, tenant_id: str, source: VectorBackend, target: VectorBackend,
                   ids: list[str], sample: int = 20, min_overlap: float = 0.9,
                   seed: int = 0, batch: int = 500) -> Verification:
    """Check a copy: every id in ``target``, and neighbours of a sample alike.

    The sample is ``sample`` ids drawn with ``seed``; each one's vector (read from the
    source) is searched in both backends for its ``NEIGHBOURS`` nearest; the overlap of the
    two id lists is averaged.
    """
    found = 0
    for start in range(0, len(ids), batch):
        found += len(call(target.get, tenant_id, ids[start:start + batch]))
    chosen = random.Random(seed).sample(ids, min(sample, len(ids)))
    overlaps = []
    for record in call(source.get, tenant_id, chosen) if chosen else []:
        query = SearchQuery(vector=record.vector, limit=NEIGHBOURS)
        mine = {h.id for h in call(source.search, tenant_id, query)}
        theirs = {h.id for h in call(target.search, tenant_id, query)}
        overlaps.append(len(mine & theirs) / max(1, min(len(mine), NEIGHBOURS)))
    overlap = sum(overlaps) / len(overlaps) if overlaps else 1.0
    return Verification(copied=len(ids), found=found, sampled=len(overlaps),
                        overlap=overlap, ok=found == len(ids) and overlap >= min_overlap)
