"""The ``arithmetic`` family: a counting story ("Ann has 12 apples. Ann buys 5 more. ... How many
apples does Ann have?"); every count stays a whole number in 0..1000. See :class:`Arithmetic`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

import numpy as np

from games.mae.family import NAMES, Family, Task, name_of, sentences

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
