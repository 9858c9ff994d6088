"""Purpose: what an agent learned in one run, worth remembering for its next run in the same
project (seed 003 "Memory extraction after agent run").

The transcript (what the agent did: its messages, commands and their output) is cut into
numbered chunks; the model lists learnings (a convention of the project, a command that
works, a pitfall and its fix, a decision and its reason), each citing the chunks it comes
from. :meth:`LearningsPurpose.accept` keeps a learning only when the chunks it cites hold
most of its content words, so a learning can never say more than the transcript did.

Offline fallback: the sentences that state a learning in so many words: a line marked
``Learning:``, ``Lesson:``, ``Note:``, ``Remember:``, ``TIL``, or a sentence with a cue of
advice or cause ("always", "never", "must", "instead of", "fixed by", "because", "turns
out", "prefer", "requires", "don't"), at least three content words, not a question; at most
:data:`MAX_LEARNINGS`, in transcript order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from llm.purposes.base import InvalidOutput, Purpose, Schema, chat, cited_claim, content_words
from llm.runner import Result, run
from memory_project.errors import InvalidInput
from tenants.context import TenantContext

#: Chunks of transcript given to the model (and to the fallback) at most per call, and the
#: characters of one chunk.
MAX_CHUNKS = 50
MAX_CHUNK_CHARS = 4000
MAX_LEARNINGS = 10
_MARKER = re.compile(r"^\s*(?:[-*]\s*)?(?:learning|lesson|note|remember|til)\s*[:\-]\s*(.+)$",
                     re.IGNORECASE)
_CUE = re.compile(
    r"\b(always|never|must|instead of|fixed by|the fix|because|turns out|turned out|prefer|"
    r"requires?|don't|do not|avoid|make sure|works only|only works|learned)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])")


@dataclass(frozen=True)
class Learning:
    """One learning, and the indexes of the transcript chunks it comes from."""

    text: str
    chunk_indexes: tuple[int, ...]


class _Learning(Schema):
    text: str = Field(min_length=3, max_length=300)
    chunks: list[int] = Field(min_length=1, max_length=5)


class _Output(Schema):
    learnings: list[_Learning] = Field(max_length=MAX_LEARNINGS)


def transcript_chunks(transcript: str) -> tuple[str, ...]:
    """``transcript`` cut at blank lines into chunks of at most :data:`MAX_CHUNK_CHARS`
    characters (a longer paragraph is cut at line ends, then hard), the last
    :data:`MAX_CHUNKS` of them: the end of a run holds its outcome."""
    chunks: list[str] = []
    for paragraph in re.split(r"\n\s*\n", transcript):
        text = paragraph.strip()
        while text:
            if len(text) <= MAX_CHUNK_CHARS:
                chunks.append(text)
                break
            cut = text.rfind("\n", 0, MAX_CHUNK_CHARS)
            cut = cut if cut > 0 else MAX_CHUNK_CHARS
            chunks.append(text[:cut].strip())
            text = text[cut:].strip()
    return tuple(c for c in chunks if c)[-MAX_CHUNKS:]


class LearningsPurpose(Purpose[tuple[str, ...], tuple[Learning, ...]]):
    """Learnings of an agent run, each traceable to the transcript chunks it comes from."""

    name = "learnings"
    version = "1"
    output_model = _Output
    max_tokens = 500
    fallback_name = "cues"

    def messages(self, payload: tuple[str, ...]) -> list[dict[str, str]]:
        listing = "\n".join(f"[{i}] {chunk}" for i, chunk in enumerate(payload, start=1))
        system = (
            "You read the numbered transcript of an AI agent's run in a software project and "
            "list what the agent learned that will help its next run in the same project: "
            "conventions of the project, commands that work, pitfalls and their fixes, "
            "decisions and their reasons. Write each learning as one short, self-contained "
            "sentence. Give the numbers of the transcript chunks it comes from. Skip what "
            "the agent merely did, and anything that holds only for this run. An empty list "
            "is a good answer when nothing is worth keeping. ")
        return chat(system, listing)

    def accept(self, payload: tuple[str, ...], output: Any) -> tuple[Learning, ...]:
        kept: dict[str, Learning] = {}
        for item in output.learnings:
            claim = cited_claim(item.text, item.chunks, payload)
            if claim is not None:
                kept.setdefault(claim[0].lower(), Learning(*claim))
        if not kept and output.learnings:
            raise InvalidOutput("no learning is supported by the chunks it cites")
        return tuple(kept.values())[:MAX_LEARNINGS]

    def fallback(self, payload: tuple[str, ...]) -> tuple[Learning, ...]:
        kept: dict[str, Learning] = {}
        for index, chunk in enumerate(payload):
            for line in chunk.splitlines():
                marked = _MARKER.match(line)
                sentences = [marked.group(1)] if marked else _SENTENCE.split(line.strip())
                for sentence in sentences:
                    text = " ".join(sentence.split()).strip(" -*")
                    if (not text or text.endswith("?") or len(content_words(text)) < 3
                            or not (marked or _CUE.search(text))):
                        continue
                    kept.setdefault(text.lower(), Learning(text, (index,)))
        return tuple(kept.values())[:MAX_LEARNINGS]

    def cache_identity(self, payload: tuple[str, ...]) -> Any:
        return list(payload)

    def dump(self, result: tuple[Learning, ...]) -> Any:
        return [[item.text, list(item.chunk_indexes)] for item in result]

    def load(self, data: Any) -> tuple[Learning, ...]:
        return tuple(Learning(text, tuple(indexes)) for text, indexes in data)

    def redacted(self, payload: tuple[str, ...], redact: Any) -> tuple[str, ...]:
        return tuple(redact(chunk) for chunk in payload)


PURPOSE = LearningsPurpose()


def extract_learnings(ctx: TenantContext, *, transcript: str,
                      layer: str | None = "agent") -> Result[tuple[Learning, ...]]:
    """The learnings of an agent run from its ``transcript`` (plain text) for ``ctx``'s
    tenant: ``value`` (the learnings), ``model`` and ``fallback`` (whether the offline
    fallback found them). Never raises for the model's failures (the fallback answers).

    Raises:
        InvalidInput: the transcript holds no text.
    """
    chunks = transcript_chunks(transcript)
    if not chunks:
        raise InvalidInput("The transcript holds no text to extract learnings from.")
    return run(ctx, PURPOSE, chunks, layer=layer)
