"""How many intra-op threads the bundled embedding model runs on in this process.

A web worker runs the model on ``EMBEDDING_TORCH_THREADS`` threads (one by default: a second
thread made a single query ten times slower on two busy cores, ``docs/performance.md``,
"Embeddings"). A bulk command that embeds thousands of texts with nothing else to serve in
its process (``import_locomo``) asks for more with :func:`use_threads` when it loads the
model: on two cores, the 788 LoCoMo dev turns went in at 88–128 turns/s per conversation on
two threads against 70–94 on one (``docs/performance.md``, "Ingest").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

_count: int | None = None


@contextmanager
def use_threads(count: int) -> Iterator[None]:
    """Inside the block, the bundled model loads on ``count`` intra-op threads (0: ONNX
    Runtime's or torch's own default). The count applies when the model loads, which happens
    once per process: a bulk command enters the block before its first embedding, and the
    model it loads there keeps the count for the life of the process.

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
    """The intra-op threads the model loads with: :func:`use_threads`' count inside its
    block, else ``EMBEDDING_TORCH_THREADS``."""
    return settings.EMBEDDING_TORCH_THREADS if _count is None else _count
