"""Task families with verifiable ground truth, for the proposer/solver/judge game.

A family is a tiny language of problems. The proposer writes a problem in it; :meth:`Family.parse`
reads that text back, checks it is a valid problem (well-formed, in range, with exactly one
answer) and computes the true answer itself, so no seat is ever trusted for the truth. Parsing
is case-insensitive and whitespace-tolerant; a parsed problem is re-rendered in one canonical
spelling (``Task.text``), so the same problem always reads the same.

- ``arithmetic``: a counting story ("Ann has 12 apples. Ann buys 5 more. ... How many apples
  does Ann have?"); every count stays a whole number in 0..1000.
- ``ordering``: comparisons on one scale ("Ann is taller than Bob. ... Who is the tallest?");
  the facts must be consistent (an acyclic graph) and must pin down the person asked for.

Each family takes difficulty knobs (its class says which); the defaults are the full family,
and :data:`FAMILIES` holds the defaults. :func:`make_families` builds every family with knobs.

Answers are read by :meth:`Family.read_answer` (``" 12 "``, ``"12.0"`` and ``"12 apples"`` all
read ``"12"``; ``"ann."`` reads ``"Ann"``) and compared with the truth by :meth:`Family.check`.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import networkx as nx
import numpy as np

NAMES = ("Ann", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lu")
"""The people every family's problems may name (a closed list keeps parsing exact)."""
MAX_CHARS = 1000
"""Longer problem texts are not parsed at all."""
_NAME_INDEX = {n.casefold(): n for n in NAMES}


@dataclass(frozen=True)
class Task:
    """One problem: its family, its canonical text, and its true answer (canonical form)."""

    family: str
    text: str
    answer: str


def sentences(text: str) -> list[str] | None:
    """``text`` split after each ``.`` or ``?``, whitespace collapsed; None when it is empty,
    too long, or has words after its last full stop."""
    text = " ".join(text.split())
    if not text or len(text) > MAX_CHARS:
        return None
    parts = re.findall(r"[^.?]*[.?]", text)
    if "".join(parts) != text:
        return None
    return [p.strip() for p in parts]


def name_of(word: str) -> str | None:
    """The listed name ``word`` spells (any case), or None."""
    return _NAME_INDEX.get(word.casefold())


class Family(ABC):
    """A task family: its grammar for the proposer, reference problems, a parser that computes
    the truth, and an answer checker."""

    name: str
    answer_hint: str
    """What a solver's answer must be, e.g. "a whole number"."""

    @abstractmethod
    def describe(self) -> str:
        """The family's grammar with an example, for the proposer's prompt."""

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Task:
        """A valid reference problem; its answer is worked out apart from :meth:`parse`."""

    @abstractmethod
    def parse(self, text: str) -> Task | None:
        """The problem ``text`` states, with its computed answer; None unless valid."""

    @abstractmethod
    def read_answer(self, text: str) -> str | None:
        """A solver's answer in canonical form, or None when it is not an answer at all."""

    @abstractmethod
    def candidates(self, task: Task) -> list[str]:
        """Well-formed answers taken from the problem's text only (never from its truth)."""

    def check(self, task: Task, answer_text: str) -> bool:
        """Whether ``answer_text`` is the task's true answer."""
        return self.read_answer(answer_text) == task.answer


# -- arithmetic ---------------------------------------------------------------------------------
MAX_COUNT = 1000
MAX_STEPS = 6
ITEMS = ("apples", "pears", "cards", "coins", "books", "stamps", "marbles", "shells")
_NUM = r"(\d{1,4})"  # longer numbers fail the pattern; range is checked after
_ADD_VERBS = ("buys", "finds", "gets")
_SUB_VERBS = ("gives away", "loses", "eats", "sells")
_MUL_VERBS = {"doubles": 2, "triples": 3}
_STEP_PATTERNS = (
    ("add", re.compile(rf"(\w+) ({'|'.join(_ADD_VERBS)}) {_NUM} more\.", re.I)),
    ("bulk", re.compile(rf"(\w+) (buys) {_NUM} boxes of {_NUM}\.", re.I)),
    ("sub", re.compile(rf"(\w+) ({'|'.join(_SUB_VERBS)}) {_NUM}\.", re.I)),
    ("mul", re.compile(rf"(\w+) ({'|'.join(_MUL_VERBS)}) them\.", re.I)),
    ("half", re.compile(r"(\w+) (halves) them\.", re.I)),
)
STEP_KINDS = ("add", "bulk", "sub", "mul", "half")
"""The kinds of arithmetic step, in the order the grammar lists them."""
_STEP_GRAMMAR = {
    "add": "'NAME buys|finds|gets N more.'",
    "bulk": "'NAME buys N boxes of M.'",
    "sub": "'NAME gives away|loses|eats|sells N.'",
    "mul": "'NAME doubles them.', 'NAME triples them.'",
    "half": "'NAME halves them.'",
}
_EXAMPLE_STEPS = (
    ("mul", "doubles", ()),
    ("sub", "eats", (4,)),
    ("add", "finds", (3,)),
    ("half", "halves", ()),
    ("bulk", "buys", (2, 5)),
)
"""The grammar example's steps (from 10 pears), the first ``max_steps`` of those allowed."""
_START = re.compile(rf"(\w+) has {_NUM} (\w+)\.", re.I)
_QUESTION = re.compile(r"How many (\w+) does (\w+) have\?", re.I)
_NUMBER_ANSWER = re.compile(r"([+-]?\d{1,12}(?:\.\d{0,12})?)(?: [a-z]+)?", re.I)


