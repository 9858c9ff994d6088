"""Effective confidence of a memory and its state (seed 002 "Effective confidence filtering").

``effective = confidence × exp(−decay_rate × days since last_confirmed_at)`` (``created_at``
when never confirmed); ``decay_rate`` is per day. The state names where that leaves it:

- ``active``: effective ≥ 0.5
- ``fading``: 0.2 ≤ effective < 0.5 (0.2 is seed 002's default retrieval threshold)
- ``expired``: effective < 0.2 (left out of recall unless ``min_confidence`` says otherwise)
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal

from django.utils import timezone

ACTIVE_MIN = 0.5
FADING_MIN = 0.2

ConfidenceState = Literal["active", "fading", "expired"]


def effective_confidence(confidence: float, decay_rate: float, days: float) -> float:
    """``confidence × exp(−decay_rate × days)`` (seed 002); ``days`` below 0 count as 0."""
    return confidence * math.exp(-decay_rate * max(0.0, days))


def confidence_state(effective: float) -> ConfidenceState:
    """``"active"`` (≥ 0.5), ``"fading"`` (≥ 0.2) or ``"expired"`` (< 0.2)."""
    if effective >= ACTIVE_MIN:
        return "active"
    if effective >= FADING_MIN:
        return "fading"
    return "expired"


def memory_confidence(memory: Any, now: datetime | None = None
                      ) -> tuple[float, ConfidenceState]:
    """``(effective confidence, state)`` of a memory at ``now`` (default: the current time).

    Args:
        memory: anything with ``confidence``, ``decay_rate``, ``last_confirmed_at`` and
            ``created_at`` (a :class:`memories.models.Memory`).
    """
    now = now or timezone.now()
    since = memory.last_confirmed_at or memory.created_at
    days = (now - since).total_seconds() / 86400.0 if since else 0.0
    value = effective_confidence(memory.confidence, memory.decay_rate, days)
    return value, confidence_state(value)
