"""The vector index of the memories table (``manage.py pgvector_index``).

Memory search orders by the configured pgvector metric (``memories.retrieval.semantic``);
an index serves that order only if its operator class matches the metric. This module builds
the index the configuration names (``PGVECTOR_INDEX_TYPE``, ``PGVECTOR_DISTANCE`` and the
type's parameters) on ``memories_memory.embedding``:

- HNSW ``WITH (m, ef_construction)`` or IVFFlat ``WITH (lists)``;
- operator class ``vector_cosine_ops``, ``vector_l2_ops`` or ``vector_ip_ops``;
- named ``mem_embedding_<type>_<metric>_<parameters>``, e.g.
  ``mem_embedding_ivfflat_l2_lists100``, except cosine HNSW with m 16 and ef_construction
  64, which is the migration's ``mem_embedding_hnsw`` (it exists: nothing is built).

Changing a parameter names another index, so a build never finds a stale one under its name;
an invalid index of that name (an interrupted concurrent build) is dropped and built again.
``drop_others`` then drops every other HNSW or IVFFlat index on the column, except the
large tenants' own (``memories.services.tenant_vector_index``). Dropping
``mem_embedding_hnsw`` makes the cosine default slow until it is built again (this module,
with the default settings); ``manage.py migrate`` does not recreate it.

DDL runs on the owner role's connection (``owner``): the application role does not own the
table. ``CREATE INDEX CONCURRENTLY`` (the default) does not block writes but cannot run
inside a transaction; without it (tests, a transaction of the caller's) the build holds a
lock that blocks writes to the table until it ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import DatabaseError, connections

from memories.models import Memory
from vectors.base import DistanceMetric
from vectors.config import PgvectorSettings

#: The connection alias of the role that owns the memories table.
OWNER = "owner"
#: The index of migration ``memories.0001`` (cosine HNSW, m 16, ef_construction 64).
MIGRATION_INDEX = "mem_embedding_hnsw"
COLUMN = "embedding"
#: The operator class that serves each metric's operator (``<=>``, ``<->``, ``<#>``).
OPCLASS = {
    DistanceMetric.COSINE: "vector_cosine_ops",
    DistanceMetric.L2: "vector_l2_ops",
    DistanceMetric.INNER_PRODUCT: "vector_ip_ops",
}
#: Names of the partial indexes of single tenants (``memories.services.tenant_vector_index``).
TENANT_INDEX_PREFIX = "mem_tenant_"
#: Seconds between progress reports of a long build (``pg_stat_progress_create_index``).
PROGRESS_INTERVAL = 10.0

Say = Callable[[str], None]


class IndexBuildError(Exception):
    """The index cannot be built as asked (e.g. concurrently inside a transaction)."""


@dataclass(frozen=True)
class IndexSpec:
    """One vector index on ``memories_memory.embedding``: ``name``, access ``method``
    (``hnsw`` or ``ivfflat``), ``opclass``, the ``WITH`` ``options`` as (name, value) and,
    for a partial index, its ``predicate`` (SQL of the ``WHERE`` clause)."""

    name: str
    method: str
    opclass: str
    options: tuple[tuple[str, int], ...]
    predicate: str = ""

    def describe(self) -> str:
        """E.g. ``hnsw (embedding vector_l2_ops) WITH (m = 16, ef_construction = 64)``."""
        options = ", ".join(f"{key} = {value}" for key, value in self.options)
        return f"{self.method} ({COLUMN} {self.opclass}) WITH ({options})"

    def create_sql(self, *, concurrently: bool) -> str:
        """``CREATE INDEX [CONCURRENTLY] IF NOT EXISTS`` of this index."""
        quote = connections[OWNER].ops.quote_name
        where = f" WHERE {self.predicate}" if self.predicate else ""
        return (f"CREATE INDEX {'CONCURRENTLY ' if concurrently else ''}IF NOT EXISTS "
                f"{quote(self.name)} ON {quote(Memory._meta.db_table)} USING "
                f"{self.describe()}{where}")


@dataclass(frozen=True)
class ExistingIndex:
    """An HNSW or IVFFlat index on the column: ``name``, ``valid`` (``pg_index.indisvalid``:
    false after an interrupted concurrent build) and its ``definition``."""

    name: str
    valid: bool
    definition: str


@dataclass
class Outcome:
    """What :func:`index_build` did: the ``index`` configured, whether it was ``built`` (false:
    it existed) and the other indexes ``dropped``."""

    index: str
    built: bool
    dropped: list[str] = field(default_factory=list)


def index_spec(pg: PgvectorSettings) -> IndexSpec:
    """The index ``pg`` names (see the module docstring)."""
    metric = pg.metric
    if pg.index_type == "ivfflat":
        options: tuple[tuple[str, int], ...] = (("lists", pg.ivfflat_lists),)
        name = f"mem_embedding_ivfflat_{metric.value}_lists{pg.ivfflat_lists}"
    else:
        options = (("m", pg.hnsw_m), ("ef_construction", pg.hnsw_ef_construction))
        default = metric == DistanceMetric.COSINE and options == (
            ("m", 16), ("ef_construction", 64))
        name = MIGRATION_INDEX if default else (
            f"mem_embedding_hnsw_{metric.value}_m{pg.hnsw_m}_ef{pg.hnsw_ef_construction}")
    return IndexSpec(name=name, method=pg.index_type, opclass=OPCLASS[metric], options=options)


def embedding_indexes(using: str = OWNER) -> list[ExistingIndex]:
    """The HNSW and IVFFlat indexes on ``memories_memory.embedding``, by name."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_am am ON am.oid = c.relam "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
            "WHERE i.indrelid = %s::regclass AND am.amname IN ('hnsw', 'ivfflat') "
            "AND a.attname = %s ORDER BY c.relname",
            [Memory._meta.db_table, COLUMN])
        return [ExistingIndex(name, bool(valid), definition)
                for name, valid, definition in cursor.fetchall()]