def _step_text(name: str, kind: str, verb: str, args: tuple[int, ...]) -> str:
    if kind == "add":
        return f"{name} {verb} {args[0]} more."
    if kind == "bulk":
        return f"{name} buys {args[0]} boxes of {args[1]}."
    if kind == "sub":
        return f"{name} {verb} {args[0]}."
    return f"{name} {verb} them."


def _apply_step(count: int, kind: str, verb: str, args: tuple[int, ...]) -> int | None:
    """The count after one step, or None when the step is impossible (below zero, a half of an
    odd count)."""
    if kind == "add":
        return count + args[0]
    if kind == "bulk":
        return count + args[0] * args[1]
    if kind == "sub":
        return count - args[0] if args[0] <= count else None
    if kind == "mul":
        return count * _MUL_VERBS[verb]
    return count // 2 if count % 2 == 0 else None


class Arithmetic(Family):
    """Counting stories: a start, 1..6 steps (+, -, x2, x3, /2, boxes of), a question.

    Difficulty knobs (the defaults are the full family): ``max_steps`` (1..6) caps the steps of
    a problem; ``ops`` names the step kinds allowed (``add``: buys/finds/gets N more, ``bulk``:
    buys N boxes of M, ``sub``: gives away/loses/eats/sells N, ``mul``: doubles/triples,
    ``half``: halves); both bound what :meth:`parse` accepts and :meth:`describe` states.
    ``max_start`` (0..1000) and ``max_amount`` (1..1000) bound the numbers of reference problems
    only: their start count is drawn from 0..max_start and an add step's N from
    1..max_amount. A reference problem has 1..min(4, max_steps) steps.
    """

    name = "arithmetic"
    answer_hint = "a whole number"

    def __init__(
        self,
        max_steps: int = MAX_STEPS,
        ops: Sequence[str] = STEP_KINDS,
        max_start: int = 30,
        max_amount: int = 20,
    ) -> None:
        ops = tuple(ops)
        if not 1 <= max_steps <= MAX_STEPS:
            raise ValueError(f"max_steps must be in 1..{MAX_STEPS}, got {max_steps}")
        if not ops or any(op not in STEP_KINDS for op in ops):
            raise ValueError(f"ops must be a non-empty subset of {STEP_KINDS}, got {ops}")
        if not 0 <= max_start <= MAX_COUNT or not 1 <= max_amount <= MAX_COUNT:
            raise ValueError(
                f"max_start must be in 0..{MAX_COUNT} and max_amount in 1..{MAX_COUNT}, "
                f"got {max_start} and {max_amount}"
            )
        if not {"add", "bulk", "mul"} & set(ops):
            raise ValueError("ops must hold add, bulk or mul (steps possible from a count of 0)")
        self.max_steps, self.max_start, self.max_amount = int(max_steps), max_start, max_amount
        self.ops = tuple(op for op in STEP_KINDS if op in ops)

    def describe(self) -> str:
        steps = ", ".join(_STEP_GRAMMAR[op] for op in self.ops)
        example, answer = self._example()
        halving = ", and only an even count can be halved" if "half" in self.ops else ""
        return (
            "Arithmetic word problem. Sentences, in order:\n"
            "1. Start: 'NAME has N ITEM.'\n"
            f"2. Between 1 and {self.max_steps} steps, each one of: {steps}\n"
            "3. Question: 'How many ITEM does NAME have?'\n"
            f"NAME is one person from: {', '.join(NAMES)} (the same in every sentence). "
            f"ITEM is one of: {', '.join(ITEMS)}. Numbers are whole, written in digits. "
            f"The count must stay between 0 and {MAX_COUNT} after every step{halving}.\n"
            f"Example: {example}  (answer {answer})"
        )

    def _example(self) -> tuple[str, int]:
        """The grammar's example (the default one when its steps are allowed) and its answer."""
        steps = [s for s in _EXAMPLE_STEPS if s[0] in self.ops][: min(2, self.max_steps)]
        count, lines = 10, ["Ann has 10 pears."]
        for step in steps:
            count = _apply_step(count, *step)
            lines.append(_step_text("Ann", *step))
        lines.append("How many pears does Ann have?")
        return " ".join(lines), count

    def sample(self, rng: np.random.Generator) -> Task:
        while True:  # draws again on a dead end (only knobs other than the defaults meet one)
            task = self._draw(rng)
            if task is not None:
                return task

    def _draw(self, rng: np.random.Generator) -> Task | None:
        name = NAMES[int(rng.integers(len(NAMES)))]
        item = ITEMS[int(rng.integers(len(ITEMS)))]
        count = int(rng.integers(0, self.max_start + 1))
        lines = [f"{name} has {count} {item}."]
        for _ in range(int(rng.integers(1, min(4, self.max_steps) + 1))):
            options = [("add", v) for v in _ADD_VERBS] + [("bulk", "buys")]
            if count > 0:
                options += [("sub", v) for v in _SUB_VERBS]
            if count <= MAX_COUNT // 3:
                options += [("mul", v) for v in _MUL_VERBS]
            if count % 2 == 0 and count > 0:
                options.append(("half", "halves"))
            options = [o for o in options if o[0] in self.ops]
            if not options:
                return None
            kind, verb = options[int(rng.integers(len(options)))]
            if kind == "add":
                args = (int(rng.integers(1, self.max_amount + 1)),)
                count += args[0]
            elif kind == "bulk":
                args = (int(rng.integers(2, 6)), int(rng.integers(2, 11)))
                count += args[0] * args[1]
            elif kind == "sub":
                args = (int(rng.integers(1, count + 1)),)
                count -= args[0]
            elif kind == "mul":
                args = ()
                count *= _MUL_VERBS[verb]
            else:
                args = ()
                count //= 2
            if count > MAX_COUNT:
                return None
            lines.append(_step_text(name, kind, verb, args))
        lines.append(f"How many {item} does {name} have?")
        return Task(self.name, " ".join(lines), str(count))

    def parse(self, text: str) -> Task | None:
        parts = sentences(text)
        if parts is None or not 3 <= len(parts) <= self.max_steps + 2:
            return None
        start, question = _START.fullmatch(parts[0]), _QUESTION.fullmatch(parts[-1])
        if start is None or question is None:
            return None
        name, item = name_of(start.group(1)), start.group(3).casefold()
        if name is None or item not in ITEMS:
            return None
        if name_of(question.group(2)) != name or question.group(1).casefold() != item:
            return None
        count = int(start.group(2))
        if count > MAX_COUNT:
            return None
        lines = [f"{name} has {count} {item}."]
        for part in parts[1:-1]:
            step = self._read_step(part, name)
            if step is None or step[0] not in self.ops:
                return None
            count = _apply_step(count, *step)
            if count is None or count > MAX_COUNT:
                return None
            lines.append(_step_text(name, *step))
        lines.append(f"How many {item} does {name} have?")
        return Task(self.name, " ".join(lines), str(count))

    @staticmethod
    def _read_step(sentence: str, name: str) -> tuple[str, str, tuple[int, ...]] | None:
        """A step sentence as (kind, verb, numbers), or None when it is not one of ``name``'s."""
        for kind, pattern in _STEP_PATTERNS:
            match = pattern.fullmatch(sentence)
            if match is None:
                continue
            if name_of(match.group(1)) != name:
                return None
            args = tuple(int(n) for n in match.groups()[2:])
            if any(not 1 <= n <= MAX_COUNT for n in args):
                return None
            return kind, match.group(2).casefold(), args
        return None

    def read_answer(self, text: str) -> str | None:
        text = " ".join(text.split()).strip("$").rstrip(".").strip()
        match = _NUMBER_ANSWER.fullmatch(text)
        if match is None:
            return None
        try:
            value = Decimal(match.group(1))
        except InvalidOperation:
            return None
        if value == value.to_integral_value():
            return str(int(value))
        return format(value.normalize(), "f")

    def candidates(self, task: Task) -> list[str]:
        numbers = dict.fromkeys(re.findall(r"\d+", task.text))
        return ["0", *(n for n in numbers if n != "0")]


