"""Work a web worker does once when it boots, before it serves (``memory_project.wsgi``).

Apps register it from ``AppConfig.ready()``, so that this package imports no app: the
memories app loads its embedding model here.
"""

from __future__ import annotations

from collections.abc import Callable

_steps: dict[str, Callable[[], None]] = {}


def register_warmup(name: str, step: Callable[[], None]) -> None:
    """Run ``step()`` when a web worker boots (called from ``AppConfig.ready()``;
    registering a name again replaces it)."""
    _steps[name] = step


def run() -> None:
    """Run every registered step, in registration order."""
    for step in _steps.values():
        step()
