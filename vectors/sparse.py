"""Sparse BM25 term vectors for backends that fuse keyword and vector search themselves.

A document's vector holds, per term, BM25's term-frequency factor
``tf · (k1 + 1) / (tf + k1 · (1 − b + b · dl / avgdl))`` with ``k1 = 1.2``, ``b = 0.75``
(Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) and a
fixed ``avgdl`` of 30 terms; the backend multiplies in the inverse document frequency of its
collection at query time (Qdrant's ``Modifier.IDF``), so document · query scores are BM25.
A query's vector holds 1.0 per distinct term. Terms are lower-cased words of two or more
letters or digits, English stop words dropped; a term's index is its CRC-32.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter

K1 = 1.2
B = 0.75
AVERAGE_LENGTH = 30.0
_WORD = re.compile(r"[^\W_]{2,}", re.UNICODE)
_STOP = ("a an and are as at be but by for from has have he her his i in is it its me my of on "
         "or our she so that the their them they this to was we were what when where which who "
         "will with you your")
STOP_WORDS = frozenset(_STOP.split(" "))


def terms(text: str) -> list[str]:
    """The BM25 terms of ``text``, in order, repeats kept."""
    return [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def term_index(term: str) -> int:
    """The sparse index of ``term`` (CRC-32, unsigned)."""
    return zlib.crc32(term.encode())


def document_vector(text: str) -> tuple[list[int], list[float]]:
    """``(indices, values)`` of ``text`` as a document (BM25 term-frequency factors)."""
    counts = Counter(terms(text))
    length = sum(counts.values())
    weights: dict[int, float] = {}
    for term, tf in counts.items():
        norm = K1 * (1 - B + B * length / AVERAGE_LENGTH)
        index = term_index(term)
        weights[index] = weights.get(index, 0.0) + tf * (K1 + 1) / (tf + norm)
    return list(weights), list(weights.values())


def query_vector(text: str) -> tuple[list[int], list[float]]:
    """``(indices, values)`` of ``text`` as a query: 1.0 per distinct term."""
    indices = sorted({term_index(t) for t in terms(text)})
    return indices, [1.0] * len(indices)
