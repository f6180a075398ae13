"""The oracle bot for Proposer, solver and judge: it plays every seat from the truth.

- proposer: samples a reference problem of the episode's family and writes its text (always
  valid);
- solver: answers the true answer, or with probability ``error_rate`` a wrong one (a baseline
  of known accuracy, and wrong answers for tests);
- judge: the ground-truth judge, scoring each answer against the truth.

Unlike the other reference bots it reads what no seat may see (the game's task and its answer):
it is a yardstick for evaluation and tests, never an opponent to learn the game's secrets from.
"""

from __future__ import annotations

from games.bots.base import ErringBot, unsupported
from games.mae.game import ProposerSolverJudge
from games.text_env import TextGame


class MAEOracleBot(ErringBot):
    """Valid proposals, true answers (but for ``error_rate``), truthful verdicts."""

    def act(self, env: TextGame, agent: str) -> str:
        if not isinstance(env, ProposerSolverJudge):
            raise unsupported(self, env, "Proposer, solver and judge")
        if agent == "proposer":
            return env.family.sample(self.rng).text
        task = env.task
        if agent == "judge":
            return " ".join(
                str(int(env.answers.get(s) is not None and env.family.check(task, env.answers[s])))
                for s in env.solvers
            )
        if self.errs():
            return self.wrong_answer(env)
        return task.answer

    @staticmethod
    def wrong_answer(env: ProposerSolverJudge) -> str:
        """A well-formed answer that is not the truth: another name from the problem, or the
        true number plus one."""
        task = env.task
        others = [c for c in env.family.candidates(task) if not env.family.check(task, c)]
        if task.answer.lstrip("-").isdigit():
            return str(int(task.answer) + 1)
        return others[0]
