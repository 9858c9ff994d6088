"""The memory service's Django project: settings, URLs, Celery app and the embedded stack."""

from __future__ import annotations

import os

# numpy's OpenBLAS threads fight torch's on small machines; one BLAS thread keeps query
# embedding at single-digit milliseconds instead of 60+ ms (measured on 2 cores).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memory_project.celery import app as celery_app

__all__ = ["celery_app"]
