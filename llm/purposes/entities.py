"""The knowledge graph's entity and relation vocabulary (:data:`ENTITY_TYPES`,
:data:`RELATION_TYPES`, :func:`relation_fits`, :func:`canonical_name`) and the extraction of
a text's entities and relations without a model (seed 001 "Dynamic Graph Reasoning"), for
the ``graph`` purpose (:mod:`llm.purposes.graph`) and query lookups: spaCy's entities, quoted
titles, missed proper nouns and acronyms, the caller's ``known`` names in any case, keyed by
:func:`canonical_name`; entities of one sentence get the relation the parse shows, else
``RELATES_TO`` (:func:`extract_offline`, :func:`entities_in_query`)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from llm.purposes.nlp import nlp

#: Characters read of a text (spaCy parses ~10 a ms) and a query; longest known name (tokens);
#: most entities and relations per text; entities of a sentence related pairwise (not dates);
#: longest entity name (characters).
MAX_TEXT_CHARS, MAX_QUERY_CHARS, MAX_KNOWN_TOKENS = 5000, 500, 6
MAX_ENTITIES, MAX_RELATIONS, MAX_PAIRED_PER_SENTENCE, MAX_NAME_CHARS = 50, 100, 10, 100

ENTITY_TYPES = ("person", "place", "organisation", "object", "event", "date", "concept")
#: Relation type → meaning (source → target): the graph's edge vocabulary.
RELATION_TYPES: dict[str, str] = {
    "WORKS_ON": "source works on, at or for target (a project, organisation, thing)",
    "CAUSED_BY": "source was caused by target ('X because of Y', 'Y caused X')",
    "LOCATED_IN": "source lives in, moved to, comes from or is in target (a place)",
    "PART_OF": "source is part or a member of, joined or belongs to target",
    "KNOWS": "two persons met, are married or friends, or did something together",
    "HAPPENED_ON": "source happened on target (a date)",
    "RELATES_TO": "mentioned together, no clearer relation",
}
#: spaCy's labels → types (numbers and amounts are dropped); NORP ("Swedish") is a concept.
SPACY_TYPES = {
    "PERSON": "person", "GPE": "place", "LOC": "place", "FAC": "place", "ORG": "organisation",
    "NORP": "concept", "PRODUCT": "object", "WORK_OF_ART": "object", "LAW": "object",
    "EVENT": "event", "DATE": "date", "TIME": "date", "LANGUAGE": "concept"}
_ANY = frozenset(ENTITY_TYPES) - {"date"}
#: The types a relation accepts at (source, target); one that does not fit is RELATES_TO.
RELATION_ENDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "WORKS_ON": (frozenset({"person", "organisation"}), _ANY - {"person"}),
    "LOCATED_IN": (_ANY, frozenset({"place"})), "PART_OF": (_ANY, _ANY - {"person"}),
    "KNOWS": (frozenset({"person"}), frozenset({"person"})), "CAUSED_BY": (_ANY, _ANY),
    "HAPPENED_ON": (_ANY, frozenset({"date"})), "RELATES_TO": (_ANY, _ANY)}

_DETERMINERS = frozenset({"the", "a", "an"})
_QUOTES = str.maketrans({"’": "'", "‘": "'", "`": "'", "´": "'", "“": '"', "”": '"'})
_TRIM = re.compile(r"^[^\w+#]+|(?:(?<=\w)'s)?[^\w+#]*$", re.IGNORECASE)
#: A date phrase naming a calendar point (a year, a month, "3/5"), unlike "last week".
ABSOLUTE_DATE = re.compile(r"\b(?:1[5-9]\d\d|2[01]\d\d)s?\b|\b\d{1,4}[/.-]\d{1,2}\b|"
                           r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.I)
_QUOTED = re.compile(r'"([^"\n]{1,80}?)[.,!?]?"|“([^”\n]{1,80}?)[.,!?]?”|'
                     r"(?<!\w)['‘]([A-Z][^'’\n]{0,78}?)[.,!?]?['’](?!\w)")
#: Words after which a name is addressed ("Hey Gina!"); capitalised words that are no name.
_GREETINGS = frozenset({"hey", "hi", "hello", "thanks", "dear", "bye", "congrats", "yo",
                        "morning", "welcome", "sorry", "cheers", "hiya", "howdy"})
_DAYS = frozenset({"monday", "tuesday", "tues", "wednesday", "thursday", "thurs", "friday", "fri",
                   "saturday", "sunday"})
_NOT_NAMES = _GREETINGS | _DAYS | {
    "mon", "tue", "wed", "thu", "sat", "sun", "ok", "okay", "thank", "wow", "yeah", "yes", "yep",
    "no", "nope", "yay", "woohoo", "oh", "ah", "hah", "haha", "lol", "omg", "btw", "mr", "mrs",
    "ms", "dr", "sir", "madam", "man", "dude", "god", "here", "there", "today", "tonight",
    "tomorrow", "wanna", "gonna", "gotta", "super", "cool", "awesome", "nice", "great", "please",
    "congratulations", "evening", "night"}
_PERSON_DEPS = frozenset({"nsubj", "nsubjpass", "dobj", "pobj", "conj", "appos", "poss",
                          "npadvmod", "intj", "attr", "oprd"})
_SUBJECT = ("nsubj", "nsubjpass")
#: Verb lemmas, paths of the other entity from the verb (:func:`_path`; "|" between, "": its
#: direct object) → the relation from the verb's subject to that entity.
_VERB_PATTERNS = tuple(
    (frozenset(verbs.split()), frozenset(tuple(p.split()) for p in paths.split("|")), kind)
    for verbs, paths, kind in (
        ("work volunteer intern", "on|at|for", "WORKS_ON"),
        ("develop build lead manage maintain", "", "WORKS_ON"),
        ("live reside settle stay move relocate grow bear base locate be come",
         "in|to|from|near", "LOCATED_IN"),
        ("join", "", "PART_OF"), ("belong", "to", "PART_OF"),
        ("be become", "of part|of member", "PART_OF"),
        ("meet marry know date befriend wed divorce", "", "KNOWS"),
        ("result stem", "from", "CAUSED_BY")))
_KNOWING = _VERB_PATTERNS[-2][0]
#: Verbs whose subject causes their object ("Y caused X", "Y led to X": X CAUSED_BY Y), and
#: the paths of a cause ("X because of Y", "due to Y", "thanks to Y").
_CAUSING = frozenset({"cause", "trigger", "create", "produce", "lead", "result"})
_CAUSE_PATHS = frozenset({("of", "because"), ("to", "due"), ("to", "owe"), ("to", "thank")})


@dataclass(frozen=True)
class Entity:
    """``name`` as written, ``canonical`` (:func:`canonical_name`), ``type`` (ENTITY_TYPES)."""

    name: str
    canonical: str
    type: str


@dataclass(frozen=True)
class Relation:
    """A typed edge (:data:`RELATION_TYPES`) between two entities, by canonical name."""

    source: str
    target: str
    type: str


@dataclass(frozen=True)
class GraphExtraction:
    """A text's entities (one per canonical name, in order) and relations."""

    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]


