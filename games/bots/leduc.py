"""A CFR+ policy for Leduc hold'em, solved with OpenSpiel and cached on disk as JSON.

The first use of a given iteration count solves the game (about 1 s per 100 iterations on one
core) and stores the average policy, its exploitability, and the solver settings under
:func:`~games.bots.policy_cache.cache_dir`; later uses read the file.
Exploitability after 100 iterations is about 0.013 chips per hand; after 200, about 0.005.
"""

from __future__ import annotations

from typing import Any

from games.bots.policy_cache import cache_dir, load_json, save_json
from games.bots.tabular import PolicyTable, TabularPolicyBot
from games.optional import require

GAME = "leduc_poker"


def solve_leduc(iterations: int) -> dict[str, Any]:
    """Run CFR+ for ``iterations``; return the average policy table and its exploitability."""
    pyspiel = require("pyspiel", "openspiel")
    policy_module = require("open_spiel.python.policy", "openspiel")
    game = pyspiel.load_game(GAME)
    solver = pyspiel.CFRPlusSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()
    actions = range(game.num_distinct_actions())
    table = {}
    for state in policy_module.TabularPolicy(game).states:
        probs = average.action_probabilities(state)
        table[state.information_state_string()] = [float(probs.get(a, 0.0)) for a in actions]
    return {
        "game": GAME,
        "solver": "cfr+",
        "iterations": iterations,
        "exploitability": float(pyspiel.exploitability(game, average)),
        "policy": table,
    }


def leduc_policy(iterations: int = 200) -> dict[str, Any]:
    """The cached solution for ``iterations``, solving and caching it on first use."""
    path = cache_dir() / f"{GAME}-cfr_plus-{iterations}.json"
    solved = load_json(path)
    if not isinstance(solved, dict) or solved.get("iterations") != iterations:
        solved = solve_leduc(iterations)
        save_json(path, solved)
    return solved


class LeducCFRBot(TabularPolicyBot):
    """Plays the CFR+ average policy for Leduc hold'em."""

    game = GAME

    def __init__(self, iterations: int = 200, seed: int | None = None) -> None:
        solved = leduc_policy(iterations)
        self.exploitability = solved["exploitability"]
        table: PolicyTable = solved["policy"]
        super().__init__(table, seed)
