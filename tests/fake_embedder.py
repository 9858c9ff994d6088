"""A deterministic embedder for tests that do not measure retrieval quality.

Feature hashing of lower-cased words into 384 signed dimensions, L2-normalised: the same text
always gives the same vector, texts that share words are similar, and nothing loads a model.
Tests that depend on what MiniLM understands (paraphrases, thresholds, ranking quality) are
marked ``real_embedder`` and get the bundled model (``tests/conftest.py``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

WORD = re.compile(r"\w+")


class HashingEmbedder:
    """``Embedder`` (``memories.embedding.embedders``) by feature hashing; 384 dimensions."""

    model_name = "test-hashing-384"
    dimensions = 384

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self.dimensions
                out[row, index] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0], norm = 1.0, 1.0
            out[row] /= norm
        return out
