"""The embedding model's readiness probe and the web worker's warm-up (registered with
``memory_project.health`` and ``memory_project.warmup`` in ``MemoriesConfig.ready``)."""

from __future__ import annotations

import threading
import time

from django.conf import settings

from memories.embedding.embedders import get_embedder

#: How long a successful model probe stands: /ready is open to anyone, and must not make the
#: model (or a paid provider) run on every call.
MODEL_PROBE_SECONDS = 60.0
_model_ok_until = 0.0
_model_lock = threading.Lock()


def embedding_model_probe() -> None:
    """``/ready``'s ``embeddingModel`` component: embed one text; raises when the model
    fails. A success stands for ``MODEL_PROBE_SECONDS``."""
    global _model_ok_until
    with _model_lock:
        if time.monotonic() < _model_ok_until:
            return
        vector = get_embedder().encode(["ready"])
        if vector.shape[0] != 1:
            raise RuntimeError("embedding model returned no vector")
        _model_ok_until = time.monotonic() + MODEL_PROBE_SECONDS



def warm_up() -> None:
    """Load the local embedding model and run it once (``EMBEDDING_WARMUP``, on by default),
    so a web worker's first request does not wait seconds for it."""
    if settings.EMBEDDING_WARMUP and settings.EMBEDDING_PROVIDER == "local":
        get_embedder().encode(["warm up"])
