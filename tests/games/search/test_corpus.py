"""The generated knowledge graph and its documents: determinism, one answer per question, names
that never collide, and the reference reader.

Run with ``.venv/bin/python -m pytest -q tests/games/search/test_corpus.py``.
"""

from __future__ import annotations

import collections

import pytest

from games.search.corpus import (
    ENTITY_TYPES,
    RELATIONS,
    Doc,
    build_corpus,
    parse_question,
    read_answer,
    slug,
)

CORPUS = build_corpus(0)


def test_the_same_seed_builds_the_same_corpus_and_another_seed_another() -> None:
    again, other = build_corpus(0), build_corpus(1)
    assert again.docs == CORPUS.docs and again.facts == CORPUS.facts
    assert other.docs != CORPUS.docs


def test_entity_counts_follow_the_type_shares() -> None:
    counts = collections.Counter(t for _, t in CORPUS.graph.nodes(data="type"))
    # 200 entities: 6% countries, 24% cities, 40% people, 18% companies, the rest rivers
    assert {t: counts[t] for t in ENTITY_TYPES} == {
        "country": 12,
        "city": 48,
        "person": 80,
        "company": 36,
        "river": 24,
    }
    assert len(CORPUS.docs) == 200
    with pytest.raises(ValueError, match="at least 5"):
        build_corpus(0, n_entities=4)


def test_every_relation_gives_its_subject_exactly_one_object() -> None:
    pairs = collections.Counter((f.subject, f.relation) for f in CORPUS.facts)
    assert set(pairs.values()) == {1}
    # 12 capitals both ways, 48 cities x 2, 80 people x 4, 36 companies x 3, 24 rivers x 2
    assert len(CORPUS.facts) == 12 * 2 + 48 * 2 + 80 * 4 + 36 * 3 + 24 * 2
    for f in CORPUS.facts:
        relation = RELATIONS[f.relation]
        assert CORPUS.graph.nodes[f.subject]["type"] == relation.subject_type
        assert CORPUS.graph.has_edge(f.subject, f.object, key=f.relation)


def test_a_name_word_belongs_to_one_entity_only() -> None:
    words = collections.Counter(w for d in CORPUS.docs for w in set(d.title.split()[:2]))
    suffixes = {d.title.split()[-1] for d in CORPUS.docs if len(d.title.split()) == 2}
    shared = {w for w, n in words.items() if n > 1} - suffixes
    assert shared == set()
    assert len({d.id for d in CORPUS.docs}) == len(CORPUS.docs)


def test_each_question_is_answered_by_its_gold_document_and_read_back() -> None:
    for fact in CORPUS.facts:
        question = CORPUS.question_for(fact)
        gold = CORPUS.doc(question.gold_doc_id)
        assert gold.title == fact.subject and question.answer in gold.text
        assert read_answer(question.text, [gold]) == fact.object
        # readings are case-folded: the reader matches documents regardless of case
        assert (fact.relation, fact.subject.casefold()) in parse_question(question.text)


def test_reading_finds_the_first_stating_document_and_none_elsewhere() -> None:
    question = "In which city was Ann Vel born?"
    other = Doc("bo-ruk", "Bo Ruk", "Bo Ruk is a person. Bo Ruk was born in Kast.")
    gold = Doc("ann-vel", "Ann Vel", "Ann Vel is a person. Ann Vel was born in Morrow.")
    assert read_answer(question, [other, gold]) == "Morrow"
    assert read_answer(question, [other]) is None
    # case and spacing of the question do not matter; an unknown wording has no reading
    assert read_answer("in which  CITY was ann vel born", [gold]) == "Morrow"
    assert parse_question("Where did Ann Vel grow up?") == []


def test_founded_questions_read_two_ways() -> None:
    # cities and companies are both "founded": the wording is ambiguous, the documents decide
    readings = parse_question("In which year was Kast founded?")
    assert sorted(readings) == [("city_founded_in_year", "kast"), ("founded_in_year", "kast")]
    company = next(f for f in CORPUS.facts if f.relation == "founded_in_year")
    question = CORPUS.question_for(company)
    assert read_answer(question.text, [CORPUS.doc_of(company.subject)]) == company.object


def test_spelling_makes_case_and_spacing_canonical() -> None:
    name = CORPUS.docs[70].title  # a person: two invented words
    assert CORPUS.spell(f"  where   is {name.upper()}  ") == f"Where is {name}"
    assert CORPUS.spell(name.lower()) == name
    assert slug("Velmora  Tashkin!") == "velmora-tashkin"


def test_questions_are_seeded_and_distinct() -> None:
    first, again = CORPUS.questions(3, 20), CORPUS.questions(3, 20)
    assert first == again and len({q.text for q in first}) == 20
