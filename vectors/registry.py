"""Backend implementations by name, and the process's configured backend.

The six vendor adapters live in ``vectors.adapters`` and are imported on first use (their
client libraries are optional extras). ``pgvector`` works on the memories table, so the
``memories`` app registers its implementation (:func:`register`) when it starts; this
package never imports ``memories``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable

from vectors.base import VectorBackend
from vectors.config import BACKENDS, BackendSettings, VectorConfig, load_config
from vectors.errors import InvalidBackendConfig
from vectors.guard import GuardedBackend

Factory = Callable[[BackendSettings], VectorBackend]

_factories: dict[str, Factory] = {}
#: Adapters in this package: backend name → module with a ``build(settings)`` function.
_ADAPTER_MODULES = {
    "qdrant": "vectors.adapters.qdrant",
    "weaviate": "vectors.adapters.weaviate",
    "pinecone": "vectors.adapters.pinecone",
    "mongodb": "vectors.adapters.mongodb",
    "vertex_ai": "vectors.adapters.vertex_ai",
    "databricks": "vectors.adapters.databricks",
}
_lock = threading.Lock()
_config: VectorConfig | None = None
_backend: GuardedBackend | None = None


def register(name: str, factory: Factory) -> None:
    """Make ``factory(settings)`` the implementation of backend ``name`` (one of
    ``vectors.config.BACKENDS``)."""
    if name not in BACKENDS:
        raise ValueError(f"{name!r} is not a supported vector backend")
    _factories[name] = factory


def build(config: VectorConfig) -> GuardedBackend:
    """A new guarded backend for ``config``.

    Raises:
        InvalidBackendConfig: no implementation is registered for the backend.
    """
    factory = _factories.get(config.backend)
    if factory is None and config.backend in _ADAPTER_MODULES:
        module = importlib.import_module(_ADAPTER_MODULES[config.backend])
        factory = module.build
    if factory is None:
        raise InvalidBackendConfig(
            f"No implementation of the {config.backend} backend is installed.",
            backend=config.backend, supported=list(BACKENDS))
    return GuardedBackend(factory(config.settings))


def configured() -> VectorConfig:
    """The configuration read at start-up (``vectors.config.load_config``), cached."""
    global _config
    with _lock:
        if _config is None:
            _config = load_config()
        return _config


def backend() -> GuardedBackend:
    """The process-wide configured backend (built on first use)."""
    global _backend
    config = configured()
    with _lock:
        if _backend is None:
            _backend = build(config)
        return _backend


def reset(config: VectorConfig | None = None) -> None:
    """Forget the configured backend (and use ``config`` from now on, when given); for
    tests and reloads. The old backend is not closed: callers that hold it may finish."""
    global _config, _backend
    with _lock:
        _config, _backend = config, None
