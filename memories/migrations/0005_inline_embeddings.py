"""Keep embeddings inline in the heap row.

pgvector gives ``vector`` EXTERNAL storage, so a row over PostgreSQL's 2 KB TOAST threshold
(a 384-d embedding is 1.5 KB) keeps its embedding out of line, and every distance an exact
scan computes costs a TOAST fetch: ~9 µs per row instead of ~2 µs on these machines
(``EXPLAIN (ANALYZE, BUFFERS)``: 3.8 shared buffers per row). ``STORAGE MAIN`` makes the
embedding the last column moved out of line, and ``toast_tuple_target = 4080`` lets rows up
to half a page stay whole. Rows written before this migration keep their layout until
they are rewritten (``VACUUM FULL memories_memory``).
"""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0004_lifecycle")]

    operations = [
        migrations.RunSQL(
            sql=[
                "ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE MAIN",
                "ALTER TABLE memories_memory SET (toast_tuple_target = 4080)",
            ],
            reverse_sql=[
                "ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE EXTERNAL",
                "ALTER TABLE memories_memory RESET (toast_tuple_target)",
            ],
        ),
    ]
