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


@pytest.mark.parametrize(
    ("bets", "names", "refused"),
    [
        ("", ("pass", "bet"), "call"),
        ("p", ("pass", "bet"), "fold"),
        ("b", ("fold", "call"), "check"),
        ("pb", ("fold", "call"), "check"),
    ],
)
def test_each_decision_names_its_own_actions(bets: str, names: tuple, refused: str) -> None:
    """A bet and a call are different words (one OpenSpiel action, two decisions); the legal
    list shows the decision's names, and OpenSpiel's pass/bet are read facing a bet too."""
    env = deal((0, 1), bets)
    agent = env.agent_selection
    assert [env.action_to_text(agent, a) for a in (0, 1)] == list(names)
    assert f"Legal actions: {names[0]}, {names[1]}" in env.observe(agent)["text"]
    assert [env.parse_action(agent, n) for n in names] == [0, 1]
    assert [env.parse_action(agent, n) for n in ("pass", "BET")] == [0, 1]
    assert env.parse_action(agent, refused) is None


def test_the_betting_log_uses_each_decisions_names() -> None:
    env = deal((0, 1), "pb")
    assert "Betting so far: player_0 pass, player_1 bet." in env.observe("player_0")["text"]
    env.step_text("call")
    assert env.rewards == {"player_0": -2.0, "player_1": 2.0}
