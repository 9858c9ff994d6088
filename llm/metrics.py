"""Prometheus series of the language-model layer (``/metrics``)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

LLM_REQUESTS = Counter("llm_requests_total", "Language-model purpose calls, by outcome.",
                       ["purpose", "model", "outcome"])
LLM_TOKENS = Counter("llm_tokens_total", "Tokens the language model read and wrote.",
                     ["purpose", "model", "kind"])
LLM_COST = Counter("llm_cost_dollars_total", "US dollars spent on the language model.",
                   ["purpose", "model"])
LLM_DURATION = Histogram("llm_request_duration_seconds", "Seconds per language-model call.",
                         ["purpose", "model"],
                         buckets=(0.5, 1, 2, 5, 10, 20, 40, 80, 160))
