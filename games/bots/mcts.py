"""OpenSpiel's MCTS bot (UCT with random rollouts) for perfect-information games.

It plays any game that can hand out an OpenSpiel state: the OpenSpiel adapter, and the native
games that mirror an OpenSpiel game (Tic-Tac-Toe, Connect Four). Arena's action index is the
OpenSpiel action id in both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from games.bots.base import Bot, unsupported
from games.optional import require
from games.text_env import TextGame


class MCTSBot(Bot):
    """``open_spiel.python.algorithms.mcts.MCTSBot`` with a random-rollout evaluator."""

    def __init__(
        self,
        simulations: int = 200,
        rollouts: int = 1,
        uct_c: float = 2.0,
        solve: bool = True,
        seed: int | None = None,
    ) -> None:
        self.simulations, self.rollouts, self.uct_c, self.solve = (
            simulations,
            rollouts,
            uct_c,
            solve,
        )
        self._mcts = require("open_spiel.python.algorithms.mcts", "openspiel")
        super().__init__(seed)

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        # OpenSpiel's MCTS draws from a legacy RandomState; derive it from this bot's seed
        self._random_state = np.random.RandomState(int(self.rng.integers(2**31)))

    def act(self, env: TextGame, agent: str) -> Any:
        if not hasattr(env, "openspiel_state") or env.information != "perfect":
            raise unsupported(self, env, "a perfect-information game with an OpenSpiel state")
        state = env.openspiel_state()
        evaluator = self._mcts.RandomRolloutEvaluator(self.rollouts, self._random_state)
        bot = self._mcts.MCTSBot(
            state.get_game(),
            self.uct_c,
            self.simulations,
            evaluator,
            solve=self.solve,
            random_state=self._random_state,
        )
        return int(bot.step(state))
