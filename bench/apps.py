"""The benchmark app: LoCoMo import and evaluation, ``manage.py bench``, ``llm_bench``.

Not product code: it measures the service (ingest rate, search p50/p95, recall@k) and the
local model, and sits on the top floor, beside the console, so nothing below imports it.
"""

from django.apps import AppConfig


class BenchConfig(AppConfig):
    """Registers the benchmark commands."""

    name = "bench"
    verbose_name = "Benchmarks"