def index_build(pg: PgvectorSettings, *, concurrently: bool = True,
                drop_others: bool = False, using: str = OWNER,
                say: Say = lambda _: None) -> Outcome:
    """Build the index ``pg`` names unless it exists; with ``drop_others``, then drop the
    other vector indexes on the column. ``say`` receives a line per step (and progress
    lines every ``PROGRESS_INTERVAL`` seconds of a long build).

    Raises:
        IndexBuildError: ``concurrently`` inside a transaction of ``using``.
        django.db.DatabaseError: PostgreSQL refused (a parameter out of pgvector's range,
            a role that does not own the table, ...).
    """
    connection = connections[using]
    if concurrently and connection.in_atomic_block:
        raise IndexBuildError("CREATE INDEX CONCURRENTLY cannot run inside a transaction; "
                              "build without it (--no-concurrently).")
    spec = index_spec(pg)
    existing = {index.name: index for index in embedding_indexes(using)
                if not index.name.startswith(TENANT_INDEX_PREFIX)}
    found = existing.pop(spec.name, None)
    if found is not None and not found.valid:
        say(f"{spec.name} is invalid (an interrupted build): dropping it to build it again")
        drop_index(using, spec.name, concurrently=concurrently)
        found = None
    if found is not None:
        say(f"{spec.name} exists ({found.definition}): nothing to build")
    else:
        say(f"building {spec.name}: {spec.describe()}"
            f"{' concurrently' if concurrently else ''}")
        started = time.perf_counter()
        with build_progress(using, say), connection.cursor() as cursor:
            cursor.execute(spec.create_sql(concurrently=concurrently))
        say(f"built {spec.name} in {time.perf_counter() - started:.1f} s")
    outcome = Outcome(index=spec.name, built=found is None)
    if drop_others:
        for name in existing:
            say(f"dropping {name}")
            drop_index(using, name, concurrently=concurrently)
            outcome.dropped.append(name)
    elif existing:
        say(f"other vector indexes on {COLUMN}: {', '.join(existing)} (--drop-others drops "
            "them; every index slows writes)")
    return outcome


def drop_index(using: str, name: str, *, concurrently: bool) -> None:
    """``DROP INDEX [CONCURRENTLY] IF EXISTS name`` on ``using``'s connection."""
    with connections[using].cursor() as cursor:
        cursor.execute(f"DROP INDEX {'CONCURRENTLY ' if concurrently else ''}IF EXISTS "
                       f"{connections[using].ops.quote_name(name)}")


class build_progress:  # noqa: N801 (used as a context manager)
    """While the block runs, a thread reports ``pg_stat_progress_create_index`` for the table
    every ``PROGRESS_INTERVAL`` seconds (on its own connection; its errors only end it)."""

    def __init__(self, using: str, say: Say) -> None:
        self.using, self.say = using, say
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="pgvector-index-progress",
                                       daemon=True)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        connection = connections[self.using]  # this thread's own connection
        try:
            while not self.stop.wait(PROGRESS_INTERVAL):
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT phase, blocks_done, blocks_total, tuples_done, tuples_total "
                        "FROM pg_stat_progress_create_index WHERE relid = %s::regclass",
                        [Memory._meta.db_table])
                    row = cursor.fetchone()
                if row is not None:
                    self.say(_progress_line(*row))
        except DatabaseError:
            pass
        finally:
            connection.close()


def _progress_line(phase: str, blocks_done: int, blocks_total: int, tuples_done: int,
                   tuples_total: int) -> str:
    """E.g. ``… building index: loading tuples in tree: 1200/5000 tuples``."""
    counts = [f"{done}/{total} {unit}" for done, total, unit in (
        (blocks_done, blocks_total, "blocks"), (tuples_done, tuples_total, "tuples")) if total]
    return f"… {phase}{': ' + ', '.join(counts) if counts else ''}"
