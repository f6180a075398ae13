"""A generated knowledge graph and its documents: the local corpus of Search Self-Play.

``build_corpus(seed)`` makes, with no download and the same result for the same seed:

- **entities** of five types (countries, cities, people, companies, rivers) with invented names,
  built from syllables; every name word is used by one entity only, so a name never matches
  another entity's name by accident;
- **facts** ``(subject, relation, object)``: each relation in :data:`RELATIONS` gives its subject
  exactly one object (an entity, or a year), so every fact is a question with one answer;
- a **networkx** ``MultiDiGraph`` of the facts (nodes carry ``type``; edges ``relation``);
- one short **document** per entity, a sentence per fact whose subject it is;
- single-hop **questions** (``"In which city was Velmora Tashkin born?"`` -> ``"Karvos"``), each
  with its gold document, the subject's own.

:func:`parse_question` and :func:`read_answer` invert the question and sentence templates: a
deterministic reader for the reference bot, which answers from documents it was shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

ENTITY_TYPES = ("country", "city", "person", "company", "river")
TYPE_SHARES = {"country": 0.06, "city": 0.24, "person": 0.40, "company": 0.18}
"""Fraction of the entities of each type; rivers take the rest."""
DEFAULT_ENTITIES = 200


@dataclass(frozen=True)
class Relation:
    """A functional relation: its types, the sentence a document states it with, the question."""

    subject_type: str
    object_type: str
    sentence: str
    question: str


RELATIONS: dict[str, Relation] = {
    "has_capital": Relation(
        "country", "city", "The capital of {s} is {o}.", "What is the capital of {s}?"
    ),
    "located_in": Relation("city", "country", "{s} is located in {o}.", "In which country is {s}?"),
    "capital_of": Relation(
        "city", "country", "{s} is the capital of {o}.", "Which country has {s} as its capital?"
    ),
    "city_founded_in_year": Relation(
        "city", "year", "{s} was founded in the year {o}.", "In which year was {s} founded?"
    ),
    "born_in": Relation("person", "city", "{s} was born in {o}.", "In which city was {s} born?"),
    "born_in_year": Relation(
        "person", "year", "The birth year of {s} is {o}.", "In which year was {s} born?"
    ),
    "lives_in": Relation("person", "city", "{s} lives in {o}.", "In which city does {s} live?"),
    "works_for": Relation(
        "person", "company", "{s} works for {o}.", "Which company does {s} work for?"
    ),
    "founded_by": Relation("company", "person", "{s} was founded by {o}.", "Who founded {s}?"),
    "headquartered_in": Relation(
        "company", "city", "{s} is headquartered in {o}.", "In which city is {s} headquartered?"
    ),
    "founded_in_year": Relation(
        "company", "year", "{s} was founded in the year {o}.", "In which year was {s} founded?"
    ),
    "flows_through": Relation(
        "river",
        "city",
        "The river {s} flows through {o}.",
        "Through which city does the river {s} flow?",
    ),
    "rises_in": Relation(
        "river",
        "country",
        "The river {s} rises in {o}.",
        "In which country does the river {s} rise?",
    ),
}
"""Every relation, in the order a document states them."""

_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "k", "kr", "l", "m", "n", "p", "r", "s", "st")
_ONSETS += ("t", "tr", "v", "z", "th", "sh", "h", "j")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou")
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "k", "m")
_COMPANY_SUFFIXES = ("Works", "Systems", "Holdings", "Industries", "Labs", "Motors", "Textiles")
_COMPANY_SUFFIXES += ("Shipping", "Mining", "Foods")
_TEMPLATE_WORDS = frozenset(
    w.casefold()
    for r in RELATIONS.values()
    for w in re.findall(r"[A-Za-z]+", r.sentence + " " + r.question)
) | frozenset(t.casefold() for t in (*ENTITY_TYPES, *_COMPANY_SUFFIXES))


@dataclass(frozen=True)
class Doc:
    """One document: ``id`` (a slug of the title), ``title`` (the entity's name), ``text``."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Fact:
    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class Question:
    """A single-hop question; ``answer`` is stated in the gold document, the subject's own."""

    text: str
    answer: str
    gold_doc_id: str
    relation: str
    subject: str


def slug(name: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", name.casefold()))


@dataclass
class Corpus:
    """The knowledge graph, its facts and its documents (one per entity)."""

    graph: nx.MultiDiGraph
    facts: list[Fact]
    docs: list[Doc]
    _by_id: dict[str, Doc] = field(init=False, repr=False)
    _spelling: dict[str, str] = field(init=False, repr=False)
    _names: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_id = {d.id: d for d in self.docs}
        # every name, and every invented word of a name, in its corpus spelling
        names = {d.title.casefold(): d.title for d in self.docs}
        for title in list(names.values()):
            names.update((w.casefold(), w) for w in title.split() if w not in _COMPANY_SUFFIXES)
        self._spelling = names
        alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        self._names = re.compile(rf"\b(?:{alternation})\b")

    def spell(self, text: str) -> str:
        """``text`` with its case and spacing made canonical: whitespace collapsed, lower case
        but for the corpus's names (in their spelling) and a capital first letter. Two texts
        that differ only in case and spacing spell alike."""
        flat = " ".join(text.split()).casefold()
        flat = self._names.sub(lambda m: self._spelling[m.group(0)], flat)
        return flat[:1].upper() + flat[1:]

    def doc(self, doc_id: str) -> Doc:
        return self._by_id[doc_id]

    def doc_of(self, entity: str) -> Doc:
        """The document about ``entity`` (a name)."""
        return self._by_id[slug(entity)]

    def entities(self, entity_type: str | None = None) -> list[str]:
        """Entity names (of one type), in the order they were made."""
        return [
            n
            for n, t in self.graph.nodes(data="type")
            if t in ENTITY_TYPES and (entity_type is None or t == entity_type)
        ]

    def question_for(self, fact: Fact) -> Question:
        text = RELATIONS[fact.relation].question.format(s=fact.subject)
        return Question(text, fact.object, slug(fact.subject), fact.relation, fact.subject)

    def questions(self, rng: np.random.Generator | int, n: int) -> list[Question]:
        """``n`` questions about distinct facts (with repeats only when ``n`` exceeds them)."""
        rng = np.random.default_rng(rng)
        picks = rng.choice(len(self.facts), size=n, replace=n > len(self.facts))
        return [self.question_for(self.facts[int(i)]) for i in picks]


def _words(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct invented words of two or three syllables."""
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        syllables = 3 if rng.random() < 0.3 else 2
        word = "".join(
            _ONSETS[rng.integers(len(_ONSETS))]
            + _VOWELS[rng.integers(len(_VOWELS))]
            + _CODAS[rng.integers(len(_CODAS))]
            for _ in range(syllables)
        )
        if 4 <= len(word) <= 10 and word not in seen and word not in _TEMPLATE_WORDS:
            seen.add(word)
            words.append(word.capitalize())
    return words


def _counts(n_entities: int) -> dict[str, int]:
    counts = {t: max(1, round(n_entities * share)) for t, share in TYPE_SHARES.items()}
    counts["river"] = max(1, n_entities - sum(counts.values()))
    return counts


def build_corpus(seed: int, n_entities: int = DEFAULT_ENTITIES) -> Corpus:
    """The corpus for ``seed``: about ``n_entities`` entities (at least one of each type)."""
    if n_entities < len(ENTITY_TYPES):
        raise ValueError(f"n_entities must be at least {len(ENTITY_TYPES)}, got {n_entities}")
    rng = np.random.default_rng(seed)
    counts = _counts(n_entities)
    counts["city"] = max(counts["city"], counts["country"])  # every country needs a capital
    words = iter(_words(rng, sum(counts.values()) + counts["person"]))
    names = {
        "country": [next(words) for _ in range(counts["country"])],
        "city": [next(words) for _ in range(counts["city"])],
        "person": [f"{next(words)} {next(words)}" for _ in range(counts["person"])],
        "company": [
            f"{next(words)} {_COMPANY_SUFFIXES[rng.integers(len(_COMPANY_SUFFIXES))]}"
            for _ in range(counts["company"])
        ],
        "river": [next(words) for _ in range(counts["river"])],
    }
    facts: list[Fact] = []

    def pick(kind: str) -> str:
        return names[kind][int(rng.integers(len(names[kind])))]

    def add(subject: str, relation: str, obj: object) -> None:
        facts.append(Fact(subject, relation, str(obj)))

    countries, cities = names["country"], names["city"]
    for i, city in enumerate(cities):
        # the first cities are the capitals, one per country
        country = countries[i] if i < len(countries) else pick("country")
        if i < len(countries):
            add(country, "has_capital", city)
            add(city, "capital_of", country)
        add(city, "located_in", country)
        add(city, "city_founded_in_year", int(rng.integers(700, 1900)))
    born = {}
    for person in names["person"]:
        born[person] = int(rng.integers(1920, 2006))
        add(person, "born_in", pick("city"))
        add(person, "born_in_year", born[person])
        add(person, "lives_in", pick("city"))
        add(person, "works_for", pick("company"))
    for company in names["company"]:
        founder = pick("person")
        add(company, "founded_by", founder)
        add(company, "headquartered_in", pick("city"))
        add(company, "founded_in_year", min(2024, born[founder] + int(rng.integers(20, 61))))
    for river in names["river"]:
        add(river, "flows_through", pick("city"))
        add(river, "rises_in", pick("country"))

    order = {r: i for i, r in enumerate(RELATIONS)}
    facts.sort(key=lambda f: order[f.relation])  # documents state facts in RELATIONS order
    graph = nx.MultiDiGraph()
    for kind in ENTITY_TYPES:
        for name in names[kind]:
            graph.add_node(name, type=kind, doc_id=slug(name))
    for f in facts:
        if f.object not in graph:
            graph.add_node(f.object, type=RELATIONS[f.relation].object_type)
        graph.add_edge(f.subject, f.object, key=f.relation, relation=f.relation)
    docs = [_document(name, kind, facts) for kind in ENTITY_TYPES for name in names[kind]]
    return Corpus(graph, facts, docs)


def _document(name: str, kind: str, facts: Iterable[Fact]) -> Doc:
    sentences = [f"{name} is a {kind}."]
    sentences += [
        RELATIONS[f.relation].sentence.format(s=name, o=f.object)
        for f in facts
        if f.subject == name
    ]
    return Doc(slug(name), name, " ".join(sentences))


# -- a reader, for the reference bot ---------------------------------------------------------------
def _canon(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip("?. ")


_QUESTION_PATTERNS = [
    (name, re.compile(re.escape(_canon(r.question)).replace(r"\{s\}", "(?P<s>.+)")))
    for name, r in RELATIONS.items()
]


def parse_question(text: str) -> list[tuple[str, str]]:
    """``(relation, subject)`` readings of a question in :data:`RELATIONS`' wording (case and
    spacing aside); several when two relations share a wording (cities and companies are both
    "founded")."""
    canon = _canon(text)
    return [(name, m["s"]) for name, p in _QUESTION_PATTERNS if (m := p.fullmatch(canon))]


def read_answer(question: str, docs: Sequence[Doc]) -> str | None:
    """The answer to ``question`` as stated in ``docs`` (the first that states it), or None."""
    for relation, subject in parse_question(question):
        sentence = re.escape(RELATIONS[relation].sentence)
        pattern = sentence.replace(r"\{s\}", re.escape(subject)).replace(r"\{o\}", r"([^.]+)")
        for doc in docs:
            match = re.search(pattern, doc.text, flags=re.IGNORECASE)
            if match:
                return match.group(1)
    return None
