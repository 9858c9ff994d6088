"""Purpose: named entities and typed relations of a text (seed 001 "LLM-based Entity
Extraction": ``WORKS_ON``, ``CAUSED_BY``, ``RELATES_TO``, …). The knowledge graph calls
:func:`extract_entities` and resolves the surface forms itself ("Maria", "maria", "Maria's").

Offline fallback: spaCy's NER (PERSON; GPE/LOC/FAC → PLACE; ORG/NORP → ORGANIZATION;
PRODUCT/WORK_OF_ART/LAW → OBJECT; EVENT; DATE/TIME → DATE; LANGUAGE → CONCEPT) plus the proper
nouns it misses, and between two entities of one sentence: ``HAPPENED_ON`` to a date, the
relation the verb they share names (:data:`VERB_RELATIONS`, from its subject), else
``RELATES_TO``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from llm.purposes.base import InvalidOutput, Purpose, Schema, chat
from llm.purposes.nlp import nlp
from llm.runner import run
from tenants.context import TenantContext

ENTITY_TYPES = ("PERSON", "PLACE", "ORGANIZATION", "OBJECT", "EVENT", "DATE", "CONCEPT")
RELATION_TYPES = ("WORKS_ON", "WORKS_AT", "CAUSED_BY", "RELATES_TO", "LIVES_IN", "LOCATED_IN",
                  "MEMBER_OF", "PART_OF", "KNOWS", "FAMILY_OF", "LIKES", "VISITED",
                  "ATTENDED", "OWNS", "CREATED", "HAPPENED_ON")
SPACY_TYPES = {"PERSON": "PERSON", "GPE": "PLACE", "LOC": "PLACE", "FAC": "PLACE",
               "ORG": "ORGANIZATION", "NORP": "ORGANIZATION", "PRODUCT": "OBJECT",
               "WORK_OF_ART": "OBJECT", "LAW": "OBJECT", "EVENT": "EVENT", "DATE": "DATE",
               "TIME": "DATE", "LANGUAGE": "CONCEPT"}
#: Verb lemma → relation type, for the offline fallback.
VERB_RELATIONS = {
    "work": "WORKS_AT", "employ": "WORKS_AT", "join": "MEMBER_OF", "live": "LIVES_IN",
    "move": "LIVES_IN", "visit": "VISITED", "go": "VISITED", "travel": "VISITED",
    "attend": "ATTENDED", "own": "OWNS", "buy": "OWNS", "create": "CREATED", "paint": "CREATED",
    "write": "CREATED", "build": "CREATED", "cause": "CAUSED_BY", "love": "LIKES",
    "like": "LIKES", "enjoy": "LIKES", "meet": "KNOWS", "marry": "FAMILY_OF",
}

#: What a verb relation may point at (a mismatch falls back to ``RELATES_TO``).
TARGET_TYPES = {
    "WORKS_AT": {"ORGANIZATION", "PLACE"}, "MEMBER_OF": {"ORGANIZATION"},
    "LIVES_IN": {"PLACE"}, "VISITED": {"PLACE", "EVENT"},
    "ATTENDED": {"EVENT", "ORGANIZATION", "PLACE"}, "KNOWS": {"PERSON"},
    "FAMILY_OF": {"PERSON"}, "OWNS": {"OBJECT", "ORGANIZATION", "CONCEPT"},
    "CREATED": {"OBJECT", "ORGANIZATION", "CONCEPT", "EVENT"},
}


@dataclass(frozen=True)
class ExtractedEntity:
    """An entity as written in the text; ``type`` is one of :data:`ENTITY_TYPES`."""

    name: str
    type: str


@dataclass(frozen=True)
class ExtractedRelation:
    """A typed edge between two extracted entities (by name)."""

    source: str
    target: str
    type: str
    confidence: float


@dataclass(frozen=True)
class EntityExtraction:
    """What a text names and how those things relate."""

    entities: tuple[ExtractedEntity, ...]
    relations: tuple[ExtractedRelation, ...]
    model: str = ""
    fallback: bool = False


class _Entity(Schema):
    name: str = Field(min_length=1, max_length=100)
    type: Literal[ENTITY_TYPES]  # type: ignore[valid-type]


class _Relation(Schema):
    source: str = Field(min_length=1, max_length=100)
    target: str = Field(min_length=1, max_length=100)
    type: Literal[RELATION_TYPES]  # type: ignore[valid-type]


class _Output(Schema):
    entities: list[_Entity] = Field(max_length=15)
    relations: list[_Relation] = Field(max_length=10)


@dataclass(frozen=True)
class EntitiesInput:
    """The text to analyse."""

    text: str


class EntitiesPurpose(Purpose[EntitiesInput, EntityExtraction]):
    """Entities and relations; entities must occur in the text as whole words, relations must
    join two of them, and a relation whose target is of the wrong type (a person
    ``WORKS_AT`` a person) becomes ``RELATES_TO``."""

    name = "entities"
    version = "1"
    output_model = _Output
    max_tokens = 400
    fallback_name = "spacy-en_core_web_sm"

    def messages(self, payload: EntitiesInput) -> list[dict[str, str]]:
        system = (
            "You extract named entities and the relations between them from a text. "
            f"Entity types: {', '.join(ENTITY_TYPES)}. Relation types: "
            f"{', '.join(RELATION_TYPES)}. Use names exactly as written in the text; list "
            "each entity once; relate only entities you listed. ")
        return chat(system, payload.text)

    def accept(self, payload: EntitiesInput, output: Any) -> EntityExtraction:
        entities: dict[str, ExtractedEntity] = {}
        for entity in output.entities:
            name = entity.name.strip()
            if name and name.lower() not in entities and _occurs(name, payload.text):
                entities[name.lower()] = ExtractedEntity(name, entity.type)
        relations: dict[tuple[str, str, str], ExtractedRelation] = {}
        for r in output.relations:
            source, target = r.source.strip().lower(), r.target.strip().lower()
            if source not in entities or target not in entities or source == target:
                continue
            kind = r.type if _fits(r.type, entities[target].type) else "RELATES_TO"
            relations.setdefault((source, target, kind), ExtractedRelation(
                entities[source].name, entities[target].name, kind, 0.8))
        if not entities and output.entities:
            raise InvalidOutput("none of the entities occurs in the text")
        return EntityExtraction(tuple(entities.values()), tuple(relations.values()))

    def fallback(self, payload: EntitiesInput) -> EntityExtraction:
        doc = nlp()(payload.text[:20_000])
        entities: dict[str, ExtractedEntity] = {}
        relations: dict[tuple[str, str, str], ExtractedRelation] = {}
        for sentence in doc.sents:
            found = _sentence_entities(sentence)
            for text, kind, _ in found:
                entities.setdefault(text.lower(), ExtractedEntity(text, kind))
            for i, (left, left_kind, left_root) in enumerate(found):
                for right, right_kind, right_root in found[i + 1:]:
                    if left.lower() == right.lower():
                        continue
                    relation = _relation(left_root, left_kind, right_root, right_kind)
                    source, target = (right, left) if relation.reversed else (left, right)
                    relations.setdefault(
                        (source.lower(), target.lower(), relation.type),
                        ExtractedRelation(source, target, relation.type, relation.confidence))
        return EntityExtraction(tuple(entities.values()), tuple(relations.values()))

    def cache_identity(self, payload: EntitiesInput) -> Any:
        return payload.text

    def dump(self, result: EntityExtraction) -> Any:
        return {"entities": [[e.name, e.type] for e in result.entities],
                "relations": [[r.source, r.target, r.type, r.confidence]
                              for r in result.relations]}

    def load(self, data: Any) -> EntityExtraction:
        return EntityExtraction(tuple(ExtractedEntity(*e) for e in data["entities"]),
                                tuple(ExtractedRelation(*r) for r in data["relations"]))

    def redacted(self, payload: EntitiesInput, redact: Any) -> EntitiesInput:
        return EntitiesInput(redact(payload.text))


def _occurs(name: str, text: str) -> bool:
    """Whether ``name`` is written in ``text`` as whole words ("self" is not in "myself")."""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def _fits(relation: str, target_type: str) -> bool:
    """Whether ``relation`` may point at an entity of ``target_type`` (a date only by
    ``HAPPENED_ON``, which points at nothing else)."""
    if relation == "HAPPENED_ON" or target_type == "DATE":
        return relation == "HAPPENED_ON" and target_type == "DATE"
    return target_type in TARGET_TYPES.get(relation, {target_type})


@dataclass(frozen=True)
class _Guess:
    type: str
    confidence: float
    reversed: bool = False


def _sentence_entities(sentence: Any) -> list[tuple[str, str, Any]]:
    """``(text, type, root token)`` of the sentence's entities: spaCy's, plus proper nouns
    its small model leaves out (a capitalised PROPN acting as a subject or object is taken
    for a PERSON, any other for a CONCEPT)."""
    found = [(e.text, SPACY_TYPES[e.label_], e.root) for e in sentence.ents
             if e.label_ in SPACY_TYPES]
    covered = {t.i for e in sentence.ents for t in e}
    for token in sentence:
        if (token.pos_ == "PROPN" and token.i not in covered and token.text[:1].isupper()
                and token.is_alpha and len(token.text) > 1):
            kind = "PERSON" if token.dep_ in ("nsubj", "nsubjpass", "dobj", "pobj", "conj",
                                              "poss") else "CONCEPT"
            found.append((token.text, kind, token))
    return found


def _head_verb(token: Any) -> Any:
    while token.pos_ not in ("VERB", "AUX") and token.head.i != token.i:
        token = token.head
    return token


def _relation(left: Any, left_kind: str, right: Any, right_kind: str) -> _Guess:
    """The relation the sentence's grammar suggests between two entities: a date is when the
    other happened; the subject of a verb that :data:`VERB_RELATIONS` names relates to the
    other entity of that verb by it; anything else merely co-occurs (``RELATES_TO``)."""
    if right_kind == "DATE" and left_kind != "DATE":
        return _Guess("HAPPENED_ON", 0.5)
    if left_kind == "DATE" and right_kind != "DATE":
        return _Guess("HAPPENED_ON", 0.5, reversed=True)
    verb_left, verb_right = _head_verb(left), _head_verb(right)
    kind = VERB_RELATIONS.get(verb_left.lemma_.lower())
    if verb_left.i == verb_right.i and kind:
        subject = ("nsubj", "nsubjpass")
        if left.dep_ in subject and right_kind in TARGET_TYPES.get(kind, {right_kind}):
            return _Guess(kind, 0.6)
        if right.dep_ in subject and left_kind in TARGET_TYPES.get(kind, {left_kind}):
            return _Guess(kind, 0.6, reversed=True)
    return _Guess("RELATES_TO", 0.4)


PURPOSE = EntitiesPurpose()


def extract_entities(ctx: TenantContext, *, text: str, reference_time: datetime | None = None,
                     layer: str | None = None) -> EntityExtraction:
    """Entities and relations of ``text`` for ``ctx``'s tenant, through the configured model
    or, offline, spaCy (``llm.runner``). ``reference_time`` is accepted for the graph's
    callers (dates are returned as written). Never raises for the model's failures."""
    result = run(ctx, PURPOSE, EntitiesInput(text), layer=layer)
    value = result.value
    return EntityExtraction(value.entities, value.relations, model=result.model,
                            fallback=result.fallback)
