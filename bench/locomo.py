"""LoCoMo conversations (Maharana et al., ACL 2024) as memories, and evidence recall@k.

Format: a JSON list of samples ``{"sample_id", "conversation": {"speaker_a", "speaker_b",
"session_N_date_time", "session_N": [{"speaker", "dia_id", "text", "blip_caption"?}]},
"qa": [{"question", "answer", "evidence": ["D1:3"], "category"}]}``. Each conversation
becomes a project (``projectId`` = ``sample_id``) and each turn a project-layer memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memory_project.errors import InvalidInput

_SESSION_RE = re.compile(r"^session_(\d+)$")
_DIA_RE = re.compile(r"D\d+:\d+")
RETRIEVAL_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Turn:
    """One dialogue turn of a conversation."""

    sample_id: str
    session: int
    session_date: str
    speaker: str
    dia_id: str
    text: str
    image_caption: str | None
    context: str = ""

    @property
    def content(self) -> str:
        """Memory content: ``"<speaker>: <text>"``, plus the shared image's caption."""
        caption = f" [shares an image: {self.image_caption}]" if self.image_caption else ""
        return f"{self.speaker}: {self.text}{caption}"

    def metadata(self) -> dict[str, Any]:
        """Speaker, session number and date, ``dia_id`` and image caption, as metadata."""
        data: dict[str, Any] = {
            "source": {"type": "import", "reference": f"locomo:{self.sample_id}:{self.dia_id}"},
            "tags": ["locomo", self.sample_id],
            "speaker": self.speaker,
            "session": self.session,
            "sessionDate": self.session_date,
            "diaId": self.dia_id,
        }
        if self.image_caption:
            data["imageCaption"] = self.image_caption
        return data


@dataclass(frozen=True)
class Question:
    """A question with the turns that answer it."""

    sample_id: str
    question: str
    category: int
    evidence: tuple[str, ...]


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
    if not isinstance(data, list) or not all(
        isinstance(s, dict) and "sample_id" in s and isinstance(s.get("conversation"), dict)
        for s in data
    ):
        raise InvalidInput(f"{path} is not a LoCoMo file (a list of samples).")
    return data


def turns(sample: dict[str, Any]) -> Iterator[Turn]:
    """Every turn of a sample, session by session."""
    conversation = sample["conversation"]
    sessions = sorted(
        int(m.group(1)) for key in conversation if (m := _SESSION_RE.match(key))
    )
    for number in sessions:
        date = str(conversation.get(f"session_{number}_date_time", ""))
        session = [
            Turn(
                sample_id=str(sample["sample_id"]),
                session=number,
                session_date=date,
                speaker=str(turn.get("speaker", "")),
                dia_id=str(turn["dia_id"]),
                text=str(turn.get("text", "")).strip(),
                image_caption=(turn.get("blip_caption") or None),
            )
            for turn in conversation.get(f"session_{number}") or []
            if isinstance(turn, dict) and str(turn.get("text", "")).strip() and "dia_id" in turn
        ]
        for i, turn in enumerate(session):
            # The neighbouring turns of the session: what a reply answers, and what follows.
            neighbours = session[max(0, i - 1) : i] + session[i + 1 : i + 2]
            yield replace(turn, context="\n".join(n.content for n in neighbours))


def questions(sample: dict[str, Any]) -> Iterator[Question]:
    """Questions of categories 1–4 that name at least one evidence turn."""
    for qa in sample.get("qa") or []:
        category = qa.get("category")
        if category not in RETRIEVAL_CATEGORIES or not qa.get("question"):
            continue
        cited = " ".join(map(str, qa.get("evidence") or []))
        evidence = tuple(dict.fromkeys(_DIA_RE.findall(cited)))
        if evidence:
            yield Question(str(sample["sample_id"]), str(qa["question"]), int(category), evidence)


def recall_at_k(retrieved: list[str] | list[tuple[str, ...]], evidence: tuple[str, ...],
                k: int) -> float:
    """Fraction of the evidence turns found among the first ``k`` retrieved memories: each a
    ``dia_id`` (an imported turn) or the tuple of ``dia_id``s it was extracted from (a
    memory of conversation ingestion, :func:`cited_turns`)."""
    top: set[str] = set()
    for item in retrieved[:k]:
        top.update((item,) if isinstance(item, str) else item)
    return sum(1 for e in evidence if e in top) / len(evidence)


def cited_turns(metadata: dict[str, Any]) -> tuple[str, ...]:
    """The LoCoMo turns a memory stands for: an imported turn's ``diaId``, or the message ids
    (``sourceMessages``) a memory extracted by conversation ingestion cites."""
    cited = metadata.get("sourceMessages")
    if isinstance(cited, list) and cited:
        return tuple(str(c) for c in cited)
    return (str(metadata.get("diaId")),)
