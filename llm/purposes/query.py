"""Purpose: refine a search query and decompose it into sub-queries (seed 001 reasoning,
"Query Refinement Caching" MR-H3: identical queries of a tenant reuse the answer).

The model rewrites the query for retrieval, splits a multi-part question into at most
:data:`MAX_SUBQUERIES` self-contained sub-queries, and names its keywords.
:meth:`QueryPurpose.accept` keeps only sub-queries that share a content word with the query
and keywords that occur in it, so the refinement never wanders off the question.

Offline fallback: the query split at question marks and at "and"/"or"/";" between clauses,
and its keywords: the nouns, proper nouns, verbs and numbers spaCy finds (content words when
it finds none).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from llm.purposes.base import (
    InvalidOutput,
    Purpose,
    Schema,
    chat,
    content_words,
)
from llm.purposes.nlp import nlp
from llm.runner import Result, run
from memory_project.errors import InvalidInput
from tenants.context import TenantContext

MAX_QUERY_CHARS = 2000
MAX_SUBQUERIES = 4
_SPLIT = re.compile(r"\?\s+|;\s*|,?\s+\b(?:and|or)\b\s+(?=(?:what|when|where|who|why|how|"
                    r"which|did|does|do|is|are|was|were)\b)", re.IGNORECASE)
_KEYWORD_POS = {"NOUN", "PROPN", "VERB", "NUM", "ADJ"}


@dataclass(frozen=True)
class RefinedQuery:
    """A query made ready for retrieval."""

    rewritten: str
    subqueries: tuple[str, ...]
    keywords: tuple[str, ...]


class _Output(Schema):
    rewritten: str = Field(min_length=1, max_length=300)
    subqueries: list[Annotated[str, Field(max_length=200)]] = Field(max_length=MAX_SUBQUERIES)
    keywords: list[Annotated[str, Field(max_length=60)]] = Field(max_length=12)


class QueryPurpose(Purpose[str, RefinedQuery]):
    """Rewrite, decompose and pick keywords; nothing unrelated to the query survives."""

    name = "query"
    version = "1"
    output_model = _Output
    max_tokens = 250
    fallback_name = "clauses"

    def messages(self, payload: str) -> list[dict[str, str]]:
        system = (
            "You prepare a question for searching a memory store. Rewrite it as one clear "
            "search query; if it asks several things, split it into at most "
            f"{MAX_SUBQUERIES} self-contained sub-queries (else none); list its keywords as "
            "they are written in it. Do not answer the question. ")
        return chat(system, payload)

    def accept(self, payload: str, output: Any) -> RefinedQuery:
        words = content_words(payload)
        lowered = payload.lower()
        rewritten = " ".join(output.rewritten.split())
        if not content_words(rewritten) & words:
            raise InvalidOutput("the rewritten query shares no word with the query")
        subqueries = tuple(dict.fromkeys(
            " ".join(q.split()) for q in output.subqueries
            if content_words(q) & words))[:MAX_SUBQUERIES]
        keywords = tuple(dict.fromkeys(
            k.strip() for k in output.keywords if k.strip() and k.strip().lower() in lowered))
        return RefinedQuery(rewritten, subqueries, keywords)

    def fallback(self, payload: str) -> RefinedQuery:
        text = " ".join(payload.split())
        parts = [p.strip(" ,") for p in _SPLIT.split(text) if p and p.strip(" ,?")]
        subqueries = tuple(p if p.endswith("?") or "?" not in text else p + "?"
                           for p in parts) if len(parts) > 1 else ()
        doc = nlp()(text)
        keywords = [t.text for t in doc if t.pos_ in _KEYWORD_POS and not t.is_stop
                    and len(t.text) > 1]
        if not keywords:
            keywords = sorted(content_words(text))
        return RefinedQuery(text, subqueries[:MAX_SUBQUERIES],
                            tuple(dict.fromkeys(keywords))[:12])

    def cache_identity(self, payload: str) -> Any:
        return payload.lower()  # MR-H3: the normalised query (case folded)

    def dump(self, result: RefinedQuery) -> Any:
        return [result.rewritten, list(result.subqueries), list(result.keywords)]

    def load(self, data: Any) -> RefinedQuery:
        return RefinedQuery(data[0], tuple(data[1]), tuple(data[2]))

    def redacted(self, payload: str, redact: Any) -> str:
        return str(redact(payload))


PURPOSE = QueryPurpose()


def refine_query(ctx: TenantContext, *, query: str) -> Result[RefinedQuery]:
    """``query`` rewritten, decomposed and reduced to keywords for ``ctx``'s tenant:
    ``value`` (the :class:`RefinedQuery`), ``model`` and ``fallback``. Never raises for the
    model's failures (the fallback answers).

    Raises:
        InvalidInput: an empty query, or one over :data:`MAX_QUERY_CHARS` characters.
    """
    if not query.strip() or len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"The query must have 1 to {MAX_QUERY_CHARS} characters.")
    return run(ctx, PURPOSE, query)
