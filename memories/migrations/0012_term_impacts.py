# The SQL is frozen as literals: what this migration runs must not change when
# tenants.rls changes later.
"""The keyword index's postings: one ``memories_termimpact`` row per lexeme of a memory.

Kept by the trigger ``memory_term_impacts_sync`` on ``memories_memory`` (insert, delete, and
updates that change ``term_frequencies`` or ``scope_key``), filled here for existing rows.

- ``memory_term_impact(tf, dl)``: BM25's term-frequency factor with k1 = 1.2, b = 0.75 and a
  reference length of 30 lexemes (``memories.keyword``: ``BM25_K1``, ``BM25_B``,
  ``IMPACT_REFERENCE_LENGTH``).
- ``memory_scope_hash(scope_key)``: the first 64 bits of the scope lexeme's SHA-256, as a
  signed bigint (``memories.keyword.scope_hash`` computes the same in Python).

Row-level security as on every tenant table; the trigger writes as the caller, whose write to
the memory passed the same tenant check.
"""

from __future__ import annotations

from django.db import migrations, models


FUNCTIONS = """
CREATE OR REPLACE FUNCTION memory_term_impact(tf float8, dl integer) RETURNS float8
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / 30.0))
$$;
CREATE OR REPLACE FUNCTION memory_scope_hash(scope_key tsvector) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT ('x' || substr((tsvector_to_array(scope_key))[1], 2, 16))::bit(64)::bigint
$$;
CREATE OR REPLACE FUNCTION memory_term_impacts_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.term_frequencies IS NOT DISTINCT FROM OLD.term_frequencies
            AND NEW.scope_key IS NOT DISTINCT FROM OLD.scope_key THEN
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM memories_termimpact WHERE memory_id = OLD.id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO memories_termimpact (memory_id, lexeme, tenant_id, scope, impact)
        SELECT NEW.id, f.key, NEW.tenant_id, memory_scope_hash(NEW.scope_key),
               memory_term_impact(f.value::float8, length(NEW.search_vector))
        FROM jsonb_each_text(NEW.term_frequencies) AS f;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER memory_term_impacts_sync
    AFTER INSERT OR DELETE OR UPDATE OF term_frequencies, scope_key ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION memory_term_impacts_sync();
"""

DROP_FUNCTIONS = """
DROP TRIGGER IF EXISTS memory_term_impacts_sync ON memories_memory;
DROP FUNCTION IF EXISTS memory_term_impacts_sync();
DROP FUNCTION IF EXISTS memory_scope_hash(tsvector);
DROP FUNCTION IF EXISTS memory_term_impact(float8, integer);
"""

#: Every tenant's memories: the platform-level fill of a new index, in this transaction only.
BACKFILL = """
SELECT set_config('app.cross_tenant', 'on', true);
INSERT INTO memories_termimpact (memory_id, lexeme, tenant_id, scope, impact)
SELECT m.id, f.key, m.tenant_id, memory_scope_hash(m.scope_key),
       memory_term_impact(f.value::float8, length(m.search_vector))
FROM memories_memory m, jsonb_each_text(m.term_frequencies) AS f;
SELECT set_config('app.cross_tenant', '', true);
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0011_scope_key'),
        ('tenants', '0004_api_key_config_touch'),
    ]

    operations = [
        migrations.CreateModel(
            name='TermImpact',
            fields=[
                ('pk', models.CompositePrimaryKey('memory_id', 'lexeme', blank=True, editable=False, primary_key=True, serialize=False)),
                ('memory_id', models.UUIDField()),
                ('lexeme', models.TextField()),
                ('scope', models.BigIntegerField()),
                ('impact', models.FloatField()),
                ('tenant', models.ForeignKey(db_constraint=False, db_index=False, on_delete=models.deletion.CASCADE, related_name='+', to='tenants.tenant')),
            ],
            options={
                'indexes': [models.Index(fields=['scope', 'lexeme', '-impact'], include=('memory_id', 'tenant'), name='termimpact_champions')],
            },
        ),
        migrations.RunSQL(
            sql=[
                'ALTER TABLE "memories_termimpact" ENABLE ROW LEVEL SECURITY',
                'ALTER TABLE "memories_termimpact" FORCE ROW LEVEL SECURITY',
                'CREATE POLICY tenant_isolation ON "memories_termimpact" USING (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\'))) WITH CHECK (tenant_id = (SELECT NULLIF(current_setting(\'app.tenant_id\', true), \'\')::uuid) OR (SELECT pg_has_role(current_user, \'memory_platform\', \'MEMBER\')))',
            ],
            reverse_sql=[
                'DROP POLICY IF EXISTS tenant_isolation ON "memories_termimpact"',
                'ALTER TABLE "memories_termimpact" NO FORCE ROW LEVEL SECURITY',
                'ALTER TABLE "memories_termimpact" DISABLE ROW LEVEL SECURITY',
            ],
        ),
        migrations.RunSQL(FUNCTIONS, DROP_FUNCTIONS),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
