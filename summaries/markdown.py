"""An assembled context as Markdown, ready to drop into a prompt (``Accept: text/markdown``
or ``format=markdown`` on ``POST /api/v1/context``)::

    ## What we know
    ### Project p1 (paragraph summary)
    <summary text>

    ## Relevant memories
    - [13 Oct 2023] <memory content>
    - <memory content>

A memory whose writer said when it happened (``occurredAt``) has that day in front of it, so a
reader can place "last week" or "yesterday" in its content; a memory without one has no date
(its ``createdAt`` is when the service stored it, in the JSON form).

The token count of the rendering is the sum of its lines' counts (the WordPiece tokenizer
splits at whitespace, so line breaks add none): context assembly prices each line with the
functions below before it adds it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memories.retrieval.when import MONTHS

if TYPE_CHECKING:
    from summaries.context import AssembledContext
    from summaries.selectors import ServedSummary

SUMMARIES_HEADING = "## What we know"
MEMORIES_HEADING = "## Relevant memories"


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) as one space."""
    return " ".join(text.split())


def summary_heading(served: ServedSummary) -> str:
    """``### Project p1 (paragraph summary)``, marked when the summary is stale."""
    title = served.scope.describe()
    stale = " — may be out of date" if served.freshness.stale else ""
    return f"### {title[:1].upper()}{title[1:]} ({served.summary.depth} summary{stale})"


def day(moment: datetime) -> str:
    """``moment``'s UTC calendar date as ``13 Oct 2023`` (six WordPiece tokens with its
    brackets, against eight for ``[2023-10-13]``); the day is the one hybrid search matches
    a query's dates against (``memories.retrieval.when``)."""
    date = moment.astimezone(UTC) if moment.tzinfo else moment
    return f"{date.day} {MONTHS[date.month - 1][:3]} {date.year}"  # never the locale's names


def bullet(content: str, occurred_at: datetime | None = None) -> str:
    """A memory's line: ``- [13 Oct 2023] content`` with the day it occurred, else
    ``- content``."""
    when = f"[{day(occurred_at)}] " if occurred_at is not None else ""
    return f"- {when}{one_line(content)}"


def render_markdown(context: AssembledContext) -> str:
    """The context's summaries (one section per layer scope, stale ones marked) and memories
    (one bullet each, newlines folded, dated when they say when they occurred), in the order
    they were chosen."""
    parts: list[str] = []
    if context.summaries:
        parts.append(SUMMARIES_HEADING)
        for served, _ in context.summaries:
            parts.append(summary_heading(served))
            parts.append(one_line(served.summary.content))
    if context.memories:
        if parts:
            parts.append("")
        parts.append(MEMORIES_HEADING)
        parts.extend(bullet(m.memory.content, m.memory.occurred_at)
                     for m in context.memories)
    return "\n".join(parts) + ("\n" if parts else "")
