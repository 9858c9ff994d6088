"""The memories app's sections of a tenant's settings (registered with
``tenants.tenant_settings`` in ``MemoriesConfig.ready``): ``search``, ``recall`` and
``lifecycle``. Defaults live here and in ``memories.services.lifecycle_config``.

Shape (JSON, camelCase)::

    {"search": {"defaultThreshold": 0.7},
     "recall": {"scoreWeights": {"default": {...}, "health": {...}},
                "recencyHalfLifeDays": 30},
     "lifecycle": {...}}        # memories.services.lifecycle_config, .lifecycle

Score weights are importable from a TOML file in seed 002's ``butler.toml`` form
(``memories.services.settings.weights_from_toml``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from memories.retrieval.recall import DEFAULT_HALF_LIFE_DAYS, DEFAULT_WEIGHTS, validate_weights
from memories.services.lifecycle import VOLATILE_LAYERS, parse_period
from memories.services.lifecycle_config import CHECKS
from memory_project.errors import InvalidInput
from tenants.tenant_settings import register_section

#: Scopes with their own recall weights a tenant may keep (each search copies them).
MAX_WEIGHT_SCOPES = 100
#: The longest half-life or retention a setting may name: 100 years, in days.
MAX_DAYS = 36_500
SESSION_CLEANUP_KEYS = {"autoDelete", "retentionPeriod", "promoteImportant",
                        "promotionThreshold"}
LIFECYCLE_KEYS = {"deletedRetentionDays", "importance", "decay", "consolidation", "pruning",
                  "sessionCleanup", "promotionTargetLayer"}


def _days(value: Any) -> bool:
    """A number of days within (0, :data:`MAX_DAYS`]."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and 0 < value <= MAX_DAYS)


@dataclass(frozen=True)
class SearchSettings:
    """``search``: the similarity threshold a search uses when it names none."""

    default_threshold: float | None = None

    @property
    def threshold(self) -> float:
        """The tenant's threshold, else ``MEMORY_DEFAULT_THRESHOLD`` (0.7, seed 001)."""
        if self.default_threshold is None:
            return float(settings.MEMORY_DEFAULT_THRESHOLD)
        return self.default_threshold

    @classmethod
    def parse(cls, values: dict[str, Any]) -> SearchSettings:
        """Raises InvalidInput: ``defaultThreshold`` not a number within [0, 1]."""
        threshold = values.get("defaultThreshold")
        if threshold is None:
            return cls()
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not (
                0 <= threshold <= 1):
            raise InvalidInput("search.defaultThreshold must be a number within [0, 1].")
        return cls(float(threshold))


@dataclass(frozen=True)
class RecallSettings:
    """``recall``: composite-score weights per scope (seed 002) and the recency half-life."""

    score_weights: dict[str, dict[str, float]] = field(default_factory=dict)
    recency_half_life_days: float = DEFAULT_HALF_LIFE_DAYS

    def weights_for(self, scope: str | None) -> dict[str, float]:
        """``scope``'s weights, else the tenant's ``default`` ones, else seed 002's."""
        by_scope = self.score_weights
        return dict(by_scope.get(scope or "default") or by_scope.get("default")
                    or DEFAULT_WEIGHTS)

    @classmethod
    def parse(cls, values: dict[str, Any]) -> RecallSettings:
        """Raises InvalidInput: weights that ``validate_weights`` refuses, more than
        :data:`MAX_WEIGHT_SCOPES` scopes, or a half-life outside (0, :data:`MAX_DAYS`]."""
        weights = values.get("scoreWeights")
        checked: dict[str, dict[str, float]] = {}
        if weights is not None:
            if not isinstance(weights, dict) or not weights:
                raise InvalidInput("recall.scoreWeights must map scopes to weights.")
            if len(weights) > MAX_WEIGHT_SCOPES:
                raise InvalidInput(f"recall.scoreWeights may name at most {MAX_WEIGHT_SCOPES} "
                                   "scopes.", details={"max": MAX_WEIGHT_SCOPES})
            for scope, value in weights.items():
                if not isinstance(scope, str) or not scope.strip() or len(scope) > 100:
                    raise InvalidInput("recall.scoreWeights keys must be scope names of at "
                                       "most 100 characters.")
                checked[scope] = validate_weights(value)
        half_life = values.get("recencyHalfLifeDays")
        if half_life is not None and not _days(half_life):
            raise InvalidInput("recall.recencyHalfLifeDays must be a number within "
                               f"(0, {MAX_DAYS}].", details={"max": MAX_DAYS})
        return cls(checked, float(half_life) if half_life is not None
                   else DEFAULT_HALF_LIFE_DAYS)


