"""Purpose: the memories worth keeping from a conversation (seed 003's conversation
ingestion, seed 001 "LLM-based Entity Extraction" for the facts' dates).

Each message is numbered; the model lists facts, each citing the messages it comes from,
with the date it happened when the conversation says so. :meth:`MemoriesPurpose.accept`
keeps a fact only when the messages it cites hold most of its content words; its date is one
that those messages name (:func:`dates_in`, resolved against the message's own time or the
reference time): the model's when it is among them, else the first named, else none.

Offline fallback: every statement of substance (not a question, not a greeting, at least
three content words) becomes a fact, in the speaker's words after the speaker's name; its
date is the one the sentence names (dateparser,
with false matches such as "May I", "Sat on", "We" or "now" dropped) or none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import Field

from llm.purposes.base import InvalidOutput, Purpose, Schema, chat, cited_claim, content_words
from llm.purposes.nlp import nlp
from llm.runner import Result, run
from memory_project.errors import InvalidInput
from tenants.context import TenantContext

#: Messages given to the model (and to the fallback) at most per call.
MAX_MESSAGES = 50
MAX_MESSAGE_CHARS = 4000
#: A date phrase counts only with a digit, a relative word or a full weekday name.
_DATE_SIGNAL = re.compile(
    r"\d|\b(yesterday|tomorrow|today|tonight|ago|last|next|this|weekend|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)\b", re.IGNORECASE)
_GREETING = re.compile(r"^(hi|hey|hello|thanks|thank you|bye|good (morning|night|evening))\b",
                       re.IGNORECASE)


@dataclass(frozen=True)
class Message:
    """One message: who said it, what, and when (``None``: the reference time)."""

    speaker: str
    text: str
    at: datetime | None = None


@dataclass(frozen=True)
class ExtractedMemory:
    """A fact worth keeping, the indexes of the messages it comes from, and when it happened
    (ISO date, or ``""`` when the conversation does not say)."""

    text: str
    message_indexes: tuple[int, ...]
    occurred_on: str = ""


@dataclass(frozen=True)
class MemoriesInput:
    """Messages, and the time relative dates are resolved against."""

    messages: tuple[Message, ...]
    reference_time: datetime


class _Fact(Schema):
    text: str = Field(min_length=3, max_length=400)
    messages: list[int] = Field(min_length=1, max_length=5)
    date: str = Field(max_length=40)


class _Output(Schema):
    facts: list[_Fact] = Field(max_length=30)


def dates_in(text: str, base: datetime) -> list[tuple[str, datetime]]:
    """Date phrases of ``text`` resolved against ``base`` (dateparser), without the false
    matches a bare month or weekday abbreviation gives ("May I", "Sat on", "We", "now")."""
    from dateparser.search import search_dates

    found = search_dates(text[:MAX_MESSAGE_CHARS], languages=["en"], settings={
        "RELATIVE_BASE": base.replace(tzinfo=None), "PREFER_DATES_FROM": "past",
        "RETURN_AS_TIMEZONE_AWARE": False}) or []
    return [(phrase, when) for phrase, when in found if _DATE_SIGNAL.search(phrase)]


class MemoriesPurpose(Purpose[MemoriesInput, tuple[ExtractedMemory, ...]]):
    """Facts of a conversation, each traceable to the messages it comes from."""

    name = "memories"
    version = "1"
    output_model = _Output
    max_tokens = 600
    fallback_name = "sentences"

    def _messages(self, payload: MemoriesInput) -> tuple[Message, ...]:
        return payload.messages[:MAX_MESSAGES]

    def messages(self, payload: MemoriesInput) -> list[dict[str, str]]:
        listing = "\n".join(
            f"[{i}] ({(m.at or payload.reference_time).date().isoformat()}) {m.speaker}: "
            f"{m.text[:MAX_MESSAGE_CHARS]}"
            for i, m in enumerate(self._messages(payload), start=1))
        system = (
            "You read numbered chat messages and list the facts worth remembering about the "
            "people in them: events, plans, preferences, relationships, possessions. Write "
            "each fact as one short sentence naming the person (never 'I'). Give the numbers "
            "of the messages it comes from, and its date (YYYY-MM-DD) only when the messages "
            "say when it happened, else an empty string. Skip greetings and small talk. ")
        return chat(system, listing)

    def accept(self, payload: MemoriesInput, output: Any) -> tuple[ExtractedMemory, ...]:
        messages = self._messages(payload)
        sources = [f"{m.speaker} {m.text}" for m in messages]
        kept: dict[str, ExtractedMemory] = {}
        for fact in output.facts:
            claim = cited_claim(fact.text, fact.messages, sources)
            if claim is None or claim[0].lower() in kept:
                continue
            text, indexes = claim
            kept[text.lower()] = ExtractedMemory(
                text, indexes, self._date(fact.date, [messages[i] for i in indexes], payload))
        if not kept and output.facts:
            raise InvalidOutput("no fact is supported by the messages it cites")
        return tuple(kept.values())

    def _date(self, claimed: str, cited: list[Message], payload: MemoriesInput) -> str:
        """The fact's date: ``claimed`` when a cited message names a date that resolves to
        it, else the first date a cited message names, else ``""``."""
        named = [when.date().isoformat() for message in cited
                 for _, when in dates_in(message.text, message.at or payload.reference_time)]
        if claimed and claimed[:10] in named:
            return claimed[:10]
        return named[0] if named else ""

    def fallback(self, payload: MemoriesInput) -> tuple[ExtractedMemory, ...]:
        kept: dict[str, ExtractedMemory] = {}
        for index, message in enumerate(self._messages(payload)):
            doc = nlp()(message.text[:MAX_MESSAGE_CHARS])
            for sentence in doc.sents:
                text = " ".join(sentence.text.split())
                if (text.endswith("?") or _GREETING.match(text)
                        or len(content_words(text)) < 3):
                    continue
                if message.speaker:
                    text = f"{message.speaker}: {text}"
                dates = dates_in(sentence.text, message.at or payload.reference_time)
                occurred = dates[0][1].date().isoformat() if dates else ""
                kept.setdefault(text.lower(), ExtractedMemory(text, (index,), occurred))
        return tuple(kept.values())

    def cache_identity(self, payload: MemoriesInput) -> Any:
        return [payload.reference_time.isoformat(),
                [[m.speaker, m.text, m.at.isoformat() if m.at else ""]
                 for m in self._messages(payload)]]

    def dump(self, result: tuple[ExtractedMemory, ...]) -> Any:
        return [[m.text, list(m.message_indexes), m.occurred_on] for m in result]

    def load(self, data: Any) -> tuple[ExtractedMemory, ...]:
        return tuple(ExtractedMemory(text, tuple(indexes), when) for text, indexes, when in data)

    def redacted(self, payload: MemoriesInput, redact: Any) -> MemoriesInput:
        return MemoriesInput(tuple(Message(m.speaker, redact(m.text), m.at)
                                   for m in payload.messages), payload.reference_time)


PURPOSE = MemoriesPurpose()


def extract_memories(ctx: TenantContext, *, messages: list[Message],
                     reference_time: datetime, layer: str | None = None
                     ) -> Result[tuple[ExtractedMemory, ...]]:
    """The facts worth keeping from ``messages`` (at most :data:`MAX_MESSAGES`) for ``ctx``'s
    tenant: ``value`` (the facts), ``model`` and ``fallback``. Never raises for the model's
    failures (the fallback answers).

    Raises:
        InvalidInput: no messages.
        BudgetExceeded: never (an exhausted budget falls back offline).
    """
    if not messages:
        raise InvalidInput("No messages to extract memories from.")
    return run(ctx, PURPOSE, MemoriesInput(tuple(messages), reference_time), layer=layer)
