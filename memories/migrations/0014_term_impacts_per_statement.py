"""Term postings of inserted memories written once per statement instead of once per row.

``memory_term_impacts_sync`` (migration 0012) ran for every inserted row: a bulk add of 100
memories ran 100 trigger calls, 67 ms of the 235 ms the insert took (``EXPLAIN (ANALYZE)`` on
the development database; docs/performance.md "Ingest"). Inserts now fire a statement-level
trigger that reads the statement's rows from its transition table and writes all their
postings in one ``INSERT … SELECT``. Updates and deletes keep the row-level trigger (a
transition table cannot be combined with ``UPDATE OF`` a column list). Same rows written, same
row-level security: the trigger writes as the caller.
"""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION memory_term_impacts_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.term_frequencies IS NOT DISTINCT FROM OLD.term_frequencies
            AND NEW.scope_key IS NOT DISTINCT FROM OLD.scope_key THEN
        RETURN NULL;
    END IF;
    DELETE FROM memories_termimpact WHERE memory_id = OLD.id;
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO memories_termimpact (memory_id, lexeme, tenant_id, scope, impact)
        SELECT NEW.id, f.key, NEW.tenant_id, memory_scope_hash(NEW.scope_key),
               memory_term_impact(f.value::float8, length(NEW.search_vector))
        FROM jsonb_each_text(NEW.term_frequencies) AS f;
    END IF;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION memory_term_impacts_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memories_termimpact (memory_id, lexeme, tenant_id, scope, impact)
    SELECT n.id, f.key, n.tenant_id, memory_scope_hash(n.scope_key),
           memory_term_impact(f.value::float8, length(n.search_vector))
    FROM inserted AS n, jsonb_each_text(n.term_frequencies) AS f;
    RETURN NULL;
END
$$;
DROP TRIGGER memory_term_impacts_sync ON memories_memory;
CREATE TRIGGER memory_term_impacts_sync
    AFTER DELETE OR UPDATE OF term_frequencies, scope_key ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION memory_term_impacts_sync();
CREATE TRIGGER memory_term_impacts_insert
    AFTER INSERT ON memories_memory REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION memory_term_impacts_insert();
"""

#: Back to migration 0012's row-level trigger: its own SQL (CREATE OR REPLACE of the functions,
#: then the trigger), once this migration's triggers are gone.
BACKWARD = """
DROP TRIGGER IF EXISTS memory_term_impacts_insert ON memories_memory;
DROP FUNCTION IF EXISTS memory_term_impacts_insert();
DROP TRIGGER memory_term_impacts_sync ON memories_memory;
""" + import_module("memories.migrations.0012_term_impacts").FUNCTIONS


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0013_memory_autovacuum'),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
