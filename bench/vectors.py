"""pgvector and Qdrant side by side on the same tenant: search latency and recall@10 against
exact search (``manage.py bench --parts vectors``).

Both backends answer the same ``SearchQuery(vector, limit=10)`` through the vector backend
trait (``vectors.runner.call`` on a ``vectors.registry.build`` backend), one LoCoMo question
at a time, alternating: pgvector on the bench database (the service's default backend, in
the tenant's scope), then Qdrant in its embedded local mode, in a directory under the
project's ``var/`` that is filled once from pgvector (``vectors.services.vectors_copy``) and
reused while it holds the tenant's vectors.

The reference is exact: the cosine similarity of each query with every one of the tenant's
vectors (numpy, float64), read once from the memory table. The bench's large tenants are
sums of two MiniLM turn embeddings, so their vectors are not of length 1: they are
normalised first. A pair and its reverse (``a + b``, ``b + a``) hold the same vector, so the
10th place can be shared: every vector scoring within ``TIE_TOLERANCE`` of the 10th counts as
a correct 10th (:func:`exact_neighbours`).
"""

from __future__ import annotations

import importlib.metadata
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np
from django.conf import settings
from django.db import connection, connections
from django.db.models import BinaryField, F, Func
from tqdm import tqdm

from bench import dataset, machine
from memories.embedding.embedders import embed_query
from memories.models import Memory, State
from memories.retrieval import semantic
from memory_project.paths import VAR_DIR
from tenants.entry import tenant_job
from tenants.models import Tenant
from vectors.base import SearchQuery
from vectors.config import QdrantSettings, VectorConfig, load_config
from vectors.guard import GuardedBackend
from vectors.registry import build
from vectors.runner import call
from vectors.services import vectors_copy

#: Qdrant's local-mode storage for the bench (one collection per tenant).
QDRANT_DIR = VAR_DIR / "bench" / "qdrant"
#: Neighbours per query, and the k of recall@k.
K = 10
#: Cosine similarities closer than this to the k-th one count as ties with it (float32
#: rounding in the backends is ~1e-7).
TIE_TOLERANCE = 1e-6
#: Questions searched in both backends before timing starts (caches, index pages).
WARMUP = 5
#: qdrant-client's warning past 20,000 points in local mode (the bench says what it measures).
LOCAL_MODE_WARNING = "Local mode is not recommended"
#: Ids whose presence in Qdrant is checked before a filled collection is reused.
REUSE_SAMPLE = 200