# -- ordering -----------------------------------------------------------------------------------
MAX_PEOPLE = 6
MAX_FACTS = 10
SCALES = {
    "taller": ("shorter", "tallest", "shortest"),
    "older": ("younger", "oldest", "youngest"),
    "faster": ("slower", "fastest", "slowest"),
}
"""Each scale: its 'more' comparative -> (its 'less' comparative, top superlative, bottom one)."""
ORDINALS = {"": 1, "second ": 2, "third ": 3}
_COMPARATIVES = {c: (more, c == more) for more, v in SCALES.items() for c in (more, v[0])}
_SUPERLATIVES = {s: (more, s == v[1]) for more, v in SCALES.items() for s in v[1:]}
_FACT = re.compile(r"(\w+) is (\w+) than (\w+)\.", re.I)
_WHO = re.compile(r"Who is the (second |third )?(\w+)\?", re.I)


def unique_at(graph: nx.DiGraph, rank: int, from_top: bool) -> str | None:
    """The person at ``rank`` (1 = the end) from the top (or bottom) of every order consistent
    with ``graph`` (edges point from more to less), or None when that person is not determined.

    A person's place is the same in every consistent order exactly when they are compared,
    directly or through others, with everyone: then it is one more than the number above them.
    """
    n = graph.number_of_nodes()
    for person in graph.nodes:
        above, below = nx.ancestors(graph, person), nx.descendants(graph, person)
        if len(above) + len(below) == n - 1 and len(above if from_top else below) == rank - 1:
            return person
    return None


