"""The ``llm`` component of ``/ready``: healthy (the model answers), degraded (answers come
from the offline fallbacks: ``LLM_OFFLINE``, no model configured, or the ``llm`` circuit is
open) or down (the configured model does not answer its probe; every call falls back until
it does). The probe lists the server's models, at most once per ``PROBE_SECONDS``."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from llm import client, config
from memory_project.resilience import breaker

logger = logging.getLogger(__name__)
PROBE_SECONDS = 15.0
_lock = threading.Lock()
_last: tuple[float, dict[str, Any]] | None = None


def _probe() -> dict[str, Any]:
    if config.offline():
        return {"status": "degraded", "fallback": True, "reason": "offline"}
    if breaker(client.BACKEND).current_state == "open":
        return {"status": "degraded", "fallback": True, "reason": "circuit_open"}
    try:
        latency = client.ping()
    except Exception as exc:
        logger.warning("language model probe failed: %s", exc)
        return {"status": "down", "fallback": True, "error": type(exc).__name__}
    return {"status": "healthy", "fallback": False, "latencyMs": round(latency, 2),
            "model": config.model_for("graph")}


def llm_component() -> dict[str, Any]:
    """The component's report (cached for ``PROBE_SECONDS``)."""
    global _last
    with _lock:
        if _last is not None and time.monotonic() - _last[0] < PROBE_SECONDS:
            return _last[1]
        report = _probe()
        _last = (time.monotonic(), report)
        return report


def reset() -> None:
    """Forget the cached report (tests)."""
    global _last
    with _lock:
        _last = None
