"""Vacuum the memory table after 2% of its rows changed, not PostgreSQL's default 20%.

Every search, recall and get rewrites the rows it returns (reference and access counters,
seed 002). On the 100k bench tenant, 44k dead row versions (23% of the table, still under the
default trigger) had REST hybrid search at p50 77–83 ms and p95 ~120 ms; after a ``VACUUM``
(5 s) it was back to 31 ms and 41–46 ms. ``autovacuum_vacuum_scale_factor`` is a per-table
storage parameter (PostgreSQL documentation, "Routine Vacuuming", "The Autovacuum Daemon").
"""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0012_term_impacts")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory SET (autovacuum_vacuum_scale_factor = 0.02, "
            "autovacuum_vacuum_threshold = 1000)",
            "ALTER TABLE memories_memory RESET (autovacuum_vacuum_scale_factor, "
            "autovacuum_vacuum_threshold)",
        ),
    ]