class Ordering(Family):
    """Ordering puzzles: comparisons on one scale, then who is first, second or third.

    Difficulty knobs (the defaults are the full family): ``max_people`` (2..6) caps the people
    of a puzzle and ``max_rank`` (1..3) the question's rank (1: only 'Who is the SUPERLATIVE?';
    2 adds 'second', 3 'third'); both bound what :meth:`parse` accepts and :meth:`describe`
    states, as does ``ask_bottom`` (False: questions ask for the top of the scale only, the
    tallest, oldest or fastest, never the shortest, youngest or slowest). ``min_people``
    (2..max_people; default 3, or 2 when max_people is 2) bounds reference puzzles only: they
    have min_people..max_people people.
    """

    name = "ordering"
    answer_hint = "one person's name"

    def __init__(
        self,
        max_people: int = MAX_PEOPLE,
        min_people: int | None = None,
        max_rank: int = 3,
        ask_bottom: bool = True,
    ) -> None:
        if not 2 <= max_people <= MAX_PEOPLE:
            raise ValueError(f"max_people must be in 2..{MAX_PEOPLE}, got {max_people}")
        if not 1 <= max_rank <= len(ORDINALS):
            raise ValueError(f"max_rank must be in 1..{len(ORDINALS)}, got {max_rank}")
        min_people = min(3, max_people) if min_people is None else min_people
        if not 2 <= min_people <= max_people:
            raise ValueError(f"min_people must be in 2..{max_people}, got {min_people}")
        self.max_people, self.min_people, self.max_rank = max_people, min_people, max_rank
        self.ask_bottom = bool(ask_bottom)

    def describe(self) -> str:
        pairs = "; ".join(
            f"{more}/{v[0]} (-> {v[1]}/{v[2]})" if self.ask_bottom else f"{more}/{v[0]} (-> {v[1]})"
            for more, v in SCALES.items()
        )
        questions = [f"'Who is the {o}SUPERLATIVE?'" for o in list(ORDINALS)[: self.max_rank]]
        if len(questions) > 1:
            questions[-2:] = [f"{questions[-2]} or {questions[-1]}"]
        if self.max_people >= 3:
            example = "Ann is taller than Bob. Cy is shorter than Bob. Who is the tallest?"
        else:
            example = "Ann is taller than Bob. Who is the tallest?"
        return (
            "Ordering puzzle. Sentences, in order:\n"
            f"1. Between 1 and {MAX_FACTS} facts, each 'NAME is COMPARATIVE than NAME.'\n"
            f"2. One question: {', '.join(questions)}\n"
            f"Every word comes from one scale: {pairs}. Names come from: {', '.join(NAMES)}; "
            f"at most {self.max_people} people. The facts must not contradict each other, and "
            "they must determine exactly one person as the answer.\n"
            f"Example: {example} (answer Ann)"
        )

    def sample(self, rng: np.random.Generator) -> Task:
        size = int(rng.integers(self.min_people, self.max_people + 1))
        people = [NAMES[i] for i in rng.permutation(len(NAMES))[:size]]  # most first
        more = list(SCALES)[int(rng.integers(len(SCALES)))]
        less, top, bottom = SCALES[more]
        rank = int(rng.integers(1, min(self.max_rank, size) + 1))
        from_top = bool(rng.integers(2)) if self.ask_bottom else True
        answer = people[rank - 1] if from_top else people[-rank]
        pairs = list(zip(people, people[1:], strict=False))
        # dropping one link of the chain keeps the puzzle valid when the answer is still pinned
        drop = int(rng.integers(len(pairs)))
        graph = nx.DiGraph(pairs[:drop] + pairs[drop + 1 :])
        graph.add_nodes_from(people)
        if unique_at(graph, rank, from_top) == answer:
            pairs.pop(drop)
        facts = []
        for i in rng.permutation(len(pairs)):
            a, b = pairs[i]
            facts.append(
                f"{a} is {more} than {b}." if rng.integers(2) else f"{b} is {less} than {a}."
            )
        ordinal = {1: "", 2: "second ", 3: "third "}[rank]
        question = f"Who is the {ordinal}{top if from_top else bottom}?"
        return Task(self.name, " ".join([*facts, question]), answer)

    def parse(self, text: str) -> Task | None:
        parts = sentences(text)
        if parts is None or not 2 <= len(parts) <= MAX_FACTS + 1:
            return None
        question = _WHO.fullmatch(parts[-1])
        if question is None or question.group(2).casefold() not in _SUPERLATIVES:
            return None
        scale, from_top = _SUPERLATIVES[question.group(2).casefold()]
        rank = ORDINALS[(question.group(1) or "").casefold()]
        if rank > self.max_rank or not (from_top or self.ask_bottom):
            return None
        graph, lines = nx.DiGraph(), []
        for part in parts[:-1]:
            fact = _FACT.fullmatch(part)
            if fact is None:
                return None
            a, word, b = name_of(fact.group(1)), fact.group(2).casefold(), name_of(fact.group(3))
            if a is None or b is None or a == b or _COMPARATIVES.get(word, ("",))[0] != scale:
                return None
            graph.add_edge(*((a, b) if _COMPARATIVES[word][1] else (b, a)))
            lines.append(f"{a} is {word} than {b}.")
        if graph.number_of_nodes() > self.max_people or not nx.is_directed_acyclic_graph(graph):
            return None
        answer = unique_at(graph, rank, from_top)
        if answer is None:
            return None
        ordinal = (question.group(1) or "").casefold()
        lines.append(f"Who is the {ordinal}{question.group(2).casefold()}?")
        return Task(self.name, " ".join(lines), answer)

    def read_answer(self, text: str) -> str | None:
        word = " ".join(text.split()).rstrip(".!").strip()
        if not re.fullmatch(r"[A-Za-z]{1,20}", word):
            return None
        return word.capitalize()

    def candidates(self, task: Task) -> list[str]:
        return list(dict.fromkeys(n for n in re.findall(r"[A-Z][a-z]*", task.text) if n in NAMES))


FAMILIES: dict[str, Family] = {f.name: f for f in (Arithmetic(), Ordering())}
"""Every shipped family, by name, with the default knobs."""
KNOBS: dict[str, tuple[str, ...]] = {
    "arithmetic": ("max_steps", "ops", "max_start", "max_amount"),
    "ordering": ("max_people", "min_people", "max_rank", "ask_bottom"),
}
"""Each family's difficulty knobs (its constructor's keyword arguments)."""


def make_families(**knobs: Any) -> dict[str, Family]:
    """Every shipped family, by name, each built with the knobs of ``knobs`` that are its own
    (see :data:`KNOBS`); a knob no family has is a ``TypeError``."""
    unknown = set(knobs) - {k for names in KNOBS.values() for k in names}
    if unknown:
        raise TypeError(f"unknown family knob(s) {sorted(unknown)}; known: {KNOBS}")
    classes = {"arithmetic": Arithmetic, "ordering": Ordering}
    return {
        name: cls(**{k: v for k, v in knobs.items() if k in KNOBS[name]})
        for name, cls in classes.items()
    }
