"""Proposer, solver and judge.

Seats: proposer, then solver_0, solver_1, ... (2 solvers unless stated below), then judge; each
moves once, in that order.

- proposer: you are given a task family and its grammar. Write one new problem in that grammar.
  The game reads your problem and works out its true answer itself. A problem that breaks the
  grammar, leaves numbers out of range, or has no single answer is invalid: a reference problem
  of the family replaces it, and the solvers and the judge play on that one instead.
- solver: you see only the problem. Write your final answer alone: a whole number, or one
  person's name. You never see the other solvers' answers.
- judge: you see the problem and every solver's answer, never the true answer. Write one verdict
  per answer, in solver order, separated by spaces: 1 if it is correct, 0 if it is wrong (with
  two solvers, e.g. "1 0").

Rewards, given at the end: a solver gets 1 for a correct answer and 0 otherwise. The judge gets
the fraction of its verdicts that match the truth. The proposer gets 0.5 for a valid problem
plus 0.5 times the fraction of solvers who got it wrong (0 in all for an invalid problem), so a
valid problem that is hard to solve scores most.

Invalid output: a problem must end with its question (a '?'), an answer must be a number or a
single name, a judgement must hold exactly one 0 or 1 per solver. Anything else gets feedback
and another try. After the last try the seat forfeits its turn (reward -1) and play goes on: a
forfeited problem counts as invalid, a forfeited answer as wrong.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import networkx as nx
import numpy as np
from gymnasium import spaces

from games.mae.families import FAMILIES, KNOBS, Family, Task, make_families
from games.text import CHARSET, normalize
from games.text_env import TextGame

PROPOSAL_MAX_CHARS = 2000
"""Longer texts are not read as a problem at all (the seat is asked again)."""
REFERENCE = "reference"
"""The non-seat node that posts the reference problem when a proposal is invalid."""
_EXAMPLES = 3
"""Reference problems drawn per episode: the first is the fallback; all are the proposer's
sample actions (with one well-formed invalid problem)."""
ROLES = ("proposer", "solver", "judge")
"""The game's roles, as ``role_overrides`` names them."""
_WHOLE_VERDICTS = 4
"""Up to this many solvers, every verdict combination is a sample judge action."""