def canonical_name(surface: str) -> str:
    """The resolution key of an entity name: NFKC, typographic quotes made plain, whitespace
    collapsed, punctuation and symbols around it (not "+", "#": "C++") removed, then a final
    "'s" and a leading "the", "a" or "an", case folded. "Maria", "maria", "Maria's", " MARIA "
    and "“Maria”" give "maria"; "The Lean Startup" "lean startup"; "Node.js" "node.js".
    ``""`` when nothing is left."""
    text = surface if surface.isascii() else unicodedata.normalize(
        "NFKC", surface).translate(_QUOTES)
    text = _TRIM.sub("", " ".join(text.split()))
    first, _, rest = text.partition(" ")
    return (_TRIM.sub("", rest) if rest and first.casefold() in _DETERMINERS else text).casefold()


def relation_fits(relation: str, source_type: str, target_type: str) -> bool:
    """Whether ``relation`` may join these types (:data:`RELATION_ENDS`)."""
    sources, targets = RELATION_ENDS.get(relation, (frozenset(), frozenset()))
    return source_type in sources and target_type in targets


@dataclass(frozen=True)
class _Found:
    entity: Entity
    start: int  # token indexes
    end: int
    root: Any  # spaCy token


def _entity(doc: Any, start: int, end: int, kind: str) -> tuple[_Found, ...]:
    """``doc[start:end]`` without articles, punctuation or possessive around it, if any left."""
    while start < end and (doc[start].is_punct or doc[start].is_space
                           or doc[start].lower_ in _DETERMINERS):
        start += 1
    while end > start and (doc[end - 1].is_punct or doc[end - 1].is_space
                           or doc[end - 1].lower_ in ("'s", "’s")):
        end -= 1
    span = doc[start:end]
    key = canonical_name(span.text) if start < end else ""
    if len(span.text) > MAX_NAME_CHARS or not any(c.isalnum() for c in key):
        return ()
    return (_Found(Entity(span.text, key, kind if kind in ENTITY_TYPES else "concept"),
                   start, end, span.root),)


