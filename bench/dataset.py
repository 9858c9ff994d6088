"""Benchmark data: a separate database, tenants, and memories made from LoCoMo turns.

The bench runs in its own database (``memory_bench``, kept between runs). Turns of the dev
LoCoMo file are imported through the service (real embeddings); large tenants are then
filled in SQL with pairs of turns: content ``a || ' ' || b`` and embedding ``a + b``. Cosine
distance ignores length, so ``a + b`` ranks exactly like its normalised form; the pair's text
is real English with LoCoMo's vocabulary, so BM25 sees a realistic term distribution.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.core.management import call_command
from django.db import connections, transaction

from memories.models import Memory
from tenants.entry import tenant_job
from tenants.models import Tenant
from tenants.services import api_key_create, tenant_create

BENCH_DATABASE = "memory_bench"
POOL_TENANT = "bench-pool"
BENCH_PROJECT = "bench"

#: Pairs of distinct turns (788 turns: 620,156 pairs), or, beyond them, triples: each pair
#: with a third turn picked by a hash of the pair (another 620,156), for tenants of a million.
_PAIRS = """
    SELECT a.content || ' ' || b.content AS content, a.embedding + b.embedding AS embedding,
           md5(a.n::text || ':' || b.n::text || %(seed)s) AS shuffle
    FROM pool a JOIN pool b ON a.n <> b.n
"""
_TRIPLES = """
    SELECT a.content || ' ' || b.content || ' ' || c.content AS content,
           a.embedding + b.embedding + c.embedding AS embedding,
           md5(a.n::text || ':' || b.n::text || ':3' || %(seed)s) AS shuffle
    FROM pool a JOIN pool b ON a.n <> b.n
    JOIN pool c ON c.n = 1 + (a.n * 31 + b.n * 17) %% (SELECT count(*) FROM pool)
"""
_FILL_SQL = """
WITH pool AS (
    SELECT content, embedding, row_number() OVER (ORDER BY id) AS n
    FROM memories_memory WHERE tenant_id = %(pool)s
), pairs AS (
    SELECT content, embedding FROM ({combos}) AS combos ORDER BY shuffle
    OFFSET %(offset)s LIMIT %(count)s
)
INSERT INTO memories_memory (
    id, tenant_id, content, content_hash, layer, project_id, company_id, metadata,
    embedding, embedding_model, context, kind, scope, importance, confidence, decay_rate,
    reference_count, access_count, sensitive, private, state, version, created_at, updated_at,
    last_confirmed_at)
SELECT gen_random_uuid(), %(tenant)s, content, encode(sha256(convert_to(content, 'UTF8')), 'hex'),
       'project', %(project)s, %(company)s, '{"source": {"type": "import"}}'::jsonb,
       embedding, 'all-MiniLM-L6-v2', '', 'fact', 'global', 0.5, 1.0, 0.0,
       0, 0, false, false, 'active', 1, now(), now(), now()
FROM pairs
"""


def use_bench_database() -> str:
    """Create (or reuse) the bench database, migrated, and point both roles at it.

    Returns:
        The app role's connection URL for the bench database (for the HTTP server).
    """
    owner = connections["owner"]
    owner.settings_dict.setdefault("TEST", {})["NAME"] = BENCH_DATABASE
    owner.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=True, serialize=False)
    connections["default"].close()
    connections["default"].creation.set_as_test_mirror(owner.settings_dict)
    parts = urlsplit(settings.DATABASE_URL)
    return urlunsplit(parts._replace(path=f"/{BENCH_DATABASE}"))


def tenant_with_key(slug: str) -> tuple[Tenant, str]:
    """The bench tenant ``slug`` (created when missing) and a fresh API key for it."""
    tenant = Tenant.objects.filter(slug=slug).first() or tenant_create(name=slug, slug=slug)
    with tenant_job(tenant, "bench") as ctx:
        _, raw_key = api_key_create(ctx, name="bench")
    return tenant, raw_key


def count_project(tenant: Tenant, project: str) -> int:
    """Memories of ``tenant`` in ``project``."""
    with tenant_job(tenant, "bench"):
        return Memory.objects.filter(project_id=project).count()


def ensure_pool(locomo_file: Path) -> Tenant:
    """The pool tenant, with every LoCoMo turn imported through the service (real embeddings)."""
    tenant = Tenant.objects.filter(slug=POOL_TENANT).first() or tenant_create(
        name=POOL_TENANT, slug=POOL_TENANT
    )
    call_command("import_locomo", str(locomo_file), tenant=POOL_TENANT, verbosity=0)
    return tenant


def fill(tenant: Tenant, pool: Tenant, count: int, seed: str) -> int:
    """Give ``tenant`` ``count`` project-layer memories made of turn pairs (then triples, past
    the pairs a pool holds); returns the total."""
    have = count_project(tenant, BENCH_PROJECT)
    if have >= count:
        return have
    with transaction.atomic(using="owner"), connections["owner"].cursor() as cursor:
        # The pool's rows are another tenant's: a platform-level copy, for the bench only, on
        # the owner's connection (its role is a member of memory_platform, which row-level
        # security lets through).
        turns = _pool_size(pool)
        per_kind = turns * (turns - 1)  # pairs, then as many triples
        for index, combos in enumerate((_PAIRS, _TRIPLES)):
            offset = have - index * per_kind  # the ones of this kind a former fill made
            if have >= count or offset >= per_kind:
                continue
            cursor.execute(_FILL_SQL.replace("{combos}", combos), {
                "pool": str(pool.id), "seed": seed, "offset": max(0, offset),
                "count": count - have, "tenant": str(tenant.id), "project": BENCH_PROJECT,
                "company": tenant.slug,
            })
            have += cursor.rowcount
    vacuum()  # statistics, and the postings' pages all-visible for index-only scans
    return count_project(tenant, BENCH_PROJECT)


def _pool_size(pool: Tenant) -> int:
    with tenant_job(pool, "bench"):
        return Memory.objects.count()


def vacuum() -> None:
    """``VACUUM (ANALYZE)`` the memory table and its postings: what autovacuum does on a
    running server (migration ``memories.0013``), done before timing so that the dead row
    versions left by earlier runs (counter updates, deleted ingest tenants) do not skew it,
    and after a fill."""
    with connections["owner"].cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE) memories_memory, memories_termimpact")


VECTOR_INDEX = "mem_embedding_hnsw"


def drop_vector_index() -> None:
    """Drop the HNSW index before a bulk fill (building once is far faster than inserting)."""
    with connections["owner"].cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {VECTOR_INDEX}")


def build_vector_index() -> None:
    """(Re)build the HNSW index as in the migration (m=16, ef_construction=64, cosine).

    4 GB of ``maintenance_work_mem`` hold the graph of 1.2M 384-d vectors (the 1M bench),
    which pgvector builds much faster in memory than once it spills."""
    with connections["owner"].cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '4GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 2")
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {VECTOR_INDEX} ON memories_memory "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
