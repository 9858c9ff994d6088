"""How many cores the bundled embedding model uses in this process.

ONNX Runtime (the default runtime) runs one call's batches side by side:
:func:`parallel_batches` of them at once, each on its own thread, each a run of the model on
``EMBEDDING_TORCH_THREADS`` intra-op threads (one by default). The runs are independent and
ONNX Runtime releases the GIL while one computes, so two of them keep two cores busy with no
synchronisation between the threads. One run spread over two intra-op threads instead meets
at every operator, and waits for the slower thread when the cores are shared: a second
intra-op thread made a single query ten times slower on two busy cores. On two idle cores,
the 788 LoCoMo dev turns (batches of 8): 140 texts/s on one thread, 245–250 on two intra-op
threads, 265–268 as two batches at once (the same vectors to the bit;
``docs/performance.md``, "Embeddings").

The torch runtime (sentence-transformers) has no batches of its own to run side by side;
:func:`model_threads` is its intra-op thread count, fixed when it loads.

A bulk command that embeds thousands of texts with nothing else to serve in its process
(``import_locomo``) sets its own count with :func:`use_threads`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

_count: int | None = None


@contextmanager
def use_threads(count: int) -> Iterator[None]:
    """Inside the block, the model uses ``count`` cores: ONNX Runtime runs ``count`` batches
    at once (:func:`parallel_batches`); torch loads on ``count`` intra-op threads (0: its own
    default). torch's count applies when the model loads, once per process: a bulk command
    enters the block before its first embedding.

    Raises:
        ValueError: ``count`` is negative.
    """
    global _count
    if count < 0:
        raise ValueError("the thread count cannot be negative")
    previous, _count = _count, count
    try:
        yield
    finally:
        _count = previous


def model_threads() -> int:
    """The torch runtime's intra-op threads: :func:`use_threads`' count inside its block,
    else ``EMBEDDING_TORCH_THREADS``."""
    return settings.EMBEDDING_TORCH_THREADS if _count is None else _count


def parallel_batches() -> int:
    """How many batches of one call ONNX Runtime runs at once (at least 1):
    :func:`use_threads`' count inside its block, else ``EMBEDDING_PARALLEL_BATCHES``, whose
    0 means one per core."""
    count = settings.EMBEDDING_PARALLEL_BATCHES if _count is None else _count
    return max(1, count or os.cpu_count() or 1)