def _named(doc: Any) -> Iterator[_Found]:
    """spaCy's entities, dates only absolute ("yesterday" would join unrelated memories), run
    on over a name ("Shia" → "Shia Labeouf"); not one word opening a sentence unless a proper
    noun ("Nature's amazing"); a NORP that is a singular proper noun is a person ("Maria")."""
    tagged = doc.has_annotation("TAG")
    for ent in doc.ents:
        kind = SPACY_TYPES.get(ent.label_)
        if (kind is None or (kind == "date" and not ABSOLUTE_DATE.search(ent.text))
                or ent.text.lower() in _NOT_NAMES or (kind != "date" and any(
                    t.lower_ in _DAYS for t in ent))
                or (ent.text.islower() and len(ent.text) < 3) or (  # "see ya", "last Fri"
                    tagged and len(ent) == 1 and ent[0].is_sent_start and ent[0].pos_ != "PROPN")):
            continue
        start, end = ent.start, ent.end
        while start and _name_like(doc, start - 1) and doc[start - 1].head.i in range(start, end):
            start -= 1  # "Project" of "Project Atlas"
        while (end < len(doc) and _name_like(doc, end)
               and doc[end - 1].dep_ in ("compound", "flat") and doc[end - 1].head.i == end):
            end += 1
        root = doc[start:end].root
        if ent.label_ == "NORP" and root.tag_ == "NNP" and root.dep_ not in ("compound", "amod"):
            kind = "person"
        yield from _entity(doc, start, end, kind)


def _quoted(doc: Any) -> Iterator[_Found]:
    """Quoted titles ("Charlotte's Web"): 1-8 words, the first and the long ones capitalised."""
    for match in _QUOTED.finditer(doc.text):
        group = next(g for g in (1, 2, 3) if match.group(g) is not None)
        words = match.group(group).split()
        if (not 1 <= len(words) <= 8 or not words[0][:1].isupper()
                or any(len(w) > 3 and w[:1].islower() for w in words)
                or canonical_name(match.group(group)) in _NOT_NAMES):
            continue
        span = doc.char_span(match.start(group), match.end(group), alignment_mode="contract")
        yield from _entity(doc, span.start, span.end, "object") if span is not None else ()


def _name_like(doc: Any, i: int) -> bool:
    """A capitalised proper noun, or an acronym ("LGBTQ+") amid lower-case words."""
    token = doc[i]
    text = token.text.replace("+", "")
    if len(text) < 2 or not text.isalpha() or token.lower_ in _NOT_NAMES:
        return False
    if token.is_upper:
        return not token.is_stop and not any(
            doc[j].is_upper and len(doc[j]) > 1 for j in (i - 1, i + 1) if 0 <= j < len(doc))
    return token.pos_ == "PROPN" and text[:1].isupper()


def _proper_nouns(doc: Any, taken: set[int]) -> Iterator[_Found]:
    """Runs of :func:`_name_like` tokens: one word addressed ("Hey Gina!", "Wow, Mel, glad"),
    subject or object is a person, else a concept; opening a sentence, only if addressed, a
    subject, or of two words or more."""
    i = 0
    while i < len(doc):
        if i in taken or not _name_like(doc, i):
            i += 1
            continue
        end = i + 1
        while end < len(doc) and end not in taken and _name_like(doc, end):
            end += 1
        root = doc[i:end].root
        addressed = (i > 0 and doc[i - 1].lower_ in _GREETINGS) or (
            (i == 0 or doc[i - 1].is_punct or doc[i].is_sent_start)
            and end < len(doc) and doc[end].text in ("!", ",", "?"))
        if not doc[i].is_sent_start or end - i > 1 or addressed or root.dep_ == "nsubj":
            person = end - i == 1 and not doc[i].is_upper and (
                addressed or root.dep_ in _PERSON_DEPS)
            yield from _entity(doc, i, end, "person" if person else "concept")
        i = end


