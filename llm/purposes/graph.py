"""The ``graph`` purpose: a text's named entities and the typed relations between them, for the
knowledge graph (seed 001 "LLM-based Entity Extraction"; types, relation vocabulary and the
offline extraction in :mod:`llm.purposes.entities`).

The model never invents: :meth:`GraphPurpose.accept` keeps an entity only when its name is
written in the text (whole words, any case; named as written; a date only when absolute), a
relation only between kept entities, as ``HAPPENED_ON`` when it touches a date and
``RELATES_TO`` when its ends do not fit its type (:func:`relation_fits`). Offline fallback:
:func:`extract_offline` (spaCy). Callers use :func:`extract_graph`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from llm.purposes.base import InvalidOutput, Purpose, Schema, chat
from llm.purposes.entities import (
    ABSOLUTE_DATE,
    ENTITY_TYPES,
    MAX_ENTITIES,
    MAX_NAME_CHARS,
    MAX_RELATIONS,
    MAX_TEXT_CHARS,
    RELATION_TYPES,
    Entity,
    GraphExtraction,
    Relation,
    canonical_name,
    extract_offline,
    relation_fits,
)
from llm.runner import Result, run
from memory_project.errors import InvalidInput
from tenants.context import TenantContext

#: Entities and relations one answer may list (the schema's bounds).
MAX_MODEL_ENTITIES, MAX_MODEL_RELATIONS = 30, 30


class _GraphEntity(Schema):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    type: Literal[ENTITY_TYPES]  # type: ignore[valid-type]


class _GraphRelation(Schema):
    source: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    target: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    type: Literal[tuple(RELATION_TYPES)]  # type: ignore[valid-type]


class _GraphOutput(Schema):
    entities: list[_GraphEntity] = Field(max_length=MAX_MODEL_ENTITIES)
    relations: list[_GraphRelation] = Field(max_length=MAX_MODEL_RELATIONS)


@dataclass(frozen=True)
class GraphInput:
    """The text (its first :data:`MAX_TEXT_CHARS` characters count) and the canonical names
    the caller already knows (a set, or a dict name → type; used by the offline answer)."""

    text: str
    known: Collection[str] = ()


class GraphPurpose(Purpose[GraphInput, GraphExtraction]):
    """Entities and relations of a text for the knowledge graph (module docstring)."""

    name = "graph"
    version = "1"
    output_model = _GraphOutput
    max_tokens = 700
    fallback_name = "spacy-en_core_web_sm"

    def messages(self, payload: GraphInput) -> list[dict[str, str]]:
        meanings = "; ".join(f"{kind}: {meaning}" for kind, meaning in RELATION_TYPES.items())
        system = (
            "You build a knowledge graph from a text: list the named entities it mentions "
            "(people, places, organisations, objects such as products and works, events, "
            "calendar dates, named concepts) and the relations between them. Entity types: "
            f"{', '.join(ENTITY_TYPES)}. Relation types, from source to target: {meanings}. "
            "Write each name exactly as the text writes it and list each entity once; skip "
            "pronouns, generic nouns and relative dates such as 'yesterday'; relate only "
            "entities you listed. ")
        return chat(system, payload.text[:MAX_TEXT_CHARS])

    def accept(self, payload: GraphInput, output: Any) -> GraphExtraction:
        text = _plain(payload.text[:MAX_TEXT_CHARS])
        entities: dict[str, Entity] = {}
        for item in output.entities:
            key, written = canonical_name(item.name), _written(item.name, text)
            if key and key not in entities and written and (
                    item.type != "date" or ABSOLUTE_DATE.search(written)):  # not "yesterday"
                entities[key] = Entity(" ".join(written.split()), key, item.type)
        if output.entities and not entities:
            raise InvalidOutput("none of the entities is written in the text")
        relations: dict[tuple[str, str, str], Relation] = {}
        for item in output.relations:
            source, target = canonical_name(item.source), canonical_name(item.target)
            if source not in entities or target not in entities or source == target:
                continue
            kinds = entities[source].type, entities[target].type
            kind = item.type
            if "date" in kinds and kinds != ("date", "date"):
                kind = "HAPPENED_ON"
                source, target = (target, source) if kinds[0] == "date" else (source, target)
            elif not relation_fits(kind, *kinds):
                kind = "RELATES_TO"
            if relation_fits(kind, entities[source].type, entities[target].type):
                relations.setdefault((source, target, kind), Relation(source, target, kind))
        return GraphExtraction(tuple(entities.values())[:MAX_ENTITIES],
                               tuple(relations.values())[:MAX_RELATIONS])

    def fallback(self, payload: GraphInput) -> GraphExtraction:
        return extract_offline(payload.text, payload.known)

    def cache_identity(self, payload: GraphInput) -> Any:
        return payload.text[:MAX_TEXT_CHARS]

    def dump(self, result: GraphExtraction) -> Any:
        return {"entities": [[e.name, e.canonical, e.type] for e in result.entities],
                "relations": [[r.source, r.target, r.type] for r in result.relations]}

    def load(self, data: Any) -> GraphExtraction:
        return GraphExtraction(tuple(Entity(*e) for e in data["entities"]),
                               tuple(Relation(*r) for r in data["relations"]))

    def redacted(self, payload: GraphInput, redact: Any) -> GraphInput:
        return GraphInput(redact(payload.text), payload.known)


def _plain(text: str) -> str:
    """``text`` in NFKC with typographic apostrophes made plain (for :func:`_written`)."""
    return unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'")


def _written(name: str, text: str) -> str:
    """``name`` as ``text`` writes it: as whole words, in any case, with any spaces between
    its words ("self" is not in "myself"); ``""`` when it is not there."""
    words = [re.escape(word) for word in _plain(name).split()]
    found = re.search(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", text, re.IGNORECASE)
    return found.group(0) if words and found else ""


PURPOSE = GraphPurpose()


def extract_graph(ctx: TenantContext, *, text: str, known: Collection[str] = (),
                  layer: str | None = None) -> Result[GraphExtraction]:
    """The entities and relations of ``text`` for ``ctx``'s tenant through the configured
    model, or offline (no model configured, a failure, a timeout, a spent budget: the
    runner's rules, ``llm.runner``): ``value`` (a
    :class:`~llm.purposes.entities.GraphExtraction`), ``model``, ``fallback``. ``known``:
    canonical names of the tenant's entities (a set, or a dict name → type), which the
    offline extraction finds in any case. Never raises for the model's failures.

    Raises:
        InvalidInput: the text is blank.
        RuntimeError: called in a web worker (``llm.runner.run``).
    """
    if not text.strip():
        raise InvalidInput("No text to extract entities from.")
    return run(ctx, PURPOSE, GraphInput(text, known), layer=layer)

