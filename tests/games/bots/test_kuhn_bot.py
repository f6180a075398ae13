"""The Kuhn poker equilibrium family: exploitability 0 and value -1/18, checked with OpenSpiel.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_kuhn_bot.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyspiel")

import pyspiel  # noqa: E402
from open_spiel.python import policy as policy_lib  # noqa: E402
from open_spiel.python.algorithms import exploitability  # noqa: E402
from open_spiel.python.algorithms.expected_game_score import (  # noqa: E402
    policy_value,
)

import games  # noqa: E402
from games.bots.kuhn import KuhnNashBot, kuhn_nash_policy  # noqa: E402


def as_tabular_policy(alpha: float) -> policy_lib.TabularPolicy:
    game = pyspiel.load_game("kuhn_poker")
    tabular = policy_lib.TabularPolicy(game)
    table = kuhn_nash_policy(alpha)
    assert set(table) == set(tabular.state_lookup)  # every information state is covered
    for state, probs in table.items():
        tabular.action_probability_array[tabular.state_lookup[state]] = probs
    return tabular


@pytest.mark.parametrize("alpha", [0.0, 1 / 6, 1 / 3])
def test_nash_policies_are_unexploitable(alpha: float) -> None:
    game = pyspiel.load_game("kuhn_poker")
    tabular = as_tabular_policy(alpha)
    assert exploitability.exploitability(game, tabular) == pytest.approx(0.0, abs=1e-9)
    value = policy_value(game.new_initial_state(), [tabular, tabular])
    assert value[0] == pytest.approx(-1 / 18)


def test_a_perturbed_policy_is_exploitable() -> None:
    game = pyspiel.load_game("kuhn_poker")
    tabular = as_tabular_policy(0.0)
    tabular.action_probability_array[tabular.state_lookup["1b"]] = [0.0, 1.0]  # Q always calls
    assert exploitability.exploitability(game, tabular) > 0.01


def test_alpha_outside_the_family_is_refused() -> None:
    with pytest.raises(ValueError):
        kuhn_nash_policy(0.5)


@pytest.mark.parametrize("game_id", ["kuhn-poker-v0", "openspiel-kuhn_poker-v0"])
def test_the_bot_follows_the_table(game_id: str) -> None:
    env, bets, kings = games.make(game_id), 0, 0
    for seed in range(600):
        env.reset(seed=seed)
        if env.openspiel_state().information_state_string(0) != "2":  # player_0 holds the K
            continue
        kings += 1
        # a bot seed unrelated to the deal's seed, so the two draws are independent
        bets += KuhnNashBot(alpha=1 / 6, seed=10_000 + seed).act(env, "player_0") == 1
    assert kings > 150
    assert bets / kings == pytest.approx(0.5, abs=0.1)  # a K is bet with 3 * alpha


def test_the_bot_wins_against_random_on_average() -> None:
    env = games.make("kuhn-poker-v0")
    rng_bot = np.random.default_rng(0)
    total = 0.0
    for seed in range(2000):
        env.reset(seed=seed)
        bot = KuhnNashBot(seed=seed)
        while not env.is_over:
            agent = env.agent_selection
            action = bot.act(env, agent) if agent == "player_1" else int(rng_bot.integers(2))
            env.step(action)
        total += env.returns["player_1"]
    assert total / 2000 > 0.1
