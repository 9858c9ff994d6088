"""The tenant's lifecycle settings for importance, decay, consolidation, pruning, retention and
session cleanup, with seed 001's defaults (all of them here) and light validation.

Shape (``tenant.settings["lifecycle"]``, JSON, camelCase; every key optional)::

    {"deletedRetentionDays": 30,
     "importance": {"frequencyWeight": 0.5, "recencyWeight": 0.3, "baseWeight": 0.2,
                    "halfLifeDays": 7, "saturation": 10},
     "decay": {"enabled": true, "ratePerDay": 0.01, "archiveThreshold": 0.1,
               "exemptLayers": ["company"]},                       # seed 001 DecayConfig
     "consolidation": {"enabled": true, "similarityThreshold": 0.92,
                       "maxMemoriesBeforeTrigger": 1000,
                       "targetLayers": ["user", "project"]},       # seed 001 ConsolidationConfig
     "pruning": {"enabled": true, "minFeedback": 3, "threshold": -0.3}}

A value of the wrong type or out of range falls back to its default (and is logged): a bad
setting must not turn every read into an error. ``sessionCleanup`` and
``promotionTargetLayer`` belong to ``memories.services.lifecycle``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from tenants.context import TenantContext
from tenants.layers import Layer
from tenants.tenant_settings import section

logger = logging.getLogger(__name__)

LAYER_NAMES = frozenset(x.value for x in Layer)

DEFAULTS: dict[str, Any] = {
    "deletedRetentionDays": 30,
    "importance": {"frequencyWeight": 0.5, "recencyWeight": 0.3, "baseWeight": 0.2,
                   "halfLifeDays": 7.0, "saturation": 10.0},
    "decay": {"enabled": True, "ratePerDay": 0.01, "archiveThreshold": 0.1,
              "exemptLayers": ["company"]},
    "consolidation": {"enabled": True, "similarityThreshold": 0.92,
                      "maxMemoriesBeforeTrigger": 1000, "targetLayers": ["user", "project"]},
    "pruning": {"enabled": True, "minFeedback": 3, "threshold": -0.3},
    # Seed 001 "Promotion check at session end" (read by ``memories.services.lifecycle``).
    "sessionCleanup": {"autoDelete": False, "retentionPeriod": "7d", "promoteImportant": True,
                       "promotionThreshold": 0.8},
}


def _number(low: float, high: float, *, low_open: bool = False) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if not math.isfinite(value):
            return False
        return (value > low if low_open else value >= low) and value <= high
    return check


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _layers(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v in LAYER_NAMES
                                           for v in value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


CHECKS: dict[str, dict[str, Callable[[Any], bool]]] = {
    "importance": {"frequencyWeight": _number(0, 1), "recencyWeight": _number(0, 1),
                   "baseWeight": _number(0, 1), "halfLifeDays": _number(0, 1e6, low_open=True),
                   "saturation": _number(0, 1e9, low_open=True)},
    "decay": {"enabled": _is_bool, "ratePerDay": _number(0, 1), "archiveThreshold": _number(0, 1),
              "exemptLayers": _layers},
    "consolidation": {"enabled": _is_bool, "similarityThreshold": _number(0, 1),
                      "maxMemoriesBeforeTrigger": _count, "targetLayers": _layers},
    "pruning": {"enabled": _is_bool, "minFeedback": _count, "threshold": _number(-1, 1)},
}


def _raw(ctx: TenantContext) -> dict[str, Any]:
    return dict(section(ctx, "lifecycle").values)


def lifecycle_section(ctx: TenantContext, section: str) -> dict[str, Any]:
    """One section (``importance``, ``decay``, ``consolidation``, ``pruning``) of the tenant's
    lifecycle settings, every key present: the tenant's valid values over the defaults.

    Raises:
        KeyError: an unknown section name (a programming error).
    """
    checks = CHECKS[section]
    given = _raw(ctx).get(section)
    merged = dict(DEFAULTS[section])
    if isinstance(given, dict):
        for key, value in given.items():
            if key in checks and checks[key](value):
                merged[key] = value
            else:
                logger.warning("tenant %s: ignoring lifecycle.%s.%s = %r", ctx.tenant_slug,
                               section, key, value)
    return merged


def deleted_retention_days(ctx: TenantContext) -> float:
    """``lifecycle.deletedRetentionDays`` (default 30): days a soft-deleted memory is kept."""
    value = _raw(ctx).get("deletedRetentionDays", DEFAULTS["deletedRetentionDays"])
    if _number(0, 36_500, low_open=True)(value):
        return float(value)
    logger.warning("tenant %s: ignoring lifecycle.deletedRetentionDays = %r", ctx.tenant_slug,
                   value)
    return float(DEFAULTS["deletedRetentionDays"])
