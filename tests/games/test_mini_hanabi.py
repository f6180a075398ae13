"""Mini Hanabi: plays, misplays, hints, the end of the deck, and hands hidden from their owner.

Run with ``.venv/bin/python -m pytest -q tests/games/test_mini_hanabi.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from games.mini_hanabi import MAX_SCORE, MiniHanabi

R, G = 0, 1


def setup(hands: list[list[tuple[int, int]]], deck: list[tuple[int, int]]) -> MiniHanabi:
    env = MiniHanabi()
    env.reset(seed=0)
    env.hands = [list(h) for h in hands]
    env.deck = list(deck)  # drawn from the end
    return env


def test_a_correct_play_builds_the_firework() -> None:
    env = setup([[(R, 1), (G, 2)], [(G, 1), (R, 3)]], [(R, 2), (G, 3)])
    env.step_text("play 1")
    assert env.fireworks == [1, 0] and env.lives == 2
    assert env.hands[0] == [(G, 2), (G, 3)]  # the new card fills the last slot


def test_a_misplay_costs_a_life_and_the_last_life_ends_the_game_at_zero() -> None:
    env = setup([[(R, 2), (G, 2)], [(G, 3), (R, 3)]], [(R, 1), (G, 1), (R, 1)])
    env.step_text("play 1")
    assert env.lives == 1 and env.discards == [(R, 2)]
    env.step_text("play 1")
    assert env.termination_reason == "out_of_lives"
    assert env.returns == {"player_0": 0.0, "player_1": 0.0}


def test_hints_tell_the_partner_and_spend_a_token() -> None:
    env = setup([[(R, 1), (G, 2)], [(G, 1), (R, 3)]], [(R, 2)])
    assert "hint 2" not in [env.action_to_text("player_0", a) for a in env.legal_actions()]
    env.step_text("hint green")
    assert env.tokens == 2 and env.knowledge[1] == [[G, None], [None, None]]
    assert "slot 1: green ?" in env.observe("player_1")["text"]
    env.step_text("hint 1")  # player_0 holds R1 in slot 1
    assert env.knowledge[0][0] == [None, 1]


def test_discarding_needs_a_spent_token_and_returns_it() -> None:
    env = setup([[(R, 1), (G, 2)], [(G, 1), (R, 3)]], [(R, 2), (G, 3)])
    env.step_text("discard 1")
    assert env.infos["player_0"]["invalid"]
    env.step_text("hint 1")
    env.step_text("discard 2")
    assert env.tokens == 3 and env.discards == [(R, 3)]


def test_one_more_turn_each_after_the_deck_runs_out() -> None:
    env = setup([[(R, 1), (G, 1)], [(R, 2), (G, 2)]], [(R, 3)])
    env.step_text("play 1")  # R1 played, the last card drawn
    assert env.final_turns == 2 and not env.is_over
    env.step_text("play 1")  # R2
    env.step_text("play 2")  # R3
    assert env.termination_reason == "deck_exhausted"
    assert env.returns == {"player_0": 3 / MAX_SCORE, "player_1": 3 / MAX_SCORE}


def test_a_player_never_sees_its_own_hand() -> None:
    views = []
    for own in ([(R, 1), (G, 3)], [(G, 2), (R, 2)]):
        env = setup([own, [(G, 1), (R, 3)]], [(R, 2)])
        views.append(env.observe("player_0"))
        assert "player_0's hand" in env.observe("player_1")["text"]
    assert views[0]["text"] == views[1]["text"]
    assert np.array_equal(views[0]["observation"], views[1]["observation"])


@pytest.mark.parametrize("seed", range(5))
def test_rewards_are_shared(seed: int) -> None:
    env, rng = MiniHanabi(), np.random.default_rng(seed)
    env.reset(seed=seed)
    while not env.is_over:
        env.step(int(rng.choice(env.legal_actions())))
    assert env.returns["player_0"] == env.returns["player_1"]
