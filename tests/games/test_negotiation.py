"""Simple Negotiation: strict free-text parsing, every genuine offer legal, deals and no deals.

Run with ``.venv/bin/python -m pytest -q tests/games/test_negotiation.py``.
"""

from __future__ import annotations

import pytest

from games.negotiation import POOL_VALUE, Negotiation


@pytest.fixture
def env() -> Negotiation:
    env = Negotiation()
    env.reset(seed=3)
    env.pool = (2, 1, 3)
    env.values = [(2, 3, 1), (0, 4, 2)]
    return env


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("offer books=1 hats=0 balls=2", "offer books=1 hats=0 balls=2"),
        ("  OFFER  balls = 2, books=1,hats=0 ", "offer books=1 hats=0 balls=2"),
        ("offer: books=2 hats=1 balls=3", "offer books=2 hats=1 balls=3"),
        ("Accept", "accept"),
        (" reject\n", "reject"),
        ("offer books=3 hats=0 balls=0", None),  # more books than the pool holds
        ("offer books=1 hats=0", None),  # a kind is missing
        ("offer books=1 books=1 balls=0", None),  # a kind twice
        ("offer books=1 hats=0 balls=1 please", None),
        ("offer books=-1 hats=0 balls=1", None),
        ("I accept", None),
        ("offer pens=1 hats=0 balls=1", None),
        ("", None),
    ],
)
def test_parsing_is_strict(env: Negotiation, text: str, parsed: str | None) -> None:
    assert env.parse_action("player_0", text) == parsed


def test_every_genuine_offer_is_legal_at_every_turn(env: Negotiation) -> None:
    offers = [a for a in env.legal_actions("player_0") if a.startswith("offer")]
    assert len(offers) == 3 * 2 * 4
    for turn in range(3):
        agent = env.agent_selection
        for offer in offers:
            assert env._is_legal(agent, offer)
        env.step(offers[turn])
        assert not env.infos[agent]["invalid"]


def test_accepting_splits_the_pool_by_the_offer(env: Negotiation) -> None:
    env.step_text("offer books=2 hats=0 balls=1")  # player_0 keeps 2 books and a ball
    env.step_text("accept")
    assert env.termination_reason == "agreement"
    assert env.returns == {
        "player_0": (2 * 2 + 1) / POOL_VALUE,
        "player_1": (4 + 2 * 2) / POOL_VALUE,
    }


def test_accept_and_reject_need_an_opponents_offer(env: Negotiation) -> None:
    env.step_text("accept")
    assert (
        env.infos["player_0"]["invalid_reason"] == "there is no offer from your opponent to accept"
    )
    env.step_text("offer books=1 hats=1 balls=1")
    env.step_text("offer books=1 hats=0 balls=2")  # a counter-offer replaces the first
    env.step_text("reject")
    assert env.termination_reason == "no_deal"
    assert env.returns == {"player_0": 0.0, "player_1": 0.0}


def test_values_are_private(env: Negotiation) -> None:
    env.step_text("offer books=1 hats=0 balls=1")
    assert "book=2 hat=3 ball=1" in env.observe("player_0")["text"]
    assert "book=2 hat=3 ball=1" not in env.observe("player_1")["text"]
    assert "worth 8 to you" in env.observe("player_1")["text"]  # 1 book, 1 hat, 2 balls


def test_no_agreement_within_the_turn_limit() -> None:
    env = Negotiation(max_turns=4)
    env.reset(seed=0)
    for _ in range(4):
        env.step_text("offer books=0 hats=0 balls=0")
    assert env.termination_reason == "max_turns" and all(env.truncations.values())
    assert env.returns == {"player_0": 0.0, "player_1": 0.0}


def test_every_pool_is_worth_ten_to_both_with_different_values() -> None:
    env = Negotiation()
    for seed in range(50):
        env.reset(seed=seed)
        worth = [sum(n * v for n, v in zip(env.pool, vals, strict=True)) for vals in env.values]
        assert worth == [POOL_VALUE, POOL_VALUE] and env.values[0] != env.values[1]