def _known(doc: Any, known: Collection[str]) -> Iterator[_Found]:
    """The longest known name written at each token, in any case (a common word such as "will"
    only capitalised), typed by ``known`` if a mapping, else a concept."""
    if not known:
        return
    pieces = [token.text_with_ws for token in doc]
    for i, token in enumerate(doc):
        if token.is_punct or token.is_space:
            continue
        for size in range(min(MAX_KNOWN_TOKENS, len(doc) - i), 0, -1):
            key = canonical_name("".join(pieces[i:i + size]))
            if key in known and (size > 1 or not token.is_stop or token.text[:1].isupper()):
                found = _entity(doc, i, i + size, known[key] if isinstance(known, Mapping)
                                else "concept")
                yield from found
                if found:
                    break


def _mentions(doc: Any, known: Collection[str]) -> list[_Found]:
    """Mentions in order, none overlapping: the longest first, known before quoted before
    spaCy's; then proper nouns outside all of spaCy's spans (even dropped ones: "last
    Friday"). A mapping's type for a known name wins."""
    ranked = [(rank, item) for rank, source in enumerate(
        (_known(doc, known), _quoted(doc), _named(doc))) for item in source]
    ranked.sort(key=lambda r: (r[1].start - r[1].end, r[0], r[1].start))
    taken: set[int] = set()
    found = _claim((item for _, item in ranked), taken)
    found.extend(_proper_nouns(doc, taken.union(*(range(e.start, e.end) for e in doc.ents))))
    kinds = known if isinstance(known, Mapping) else {}
    return [_Found(Entity(f.entity.name, f.entity.canonical, kinds[f.entity.canonical]),
                   f.start, f.end, f.root) if kinds.get(f.entity.canonical) in ENTITY_TYPES
            else f for f in sorted(found, key=lambda f: f.start)]


def _claim(items: Iterable[_Found], taken: set[int]) -> list[_Found]:
    """The ``items`` that overlap neither ``taken`` (which grows) nor one another."""
    kept = []
    for item in items:
        if not taken.intersection(range(item.start, item.end)):
            kept.append(item)
            taken.update(range(item.start, item.end))
    return kept


def _path(token: Any) -> tuple[Any, str, tuple[str, ...]]:
    """The verb a phrase hangs from, the dependency attaching it, the lemmas between: "lives in
    Lisbon" → (lives, "prep", ("in",)); "is a member of X" → (is, "attr", ("of", "member"))."""
    while token.dep_ in ("conj", "appos", "compound", "flat") and token.head.i != token.i:
        token = token.head
    words: list[str] = []
    for _ in range(8):
        head = token.head
        if head.i == token.i or head.pos_ in ("VERB", "AUX"):
            break
        words.append(head.lemma_.lower() or head.lower_)
        token = head
    verb = token.head if token.head.pos_ in ("VERB", "AUX") else token
    return verb, token.dep_, tuple(words)


def _typed(x: _Found, y: _Found) -> tuple[_Found, _Found, str] | None:
    """``(source, target, type)`` if the parse relates ``x`` (subject or effect) to ``y``."""
    verb_x, dep_x, path_x = _path(x.root)
    verb_y, dep_y, path_y = _path(y.root)
    if verb_y.dep_ == "xcomp" and verb_y.head.i == verb_x.i:
        verb_x = verb_y  # "Maria started working at Google"
    if verb_x.i != verb_y.i or x.root.i == verb_x.i:
        return None
    if path_y in _CAUSE_PATHS and dep_x in (*_SUBJECT, "dobj"):
        return x, y, "CAUSED_BY"
    lemma = verb_x.lemma_.lower()
    if lemma in _CAUSING and (dep_x, path_y) == ("nsubjpass", ("by",)):
        return x, y, "CAUSED_BY"
    if lemma in _CAUSING and dep_x == "nsubj" and (dep_y == "dobj" or path_y in (("to",), ("in",))):
        return y, x, "CAUSED_BY"
    if dep_x not in _SUBJECT or path_x:
        return None
    if dep_y in _SUBJECT and not path_y and lemma in _KNOWING:
        return x, y, "KNOWS"  # "Maria and Jon met"
    for verbs, paths, kind in _VERB_PATTERNS:
        if lemma in verbs and path_y in paths and (path_y or dep_y in ("dobj", "attr")):
            return x, y, kind
    return (x, y, "KNOWS") if path_y == ("with",) else None  # persons only: relation_fits


