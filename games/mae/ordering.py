"""The ``ordering`` family: comparisons on one scale ("Ann is taller than Bob. ... Who is the
tallest?"); the facts must be consistent (an acyclic graph) and must pin down the person asked
for. See :class:`Ordering`.
"""

from __future__ import annotations

import re

import networkx as nx
import numpy as np

from games.mae.family import NAMES, Family, Task, name_of, sentences

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
