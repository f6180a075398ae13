"""Tit-for-tat for the Iterated Prisoner's Dilemma: cooperate first, then repeat the opponent's
previous move. It won Axelrod's tournaments and is the standard reference opponent."""

from __future__ import annotations

from games.bots.base import Bot, unsupported
from games.prisoners_dilemma import COOPERATE, PrisonersDilemma
from games.text_env import TextGame


class TitForTatBot(Bot):
    """Cooperates, then mirrors the opponent's last completed move."""

    def act(self, env: TextGame, agent: str) -> int:
        if not isinstance(env, PrisonersDilemma):
            raise unsupported(self, env, "the Iterated Prisoner's Dilemma")
        if not env.history:
            return COOPERATE
        return env.history[-1][1 - env.agent_index(agent)]
