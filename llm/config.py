"""Which model serves which purpose, where, at what price, and within what time.

Everything comes from the environment (``memory_project.settings``):

- ``LLM_BASE_URL``, ``LLM_API_KEY``, ``LLM_MODEL``: an OpenAI-compatible server (OpenAI,
  vLLM, Ollama, LM Studio, llama.cpp's server). Unset base URL: the local model that
  ``run_stack`` serves (``LLM_LOCAL_MODEL``, on ``127.0.0.1:LLM_LOCAL_PORT``).
- ``LLM_MODELS``: per-purpose and per-layer overrides, JSON, e.g.
  ``{"summarize": {"default": "gpt-4o", "company": "gpt-4o-mini", "org": "gpt-4o-mini"}}``
  (seed 001 "Tiered model selection": cheaper models for the company and org layers).
- ``LLM_PRICES``: US dollars per million tokens, JSON, e.g.
  ``{"gpt-4o-mini": {"prompt": 0.15, "completion": 0.6}}``; a model without a price costs 0.
- ``LLM_TIMEOUTS``: seconds per purpose, JSON, over ``DEFAULT_TIMEOUTS``.
- ``LLM_OFFLINE=1``: never call a model; every purpose answers with its offline fallback.
- ``LLM_REMOTE``: ``auto`` (a base URL off this machine is remote), ``yes`` or ``no``.
"""

from __future__ import annotations

import ipaddress
import json
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from memory_project.errors import ConfigurationError

#: Seconds a purpose may wait for one model call (the local 1.5B model writes about 15–25
#: tokens/s on two idle cores; ``llm_bench`` measures it).
DEFAULT_TIMEOUTS: dict[str, float] = {
    "graph": 60.0, "summarize": 120.0, "memories": 90.0, "query": 30.0, "learnings": 90.0,
}
LOCAL_MODEL_NAME = "local"


def _json_setting(name: str) -> dict[str, Any]:
    raw = getattr(settings, name, "") or ""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if raw else {}
    except ValueError as err:
        raise ConfigurationError(f"{name} is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"{name} must be a JSON object.")
    return value


def base_url() -> str:
    """The OpenAI-compatible endpoint the client talks to (``…/v1``)."""
    if settings.LLM_BASE_URL:
        return str(settings.LLM_BASE_URL).rstrip("/")
    return f"http://127.0.0.1:{settings.LLM_LOCAL_PORT}/v1"


def is_remote() -> bool:
    """Whether calls leave this machine (then content is PII-redacted first, if the tenant's
    policies redact): ``LLM_REMOTE`` yes/no, or on ``auto`` any ``LLM_BASE_URL`` whose host
    is not a loopback address or ``localhost``."""
    choice = str(settings.LLM_REMOTE).lower()
    if choice in ("yes", "true", "1", "no", "false", "0"):
        return choice in ("yes", "true", "1")
    if not settings.LLM_BASE_URL:
        return False
    host = urlsplit(str(settings.LLM_BASE_URL)).hostname or ""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def offline() -> bool:
    """``LLM_OFFLINE``, or no model at all: nothing configured and no local model."""
    return bool(settings.LLM_OFFLINE) or (
        not settings.LLM_BASE_URL and settings.LLM_LOCAL_MODEL in ("", "none"))


def model_for(purpose: str, layer: str | None = None) -> str:
    """The model name for ``purpose`` (and the memory layer it works on): ``LLM_MODELS``'s
    ``{purpose: {layer: model, "default": model}}``, else ``LLM_MODEL``, else the local
    model."""
    overrides = _json_setting("LLM_MODELS").get(purpose) or {}
    if isinstance(overrides, str):
        return overrides
    if layer and overrides.get(layer):
        return str(overrides[layer])
    if overrides.get("default"):
        return str(overrides["default"])
    return str(settings.LLM_MODEL or LOCAL_MODEL_NAME)


def timeout_for(purpose: str) -> float:
    """Seconds ``purpose`` may wait for one model call."""
    configured = _json_setting("LLM_TIMEOUTS").get(purpose)
    return float(configured) if configured else DEFAULT_TIMEOUTS.get(purpose, 60.0)


def cost_of(model: str, prompt_tokens: int, completion_tokens: int) -> Decimal:
    """US dollars for a call (``LLM_PRICES`` per million tokens; 0 without a price)."""
    price = _json_setting("LLM_PRICES").get(model) or {}
    per_million = Decimal(1_000_000)
    return (Decimal(str(price.get("prompt", 0))) * prompt_tokens
            + Decimal(str(price.get("completion", 0))) * completion_tokens) / per_million