@dataclass(frozen=True)
class LifecycleSettings:
    """``lifecycle``: the stored document; its readers
    (``memories.services.lifecycle_config.lifecycle_section``,
    ``memories.services.lifecycle.lifecycle_settings``) fill in defaults key by key and skip
    (and log) a value that no longer validates."""

    values: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, values: dict[str, Any]) -> LifecycleSettings:
        return cls(dict(values))


def register() -> None:
    """Register the sections (``MemoriesConfig.ready``)."""
    register_section("search", {"defaultThreshold"}, SearchSettings.parse)
    register_section("recall", {"scoreWeights", "recencyHalfLifeDays"}, RecallSettings.parse)
    register_section("lifecycle", LIFECYCLE_KEYS, LifecycleSettings.parse,
                     validate=validate_lifecycle)


def validate_lifecycle(lifecycle: dict[str, Any]) -> LifecycleSettings:
    """Check the ``lifecycle`` section (shapes in ``memories.services.lifecycle_config`` and
    ``memories.services.lifecycle``). A sub-section given replaces the stored one whole.

    Raises:
        InvalidInput: an unknown key or a value out of range, naming it.
    """
    for section, checks in CHECKS.items():
        values = lifecycle.get(section)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise InvalidInput(f"lifecycle.{section} must be an object.")
        for key, value in values.items():
            if key not in checks or not checks[key](value):
                raise InvalidInput(f"Invalid lifecycle.{section}.{key}: {value!r}.",
                                   details={"allowed": sorted(checks)})
    days = lifecycle.get("deletedRetentionDays")
    if days is not None and not _days(days):
        raise InvalidInput("lifecycle.deletedRetentionDays must be a number within "
                           f"(0, {MAX_DAYS}].", details={"max": MAX_DAYS})
    cleanup = lifecycle.get("sessionCleanup")
    if cleanup is not None:
        if not isinstance(cleanup, dict) or set(cleanup) - SESSION_CLEANUP_KEYS:
            raise InvalidInput("lifecycle.sessionCleanup accepts "
                               f"{', '.join(sorted(SESSION_CLEANUP_KEYS))}.")
        for key in ("autoDelete", "promoteImportant"):
            if key in cleanup and not isinstance(cleanup[key], bool):
                raise InvalidInput(f"lifecycle.sessionCleanup.{key} must be true or false.")
        if "retentionPeriod" in cleanup:
            parse_period(cleanup["retentionPeriod"])
        threshold = cleanup.get("promotionThreshold")
        if threshold is not None and (isinstance(threshold, bool)
                                      or not isinstance(threshold, (int, float))
                                      or not 0 <= threshold <= 1):
            raise InvalidInput("lifecycle.sessionCleanup.promotionThreshold must be in [0, 1].")
    target = lifecycle.get("promotionTargetLayer")
    if target is not None and (not isinstance(target, str) or target in VOLATILE_LAYERS
                               or target not in {
            "user", "project", "team", "org", "company"}):
        raise InvalidInput("lifecycle.promotionTargetLayer must be a persistent layer.")
    return LifecycleSettings(dict(lifecycle))
