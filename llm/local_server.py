"""The local model's OpenAI-compatible server: llama.cpp's own HTTP server (``xllamacpp``),
in a process of its own that ``run_stack`` starts beside gunicorn and Celery.

It listens on ``127.0.0.1:LLM_LOCAL_PORT`` only, answers ``/v1/chat/completions`` (with JSON
schema ``response_format``), ``/v1/models`` and ``/health``, runs one request at a time on
``LLM_LOCAL_THREADS`` threads, and lowers its own scheduling priority (``LLM_LOCAL_NICE``)
so that a burst of generation never takes the CPU from search: the web workers go first.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings

from llm.weights import ensure_weights

logger = logging.getLogger(__name__)


def server_params(model_path: Path, *, port: int, threads: int, context: int) -> Any:
    """``xllamacpp.CommonParams`` for one loopback server of ``model_path``."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model_path)
    params.model_alias = "local"
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.n_ctx = context
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    return params


def serve(*, model: str | None = None, port: int | None = None) -> None:
    """Join the weights (first run), start the server and block until SIGTERM/SIGINT."""
    import xllamacpp

    name = model or settings.LLM_LOCAL_MODEL
    path = ensure_weights(name)
    os.nice(settings.LLM_LOCAL_NICE)
    params = server_params(path, port=port or settings.LLM_LOCAL_PORT,
                           threads=settings.LLM_LOCAL_THREADS, context=settings.LLM_LOCAL_CONTEXT)
    server = xllamacpp.Server(params)
    logger.info("local model %s serving on 127.0.0.1:%s", name, params.port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    del server
