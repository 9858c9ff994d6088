"""Reading and writing a tenant's settings document (the sections are typed and validated in
``memories.settings_sections`` and ``llm.budgets``, through ``tenants.tenant_settings``).

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

import tomllib
from typing import Any

from memories.retrieval.recall import validate_weights
from memories.settings_sections import MAX_WEIGHT_SCOPES
from memory_project.errors import InvalidInput
from tenants.context import TenantContext
from tenants.selectors import tenant_settings_of
from tenants.services import tenant_settings_update
from tenants.tenant_settings import section, validate_patch


def settings_get(ctx: TenantContext) -> dict[str, Any]:
    """The tenant's settings document, as stored."""
    return tenant_settings_of(ctx)


def settings_update(ctx: TenantContext, *, patch: Any) -> dict[str, Any]:
    """Validate and merge a settings patch (``tenants.tenant_settings.validate_patch``: each
    section's own rules); scope weights merge with the existing scopes.

    Raises:
        InvalidInput: what the patch's sections refuse, or more than
            :data:`MAX_WEIGHT_SCOPES` scopes with weights after the merge.
    """
    parsed = validate_patch(patch)
    if patch.get("recall", {}).get("scoreWeights") is not None:
        weights = parsed["recall"].score_weights  # checked and normalised by the section
        current = section(ctx, "recall").score_weights
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
