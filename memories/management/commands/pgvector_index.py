"""``manage.py pgvector_index [--drop-others] [--no-concurrently] [--tenants]``: build the vector
index the pgvector configuration names on the memories table
(``memories.services.vector_index``); ``--tenants``: then build and drop the large tenants'
own indexes (``memories.services.tenant_vector_index``, also an hourly job)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from memories.retrieval.semantic import pgvector_settings
from memories.services.tenant_vector_index import tenant_indexes_refresh
from memories.services.vector_index import OWNER, IndexBuildError, index_build
from vectors.errors import InvalidBackendConfig
from vectors.registry import configured


class Command(BaseCommand):
    help = ("Build the index that PGVECTOR_INDEX_TYPE (hnsw, ivfflat), PGVECTOR_DISTANCE "
            "(cosine, l2, inner_product) and their parameters name on "
            "memories_memory.embedding, so that memory search, which orders by the configured "
            "metric, can use it; as the owner role, CREATE INDEX CONCURRENTLY IF NOT EXISTS. "
            "The default (HNSW, cosine, m 16, ef_construction 64) is the migration's "
            "mem_embedding_hnsw: nothing to build. --drop-others then drops the other HNSW and "
            "IVFFlat indexes on the column; dropping mem_embedding_hnsw makes the cosine "
            "default slow until this command builds it again with the default settings "
            "(manage.py migrate does not recreate it).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--drop-others", action="store_true",
                            help="drop the other vector indexes on the column afterwards")
        parser.add_argument("--no-concurrently", dest="concurrently", action="store_false",
                            help="plain CREATE/DROP INDEX (inside a transaction; blocks "
                                 "writes to the table while it builds)")
        parser.add_argument("--database", default=OWNER,
                            help=f"connection of the table's owner role (default {OWNER!r})")
        parser.add_argument("--tenants", action="store_true",
                            help="then give every tenant of at least "
                                 "MEMORY_TENANT_INDEX_MIN_ROWS memories (and at most half the "
                                 "table) an HNSW index of its own, and drop those of tenants "
                                 "gone or below half that (what the hourly job does)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            backend = configured().backend
            pg = pgvector_settings()
        except InvalidBackendConfig as exc:
            raise CommandError(str(exc)) from exc
        if backend != "pgvector":
            self.stdout.write(f"the vector backend is {backend}: memory search does not rank "
                              "with this index; pgvector's defaults apply")
        self.stdout.write(f"pgvector: {pg.index_type}, {pg.metric.value}")
        try:
            outcome = index_build(pg, concurrently=options["concurrently"],
                                  drop_others=options["drop_others"],
                                  using=options["database"], say=self.stdout.write)
            run = (tenant_indexes_refresh(pg, concurrently=options["concurrently"],
                                          using=options["database"], say=self.stdout.write)
                   if options["tenants"] else None)
        except IndexBuildError as exc:
            raise CommandError(str(exc)) from exc
        except DatabaseError as exc:
            hint = (" (the owner role, DATABASE_OWNER_URL, must own the memories table)"
                    if "owner" in str(exc) else "")
            raise CommandError(f"PostgreSQL refused: {exc}{hint}") from exc
        dropped = f", dropped {len(outcome.dropped)}" if outcome.dropped else ""
        self.stdout.write(f"{outcome.index}: {'built' if outcome.built else 'exists'}{dropped}")
        if run is not None:
            self.stdout.write(run.skipped or (
                f"tenant indexes: {len(run.built)} built, {len(run.dropped)} dropped, "
                f"{len(run.kept)} kept"))
