"""One more posting per searchable memory: the document posting, lexeme ``''``, whose
``impact`` holds the memory's length (lexemes of its ``search_vector``).

BM25 needs a scope's size and mean document length (``memories.retrieval.keyword``). They
were counted by reading every memory of the scope: 7 s for the 1M-memory bench tenant with
its pages in memory and 49 s from disk, on the first search of each process. With a
document posting per memory, both are one index-only scan of ``termimpact_champions``
(``scope``, ``''``). ``to_tsvector`` never yields an empty lexeme, so no query term reads
these postings. They follow the memory as migration 0018's postings do: written for active,
unpruned memories, removed and written again when content, scope, state or ``pruned_at``
change. Existing memories get theirs here.
"""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

_PREVIOUS = import_module("memories.migrations.0018_term_postings_of_searchable_memories")

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
        FROM jsonb_each_text(NEW.term_frequencies) AS f
        UNION ALL
        SELECT NEW.id, '', NEW.tenant_id, memory_scope_hash(NEW.scope_key),
               length(NEW.search_vector)::float8;
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
    WHERE n.state = 'active' AND n.pruned_at IS NULL
    UNION ALL
    SELECT n.id, '', n.tenant_id, memory_scope_hash(n.scope_key), length(n.search_vector)::float8
    FROM inserted AS n
    WHERE n.state = 'active' AND n.pruned_at IS NULL;
    RETURN NULL;
END
$$;
INSERT INTO memories_termimpact (memory_id, lexeme, tenant_id, scope, impact)
SELECT m.id, '', m.tenant_id, memory_scope_hash(m.scope_key), length(m.search_vector)::float8
FROM memories_memory m
WHERE m.state = 'active' AND m.pruned_at IS NULL
ON CONFLICT DO NOTHING;
"""

#: Migration 0018's trigger functions again, without the document postings.
BACKWARD = """
DELETE FROM memories_termimpact WHERE lexeme = '';
""" + _PREVIOUS.FORWARD.split("DROP TRIGGER memory_term_impacts_sync")[0]


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0018_term_postings_of_searchable_memories'),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
