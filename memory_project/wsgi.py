"""WSGI entry point, served by gunicorn (see ``run_stack``).

Each worker loads the local embedding model when it boots (``EMBEDDING_WARMUP``, on by
default), so the first request does not wait seconds for it, and then freezes the objects
it holds (``gc.freeze``): the model's hundreds of thousands of objects leave the cyclic
garbage collector's view, whose full collections would otherwise stall a request now and
then.
It also marks the process as a web worker (``MEMORY_WEB_PROCESS``), where ``llm.runner``
refuses model calls.
"""

from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application

from memory_project.env import WEB_PROCESS_FLAG

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_project.settings")
# Language-model calls take seconds: llm.runner refuses them in a web worker (they belong in
# Celery tasks or commands).
os.environ[WEB_PROCESS_FLAG] = "1"
application = get_wsgi_application()

from memory_project import warmup  # noqa: E402  (after Django is set up)

warmup.run()  # the apps' steps: the memories app loads its embedding model
gc.collect()
gc.freeze()
