"""Leave room in each heap page for one more version of a row.

Every search, recall and get bumps the reference and access counters of what it returns
(seed 002), one UPDATE per request. A memory row is ~2.3 KB with its embedding inline, so a
full page has no room for the new version: the update then goes to another page and inserts
into every index, the HNSW graph included (~10 ms per row measured on the 10k bench tenant).
With ``fillfactor = 70`` a page keeps room for one more version and the update is HOT
(heap-only: no index changes, since no indexed column changes). Pages hold two rows instead
of three. Existing pages keep their layout until rewritten (``VACUUM FULL memories_memory``).
"""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0007_term_frequencies")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory SET (fillfactor = 70)",
            "ALTER TABLE memories_memory RESET (fillfactor)",
        ),
    ]