class ProposerSolverJudge(TextGame):
    """Multi-Agent Evolve's proposer/solver/judge loop over verifiable task families.

    ``num_solvers`` (k, 1..8) solver seats; ``family`` fixes the task family (a key of
    :data:`games.mae.families.FAMILIES`), otherwise each episode's seed picks one; ``w_valid``
    and ``w_difficulty`` weigh the proposer's reward. The turn limit is k + 2 (one move per seat).

    Difficulty knobs, each passed to the family that has it (defaults: the full families; see
    :data:`games.mae.families.KNOBS`): arithmetic's ``max_steps`` (1..6), ``ops`` (the step
    kinds allowed: add, bulk, sub, mul, half), ``max_start`` and ``max_amount`` (reference
    problems' start count and added N); ordering's ``max_people`` (2..6), ``min_people``
    (reference puzzles' least), ``max_rank`` (1: only 'Who is the tallest?'-style questions,
    2 adds 'second', 3 'third') and ``ask_bottom`` (False: no 'Who is the shortest?'-style
    questions). E.g. ``family="ordering", max_people=3, max_rank=1``.

    ``role_overrides`` maps a role (``proposer``, ``solver``, ``judge``) to role kwargs laid over
    the ones the game gives that role's seats, e.g. ``{"solver": {"example": "Jo"}}``: a run
    config's ``role_kwargs`` reach every seat of the game, these only one role's.

    Interaction graph: proposer -> solver_i and proposer -> judge carry ``question``; the
    non-seat node ``reference`` does the same for a replacement problem; solver_i -> judge
    carries ``answer``. Solvers ``never_see`` answers or scores, so no solver sees another's
    answer; the truth is never posted. An invalid proposal is posted as ``invalid_question``,
    which only the proposer sees.

    Infos: ``infos["proposer"]["proposal_valid"]`` after the proposal; each solver turn's
    ``group`` is ``f"mae:{seed}:{sha1(problem)[:12]}"``, shared by the k attempts; at the end
    each seat's ``infos[seat]["metrics"]`` holds its role's headline numbers (proposer:
    ``proposal_valid``, ``difficulty``; solver: ``solver_accuracy``; judge: ``judge_accuracy``) and
    every seat's ``infos[seat]["mae"]`` holds the episode's metrics: ``family``,
    ``proposal_valid``, ``task``, ``answer`` (the truth), ``solver_correct`` (list of bool),
    ``solver_accuracy``, ``verdicts`` (list or None), ``judge_accuracy`` and ``forfeits``.
    """

    metadata = {
        **TextGame.metadata,
        "name": "mae_v0",
        "seats": (3, 10),
        "kind": "general-sum",
        "information": "hidden",
        "max_turns": 4,
        "strongest_bot": "mae-oracle-v0",
        "pass_metrics": ("proposal_valid", "solver_accuracy"),
    }

    def __init__(
        self,
        num_solvers: int = 2,
        family: str | None = None,
        w_valid: float = 0.5,
        w_difficulty: float = 0.5,
        role_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        if family is not None and family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
        self.role_overrides = {r: dict(kw) for r, kw in (role_overrides or {}).items()}
        if not set(self.role_overrides) <= set(ROLES):
            raise ValueError(
                f"role_overrides takes roles {ROLES}, got {sorted(self.role_overrides)}"
            )
        knob_names = {k for names in KNOBS.values() for k in names}
        self.families = make_families(**{k: kwargs.pop(k) for k in knob_names & set(kwargs)})
        self.num_solvers = int(num_solvers)
        self.fixed_family = family
        self.w_valid, self.w_difficulty = float(w_valid), float(w_difficulty)
        self.solvers = [f"solver_{i}" for i in range(self.num_solvers)]
        box = spaces.Box(0.0, 1.0, (5,), np.float32)
        action_space = spaces.Text(PROPOSAL_MAX_CHARS, min_length=1, charset=CHARSET)
        super().__init__(
            self.num_solvers + 2,
            action_space,
            box,
            max_turns=self.num_solvers + 2,
            agents=["proposer", *self.solvers, "judge"],
            **kwargs,
        )
        self.family: Family = self.families[family or sorted(FAMILIES)[0]]
        self._seed: int | None = None

    # -- who sees what ---------------------------------------------------------------------------
    def interaction_graph(self) -> nx.DiGraph:
        k = self.num_solvers
        graph = nx.DiGraph()
        graph.add_node(
            "proposer",
            role="proposer-v0",
            role_kwargs={"what": "your problem (in the grammar given)"},
        )
        graph.add_node(REFERENCE)
        graph.add_node(
            "judge",
            role="judge-v0",
            role_kwargs={
                "job": "You are {seat}, the judge: decide whether each solver's answer is correct.",
                "what": f"{k} verdicts (1 correct, 0 wrong; one per answer, in solver order)",
                "example": " ".join("10"[i % 2] for i in range(k)),
            },
        )
        for solver in self.solvers:
            graph.add_node(
                solver,
                role="solver-v0",
                role_kwargs={"what": "your final answer alone (a number or a name)"},
                never_sees={"answer", "score"},
            )
            for source in ("proposer", REFERENCE):
                graph.add_edge(source, solver, sees=frozenset({"question"}))
            graph.add_edge(solver, "judge", sees=frozenset({"answer"}))
        graph.add_edge("proposer", "judge", sees=frozenset({"question"}))
        graph.add_edge(REFERENCE, "judge", sees=frozenset({"question"}))
        for seat in graph.nodes:
            role = "solver" if seat in self.solvers else seat
            if role in self.role_overrides:
                graph.nodes[seat]["role_kwargs"] = {
                    **graph.nodes[seat]["role_kwargs"],
                    **self.role_overrides[role],
                }
        return graph

    def rules(self, agent: str | None = None) -> str:
        settings = (
            f"This game: {self.num_solvers} solver(s) ({', '.join(self.solvers)}); the proposer "
            f"gets {self.w_valid:g} for a valid problem plus {self.w_difficulty:g} times the "
            f"fraction of solvers who got it wrong; a forfeit costs {self.forfeit_penalty:g}."
        )
        return f"{super().rules(agent)}\n\n{settings}"

    # -- the game --------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._seed = seed  # part of the solvers' group id
        super().reset(seed=seed, options=options)

    def _new_game(self, rng: np.random.Generator) -> None:
        names = sorted(FAMILIES)
        self.family = self.families[self.fixed_family or names[int(rng.integers(len(names)))]]
        examples = np.random.default_rng(int(rng.integers(2**63)))
        self.examples = [self.family.sample(examples) for _ in range(_EXAMPLES)]
        self.reference = self.examples[0]
        self.task: Task | None = None
        self.proposal_valid: bool | None = None
        self.group: str | None = None
        self.answers: dict[str, str | None] = {}
        self.verdicts: list[int] | None = None
        self.forfeits: list[str] = []
        self.settled = False

    def _current_agent(self) -> str:
        return self.possible_agents[min(self.turn, self.num_players - 1)]

    def _legal_actions(self, agent: str) -> list[str]:
        if agent == "proposer":
            # the reference problem's question alone is well formed but never valid
            lone_question = self.reference.text.rsplit(". ", 1)[-1]
            return [t.text for t in self.examples] + [normalize(lone_question)]
        if agent == "judge":
            k = self.num_solvers
            if k <= _WHOLE_VERDICTS:
                return [" ".join(format(i, f"0{k}b")) for i in range(2**k)]
            return [
                " ".join(["0"] * k),
                " ".join(["1"] * k),
                " ".join("10"[i % 2] for i in range(k)),
            ]
        return self.family.candidates(self.task) if self.task is not None else []

    def _is_legal(self, agent: str, action: str) -> bool:
        return True  # parse_action has accepted it: every well-formed text may be played

    def parse_action(self, agent: str, text: str) -> str | None:
        """The canonical action: a valid problem in the family's spelling, any other problem
        case-folded; an answer in the family's canonical form; verdicts as ``"1 0"``."""
        if not isinstance(text, str):
            return None
        if agent == "proposer":
            task = self.family.parse(text)
            if task is not None:
                return task.text
            flat = normalize(text)
            if len(flat) > PROPOSAL_MAX_CHARS or not re.search("[a-z]", flat):
                return None
            return flat if flat.endswith("?") else None
        if agent == "judge":
            marks = re.split(r"[\s,]+", text.strip())
            if len(marks) != self.num_solvers or any(m not in ("0", "1") for m in marks):
                return None
            return " ".join(marks)
        return self.family.read_answer(text)

    def _apply(self, agent: str, action: str) -> Mapping[str, float]:
        if agent == "proposer":
            task = self.family.parse(action)
            if task is None:
                self._post("proposer", "invalid_question", action)
            else:
                self._post("proposer", "question", task.text)
            self._set_task(task)
            return {}
        if agent == "judge":
            self._post("judge", "score", action)
            self.verdicts = [int(m) for m in action.split()]
            return self._settle()
        self._post(agent, "answer", action)
        self.answers[agent] = action
        self.infos[agent]["group"] = self.group
        return {}

    def _set_task(self, task: Task | None) -> None:
        """Play on ``task``, or on the reference problem (posted by ``reference``) when None."""
        self.proposal_valid = task is not None
        if task is None:
            task = self.reference
            self._post(REFERENCE, "question", task.text)
        self.task = task
        digest = hashlib.sha1(task.text.encode()).hexdigest()[:12]
        self.group = f"mae:{self._seed}:{digest}"
        self.infos["proposer"]["proposal_valid"] = self.proposal_valid

    def _reject(self, agent: str, reason: str) -> None:
        """Retries as usual; after the last one the seat forfeits its turn, not the episode: it
        gets ``-forfeit_penalty`` and the others play on (see the module docstring)."""
        if self._retries[agent] < self.max_retries:
            super()._reject(agent, reason)
            return
        info = self.infos[agent]
        info.update(
            invalid=True,
            invalid_reason=reason,
            retries=self._retries[agent] + 1,
            invalid_count=info["invalid_count"] + 1,
            forfeit=True,
            feedback="",
        )
        self._retries[agent], self._feedback[agent] = 0, ""
        self.forfeits.append(agent)
        rewards = {agent: -self.forfeit_penalty}
        if agent == "proposer":
            self._set_task(None)
        elif agent == "judge":
            for seat, reward in self._settle().items():
                rewards[seat] = rewards.get(seat, 0.0) + reward
        else:
            self.answers[agent] = None
            info["group"] = self.group
        self._add_rewards(rewards)
        self.turn += 1
        outcome = self._outcome()
        if outcome is not None:
            self._finish(outcome)
        else:
            self.agent_selection = self._current_agent()

    def _settle(self) -> dict[str, float]:
        """Every seat's reward, and the episode's metrics in every seat's infos."""
        assert self.task is not None
        correct = [
            self.answers.get(s) is not None and self.family.check(self.task, self.answers[s])
            for s in self.solvers
        ]
        accuracy = sum(correct) / len(correct)
        judged = 0.0
        if self.verdicts is not None:
            judged = sum(v == c for v, c in zip(self.verdicts, correct, strict=True)) / len(correct)
        proposer = (
            self.w_valid + self.w_difficulty * (1.0 - accuracy) if self.proposal_valid else 0.0
        )
        metrics = {
            "family": self.family.name,
            "proposal_valid": self.proposal_valid,
            "task": self.task.text,
            "answer": self.task.answer,
            "solver_correct": correct,
            "solver_accuracy": accuracy,
            "verdicts": self.verdicts,
            "judge_accuracy": judged,
            "forfeits": list(self.forfeits),
        }
        for agent in self.possible_agents:
            self.infos[agent]["mae"] = metrics
        # Each role's headline numbers, which role evaluation (arena/eval/roles.py) reads.
        self.infos["proposer"]["metrics"] = {
            "proposal_valid": float(self.proposal_valid),
            "difficulty": 1.0 - accuracy if self.proposal_valid else 0.0,
        }
        for solver, right in zip(self.solvers, correct, strict=True):
            self.infos[solver]["metrics"] = {"solver_accuracy": float(right)}
        self.infos["judge"]["metrics"] = {"judge_accuracy": judged}
        self.settled = True
        return {
            "proposer": proposer,
            **{s: float(c) for s, c in zip(self.solvers, correct, strict=True)},
            "judge": judged,
        }

    def _outcome(self) -> str | None:
        if not self.settled:
            return None
        return "illegal" if self.forfeits else "done"

    # -- what each seat reads --------------------------------------------------------------------
    def _observation_array(self, agent: str) -> np.ndarray:
        return np.array(
            [
                float(self.task is not None),
                float(bool(self.proposal_valid)),
                len(self.answers) / self.num_solvers,
                (self.max_turns - self.turn) / self.max_turns,
                sorted(FAMILIES).index(self.family.name) / max(len(FAMILIES) - 1, 1),
            ],
            dtype=np.float32,
        )

    def _describe(self, agent: str) -> str:
        family = self.family
        if agent == "proposer":
            if self.proposal_valid is False:
                return "Your problem was invalid; a reference problem replaced it."
            if self.task is not None:
                return "Your problem is in; the solvers and the judge play on."
            return (
                f"Task family: {family.name}.\n{family.describe()}\n"
                "Write one new problem in this grammar: valid, with a single answer, and hard "
                "for the solvers."
            )
        if self.task is None:
            return "Waiting for the proposer's problem."
        if agent == "judge":
            missing = [s for s in self.solvers if s in self.answers and self.answers[s] is None]
            lines = [
                f"Judge the answers of {', '.join(self.solvers)} to the problem above. Write "
                f"{self.num_solvers} verdicts in that order: 1 if correct, 0 if wrong."
            ]
            lines += [f"{s} gave no answer (it is wrong)." for s in missing]
            return "\n".join(lines)
        return f"Solve the problem above. Your answer: {family.answer_hint}, nothing else."
