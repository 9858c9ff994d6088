"""Prometheus counters of governance (exported at ``/metrics``)."""

from __future__ import annotations

from prometheus_client import Counter

POLICY_VIOLATIONS = Counter(
    "memory_policy_violations_total", "Writes refused by a tenant policy", ["rule"]
)
PROMOTION_BLOCKS = Counter(
    "memory_promotion_blocks_total", "Promotions blocked (sensitive, private, policy)", ["reason"]
)
