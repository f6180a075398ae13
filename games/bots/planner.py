"""The scripted reference bot for Planner, executor and verifier: it plays every seat.

- planner: follows the task's reference solution, one step a round (``search`` for a look-up,
  ``calculator`` for arithmetic, both for a two-step task), then plans ``answer``;
- executor: calls the tool the planner chose with the reference argument (the expression or
  the query); for ``answer`` it gives the task's answer, or with probability ``error_rate`` a
  wrong one (a baseline of known accuracy, and wrong answers for tests);
- verifier: STOP once an answer has been given, CONTINUE before.

Like ``mae-oracle-v0`` it reads what no seat may see (the task's reference solution and answer):
a yardstick for evaluation and tests, never a partner to learn the game's secrets from.
"""

from __future__ import annotations

from games.bots.base import ErringBot, unsupported
from games.planner.actions import canonical_call, plan_text
from games.planner.game import PlannerExecutor
from games.text_env import TextGame


class ScriptedPlannerBot(ErringBot):
    """Plans the reference steps, executes them exactly, stops after the answer."""

    def act(self, env: TextGame, agent: str) -> str:
        if not isinstance(env, PlannerExecutor):
            raise unsupported(self, env, "Planner, executor and verifier")
        steps = env.task.steps
        if agent == "planner":
            # one reference step per round: the round number says how far the plan has got
            if env.rounds < len(steps):
                step = steps[env.rounds]
                return plan_text(step.subgoal, step.tool)
            return plan_text("give the final answer", "answer")
        if agent == "verifier":
            return "STOP" if env.final_answer is not None else "CONTINUE"
        tool = env.plan_tool or "answer"
        if tool == "answer":
            text = env.task.answer
            if self.errs():
                text = f"not {text}"
            return canonical_call({"name": "answer", "arguments": {"text": text}})
        mine = [s for s in steps if s.tool == tool]
        step = steps[env.rounds] if env.rounds < len(steps) else None
        if step is None or step.tool != tool:
            step = mine[0] if mine else None
        argument = step.argument if step is not None else env.task.text
        key = "expression" if tool == "calculator" else "query"
        return canonical_call({"name": tool, "arguments": {key: argument}})
