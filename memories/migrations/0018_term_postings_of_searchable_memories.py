"""Term postings only for the memories search can return: active and not pruned.

Migration 0014's triggers wrote postings for every memory and dropped them only on delete, so
an archived, soft-deleted or pruned memory kept its postings. Postings now exist exactly for
the memories of ``memories.retrieval.partition.layer_queryset`` (state ``active``,
``pruned_at`` null): inserts write them for those only, and an update of ``state`` or
``pruned_at`` removes them or writes them again. A term's postings in a layer scope then
count its document frequency for search (``memories.retrieval.keyword``: one index-only
count instead of a GIN scan that reads every matching row). The postings of memories that
are not searchable are removed here.
"""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION memory_term_impacts_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.term_frequencies IS NOT DISTINCT FROM OLD.term_frequencies
            AND NEW.scope_key IS NOT DISTINCT FROM OLD.scope_key
            AND NEW.state IS NOT DISTINCT FROM OLD.state
            AND NEW.pruned_at IS NOT DISTINCT FROM OLD.pruned_at THEN
        RETURN NULL;
    END IF;
    DELETE FROM memories_termimpact WHERE memory_id = OLD.id;
    IF TG_OP = 'UPDATE' AND NEW.state = 'active' AND NEW.pruned_at IS NULL THEN
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
    FROM inserted AS n, jsonb_each_text(n.term_frequencies) AS f
    WHERE n.state = 'active' AND n.pruned_at IS NULL;
    RETURN NULL;
END
$$;
DROP TRIGGER memory_term_impacts_sync ON memories_memory;
CREATE TRIGGER memory_term_impacts_sync
    AFTER DELETE OR UPDATE OF term_frequencies, scope_key, state, pruned_at ON memories_memory
    FOR EACH ROW EXECUTE FUNCTION memory_term_impacts_sync();
DELETE FROM memories_termimpact ti
USING memories_memory m
WHERE m.id = ti.memory_id AND (m.state <> 'active' OR m.pruned_at IS NOT NULL);
"""

#: Migration 0014's functions and triggers again, and the postings of every memory.
BACKWARD = """
DROP TRIGGER memory_term_impacts_sync ON memories_memory;
DROP TRIGGER IF EXISTS memory_term_impacts_insert ON memories_memory;
""" + import_module("memories.migrations.0014_term_impacts_per_statement").FORWARD.replace(
    "DROP TRIGGER memory_term_impacts_sync ON memories_memory;\n", "") + """
INSERT INTO memories_termimpact (memory_id, lexeme, tenant_id, scope, impact)
SELECT m.id, f.key, m.tenant_id, memory_scope_hash(m.scope_key),
       memory_term_impact(f.value::float8, length(m.search_vector))
FROM memories_memory m, jsonb_each_text(m.term_frequencies) AS f
WHERE m.state <> 'active' OR m.pruned_at IS NOT NULL;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0017_history_created_index'),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
