"""Tasks for the planner/executor game: each needs a tool, and has one verifiable answer.

Three kinds, all sampled from a ``numpy`` generator (the episode's seed):

- ``arithmetic``: ``"What is 4837 * 29 - 1120?"``: numbers large enough that a small model does
  better with the calculator. Every answer is a whole number.
- ``lookup``: a single-hop question about the generated search corpus
  (:mod:`games.search.corpus`), e.g. ``"In which city was Velmora Tashkin born?"``; the answer is
  stated in one document, which the search tool finds.
- ``two_step``: look a year up, then compute with it: ``"How many years lie between the birth
  year of Velmora Tashkin and the year 2061?"``.

A :class:`Task` also carries the reference solution as :class:`Step` s (the tool and its
argument), which the scripted bot follows. :func:`check_answer` reads an answer leniently: case,
spacing, a final full stop and, for numbers, thousands separators and a ``.0`` do not matter.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from games.planner.calculator import CalculatorError, compute, evaluate
from games.search.corpus import DEFAULT_ENTITIES, Corpus, build_corpus
from games.search.retrieval import Retriever

KINDS = ("arithmetic", "lookup", "two_step")
YEAR_RELATIONS = {
    "born_in_year": "How many years lie between the birth year of {s} and the year {y}?",
    "city_founded_in_year": "How many years lie between the founding of the city {s} and {y}?",
    "founded_in_year": "How many years lie between the founding of the company {s} and {y}?",
}
"""Two-step templates: the relation looked up, and the question computed from it."""


@dataclass(frozen=True)
class Step:
    """One step of the reference solution: a tool, its argument, and the subgoal it serves."""

    tool: str
    """``calculator`` or ``search``."""
    argument: str
    """The calculator's expression or the search query."""
    subgoal: str


@dataclass(frozen=True)
class Task:
    kind: str
    text: str
    answer: str
    steps: tuple[Step, ...]


@functools.lru_cache(maxsize=4)
def corpus_and_retriever(seed: int, n_entities: int) -> tuple[Corpus, Retriever]:
    """The corpus for ``seed`` and its BM25 index, built once per process and shared by every
    game instance (building takes a moment; the conformance kit builds many instances)."""
    corpus = build_corpus(seed, n_entities=n_entities)
    return corpus, Retriever(corpus.docs)


def _int(rng: np.random.Generator, low: int, high: int) -> int:
    """A whole number in ``low..high`` inclusive."""
    return int(rng.integers(low, high + 1))


def _arithmetic_expression(rng: np.random.Generator) -> tuple[str, str]:
    """A question text and its expression, from one of five templates."""
    form = _int(rng, 0, 4)
    if form == 0:
        a, b, c = _int(rng, 1000, 9999), _int(rng, 12, 99), _int(rng, 100, 9999)
        expression = f"{a} * {b} - {c}"
        return f"What is {expression}?", expression
    if form == 1:
        a, b, c, d = (_int(rng, 100, 999) for _ in range(4))
        expression = f"{a} * {b} + {c} * {d}"
        return f"What is {expression}?", expression
    if form == 2:
        a, b, c = _int(rng, 1000, 9999), _int(rng, 1000, 9999), _int(rng, 13, 97)
        return f"What is ({a} + {b}) times {c}?", f"({a} + {b}) * {c}"
    if form == 3:
        quotient, divisor = _int(rng, 100, 999), _int(rng, 13, 97)
        expression = f"{quotient * divisor} / {divisor}"
        return f"What is {quotient * divisor} divided by {divisor}?", expression
    a, b = _int(rng, 10000, 99999), _int(rng, 13, 97)
    return f"What is the remainder when {a} is divided by {b}?", f"{a} % {b}"


def arithmetic_task(rng: np.random.Generator) -> Task:
    text, expression = _arithmetic_expression(rng)
    step = Step("calculator", expression, f"compute {expression}")
    return Task("arithmetic", text, evaluate(expression), (step,))


def lookup_task(rng: np.random.Generator, corpus: Corpus) -> Task:
    (question,) = corpus.questions(rng, 1)
    step = Step("search", question.text, f"find the document about {question.subject}")
    return Task("lookup", question.text, question.answer, (step,))


def two_step_task(rng: np.random.Generator, corpus: Corpus) -> Task:
    facts = [f for f in corpus.facts if f.relation in YEAR_RELATIONS]
    fact = facts[int(rng.integers(len(facts)))]
    year = _int(rng, 2030, 2099)
    question = corpus.question_for(fact)
    expression = f"{year} - {fact.object}"
    text = YEAR_RELATIONS[fact.relation].format(s=fact.subject, y=year)
    steps = (
        Step("search", question.text, f"find the year: {question.text.lower()}"),
        Step("calculator", expression, f"compute {expression}"),
    )
    return Task("two_step", text, evaluate(expression), steps)


class TaskSampler:
    """Samples tasks of the given kinds (uniformly over kinds) from one fixed corpus, or
    uniformly from a fixed list ``tasks`` (a benchmark, or a test's hand-made task)."""

    def __init__(
        self,
        kinds: Sequence[str] = KINDS,
        corpus_seed: int = 0,
        n_entities: int = DEFAULT_ENTITIES,
        tasks: Sequence[Task] | None = None,
    ) -> None:
        unknown = sorted(set(kinds) - set(KINDS))
        if not kinds or unknown:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {list(kinds)}")
        if tasks is not None and not tasks:
            raise ValueError("tasks, when given, must not be empty")
        self.kinds = tuple(kinds)
        self.corpus_seed, self.n_entities = int(corpus_seed), int(n_entities)
        self.tasks = tuple(tasks) if tasks is not None else None

    @property
    def corpus(self) -> Corpus:
        return corpus_and_retriever(self.corpus_seed, self.n_entities)[0]

    @property
    def retriever(self) -> Retriever:
        return corpus_and_retriever(self.corpus_seed, self.n_entities)[1]

    def sample(self, rng: np.random.Generator) -> Task:
        if self.tasks is not None:
            return self.tasks[int(rng.integers(len(self.tasks)))]
        kind = self.kinds[int(rng.integers(len(self.kinds)))]
        makers: dict[str, Callable[[], Task]] = {
            "arithmetic": lambda: arithmetic_task(rng),
            "lookup": lambda: lookup_task(rng, self.corpus),
            "two_step": lambda: two_step_task(rng, self.corpus),
        }
        return makers[kind]()


def _canon(text: str) -> str:
    return " ".join(str(text).split()).casefold().strip(" .'\"")


def _as_number(text: str) -> Fraction | None:
    """``text`` as an exact number (``1,234``, ``1234.0``, ``-3``), or None."""
    flat = text.replace(",", "").replace(" ", "")
    if not flat or len(flat) > 40:
        return None
    try:
        return compute(flat) if flat.lstrip("-").replace(".", "", 1).isdigit() else None
    except CalculatorError:
        return None


def check_answer(task: Task, given: str | None) -> bool:
    """Whether ``given`` is the task's answer (see the module docstring)."""
    if given is None:
        return False
    want, got = _canon(task.answer), _canon(given)
    if not got:
        return False
    if want == got:
        return True
    number = _as_number(want)
    return number is not None and number == _as_number(got)


__all__ = [
    "KINDS",
    "Step",
    "Task",
    "TaskSampler",
    "arithmetic_task",
    "check_answer",
    "corpus_and_retriever",
    "lookup_task",
    "two_step_task",
]
