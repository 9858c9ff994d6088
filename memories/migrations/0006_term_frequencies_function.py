"""``memory_term_frequencies(tsvector) → jsonb``: the BM25 term frequency of each lexeme.

A ``content`` position (weight A) counts 1, a ``context`` position (weight D) counts 0.35
(``memories.keyword.CONTEXT_WEIGHT``). IMMUTABLE, so a generated column may use it.
"""

from __future__ import annotations

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION memory_term_frequencies(vector tsvector) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(jsonb_object_agg(
        lexeme,
        cardinality(weights) - 0.65 * cardinality(array_positions(weights, 'D'))), '{}')
    FROM unnest(vector)
$$
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0005_inline_embeddings")]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION IF EXISTS memory_term_frequencies(tsvector)"),
    ]
