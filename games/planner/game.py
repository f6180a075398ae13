"""Planner, executor and verifier.

Seats: planner, executor, verifier. They play in rounds, in that order, and win or lose
together. Every seat is shown the task.

Each round:

1. planner: choose the next subgoal and the one tool that carries it out: "calculator"
   (evaluates an arithmetic expression exactly), "search" (searches a collection of short
   documents, one per person, city, country, company or river) or "answer" (gives the final
   answer). Write <subgoal>...</subgoal> then <tool>calculator|search|answer</tool>.
2. executor: you see the planner's subgoal and tool. Call that tool, once, as JSON:
   {"name": "calculator", "arguments": {"expression": "4837 * 29 - 1120"}},
   {"name": "search", "arguments": {"query": "In which city was Velmora Tashkin born?"}} or
   {"name": "answer", "arguments": {"text": "Karvos"}}. The tool's output, or its error
   message, is shown to all three seats.
3. verifier: you see the executor's calls and the tools' outputs. Write STOP when the task
   is solved (the final answer has been given), or CONTINUE for another round.

Who sees what: the planner sees the task, its own plans, the tools' outputs and the verdicts
(not the executor's calls); the executor sees the task, the plans, its own calls and the tools'
outputs (not the verdicts); the verifier sees the task, the executor's calls, the tools' outputs
and its own verdicts (not the plans).

The episode ends at STOP, or after the last round. The final answer is the last one given
through the answer tool; if none was given it is empty, and wrong.

Rewards, at the end: 1 if the final answer is correct, else 0 (case, spacing, a final full stop
and thousands separators do not matter). The planner gets it; by default the executor and the
verifier get the same.

Invalid output: a plan without both tags, or with a tool other than calculator, search and
answer; a call that is not a JSON object with a "name"; a verdict other than STOP or CONTINUE:
each gets feedback and another try, and after the last try the seat forfeits: the episode ends,
that seat gets -1 and the others 0. A call that fails (an unknown tool, wrong arguments, a tool
other than the one the planner chose, a calculator error) is no forfeit: its error message is
the tool's output, and play goes on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np
from gymnasium import spaces

from games.formats import SUBGOAL_TOOL
from games.planner.actions import ACTION_MAX_CHARS, canonical_call, plan_text, read_action
from games.planner.calculator import CalculatorError, evaluate
from games.planner.tasks import KINDS, Task, TaskSampler, check_answer
from games.search.corpus import DEFAULT_ENTITIES
from games.search.retrieval import format_results
from games.text import CHARSET
from games.text_env import TextGame
from games.tools import Tool, Toolbox, ToolError, ToolResult, call_json

SEATS = ("planner", "executor", "verifier")
TOOLS = ("calculator", "search", "answer")
TASK = "task"
"""The non-seat node that posts the task, which every seat sees."""
TOOLS_NODE = "tools"
"""The non-seat node that posts each call's output (``tool_result``)."""
SUBGOAL_MAX_CHARS = 500
REWARD_MODES = ("outcome", "zero")