def _sentence_relations(group: list[_Found], types: Mapping[str, str]) -> Iterator[Relation]:
    """One sentence's relations: to a date from its verb's subjects (else from all), other
    pairs as :func:`_typed` finds if the ends fit (:func:`relation_fits`), else RELATES_TO."""
    dates = [m for m in group if types[m.entity.canonical] == "date"]
    others = [m for m in group if types[m.entity.canonical] != "date"]
    for date in dates:
        verb = _path(date.root)[0]
        subjects = [m for m in others if _path(m.root)[0].i == verb.i
                    and _path(m.root)[1] in _SUBJECT]
        for mention in subjects or others:
            yield Relation(mention.entity.canonical, date.entity.canonical, "HAPPENED_ON")
    paired = others[:MAX_PAIRED_PER_SENTENCE]
    for i, a in enumerate(paired):
        for b in (m for m in paired[i + 1:] if m.entity.canonical != a.entity.canonical):
            x, y, kind = _typed(a, b) or _typed(b, a) or (a, b, "RELATES_TO")
            if not relation_fits(kind, types[x.entity.canonical], types[y.entity.canonical]):
                x, y, kind = a, b, "RELATES_TO"
            yield Relation(x.entity.canonical, y.entity.canonical, kind)


def extract_offline(text: str, known: Collection[str] = ()) -> GraphExtraction:
    """The entities (at most :data:`MAX_ENTITIES`) and relations (:data:`MAX_RELATIONS`, within
    sentences, RELATES_TO only for a pair no other type joins) of ``text``'s first
    :data:`MAX_TEXT_CHARS` characters. ``known``: canonical names the caller knows, found in
    any case ("i went to paris with maria"): a set (what only it finds is a concept) or a dict
    name → type (its type wins); each token n-gram is looked up. Never raises for any text."""
    doc = nlp()(_bounded(text, MAX_TEXT_CHARS))
    mentions = _mentions(doc, known)
    entities: dict[str, Entity] = {}
    for entity in (mention.entity for mention in mentions):  # a concept yields to a type
        seen = entities.get(entity.canonical)
        if (seen is None and len(entities) < MAX_ENTITIES) or (seen and seen.type == "concept"):
            entities[entity.canonical] = Entity(seen.name if seen else entity.name,
                                                entity.canonical, entity.type)
    types = {key: entity.type for key, entity in entities.items()}
    sentences: dict[int, list[_Found]] = {}
    for mention in mentions:
        if mention.entity.canonical in entities:
            sentences.setdefault(doc[mention.start].sent.start, []).append(mention)
    relations = {(r.source, r.target, r.type): r for group in sentences.values()
                 for r in _sentence_relations(group, types)}
    typed = {frozenset(key[:2]) for key in relations if key[2] != "RELATES_TO"}
    kept = [r for key, r in relations.items()
            if key[2] != "RELATES_TO" or frozenset(key[:2]) not in typed]
    return GraphExtraction(tuple(entities.values()), tuple(kept[:MAX_RELATIONS]))


def entities_in_query(text: str, known: Collection[str] = ()) -> list[str]:
    """Canonical names of the entities a query (first :data:`MAX_QUERY_CHARS` characters)
    mentions, in order, once: ``known`` names in any case (as :func:`extract_offline`) and
    spaCy's, whose model runs only for a capitalised word or a digit no known name covers
    (0.2 ms without it, 10-20 ms with it on two cores). Never raises for any text."""
    pipeline = nlp()
    doc = pipeline.make_doc(_bounded(text, MAX_QUERY_CHARS))
    taken: set[int] = set()
    found = _claim(_known(doc, known), taken)
    if any(i not in taken and (any(c.isdigit() for c in t.text) or (
            t.text[:1].isupper() and t.lower_ not in _NOT_NAMES and t.lower_ != "i"
            and not (i == 0 and t.is_stop))) for i, t in enumerate(doc)):
        for name in ("tok2vec", "ner"):
            doc = pipeline.get_pipe(name)(doc)
        found.extend(_claim(_named(doc), taken))
    return list(dict.fromkeys(f.entity.canonical for f in sorted(found, key=lambda f: f.start)))


def _bounded(text: str, limit: int) -> str:  # cut at a space in the last half, if any
    space = text.rfind(" ", limit // 2, limit)
    return text if len(text) <= limit else text[:space] if space > 0 else text[:limit]

