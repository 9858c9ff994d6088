"""The ``summaries`` section of a tenant's settings (seed 001 "Summary Configuration",
"LLM Summarization Cost Control")::

    {"summaries": {
        "batchWindowSeconds": 300,
        "budget": {"period": "month", "tokens": 500000, "cost": 5.0},
        "layers": {
            "default": {"updateInterval": 3600, "skipIfUnchanged": true,
                        "updateOnChanges": 10, "depths": ["sentence", "paragraph", "detailed"],
                        "maxAge": 86400, "personalize": null, "enabled": true},
            "company": {"updateInterval": 86400},
            "project": {"personalize": "user"}}}}

Per layer, a key left out takes the ``default`` entry's value, and that entry's left-out keys
the built-in defaults above. ``updateInterval`` and ``maxAge`` are seconds;
``updateOnChanges`` counts memory changes in the scope (0 turns the change trigger off);
``depths`` lists the depths generated (seed 001: all three when not specified);
``personalize`` is ``null``, ``"user"`` or ``"session"``. ``budget`` caps what summarization
may spend on a language model per billing period (tokens and US dollars, either ``null``),
on top of the tenant's whole ``llm.budget``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from llm.budgets import parse_budget
from memory_project.errors import InvalidInput
from summaries.models import Depth
from tenants.context import TenantContext
from tenants.layers import Layer
from tenants.tenant_settings import section

DEFAULT_BATCH_WINDOW_SECONDS = 300  # seed 001 "Summarization batching": default 5 minutes
MAX_SECONDS = 366 * 86_400
MAX_CHANGES = 1_000_000
LAYER_KEYS = {"updateInterval", "skipIfUnchanged", "updateOnChanges", "depths", "maxAge",
              "personalize", "enabled"}
SECTION_KEYS = {"batchWindowSeconds", "budget", "layers"}
PERSONALIZE = ("user", "session")


@dataclass(frozen=True)
class LayerSummaryConfig:
    """When and how one layer's scopes are summarised."""

    update_interval: int = 3600
    skip_if_unchanged: bool = True
    update_on_changes: int = 10
    depths: tuple[str, ...] = tuple(Depth.values)
    max_age: int = 86_400
    personalize: str | None = None
    enabled: bool = True


@dataclass(frozen=True)
class SummaryBudget:
    """Summarization's own cap per period (``None``: no cap)."""

    period: str = "month"
    tokens: int | None = None
    cost: float | None = None


@dataclass(frozen=True)
class SummarySettings:
    """The parsed ``summaries`` section."""

    batch_window_seconds: int = DEFAULT_BATCH_WINDOW_SECONDS
    budget: SummaryBudget = field(default_factory=SummaryBudget)
    layers: dict[str, LayerSummaryConfig] = field(default_factory=dict)

    def for_layer(self, layer: Layer | str) -> LayerSummaryConfig:
        """The configuration of ``layer`` (defaults filled in)."""
        name = layer.value if isinstance(layer, Layer) else layer
        return self.layers.get(name) or self.layers.get("default") or LayerSummaryConfig()

    @classmethod
    def parse(cls, values: dict[str, Any]) -> SummarySettings:
        """Raises InvalidInput: an unknown key or layer, or a value out of range (the message
        names the key)."""
        window = _seconds(values.get("batchWindowSeconds", DEFAULT_BATCH_WINDOW_SECONDS),
                          "summaries.batchWindowSeconds", maximum=86_400)
        layers_raw = values.get("layers", {})
        if not isinstance(layers_raw, dict):
            raise InvalidInput("summaries.layers must be an object.")
        allowed = {"default", *(x.value for x in Layer)}
        unknown = sorted(set(layers_raw) - allowed)
        if unknown:
            raise InvalidInput(f"Unknown layer(s) in summaries.layers: {', '.join(unknown)}.",
                               details={"allowed": sorted(allowed)})
        default = _layer(layers_raw.get("default", {}), LayerSummaryConfig(), "default")
        layers = {"default": default}
        for layer in Layer:
            layers[layer.value] = (_layer(layers_raw[layer.value], default, layer.value)
                                   if layer.value in layers_raw else default)
        return cls(batch_window_seconds=window, budget=_budget(values.get("budget")),
                   layers=layers)


def _seconds(value: Any, name: str, *, maximum: int = MAX_SECONDS, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidInput(f"{name} must be an integer number of seconds within "
                           f"{minimum}..{maximum}.", details={"field": name, "min": minimum,
                                                              "max": maximum})
    return value


def _layer(raw: Any, base: LayerSummaryConfig, name: str) -> LayerSummaryConfig:
    if not isinstance(raw, dict):
        raise InvalidInput(f"summaries.layers.{name} must be an object.")
    unknown = sorted(set(raw) - LAYER_KEYS)
    if unknown:
        raise InvalidInput(f"Unknown summaries.layers.{name} key(s): {', '.join(unknown)}.",
                           details={"allowed": sorted(LAYER_KEYS)})
    prefix = f"summaries.layers.{name}"
    values: dict[str, Any] = {}
    if "updateInterval" in raw:
        values["update_interval"] = _seconds(raw["updateInterval"], f"{prefix}.updateInterval",
                                             minimum=60)
    if "maxAge" in raw:
        values["max_age"] = _seconds(raw["maxAge"], f"{prefix}.maxAge", minimum=60)
    if "updateOnChanges" in raw:
        changes = raw["updateOnChanges"]
        if isinstance(changes, bool) or not isinstance(changes, int) or not (
                0 <= changes <= MAX_CHANGES):
            raise InvalidInput(f"{prefix}.updateOnChanges must be an integer within "
                               f"0..{MAX_CHANGES}.", details={"field": f"{prefix}.updateOnChanges"})
        values["update_on_changes"] = changes
    for key, attr in (("skipIfUnchanged", "skip_if_unchanged"), ("enabled", "enabled")):
        if key in raw:
            if not isinstance(raw[key], bool):
                raise InvalidInput(f"{prefix}.{key} must be true or false.")
            values[attr] = raw[key]
    if "depths" in raw:
        depths = raw["depths"]
        if (not isinstance(depths, list) or not depths
                or any(d not in Depth.values for d in depths)):
            raise InvalidInput(f"{prefix}.depths must list one or more of "
                               f"{', '.join(Depth.values)}.",
                               details={"allowed": list(Depth.values)})
        values["depths"] = tuple(d for d in Depth.values if d in depths)
    if "personalize" in raw:
        if raw["personalize"] is not None and raw["personalize"] not in PERSONALIZE:
            raise InvalidInput(f"{prefix}.personalize must be null, user or session.")
        values["personalize"] = raw["personalize"]
    return replace(base, **values)


def _budget(raw: Any) -> SummaryBudget:
    period, tokens, cost = parse_budget(raw, "summaries.budget")
    return SummaryBudget(period=period, tokens=tokens,
                         cost=float(cost) if cost is not None else None)


def summary_settings(ctx: TenantContext) -> SummarySettings:
    """The tenant's parsed ``summaries`` section (read once per configuration version)."""
    settings: SummarySettings = section(ctx, "summaries")
    return settings
