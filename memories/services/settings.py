"""The retrieval part of a tenant's settings, validated.

Shape (JSON, camelCase)::

    {"search": {"defaultThreshold": 0.7},
     "recall": {"scoreWeights": {"default": {...}, "health": {...}},
                "recencyHalfLifeDays": 30},
     "llm": {"budget": {"period": "month", "tokens": 2000000, "cost": 25.0},
             "cacheTtlSeconds": 3600}}

(``llm``: the language-model budget and cache, ``llm.budgets``.)

Score weights are importable from a TOML file in seed 002's ``butler.toml`` form:
``score_weights = { relevance = 0.6, importance = 0.1, recency = 0.2, confidence = 0.1 }``
at the top level (for one scope, ``default`` unless told), and/or per scope as
``[scopes.health]`` tables holding a ``score_weights`` line.
"""

from __future__ import annotations

import math
import tomllib
from typing import Any

from llm.budgets import validate_llm_settings
from memories.retrieval.recall import validate_weights
from memories.services.lifecycle import VOLATILE_LAYERS, parse_period
from memories.services.lifecycle_config import CHECKS
from memory_project.errors import InvalidInput
from memory_project.validation import unstorable_text
from tenants.context import TenantContext
from tenants.selectors import tenant_settings_of
from tenants.services import tenant_settings_update

ALLOWED = {
    "search": {"defaultThreshold"},
    "recall": {"scoreWeights", "recencyHalfLifeDays"},
    "lifecycle": {"deletedRetentionDays", "importance", "decay", "consolidation", "pruning",
                  "sessionCleanup", "promotionTargetLayer"},
    "llm": {"budget", "cacheTtlSeconds"},
}
SESSION_CLEANUP_KEYS = {"autoDelete", "retentionPeriod", "promoteImportant",
                        "promotionThreshold"}
#: Scopes with their own recall weights a tenant may keep (each search copies them).
MAX_WEIGHT_SCOPES = 100
#: The longest half-life or retention a setting may name: 100 years, in days.
MAX_DAYS = 36_500


def _days(value: Any) -> bool:
    """A number of days within (0, :data:`MAX_DAYS`]."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and 0 < value <= MAX_DAYS)


def validate_settings_patch(patch: Any) -> dict[str, Any]:
    """Check a settings patch.

    Raises:
        InvalidInput: unknown sections or keys, a threshold outside [0, 1], weights that
            :func:`memories.retrieval.recall.validate_weights` refuses, a half-life that is not > 0.
    """
    if not isinstance(patch, dict):
        raise InvalidInput("settings must be an object.")
    problem = unstorable_text(patch)
    if problem:
        raise InvalidInput(f"Invalid settings: {problem}")
    for section, values in patch.items():
        if section not in ALLOWED or not isinstance(values, dict):
            raise InvalidInput(f"Unknown settings section {section!r}.",
                               details={"allowed": {k: sorted(v) for k, v in ALLOWED.items()}})
        unknown = set(values) - ALLOWED[section]
        if unknown:
            raise InvalidInput(f"Unknown {section} setting(s): {', '.join(sorted(unknown))}.")
    threshold = patch.get("search", {}).get("defaultThreshold")
    if threshold is not None and (
        isinstance(threshold, bool) or not isinstance(threshold, (int, float))
        or not 0 <= threshold <= 1
    ):
        raise InvalidInput("search.defaultThreshold must be a number within [0, 1].")
    recall = patch.get("recall", {})
    weights = recall.get("scoreWeights")
    if weights is not None:
        if not isinstance(weights, dict) or not weights:
            raise InvalidInput("recall.scoreWeights must map scopes to weights.")
        if len(weights) > MAX_WEIGHT_SCOPES:
            raise InvalidInput(f"recall.scoreWeights may name at most {MAX_WEIGHT_SCOPES} "
                               "scopes.", details={"max": MAX_WEIGHT_SCOPES})
        for scope, value in weights.items():
            if not isinstance(scope, str) or not scope.strip() or len(scope) > 100:
                raise InvalidInput("recall.scoreWeights keys must be scope names of at most "
                                   "100 characters.")
            weights[scope] = validate_weights(value)
    validate_lifecycle(patch.get("lifecycle", {}))
    validate_llm_settings(patch.get("llm"))
    half_life = recall.get("recencyHalfLifeDays")
    if half_life is not None and not _days(half_life):
        raise InvalidInput(f"recall.recencyHalfLifeDays must be a number within (0, {MAX_DAYS}].",
                           details={"max": MAX_DAYS})
    return patch


def settings_get(ctx: TenantContext) -> dict[str, Any]:
    """The tenant's settings."""
    return tenant_settings_of(ctx)


def settings_update(ctx: TenantContext, *, patch: Any) -> dict[str, Any]:
    """Validate and merge a settings patch; scope weights merge with the existing scopes."""
    patch = validate_settings_patch(patch)
    weights = patch.get("recall", {}).get("scoreWeights")
    if weights is not None:
        current = (settings_get(ctx).get("recall") or {}).get("scoreWeights") or {}
        merged = {**current, **weights}
        if len(merged) > MAX_WEIGHT_SCOPES:
            raise InvalidInput(f"recall.scoreWeights may name at most {MAX_WEIGHT_SCOPES} "
                               "scopes.", details={"max": MAX_WEIGHT_SCOPES})
        patch["recall"]["scoreWeights"] = merged
    return tenant_settings_update(ctx, patch=patch)


def weights_from_toml(text: str, *, scope: str | None = None) -> dict[str, dict[str, float]]:
    """``{scope: weights}`` read from ``butler.toml``-style text.

    Raises:
        InvalidInput: not TOML, ``scopes`` not a table of tables, no ``score_weights``
            anywhere, or invalid weights.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InvalidInput(f"Not valid TOML: {err}") from None
    found: dict[str, dict[str, float]] = {}
    if "score_weights" in data:
        found[scope or "default"] = validate_weights(data["score_weights"])
    scopes = data.get("scopes") or {}
    if not isinstance(scopes, dict) or not all(isinstance(t, dict) for t in scopes.values()):
        raise InvalidInput("scopes must hold [scopes.<name>] tables.")
    for name, table in scopes.items():
        if "score_weights" in table:
            found[str(name)] = validate_weights(table["score_weights"])
    if not found:
        raise InvalidInput("No score_weights found (top level or [scopes.<name>]).")
    return found


def validate_lifecycle(lifecycle: dict[str, Any]) -> None:
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