class PlannerExecutor(TextGame):
    """AgentFlow's planner -> executor -> verifier loop over tool-use tasks (see the module
    docstring for the rules the seats read).

    ``max_rounds`` rounds at most (the turn limit is 3 per round); ``kinds`` the task kinds of
    :mod:`games.planner.tasks`; ``corpus_seed``/``n_entities`` the search corpus (one per game,
    shared by every episode); ``search_k`` documents per search; ``executor_reward`` and
    ``verifier_reward``: ``"outcome"`` (the planner's outcome, the default) or ``"zero"`` (0
    always: for a seat that is frozen or filled by a bot and not trained); ``tasks``: a fixed
    list of :class:`~games.planner.tasks.Task` to draw from instead of generating them (a
    benchmark; the corpus still backs the search tool).

    The planner's return is the episode outcome (1 correct, 0 wrong), given once at the end, so
    the runner's ``final_rewards["planner"]`` is the outcome that the learner's ``broadcast``
    advantage mode gives every planner turn (Flow-GRPO). Every seat's turns carry
    ``infos[seat]["group"] = "planner:<sha1 of the task>"``, so ``broadcast`` normalizes over
    the episodes of one task.

    Endings: ``done`` at STOP; ``max_turns`` (a truncation) when the last round ends with
    CONTINUE, scored on the last answer given; ``illegal`` on a forfeit.

    Infos: ``tool_error`` on every executor turn (``""`` when the call succeeded); at the end,
    every seat's ``metrics`` (``{"correct": 0.0 or 1.0}``, what role evaluation reads), ``correct`` (bool), ``rounds`` (completed rounds), ``tool_errors`` (failed
    calls), ``final_answer`` (``""`` when none) and ``task_kind``.
    """

    metadata = {
        **TextGame.metadata,
        "name": "planner_executor_v0",
        "seats": (3, 3),
        "kind": "cooperative",
        "information": "hidden",
        "max_turns": 15,
        "strongest_bot": "planner-scripted-v0",
        "pass_metrics": ("correct",),
    }

    def __init__(
        self,
        max_rounds: int = 5,
        kinds: Sequence[str] = KINDS,
        corpus_seed: int = 0,
        n_entities: int = DEFAULT_ENTITIES,
        search_k: int = 3,
        executor_reward: str = "outcome",
        verifier_reward: str = "outcome",
        tasks: Sequence[Task] | None = None,
        **kwargs: Any,
    ) -> None:
        if "max_turns" in kwargs:
            raise TypeError("PlannerExecutor sets max_turns from max_rounds (3 turns a round)")
        if max_rounds < 1 or search_k < 1:
            raise ValueError("max_rounds and search_k must be >= 1")
        for mode in (executor_reward, verifier_reward):
            if mode not in REWARD_MODES:
                raise ValueError(f"seat rewards are one of {REWARD_MODES}, got {mode!r}")
        self.max_rounds, self.search_k = int(max_rounds), int(search_k)
        self.reward_modes = {"executor": executor_reward, "verifier": verifier_reward}
        self.sampler = TaskSampler(kinds, corpus_seed, n_entities, tasks)
        box = spaces.Box(0.0, 1.0, (3 + len(KINDS),), np.float32)
        action_space = spaces.Text(ACTION_MAX_CHARS, min_length=1, charset=CHARSET)
        super().__init__(
            len(SEATS), action_space, box, max_turns=3 * self.max_rounds, agents=SEATS, **kwargs
        )
        self.toolbox = Toolbox(
            [
                Tool(
                    "calculator",
                    "Evaluate an arithmetic expression exactly: numbers, + - * / // % ** and "
                    "parentheses.",
                    {"expression": str},
                    _calculate,
                ),
                Tool(
                    "search",
                    f"Search the documents; returns the {self.search_k} best matches.",
                    {"query": str},
                    self._search,
                ),
                Tool("answer", "Give the final answer to the task.", {"text": str}, _answer),
            ]
        )

    # -- who sees what ---------------------------------------------------------------------------
    def interaction_graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_node(
            "planner",
            role="planner-v0",
            role_kwargs={
                "what": "the next subgoal and one tool for it (calculator, search or answer)",
                "example": plan_text("compute 4837 * 29 - 1120", "calculator"),
            },
        )
        graph.add_node(
            "executor",
            role="executor-v0",
            role_kwargs={
                "what": "one call of the tool the planner chose",
                "example": call_json("calculator", expression="4837 * 29 - 1120"),
            },
        )
        graph.add_node(
            "verifier",
            role="verifier-v0",
            role_kwargs={"what": "STOP once the final answer is given, else CONTINUE"},
        )
        graph.add_node(TASK)
        graph.add_node(TOOLS_NODE)
        graph.add_edge("planner", "executor", sees=frozenset({"subgoal", "tool"}))
        graph.add_edge("executor", "verifier", sees=frozenset({"tool_call"}))
        graph.add_edge("verifier", "planner", sees=frozenset({"verdict"}))
        for seat in SEATS:
            graph.add_edge(TASK, seat, sees=frozenset({"task"}))
            graph.add_edge(TOOLS_NODE, seat, sees=frozenset({"tool_result"}))
        return graph

    def rules(self, agent: str | None = None) -> str:
        others = "; ".join(
            f"the {seat} gets {'the same reward' if mode == 'outcome' else '0 always'}"
            for seat, mode in self.reward_modes.items()
        )
        settings = f"This game: at most {self.max_rounds} rounds; {others}."
        return f"{super().rules(agent)}\n\n{settings}"

    # -- the game --------------------------------------------------------------------------------
    def _new_game(self, rng: np.random.Generator) -> None:
        self.task = self.sampler.sample(rng)
        self.plan_tool: str | None = None
        self.final_answer: str | None = None
        self.rounds = 0
        self.tool_errors = 0
        self.stopped = False
        self.correct = False
        digest = hashlib.sha1(f"{self.task.kind}|{self.task.text}".encode()).hexdigest()[:12]
        self.group = f"planner:{digest}"
        for agent in self.possible_agents:
            self.infos[agent]["group"] = self.group
        self.infos["executor"]["tool_error"] = ""
        self._post(TASK, "task", self.task.text)

    def _current_agent(self) -> str:
        return SEATS[self.turn % len(SEATS)]

    def _legal_actions(self, agent: str) -> list[str]:
        """Sample well-formed actions (the reference steps among them), for random play."""
        steps = self.task.steps
        if agent == "planner":
            plans = [plan_text(s.subgoal, s.tool) for s in steps]
            return [*plans, plan_text("give the final answer", "answer")]
        if agent == "verifier":
            return ["STOP", "CONTINUE"]
        tool = self.plan_tool or "answer"
        calls = [{"name": tool, "arguments": self._sample_arguments(tool, i)} for i in range(2)]
        calls.append({"name": "browser", "arguments": {"url": "example.com"}})  # no such tool
        return list(dict.fromkeys(canonical_call(c) for c in calls))

    def _sample_arguments(self, tool: str, i: int) -> dict[str, str]:
        if tool == "answer":
            return {"text": (self.task.answer, "i do not know")[i]}
        mine = [s.argument for s in self.task.steps if s.tool == tool]
        if tool == "calculator":
            return {"expression": (mine[0] if mine else "2 + 2", "1 / 0")[i]}
        return {"query": (mine[0] if mine else self.task.text, "unknown")[i]}

    def parse_action(self, agent: str, text: str) -> str | None:
        """The canonical action, or None when ``text`` is malformed
        (:func:`~games.planner.actions.read_action`)."""
        return read_action(agent, text)

    def _is_legal(self, agent: str, action: str) -> bool:
        if agent != "planner":
            return True  # every readable call or verdict is played
        fields = SUBGOAL_TOOL.fields(action)
        return fields["tool"] in TOOLS and len(fields["subgoal"]) <= SUBGOAL_MAX_CHARS

    def _why_illegal(self, agent: str, action: str) -> str:
        fields = SUBGOAL_TOOL.fields(action)
        if fields["tool"] not in TOOLS:
            return f"the tool must be one of {', '.join(TOOLS)}, not {fields['tool']!r}"
        return f"the subgoal is longer than {SUBGOAL_MAX_CHARS} characters"

    def _apply(self, agent: str, action: str) -> Mapping[str, float]:
        if agent == "planner":
            fields = SUBGOAL_TOOL.fields(action)
            self.plan_tool = fields["tool"]
            self._post("planner", "subgoal", fields["subgoal"])
            self._post("planner", "tool", fields["tool"])
            return {}
        if agent == "executor":
            self._execute(action)
            return {}
        self._post("verifier", "verdict", action)
        self.rounds += 1
        self.stopped = action == "STOP"
        if self.stopped or self.rounds >= self.max_rounds:
            return self._settle()
        return {}

    def _execute(self, action: str) -> None:
        """Run the executor's call; a failure is the tool's output, never a forfeit."""
        name = json.loads(action)["name"]
        if name in self.toolbox.tools and name != self.plan_tool:
            error = (
                f"the planner chose the {self.plan_tool} tool: call {self.plan_tool}, not {name}"
            )
            result = ToolResult(False, "", error, name)
        else:
            result = self.toolbox.call(action)
        if result.ok and result.name == "answer":
            self.final_answer = result.arguments["text"]
        self.tool_errors += not result.ok
        self.infos["executor"]["tool_error"] = result.error
        self._post("executor", "tool_call", action)
        self._post(TOOLS_NODE, "tool_result", result.text)

    def _search(self, query: str) -> str:
        return format_results(self.sampler.retriever.search(query, k=self.search_k))

    def _settle(self) -> dict[str, float]:
        self.correct = check_answer(self.task, self.final_answer)
        outcome = float(self.correct)
        rewards = {"planner": outcome}
        for seat, mode in self.reward_modes.items():
            rewards[seat] = outcome if mode == "outcome" else 0.0
        return rewards

    def _outcome(self) -> str | None:
        # at the round limit without STOP, the base class ends the game as ``max_turns``
        return "done" if self.stopped else None

    def _reject(self, agent: str, reason: str) -> None:
        """Retries as usual; the last failed try forfeits the episode with ``-forfeit_penalty``
        for the seat and 0 for the others (a cooperative game: nobody gains from it)."""
        if self._retries[agent] < self.max_retries:
            super()._reject(agent, reason)
            return
        self._retries[agent] += 1
        info = self.infos[agent]
        info.update(
            invalid=True,
            invalid_reason=reason,
            retries=self._retries[agent],
            invalid_count=info["invalid_count"] + 1,
            forfeit=True,
        )
        self._add_rewards({agent: -self.forfeit_penalty})
        self._finish("illegal")

    def _finish(self, reason: str, truncated: bool = False) -> None:
        super()._finish(reason, truncated)
        for agent in self.agents:
            self.infos[agent].update(
                correct=self.correct,
                rounds=self.rounds,
                tool_errors=self.tool_errors,
                final_answer=self.final_answer or "",
                task_kind=self.task.kind,
                # the headline number role evaluation reads (arena/eval/roles.py)
                metrics={"correct": float(self.correct)},
            )

    # -- what each seat reads --------------------------------------------------------------------
    def _observation_array(self, agent: str) -> np.ndarray:
        kind = [float(self.task.kind == k) for k in KINDS]
        return np.array(
            [
                self.rounds / self.max_rounds,
                float(self.final_answer is not None),
                min(1.0, self.tool_errors / self.max_rounds),
                *kind,
            ],
            dtype=np.float32,
        )

    def _describe(self, agent: str) -> str:
        if self.is_over:
            given = self.final_answer if self.final_answer is not None else "(none)"
            verdict = "correct" if self.correct else "wrong"
            return f"Final answer: {given} ({verdict})."
        head = f"Round {min(self.rounds + 1, self.max_rounds)} of {self.max_rounds}."
        if agent != self.agent_selection:
            return head
        if agent == "planner":
            return (
                f"{head} Plan the next step toward solving the task: a subgoal and one tool "
                f"({', '.join(TOOLS)})."
            )
        if agent == "executor":
            return (
                f"{head} Carry out the planner's subgoal with one call of the {self.plan_tool} "
                f"tool. Tools:\n{self.toolbox.describe()}"
            )
        # short on purpose: a plan's text (which the verifier may not see) that happened to
        # appear in this line would read as a leak to the episode runner
        return f"{head} STOP or CONTINUE?"


def _calculate(expression: str) -> str:
    try:
        return evaluate(expression)
    except CalculatorError as err:
        raise ToolError(str(err)) from None


def _answer(text: str) -> str:
    return f"answer recorded: {text}"


__all__ = ["SEATS", "TOOLS", "PlannerExecutor"]
