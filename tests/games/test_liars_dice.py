"""Liar's Dice for 2 to 6 players: bids, challenges, zero-sum rewards, hidden dice.

Run with ``.venv/bin/python -m pytest -q tests/games/test_liars_dice.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from games.liars_dice import LiarsDice


def game(num_players: int, dice: list[list[int]]) -> LiarsDice:
    env = LiarsDice(num_players=num_players)
    env.reset(seed=0)
    env.dice = [list(d) for d in dice]
    return env


@pytest.mark.parametrize("num_players", [3, 4, 5, 6])
def test_a_true_bid_makes_the_challenger_lose(num_players: int) -> None:
    env = game(num_players, [[5, 5]] + [[1, 2]] * (num_players - 1))
    env.step_text("bid 1 5s")
    env.step_text("bid 2 5s")  # player_1 bids exactly what is on the table
    env.step_text("liar")  # player_2 challenges a true bid
    share = 1 / (num_players - 1)
    expected = {a: share for a in env.possible_agents} | {"player_2": -1.0}
    assert env.returns == pytest.approx(expected)
    assert sum(env.returns.values()) == pytest.approx(0.0)


@pytest.mark.parametrize("num_players", [3, 4, 5, 6])
def test_a_false_bid_makes_the_bidder_lose(num_players: int) -> None:
    env = game(num_players, [[1, 1]] * num_players)
    for i in range(num_players - 1):
        env.step_text(f"bid {i + 1} 6s")  # no sixes anywhere
    env.step_text("liar")
    loser = f"player_{num_players - 2}"
    assert env.returns[loser] == -1.0 and env.termination_reason == "win"
    assert all(
        r == pytest.approx(1 / (num_players - 1)) for a, r in env.returns.items() if a != loser
    )


def test_bids_must_rise_and_the_first_turn_cannot_challenge() -> None:
    env = game(3, [[1, 2], [3, 4], [5, 6]])
    assert env.liar not in env.legal_actions()
    env.step_text("liar")
    assert env.infos["player_0"]["invalid_reason"] == "there is no bid to challenge yet"
    env.step_text("bid 2 4s")
    env.step_text("bid 2 3s")
    assert env.infos["player_1"]["invalid_reason"] == "a bid must be higher than bid 2 4s"
    env.step_text("bid 2 5s")
    assert env.agent_selection == "player_2"


def test_the_highest_bid_must_be_challenged() -> None:
    env = game(2, [[1, 2], [3, 4]])
    env.step_text("bid 4 6s")
    assert env.legal_actions() == [env.liar]


@pytest.mark.parametrize("num_players", [2, 3, 4, 5, 6])
def test_turns_rotate_through_every_seat(num_players: int) -> None:
    env = LiarsDice(num_players=num_players)
    env.reset(seed=0)
    seen = []
    for bid in range(2 * num_players):
        seen.append(env.agent_selection)
        env.step(bid)
    assert seen == env.possible_agents * 2


def test_dice_are_hidden_until_the_challenge() -> None:
    views = [game(4, [[1, 2], other, [3, 3], [4, 5]]) for other in ([6, 6], [2, 5])]
    for env in views:
        env.step_text("bid 1 3s")
    texts = [env.observe("player_0")["text"] for env in views]
    assert texts[0] == texts[1] and "Your dice: [1 2]" in texts[0]
    assert np.array_equal(
        views[0].observe("player_2")["observation"], views[1].observe("player_2")["observation"]
    )
    views[0].step_text("liar")
    assert "player_1 had [6 6]" in views[0].observe("player_0")["text"]


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"dice_per_player": "2"}, "dice_per_player must be a whole number >= 1, got '2'"),
        ({"dice_per_player": 2.5}, "dice_per_player must be a whole number >= 1, got 2.5"),
        ({"dice_per_player": 6}, "dice_per_player must be between 1 and 5, got 6"),
        ({"num_players": "3"}, "num_players must be a whole number >= 2, got '3'"),
    ],
)
def test_counts_that_are_not_whole_numbers_are_refused_naming_them(
    kwargs: dict[str, object], said: str
) -> None:
    # each failed deep inside with a TypeError that named no argument
    with pytest.raises(ValueError) as err:
        LiarsDice(**kwargs)
    assert str(err.value) == said
