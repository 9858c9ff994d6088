"""Seed 001 "Summary Observability" metrics (dots written as underscores; prometheus_client
adds ``_total`` to counters):

- ``memory_summary_generation_duration_ms{layer,depth}``: histogram, milliseconds per
  generated summary (the scope's whole generation divided over its depths);
- ``memory_summary_generations_total{layer,depth,trigger}``: counter;
- ``memory_summary_retrieval_latency_ms``: histogram, milliseconds per summary read;
- ``memory_summary_retrievals_total{layer,depth,cache_hit}``: counter (``cache_hit`` is
  ``true`` when a stored summary answered, ``false`` when none existed);
- ``memory_summary_stale_served_total{layer}``: stale summaries served (with a warning);
- ``memory_summary_batch_efficiency``: histogram, summaries written per language-model call
  in one batch (seed 001 "Summarization batching": "emit batch efficiency metrics");
- ``memory_summary_batch_size``: histogram, scopes regenerated per batch run.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

_MS_BUCKETS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 120000)

GENERATION_MS = Histogram("memory_summary_generation_duration_ms",
                          "Milliseconds to generate one summary", ["layer", "depth"],
                          buckets=_MS_BUCKETS)
GENERATIONS = Counter("memory_summary_generations", "Summaries generated",
                      ["layer", "depth", "trigger"])
RETRIEVAL_MS = Histogram("memory_summary_retrieval_latency_ms",
                         "Milliseconds to read a summary with its freshness",
                         buckets=(0.5, 1, 2, 5, 10, 25, 50, 100, 250, 1000))
RETRIEVALS = Counter("memory_summary_retrievals", "Summary reads",
                     ["layer", "depth", "cache_hit"])
STALE_SERVED = Counter("memory_summary_stale_served", "Stale summaries served with a warning",
                       ["layer"])
BATCH_EFFICIENCY = Histogram("memory_summary_batch_efficiency",
                             "Summaries written per language-model call in a batch",
                             buckets=(0.5, 1, 2, 3, 5, 10, 20, 50))
BATCH_SIZE = Histogram("memory_summary_batch_size", "Scopes regenerated per batch run",
                       buckets=(0, 1, 2, 5, 10, 20, 50, 100))
