"""Leduc hold'em: betting rules, showdowns, hidden cards, and agreement with OpenSpiel.

Run with ``.venv/bin/python -m pytest -q tests/games/test_leduc_holdem.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from games.leduc_holdem import CALL, FOLD, RAISE, LeducHoldem


def deal(cards: tuple[int, int], public: int, moves: list[str]) -> LeducHoldem:
    env = LeducHoldem()
    env.reset(seed=0)
    env.cards, env._next_public, env.history = cards, public, list(cards)
    for move in moves:
        env.step_text(move)
        assert not any(i["invalid"] for i in env.infos.values()), env.infos
    return env


def test_fold_is_only_legal_when_owing() -> None:
    env = deal((0, 2), 4, [])
    assert env.legal_actions() == [CALL, RAISE]
    env.step(FOLD)
    assert env.infos["player_0"]["invalid"]
    env.step(RAISE)
    assert env.legal_actions() == [FOLD, CALL, RAISE]
    env.step(RAISE)
    assert env.legal_actions() == [FOLD, CALL]  # two raises per round at most


def test_a_pair_beats_a_higher_card() -> None:
    # player_0 holds Js, player_1 Ks, the public card is Jh: player_0 pairs
    env = deal((0, 4), 1, ["raise", "call", "raise", "call"])
    assert env.termination_reason == "win"
    assert env.returns == {"player_0": 7.0, "player_1": -7.0}  # ante 1 + 2 + 4 each


def test_higher_card_wins_without_a_pair_and_equal_ranks_split() -> None:
    env = deal((2, 4), 1, ["call", "call", "call", "call"])  # Qs vs Ks, public Jh
    assert env.returns == {"player_0": -1.0, "player_1": 1.0}
    env = deal((2, 3), 0, ["call", "call", "call", "call"])  # Qs vs Qh, public Js
    assert env.termination_reason == "draw" and env.returns == {"player_0": 0.0, "player_1": 0.0}


def test_folding_loses_what_was_put_in() -> None:
    env = deal((0, 4), 1, ["raise", "raise", "fold"])
    assert env.returns == {"player_0": -3.0, "player_1": 3.0}
    assert "player_0 folded." in env.observe("player_1")["text"]


def test_opponent_card_stays_hidden_until_showdown() -> None:
    views = [deal((other, 4), 1, ["call", "call"]).observe("player_1") for other in (0, 2, 3)]
    assert len({v["text"] for v in views}) == 1
    assert all(np.array_equal(v["observation"], views[0]["observation"]) for v in views)
    assert "Public card: [Jh]" in views[0]["text"] and "Your card: [Ks]" in views[0]["text"]


def test_a_forfeit_shows_no_showdown() -> None:
    # the last view of a forfeited hand said "Showdown: player_0 [Js], player_1 [Ks]."
    env = deal((0, 4), 1, [])
    for _ in range(env.max_retries + 1):
        env.step_text("check")
    assert env.termination_reason == "illegal"
    text = env.observe("player_1")["text"]
    assert "Showdown" not in text and "[Js]" not in text
    shown = deal((0, 4), 1, ["call", "call", "call", "call"]).observe("player_1")["text"]
    assert "Showdown: player_0 [Js], player_1 [Ks]." in shown


def test_native_game_matches_openspiel() -> None:
    pytest.importorskip("pyspiel")
    env, rng = LeducHoldem(), np.random.default_rng(0)
    for seed in range(200):
        env.reset(seed=seed)
        while not env.is_over:
            state = env.openspiel_state()
            assert state.current_player() == env.agent_index(env.agent_selection)
            assert state.legal_actions() == env.legal_actions()
            env.step(int(rng.choice(env.legal_actions())))
        assert env.openspiel_state().returns() == [env.returns["player_0"], env.returns["player_1"]]
