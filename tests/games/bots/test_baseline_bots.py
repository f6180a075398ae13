"""Rule-based baselines: tit-for-tat, Mini Hanabi rules, Liar's Dice expectations.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_baseline_bots.py``.
"""

from __future__ import annotations

import numpy as np

import games
from games.bots.hanabi import HanabiRulesBot
from games.bots.liars_dice import LiarsDiceBot
from games.bots.negotiation import ConcedingNegotiator
from games.bots.random_bot import RandomBot
from games.bots.tit_for_tat import TitForTatBot
from games.play import play_game


def test_tit_for_tat_copies_the_last_move() -> None:
    env, bot = games.make("prisoners-dilemma-v0", rounds=4), TitForTatBot()
    env.reset(seed=0)
    moves = []
    for opponent in ("defect", "cooperate", "defect", "defect"):
        moves.append(env.action_to_text("player_1", bot.act(env, "player_1")))
        env.step_text(opponent)
        env.step_text(moves[-1])
    # env order: player_0 is the scripted opponent, player_1 the bot
    assert moves == ["cooperate", "defect", "cooperate", "defect"]


def test_hanabi_rules_bot_scores_far_above_random() -> None:
    env = games.make("mini-hanabi-v0")

    def mean_score(bot_cls: type) -> float:
        return float(
            np.mean(
                [
                    play_game(
                        env,
                        {a: bot_cls(seed=s + i) for i, a in enumerate(env.possible_agents)},
                        seed=s,
                    ).returns["player_0"]
                    for s in range(60)
                ]
            )
        )

    assert mean_score(HanabiRulesBot) > mean_score(RandomBot) + 0.2


def test_liars_dice_bot_beats_random_players() -> None:
    env = games.make("liars-dice-v0", num_players=4)
    total = 0.0
    for seed in range(200):
        seats = {a: RandomBot(seed=seed * 10 + i) for i, a in enumerate(env.possible_agents)}
        mine = env.possible_agents[seed % 4]
        seats[mine] = LiarsDiceBot(seed=seed)
        total += play_game(env, seats, seed=seed).returns[mine]
    assert total / 200 > 0.2


def test_conceding_negotiators_reach_deals_and_beat_random_offers() -> None:
    env = games.make("negotiation-v0")
    deals, edge = 0, 0.0
    for seed in range(40):
        pair = {a: ConcedingNegotiator(seed=seed + i) for i, a in enumerate(env.possible_agents)}
        outcome = play_game(env, pair, seed=seed)
        deals += outcome.termination_reason == "agreement"
        mixed = {"player_0": ConcedingNegotiator(seed=seed), "player_1": RandomBot(seed=seed + 99)}
        result = play_game(env, mixed, seed=seed).returns
        edge += result["player_0"] - result["player_1"]
    assert deals >= 30
    assert edge / 40 > 0.1
