"""Kuhn poker: payoffs, hidden cards, and agreement with OpenSpiel's kuhn_poker.

Run with ``.venv/bin/python -m pytest -q tests/games/test_kuhn_poker.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from games.kuhn_poker import KuhnPoker


def deal(cards: tuple[int, int], bets: str = "") -> KuhnPoker:
    env = KuhnPoker()
    env.reset(seed=0)
    env.cards = cards
    env.history = list(cards)
    for move in bets:
        env.step_text({"p": "pass", "b": "bet"}[move])
    return env


@pytest.mark.parametrize(
    ("cards", "bets", "returns"),
    [
        ((2, 0), "pp", (1.0, -1.0)),  # showdown, K beats J
        ((0, 2), "pp", (-1.0, 1.0)),
        ((0, 1), "bp", (1.0, -1.0)),  # player_1 folds
        ((2, 1), "pbp", (-1.0, 1.0)),  # player_0 folds
        ((1, 2), "bb", (-2.0, 2.0)),  # called bet, Q loses to K
        ((1, 0), "pbb", (2.0, -2.0)),
    ],
)
def test_payoffs(cards: tuple[int, int], bets: str, returns: tuple[float, float]) -> None:
    env = deal(cards, bets)
    assert env.termination_reason == "win"
    assert (env.returns["player_0"], env.returns["player_1"]) == returns


def test_a_seat_sees_its_own_card_only() -> None:
    texts = {}
    for other in (0, 1):  # player_1 holds K; player_0's card varies
        env = deal((other, 2), "p")
        texts[other] = (env.observe("player_1")["text"], env.observe("player_1")["observation"])
        assert "[K]" in texts[other][0] and env.private_info("player_0") == [f"[{'JQ'[other]}]"]
    assert texts[0][0] == texts[1][0]
    assert np.array_equal(texts[0][1], texts[1][1])


def test_showdown_reveals_cards_at_the_end_only() -> None:
    env = deal((2, 0), "b")
    assert "[J]" not in env.observe("player_0")["text"]
    env.step_text("bet")
    assert "Showdown: player_0 [K], player_1 [J]." in env.observe("player_0")["text"]


def test_native_game_matches_openspiel() -> None:
    pytest.importorskip("pyspiel")
    env, rng = KuhnPoker(), np.random.default_rng(0)
    for seed in range(100):
        env.reset(seed=seed)
        while not env.is_over:
            state = env.openspiel_state()
            assert state.current_player() == env.agent_index(env.agent_selection)
            env.step(int(rng.choice(env.legal_actions())))
        assert env.openspiel_state().returns() == [env.returns["player_0"], env.returns["player_1"]]
