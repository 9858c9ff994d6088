"""The calendar dates a search names, and whether a memory's time falls on them.

A memory has two clocks: ``occurred_at``, when what it records was said or happened on its
source's clock (a conversation turn's session time, given by the writer as ``occurredAt``),
and ``created_at``, when the service recorded it. A query that names a date ("What did
Melanie show Caroline on October 13, 2023?", "camping in June") asks about the first; a
memory written without ``occurredAt`` falls back to the second. Hybrid search's reranker
gets one feature from this (``time_match``, ``memories.retrieval.rerank``): on the LoCoMo
development set it lifted R@10 by 1.3 points, cross-fold as in-sample
(``docs/performance.md``, "Retrieval quality").

What is read, case-sensitively for month names (so the verb "may" is no month, nor "May"
opening the query without a day or year): a day, month
and year ("October 13, 2023", "13 October 2023", "Oct 13th, 2023", "2023-10-13"); a month
and year ("July 2023"); a month and day ("June 27"); a month ("in June", any year); a year
("in 2023"). Relative expressions ("last week") are not read: a query has no date of its own
to resolve them against. Matching is on the UTC calendar date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
_ABBREVIATIONS = {"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "Jun": 6, "Jul": 7, "Aug": 8,
                  "Sep": 9, "Sept": 9, "Oct": 10, "Nov": 11, "Dec": 12}
_NUMBERS = {**{name: i for i, name in enumerate(MONTHS, start=1)}, **_ABBREVIATIONS}
_FULL = "|".join(MONTHS)
# Abbreviations only where a day or a year follows: "Mar" or "Jun" alone may be a name.
_ANY = "|".join([*MONTHS, *sorted(_ABBREVIATIONS, key=len, reverse=True)])
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
#: Patterns, most specific first; a span one of them takes is not read again by a later one.
_PATTERNS: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b"), ("year", "month", "day")),
    (re.compile(rf"\b({_ANY})\.?\s+{_DAY},?\s+{_YEAR}\b"), ("month", "day", "year")),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_ANY})\.?,?\s+{_YEAR}\b"), ("day", "month", "year")),
    (re.compile(rf"\b({_ANY})\.?,?\s+(?:of\s+)?{_YEAR}\b"), ("month", "year")),
    (re.compile(rf"\b({_FULL})\s+{_DAY}\b"), ("month", "day")),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?({_FULL})\b"), ("day", "month")),
    (re.compile(rf"\b({_FULL})\b"), ("month",)),
    (re.compile(rf"\b{_YEAR}\b"), ("year",)),
)


@dataclass(frozen=True)
class TimeWindow:
    """A calendar date with parts left open: ``month=6`` alone is any June; ``year=2023,
    month=10, day=13`` is one day."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def contains(self, moment: datetime) -> bool:
        """Whether ``moment`` (aware, or naive meaning UTC) falls in the window, on its UTC
        calendar date."""
        date = (moment.astimezone(UTC) if moment.tzinfo else moment).date()
        return ((self.year is None or self.year == date.year)
                and (self.month is None or self.month == date.month)
                and (self.day is None or self.day == date.day))


def _window(parts: tuple[str, ...], groups: tuple[str, ...]) -> TimeWindow | None:
    values = {part: (_NUMBERS[text] if part == "month" and not text.isdigit() else int(text))
              for part, text in zip(parts, groups, strict=True)}
    month, day = values.get("month"), values.get("day")
    if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
        return None
    return TimeWindow(values.get("year"), month, day)


def query_windows(query: str) -> tuple[TimeWindow, ...]:
    """The dates ``query`` names, in the order found (empty when it names none)."""
    found: list[TimeWindow] = []
    taken: list[tuple[int, int]] = []
    for pattern, parts in _PATTERNS:
        for match in pattern.finditer(query):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            opens = not query[:match.start()].strip()
            if parts == ("month",) and match.group(1) == "May" and opens:
                continue  # "May I ask ...": the question's first word, not the month
            taken.append(match.span())
            window = _window(parts, match.groups())
            if window is not None:
                found.append(window)
    return tuple(found)


def memory_time(memory: object) -> datetime | None:
    """A memory's time on its source's clock: ``occurred_at``, else ``created_at``."""
    return getattr(memory, "occurred_at", None) or getattr(memory, "created_at", None)


def falls_in(windows: tuple[TimeWindow, ...], moment: datetime | None) -> bool:
    """Whether ``moment`` falls in any of ``windows`` (``False`` for none or no moment)."""
    return moment is not None and any(window.contains(moment) for window in windows)