@dataclass(frozen=True)
class Neighbours:
    """The exact neighbours of one query.

    Attributes:
        top: the ``k`` ids of highest cosine similarity, best first.
        accepted: every id that is a correct answer within the top ``k``: the ``top`` ids and
            any other id tied with the ``k``-th (within the tolerance), so ``len ≥ k``.
    """

    top: tuple[str, ...]
    accepted: frozenset[str]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` (``n × d``) with every row scaled to length 1, as float64; zero rows stay
    zero."""
    rows = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


def exact_neighbours(ids: Sequence[str], vectors: np.ndarray, queries: np.ndarray,
                     k: int = K, tolerance: float = TIE_TOLERANCE, chunk: int = 64
                     ) -> list[Neighbours]:
    """The exact top ``k`` by cosine similarity of each query, by brute force.

    Args:
        ids: the id of each row of ``vectors`` (``n``).
        vectors: ``n × d``, any lengths (normalised here).
        queries: ``q × d``, any lengths (normalised here).
        k: neighbours per query (``k ≤ n``).
        tolerance: similarities within this of the ``k``-th one are ties with it.
        chunk: queries per matrix product (bounds memory: ``chunk × n`` float64).

    Returns:
        ``q`` :class:`Neighbours`, in the order of ``queries``; among equal similarities
        ``top`` keeps the order of ``ids``.
    """
    if not 0 < k <= len(ids):
        raise ValueError(f"k must be within 1..{len(ids)}")
    units = unit_rows(vectors)
    names = np.asarray(ids, dtype=object)
    found: list[Neighbours] = []
    for start in range(0, len(queries), chunk):
        scores = unit_rows(queries[start:start + chunk]) @ units.T
        for row in scores:
            kth = np.partition(row, len(row) - k)[len(row) - k]  # the k-th highest
            tied = np.flatnonzero(row >= kth - tolerance)
            order = tied[np.lexsort((tied, -row[tied]))]  # best first, then by position
            found.append(Neighbours(top=tuple(names[order[:k]]),
                                    accepted=frozenset(names[tied])))
    return found


def recall_at_k(found: Sequence[str], exact: Neighbours, k: int = K) -> float:
    """``|found[:k] ∩ exact top k| / k``, where an id tied with the exact ``k``-th counts as
    one of the exact top ``k`` (``exact.accepted``); 1.0 when ``found`` is exact."""
    return len(set(found[:k]) & exact.accepted) / k


@dataclass(frozen=True)
class Figures:
    """One backend's row: latency per search (ms), mean recall@k and how it searches."""

    backend: str
    p50_ms: float
    p95_ms: float
    recall: float
    how: str


def figures(backend: str, timings_ms: Sequence[float], recalls: Sequence[float], how: str
            ) -> Figures:
    """The row of ``backend`` from its per-query timings (ms) and recall@k values."""
    return Figures(backend, float(np.percentile(timings_ms, 50)),
                   float(np.percentile(timings_ms, 95)), float(np.mean(recalls)), how)


def table(rows: Sequence[Figures]) -> list[str]:
    """The printed table: backend, p50 and p95 ms, recall@10 against exact, how."""
    lines = [f"{'backend':<9} {'p50 ms':>7} {'p95 ms':>7} {'recall@10':>10}  how it searches"]
    lines += [f"{r.backend:<9} {r.p50_ms:7.1f} {r.p95_ms:7.1f} {r.recall:10.3f}  {r.how}"
              for r in rows]
    return lines


def tenant_vectors() -> tuple[list[str], np.ndarray]:
    """The ids and vectors (``n × d`` float32) of the scope's tenant: the memories the
    pgvector adapter searches (not deleted). One query, the vectors in pgvector's binary
    form (``vector_send``: two 16-bit words, the dimensions and 0, then big-endian float32s).
    """
    raw = Func(F("embedding"), function="vector_send", output_field=BinaryField())
    rows = (Memory.objects.exclude(state=State.DELETED).exclude(embedding=None)
            .annotate(raw=raw).values_list("pk", "raw"))
    ids: list[str] = []
    vectors: list[np.ndarray] = []
    for pk, data in rows.iterator(chunk_size=5000):
        ids.append(str(pk))
        vectors.append(np.frombuffer(bytes(data), dtype=">f4", offset=4))
    return ids, np.asarray(vectors, dtype=np.float32)


@dataclass(frozen=True)
class Load:
    """How Qdrant got the tenant's vectors: ``copied`` of them now (0: reused) in
    ``seconds``, opening the local storage included."""

    points: int
    copied: int
    seconds: float


def load_qdrant(pgvector: GuardedBackend, qdrant: GuardedBackend, tenant_id: str,
                ids: Sequence[str], opened_s: float, progress: IO[str]) -> Load:
    """Make Qdrant hold exactly the tenant's vectors (``ids``, read from pgvector): reuse the
    collection when it holds as many points and a sample of ``ids``, else drop it and copy
    them (tqdm on ``progress``). Runs in the tenant's scope. ``opened_s``: seconds it took
    to open the local storage (counted in the load)."""
    from vectors.adapters.qdrant import QdrantBackend  # the optional qdrant-client extra

    inner = qdrant.inner
    assert isinstance(inner, QdrantBackend)
    started = time.perf_counter() - opened_s
    name = inner.collection(tenant_id)
    points = 0
    if call(inner.client.collection_exists, name):
        points = call(inner.client.count, name, exact=True).count
    sample = list(ids[::max(1, len(ids) // REUSE_SAMPLE)])
    if points == len(ids) and len(call(qdrant.get, tenant_id, sample)) == len(sample):
        return Load(points, 0, time.perf_counter() - started)
    if points:
        call(inner.drop_tenant, tenant_id)
    with warnings.catch_warnings(), tqdm(total=len(ids), desc="qdrant", unit="vector",
                                         file=progress) as bar:
        warnings.filterwarnings("ignore", message=LOCAL_MODE_WARNING)
        copied = vectors_copy(tenant_id=tenant_id, source=pgvector, target=qdrant,
                              on_progress=bar.update)
    points = call(inner.client.count, name, exact=True).count
    return Load(points, copied.written, time.perf_counter() - started)


def _index_vectors() -> int:
    """Vectors in the memory table's HNSW index, all tenants (the planner's estimate)."""
    with connections["owner"].cursor() as cursor:
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s",
                       [dataset.VECTOR_INDEX])
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _pgvector_version() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    return str(row[0]) if row else "?"


def pgvector_how(ef_used: set[int], tenant_size: int) -> str:
    """How pgvector searched: its index, the service's ``ef_search`` and the one the scans of
    this tenant settled on (``semantic.nearest`` widens a scan the tenant's share starves)."""
    indexed = _index_vectors()
    share = f", {100 * tenant_size / indexed:.1f}% of them this tenant's" if indexed else ""
    table_size = f"~{indexed / 1e6:.2f}M" if indexed >= 1e6 else f"~{indexed:,}"
    ef = settings.MEMORY_HNSW_EF_SEARCH
    used = ", ".join("exact scan" if e == semantic.EXACT else str(e) for e in sorted(ef_used))
    settled = f"; scans settled at ef_search {used}" if used and ef_used != {ef} else ""
    return (f"pgvector {_pgvector_version()} HNSW (m 16, ef_construction 64) over the table's "
            f"{table_size} vectors{share}; ef_search {ef} (widened up to "
            f"{settings.MEMORY_HNSW_EF_SEARCH_MAX} when rows of other tenants starve it)"
            f"{settled}")


def qdrant_how() -> str:
    """How Qdrant's local mode searches (``qdrant_client.local.local_collection.search``)."""
    version = importlib.metadata.version("qdrant-client")
    return (f"qdrant-client {version} local mode, in-process: no index; numpy cosine of the "
            "query with every stored vector (each query normalises all of them again), then "
            "a full argsort: exact brute force")


def _scan_starts() -> dict[Any, int]:
    """What ``semantic.nearest`` remembers per scope: the ef_search (or exact) it starts at."""
    return dict(semantic._scan_starts.items())


def run(tenant: Tenant, questions: Sequence[str], count: int, say: Callable[[str], None],
        progress: IO[str]) -> list[Figures]:
    """Time ``count`` distinct questions of ``questions`` on pgvector and on Qdrant (local
    mode) over ``tenant``'s vectors, score both against exact search, print the table with
    ``say`` (progress bars on ``progress``) and return its rows."""
    asked = list(dict.fromkeys(questions))[:count]
    tenant_id = str(tenant.id)
    pgvector = build(load_config(backend="pgvector"))
    QDRANT_DIR.mkdir(parents=True, exist_ok=True)
    opening = time.perf_counter()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=LOCAL_MODE_WARNING)
        qdrant = build(VectorConfig("qdrant", QdrantSettings(path=str(QDRANT_DIR))))
    opened_s = time.perf_counter() - opening
    try:
        with tenant_job(tenant, "bench") as ctx:
            started = time.perf_counter()
            ids, vectors = tenant_vectors()
            read_s = time.perf_counter() - started
            load = load_qdrant(pgvector, qdrant, tenant_id, ids, opened_s, progress)
            queries = np.asarray([embed_query(ctx.tenant_id, q) for q in asked],
                                 dtype=np.float32)
            started = time.perf_counter()
            exact = exact_neighbours(ids, vectors, queries)
            exact_s = time.perf_counter() - started
            before = _scan_starts()
            timed = _measure({"pgvector": pgvector, "qdrant": qdrant}, tenant_id, queries,
                             exact)
            ef_used = {v for k, v in _scan_starts().items() if before.get(k) != v}
            numpy_ms = _numpy_timings(vectors, queries)
    finally:
        for backend in (pgvector, qdrant):
            call(backend.close)
    norms = np.linalg.norm(vectors, axis=1)
    ties = sum(len(n.accepted) > K for n in exact)
    say(f"\nvector backends side by side: {tenant.slug}, {len(ids):,} vectors of "
        f"{vectors.shape[1]} dimensions, {len(asked)} LoCoMo questions (MiniLM, norm "
        f"{np.linalg.norm(queries, axis=1).mean():.3f}), SearchQuery(vector, limit={K}) "
        "through the backend trait, one at a time, alternating")
    say(f"  exact: numpy cosine over all {len(ids):,} vectors (norms {norms.min():.2f}-"
        f"{norms.max():.2f}: normalised first), {exact_s:.1f} s; read from the memory table "
        f"in {read_s:.1f} s; a tie at the 10th place ({ties} of {len(asked)} questions) "
        "counts as found")
    verb = f"filled from pgvector ({load.copied:,} vectors)" if load.copied else "reused"
    say(f"  Qdrant local mode: {load.points:,} points, {verb} in {load.seconds:.1f} s "
        f"(opening the storage {opened_s:.1f} s)")
    rows = [
        figures("pgvector", timed.ms["pgvector"], timed.recalls["pgvector"],
                pgvector_how(ef_used, len(ids))),
        figures("qdrant", timed.ms["qdrant"], timed.recalls["qdrant"], qdrant_how()),
        figures("numpy", numpy_ms, [1.0], "the exact reference itself, float32, one query "
                "at a time, no backend (matrix-vector product, then argpartition)"),
    ]
    for line in table(rows):
        say(f"  {line}")
    say(f"  {timed.steal} while timing; 1-minute load average after it {os.getloadavg()[0]:.1f} "
        "(this process counts 1)")
    return rows


@dataclass
class Timed:
    """Per backend, the milliseconds of each timed search and its recall@k, and the CPU
    steal while timing (``bench.machine.steal_label``)."""

    ms: dict[str, list[float]]
    recalls: dict[str, list[float]]
    steal: str = ""


def _measure(backends: dict[str, GuardedBackend], tenant_id: str, queries: np.ndarray,
             exact: Sequence[Neighbours]) -> Timed:
    """Search every query (``q × d``) in each backend in turn; the first :data:`WARMUP`
    queries run once untimed before."""
    timed = Timed({name: [] for name in backends}, {name: [] for name in backends})
    for vector in queries[:WARMUP]:
        for backend in backends.values():
            call(backend.search, tenant_id, SearchQuery(vector=tuple(map(float, vector)), limit=K))
    cpu = machine.cpu_times()
    for vector, neighbours in zip(queries, exact, strict=True):
        query = SearchQuery(vector=tuple(map(float, vector)), limit=K)
        for name, backend in backends.items():
            started = time.perf_counter()
            hits = call(backend.search, tenant_id, query)
            timed.ms[name].append((time.perf_counter() - started) * 1000)
            timed.recalls[name].append(recall_at_k([h.id for h in hits], neighbours))
    timed.steal = machine.steal_label(cpu, machine.cpu_times())
    return timed


def _numpy_timings(vectors: np.ndarray, queries: np.ndarray) -> list[float]:
    """Milliseconds per query of exact search in numpy alone (float32, vectors normalised
    beforehand, as Qdrant stores them)."""
    units = unit_rows(vectors).astype(np.float32)
    timings = []
    for vector in queries:
        started = time.perf_counter()
        scores = units @ (vector / np.linalg.norm(vector))
        top = np.argpartition(-scores, K - 1)[:K]
        _ = top[np.argsort(-scores[top])]
        timings.append((time.perf_counter() - started) * 1000)
    return timings
