"""LoCoMo's format (Maharana et al., ACL 2024) and its recall@k, in plain Python (no Django).

One reading of the file for the service's importer and evaluation (:mod:`bench.locomo`) and
for the peers' runners, which run in ``.venv-peers`` without Django and import this module as
a file next to them (``python bench/peers/mem0_runner.py``): both read the same turns and
questions and score them alike.

Format: a JSON list of samples ``{"sample_id", "conversation": {"speaker_a", "speaker_b",
"session_N_date_time", "session_N": [{"speaker", "dia_id", "text", "blip_caption"?}]},
"qa": [{"question", "answer", "evidence": ["D1:3"], "category"}]}``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeGuard

#: ``session_N_date_time`` as LoCoMo writes it: ``"1:56 pm on 8 May, 2023"`` (or "Sep").
SESSION_DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")
_SESSION_RE = re.compile(r"^session_(\d+)$")
_DIA_RE = re.compile(r"D\d+:\d+")
RETRIEVAL_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Turn:
    """One dialogue turn of a conversation (the service stores it as one memory)."""

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

    @property
    def occurred_at(self) -> datetime | None:
        """The session's time (:func:`session_time`)."""
        return session_time(self.session_date)

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


def session_time(label: str) -> datetime | None:
    """A LoCoMo session date (``"1:56 pm on 8 May, 2023"``) as a UTC time; ``None`` when
    the file gives none or another form."""
    for fmt in SESSION_DATE_FORMATS:
        try:
            return datetime.strptime(label.strip(), fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def is_locomo(data: Any) -> TypeGuard[list[dict[str, Any]]]:
    """Whether ``data`` (a parsed JSON file) is a list of samples, each with ``sample_id``
    and a ``conversation`` object."""
    return isinstance(data, list) and all(
        isinstance(s, dict) and "sample_id" in s and isinstance(s.get("conversation"), dict)
        for s in data
    )


def session_turns(sample: dict[str, Any]) -> Iterator[list[Turn]]:
    """The turns of each session of a sample, in session order: every non-empty turn with a
    ``dia_id`` (``context`` left empty)."""
    conversation = sample["conversation"]
    sessions = sorted(int(m.group(1)) for key in conversation if (m := _SESSION_RE.match(key)))
    for number in sessions:
        date = str(conversation.get(f"session_{number}_date_time", ""))
        yield [
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
    memory of conversation ingestion, ``bench.locomo.cited_turns``)."""
    top: set[str] = set()
    for item in retrieved[:k]:
        top.update((item,) if isinstance(item, str) else item)
    return sum(1 for e in evidence if e in top) / len(evidence)
