"""Decide what a newly extracted fact does to what is stored: add it, let it supersede a
stored fact it contradicts, or nothing (it is known already).

The rules (offline, deterministic):

1. **Known**: a stored active memory of the same layer partition with the same text, or
   cosine similarity ≥ :data:`KNOWN_SIMILARITY` (seed 001's near-duplicate threshold, 0.95),
   or the same subject, attribute and value → nothing.
2. **Contradiction**: a stored memory states the same *attribute* of the same *subject* with
   another value ("Maria: I live in Paris" → "Maria: I moved to Berlin": subject ``maria``,
   attribute ``residence``, ``paris`` vs ``berlin``) → the new fact supersedes it.
   Attributes are those people change and conversations state plainly: where someone lives,
   where and as what they work, their relationship status, and "my favourite X is Y".
3. Otherwise → add.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

KNOWN_SIMILARITY = 0.95
_NAME = r"(?P<value>[A-Z][\w'&.-]*(?:\s+(?:[A-Z][\w'&.-]*|(?:of|de|la|du)\b))*)"
#: attribute → patterns whose ``value`` group is the attribute's value.
ATTRIBUTES: dict[str, tuple[re.Pattern[str], ...]] = {
    "residence": (
        re.compile(r"\b(?:live|lives|living|lived|reside|resides|based)\s+(?:now\s+)?in\s+"
                   + _NAME),
        re.compile(r"\b(?:moved|moving|move|relocated|relocating)\s+(?:back\s+)?to\s+" + _NAME),
    ),
    "employer": (
        re.compile(r"\b(?:work|works|working|worked)\s+(?:now\s+)?(?:at|for)\s+" + _NAME),
        re.compile(r"\b(?:joined|hired by|started at|new job at)\s+" + _NAME),
        re.compile(r"\bwork(?:s|ing)?\s+as\s+[\w -]{2,40}?\s+(?:at|for)\s+" + _NAME),
    ),
    "occupation": (
        re.compile(r"\b(?:work|works|working)\s+as\s+(?:an?\s+)?(?P<value>[a-z][\w -]{2,40}?)"
                   r"(?=[.,;!]|\s+(?:at|for|in|since)\b|$)"),
    ),
    "relationship": (
        re.compile(r"\b(?:I am|I'm|is|am)\s+(?:now\s+)?(?P<value>single|married|engaged|"
                   r"divorced|widowed)\b", re.IGNORECASE),
    ),
}
_FAVOURITE = re.compile(r"\bfavou?rite\s+(?P<what>[a-z]+(?:\s+[a-z]+)?)\s+is\s+(?P<value>[^.,;!]+)",
                        re.IGNORECASE)
_SPEAKER = re.compile(r"^(?P<subject>[^:]{1,60}):\s+")
_LEADING_NAME = re.compile(r"^(?P<subject>[A-Z][\w-]*)(?:'s)?\b")


class Action(StrEnum):
    """What a new fact does (mem0's ADD / UPDATE / NONE)."""

    ADD = "add"
    UPDATE = "update"
    NONE = "none"


@dataclass(frozen=True)
class Claim:
    """A fact read as subject, attribute and value (all lower-case)."""

    subject: str
    attribute: str
    value: str


def subject_of(text: str) -> str:
    """Who a fact is about: the speaker before ``Name:``, else its leading proper name."""
    match = _SPEAKER.match(text) or _LEADING_NAME.match(text)
    return match.group("subject").strip().lower() if match else ""


def claims(text: str) -> list[Claim]:
    """The attribute claims ``text`` makes (none for most facts)."""
    subject = subject_of(text)
    body = _SPEAKER.sub("", text, count=1)
    found: list[Claim] = []
    for attribute, patterns in ATTRIBUTES.items():
        for pattern in patterns:
            match = pattern.search(body)
            if match:
                found.append(Claim(subject, attribute, _normal(match.group("value"))))
                break
    favourite = _FAVOURITE.search(body)
    if favourite:
        found.append(Claim(subject, f"favourite {favourite.group('what').lower()}",
                           _normal(favourite.group("value"))))
    return found


def _normal(value: str) -> str:
    return " ".join(value.lower().strip(" .!,;'\"").split())


@dataclass(frozen=True)
class Stored:
    """A stored fact the new one is compared with: its id, text and cosine similarity."""

    id: str
    text: str
    similarity: float


def decide(text: str, stored: list[Stored]) -> tuple[Action, Stored | None]:
    """What ``text`` does given the nearest ``stored`` facts of its partition (module
    docstring). Returns the action and, for ``UPDATE``, the fact it supersedes; for ``NONE``
    the fact that already says it."""
    lowered = " ".join(text.lower().split())
    for item in stored:
        if item.similarity >= KNOWN_SIMILARITY or " ".join(item.text.lower().split()) == lowered:
            return Action.NONE, item
    new_claims = claims(text)
    for claim in new_claims:
        if not claim.subject:
            continue
        for item in stored:
            for old in claims(item.text):
                if (old.subject, old.attribute) != (claim.subject, claim.attribute):
                    continue
                if old.value == claim.value:
                    return Action.NONE, item
                return Action.UPDATE, item
    return Action.ADD, None
