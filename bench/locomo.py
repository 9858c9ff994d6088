"""LoCoMo conversations (Maharana et al., ACL 2024) as memories, and evidence recall@k.

Each conversation becomes a project (``projectId`` = ``sample_id``) and each turn a
project-layer memory. The file format, its reading and recall@k are in
:mod:`bench.peers.locomo_format`, shared with the peers' runners (plain Python, no Django).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.peers.locomo_format import (
    CATEGORY_NAMES,
    RETRIEVAL_CATEGORIES,
    Question,
    Turn,
    is_locomo,
    questions,
    recall_at_k,
    session_turns,
)
from memory_project.errors import InvalidInput

__all__ = [
    "CATEGORY_NAMES", "RETRIEVAL_CATEGORIES", "Question", "Turn", "cited_turns", "load_samples",
    "questions", "recall_at_k", "turns",
]


def load_samples(path: Path) -> list[dict[str, Any]]:
    """Read a LoCoMo-format file.

    Raises:
        InvalidInput: not JSON, or not a list of samples with ``sample_id`` and
            ``conversation``.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise InvalidInput(f"Cannot read {path}: {err}") from None
    if not is_locomo(data):
        raise InvalidInput(f"{path} is not a LoCoMo file (a list of samples).")
    return data


def turns(sample: dict[str, Any]) -> Iterator[Turn]:
    """Every turn of a sample, session by session, with its neighbours as ``context``."""
    for session in session_turns(sample):
        for i, turn in enumerate(session):
            # The neighbouring turns of the session: what a reply answers, and what follows.
            neighbours = session[max(0, i - 1) : i] + session[i + 1 : i + 2]
            yield replace(turn, context="\n".join(n.content for n in neighbours))


def cited_turns(metadata: dict[str, Any]) -> tuple[str, ...]:
    """The LoCoMo turns a memory stands for: an imported turn's ``diaId``, or the message ids
    (``sourceMessages``) a memory extracted by conversation ingestion cites."""
    cited = metadata.get("sourceMessages")
    if isinstance(cited, list) and cited:
        return tuple(str(c) for c in cited)
    return (str(metadata.get("diaId")),)
