"""Returns and advantages against numbers worked out by hand (the arithmetic is in comments).

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_advantages.py``.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from synthetic import bandit_episode, episode, make_config, turn

from trainers.advantages import (
    EMABaseline,
    agent_of,
    compute_advantages,
    discounted_returns,
    normalize_by_key,
    stats_by_key,
    whiten,
)
from trainers.batch import episode_samples
from trainers.config import AdvantageConfig
from trainers.inbox import Inbox
from trainers.learner import Learner
from trainers.microbatch import collate


def three_turn_two_seat(roles: dict[str, str] | None = None):
    """Seats a and b alternate a0 b0 a1 b1 a2 b2; a wins (+1 on its last turn), b loses (-1)."""
    roles = roles or {"a": "player", "b": "player"}
    rewards = {4: 1.0, 5: -1.0}
    turns = [
        turn("e", k, "ab"[k % 2], role=roles["ab"[k % 2]], reward=rewards.get(k, 0.0))
        for k in range(6)
    ]
    return episode("e", turns, roles=roles, final_rewards={"a": 1.0, "b": -1.0})


def test_discounted_returns_by_hand() -> None:
    # rewards [0, 0.5, 1], gamma 0.9: G2 = 1; G1 = 0.5 + 0.9 * 1 = 1.4; G0 = 0 + 0.9 * 1.4 = 1.26
    assert discounted_returns([0.0, 0.5, 1.0], 0.9) == pytest.approx([1.26, 1.4, 1.0])
    # gamma 1: plain suffix sums [3, 2, 1] -> [6, 3, 1]
    assert discounted_returns([3.0, 2.0, 1.0], 1.0) == pytest.approx([6.0, 3.0, 1.0])
    assert len(discounted_returns([], 0.9)) == 0


def test_three_turn_two_seat_game_returns_per_seat() -> None:
    # Each seat discounts over its own turns only (gamma per turn of that seat):
    # a: rewards [0, 0, 1] -> G = [0.9^2, 0.9, 1] = [0.81, 0.9, 1.0]
    # b: rewards [0, 0, -1] -> G = [-0.81, -0.9, -1.0]
    samples = episode_samples(three_turn_two_seat(), gamma=0.9)
    by_turn = {s.turn_index: s.ret for s in samples}
    assert by_turn == pytest.approx({0: 0.81, 2: 0.9, 4: 1.0, 1: -0.81, 3: -0.9, 5: -1.0})


def test_batch_mode_pooled_and_per_role() -> None:
    # One key (g, player) for all six: mean 0, var = 2 * (0.81^2 + 0.9^2 + 1) / 6
    #   = 2 * (0.6561 + 0.81 + 1) / 6 = 0.8220333, std = 0.9066605
    #   A = G / (0.9066605 + 1e-6): 0.81 -> 0.893388, 0.9 -> 0.992653, 1 -> 1.102948
    samples = episode_samples(three_turn_two_seat(), gamma=0.9)
    keys = [(s.game, s.role) for s in samples]
    adv = compute_advantages("batch", [s.ret for s in samples], [0.0] * 6, keys, [""] * 6)
    got = {s.turn_index: a for s, a in zip(samples, adv, strict=True)}
    assert got == pytest.approx(
        {0: 0.893388, 2: 0.992653, 4: 1.102948, 1: -0.893388, 3: -0.992653, 5: -1.102948}, abs=1e-5
    )
    # Keyed by role (a attacks, b defends), each role normalizes alone:
    # attacker [0.81, 0.9, 1]: mean 0.9033333, deviations [-0.0933333, -0.0033333, 0.0966667],
    #   var = (0.00871111 + 0.00001111 + 0.00934444) / 3 = 0.00602222, std = 0.0776030
    #   A = [-1.202702, -0.042953, 1.245655]; the defender's values are the mirror image.
    samples = episode_samples(three_turn_two_seat({"a": "attacker", "b": "defender"}), gamma=0.9)
    keys = [(s.game, s.role) for s in samples]
    adv = compute_advantages("batch", [s.ret for s in samples], [0.0] * 6, keys, [""] * 6)
    got = {s.turn_index: a for s, a in zip(samples, adv, strict=True)}
    assert got == pytest.approx(
        {0: -1.202702, 2: -0.042953, 4: 1.245655, 1: 1.202702, 3: 0.042953, 5: -1.245655}, abs=1e-4
    )


def test_three_player_game() -> None:
    # N = 3 seats, one turn each, gamma 1; the winner gets +2, the others -1 (zero-sum).
    # Key (g, player): values [2, -1, -1], mean 0, var = (4 + 1 + 1) / 3 = 2, std = sqrt 2
    #   A = [2 / 1.414214, -1 / 1.414214, -1 / 1.414214] = [1.414213, -0.707107, -0.707107]
    turns = [turn("n3", i, f"p{i}", reward=r) for i, r in enumerate([2.0, -1.0, -1.0])]
    samples = episode_samples(episode("n3", turns), gamma=1.0)
    keys = [(s.game, s.role) for s in samples]
    adv = compute_advantages("batch", [s.ret for s in samples], [0.0] * 3, keys, [""] * 3)
    assert adv == pytest.approx([1.414213, -0.707107, -0.707107], abs=1e-5)


def test_broadcast_three_players_uses_final_outcome_on_every_turn() -> None:
    # Each of 3 seats plays 2 turns; turn rewards carry shaping (0.1 on the first turn) but
    # broadcast reads final_rewards: p0 = +2, p1 = p2 = -1, on both of their turns.
    # One group: values [2, 2, -1, -1, -1, -1], mean 0, var = (4 + 4 + 1 * 4) / 6 = 2
    #   A = [1.414213, 1.414213, -0.707107 x 4]
    final = {"p0": 2.0, "p1": -1.0, "p2": -1.0}
    turns = []
    for k in range(2):
        for i in range(3):
            reward = final[f"p{i}"] if k == 1 else 0.1
            turns.append(turn("b3", 3 * k + i, f"p{i}", reward=reward, group="q"))
    samples = episode_samples(episode("b3", turns, final_rewards=final), gamma=1.0)
    keys = [(s.game, s.role) for s in samples]
    adv = compute_advantages(
        "broadcast",
        [s.ret for s in samples],
        [s.outcome for s in samples],
        keys,
        [s.group for s in samples],
    )
    expected = {"p0": 1.414213, "p1": -0.707107, "p2": -0.707107}
    for s, a in zip(samples, adv, strict=True):
        assert a == pytest.approx(expected[s.seat], abs=1e-5)
    # A seat missing from final_rewards falls back to the sum of its turn rewards (0.1 + 2).
    samples = episode_samples(episode("b3", turns, final_rewards={}), gamma=1.0)
    assert samples[0].outcome == pytest.approx(2.1)


def test_group_mode_grpo() -> None:
    # Group q1 (same prompt, 4 answers): [1, 0, 0, 1], mean 0.5, std 0.5 -> [1, -1, -1, 1]
    #   (with eps 1e-6: 0.5 / 0.500001 = 0.999998)
    # Group q2 [1, 1]: zero variance -> exactly [0, 0]. Group q3 [5]: one sample -> 0.
    returns = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 5.0]
    groups = ["q1"] * 4 + ["q2"] * 2 + ["q3"]
    keys = [("g", "solver")] * 7
    adv = compute_advantages("group", returns, [0.0] * 7, keys, groups)
    assert adv[:4] == pytest.approx([1, -1, -1, 1], abs=1e-5)
    assert list(adv[4:]) == [0.0, 0.0, 0.0]
    # The same prompt group id under two roles stays two groups: proposer [2, 4] -> [-1, 1].
    adv = compute_advantages(
        "group",
        [2.0, 4.0, 7.0],
        [0.0] * 3,
        [("g", "proposer"), ("g", "proposer"), ("g", "solver")],
        ["q"] * 3,
    )
    assert adv == pytest.approx([-1.0, 1.0, 0.0], abs=1e-5)


def test_single_sample_and_zero_variance_keys_are_exactly_zero() -> None:
    values = [0.1, 0.1, 0.1, 7.0]  # 0.1 three times: a float mean could leave 1e-17 noise
    keys = [("a",)] * 3 + [("b",)]
    out = normalize_by_key(values, keys)
    assert list(out) == [0.0, 0.0, 0.0, 0.0]
    assert not np.any(np.isnan(out))
    # Without the std division, A = G - mean: [1, 3] -> [-1, 1]
    assert normalize_by_key([1.0, 3.0], [("k",)] * 2, scale_by_std=False) == pytest.approx(
        [-1.0, 1.0]
    )


def five_turn_episode(eid: str = "e5"):
    """Seats player_0 and player_1 alternate five turns each; player_0 wins (+1, -1 for
    player_1), the outcome on each seat's last turn."""
    rewards = {8: 1.0, 9: -1.0}
    turns = [turn(eid, k, f"player_{k % 2}", reward=rewards.get(k, 0.0)) for k in range(10)]
    return episode(eid, turns, final_rewards={"player_0": 1.0, "player_1": -1.0})


def ema_inputs(samples):
    """What the learner passes: default keys, (episode, seat) trajectories and their G_1."""
    keys = [s.key(AdvantageConfig().key) for s in samples]
    return {
        "returns": [s.ret for s in samples],
        "outcomes": [s.outcome for s in samples],
        "keys": keys,
        "groups": [s.group for s in samples],
        "trajectories": [(s.episode_id, s.seat) for s in samples],
        "trajectory_returns": [s.traj_return for s in samples],
    }


def test_ema_moves_once_per_trajectory() -> None:
    # SPIRAL's RAE, alpha 0.95, gamma 1, b starts at 0. player_0's five turns all have G = 1,
    # player_1's G = -1. Each trajectory reads its baseline once: A = 1 - 0 = 1 on all five of
    # player_0's turns, A = -1 - 0 = -1 on player_1's; then one update each:
    #   b_(g, player_0) = 0.95 * 0 + 0.05 * 1 = 0.05     (not 1 - 0.95^5 = 0.226 per turn)
    #   b_(g, player_1) = 0.95 * 0 + 0.05 * (-1) = -0.05
    samples = episode_samples(five_turn_episode(), gamma=1.0)
    ema = EMABaseline(alpha=0.95)
    assert [s.seat for s in samples].count("player_0") == 5 and len(samples) == 10
    adv = compute_advantages("ema", **ema_inputs(samples), ema=ema)
    expected = {"player_0": 1.0, "player_1": -1.0}
    assert list(adv) == pytest.approx([expected[s.seat] for s in samples])
    assert ema.baselines == pytest.approx({("g", "player_0"): 0.05, ("g", "player_1"): -0.05})
    # The next episode reads those: A = 1 - 0.05 = 0.95 for the winner, -1 + 0.05 = -0.95 for
    # the loser; then b_0 = 0.95 * 0.05 + 0.05 * 1 = 0.0975, b_1 = -0.0975.
    samples = episode_samples(five_turn_episode("e6"), gamma=1.0)
    adv = compute_advantages("ema", **ema_inputs(samples), ema=ema)
    assert list(adv) == pytest.approx([0.95 if s.seat == "player_0" else -0.95 for s in samples])
    assert ema.baselines == pytest.approx({("g", "player_0"): 0.0975, ("g", "player_1"): -0.0975})


def test_ema_turn_moves_once_per_turn() -> None:
    # The per-turn variant on the same trajectory, alpha 0.95, b0 = 0, G = 1 on all five turns:
    #   A_k = 1 - b_(k-1) with b_k = 1 - 0.95^k:
    #   A = [1, 0.95, 0.9025, 0.857375, 0.81450625], b_5 = 1 - 0.7737809375 = 0.2262190625
    samples = episode_samples(five_turn_episode(), gamma=1.0)
    ema = EMABaseline(alpha=0.95)
    adv = compute_advantages("ema-turn", **ema_inputs(samples), ema=ema)
    winner = [a for s, a in zip(samples, adv, strict=True) if s.seat == "player_0"]
    assert winner == pytest.approx([1.0, 0.95, 0.9025, 0.857375, 0.81450625])
    assert ema.baselines[("g", "player_0")] == pytest.approx(0.2262190625)
    assert ema.baselines[("g", "player_1")] == pytest.approx(-0.2262190625)


def test_ema_turn_reads_the_baseline_before_updating_it() -> None:
    # The old per-turn numbers. alpha 0.5, key x, returns 1, 3, 2 in order; b starts at 0:
    #   A1 = 1 - 0 = 1,       then b = 0.5 * 0 + 0.5 * 1 = 0.5
    #   A2 = 3 - 0.5 = 2.5,   then b = 0.5 * 0.5 + 0.5 * 3 = 1.75
    #   A3 = 2 - 1.75 = 0.25, then b = 0.5 * 1.75 + 0.5 * 2 = 1.875
    # (Updating first would give A1 = 1 - 0.5 = 0.5.) Key y is independent: A = 4 - 0 = 4.
    ema = EMABaseline(alpha=0.5)
    adv = compute_advantages(
        "ema-turn",
        [1.0, 4.0, 3.0, 2.0],
        [0.0] * 4,
        [("x",), ("y",), ("x",), ("x",)],
        [""] * 4,
        ema=ema,
    )
    assert adv == pytest.approx([1.0, 4.0, 2.5, 0.25])
    assert ema.baselines == pytest.approx({("x",): 1.875, ("y",): 2.0})
    # The baseline carries over to the next batch: A = 3 - 1.875 = 1.125.
    assert ema.turn_advantages([3.0], [("x",)]) == pytest.approx([1.125])


def test_ema_trajectories_update_in_batch_order() -> None:
    # alpha 0.5, b0 = 0. Samples in batch order: (t1, x, G 2), (t2, x, G 4), (t1, x, G 1),
    # (t3, y, G -2). t1 comes first (R = its first sample's G = 2): A = [2 - 0, 1 - 0] = [2, 1],
    #   then b_x = 0.5 * 0 + 0.5 * 2 = 1.
    # t2 reads what t1 left: A = 4 - 1 = 3, then b_x = 0.5 * 1 + 0.5 * 4 = 2.5.
    # t3 is another key: A = -2 - 0 = -2, then b_y = -1.
    ema = EMABaseline(alpha=0.5)
    adv = ema.advantages(
        [2.0, 4.0, 1.0, -2.0], [("x",), ("x",), ("x",), ("y",)], ["t1", "t2", "t1", "t3"]
    )
    assert list(adv) == pytest.approx([2.0, 3.0, 1.0, -2.0])
    assert ema.baselines == pytest.approx({("x",): 2.5, ("y",): -1.0})
    # Swapping t1 and t2 changes the numbers: t2 first gives A = 4, b_x = 2; then t1: A = [0, -1].
    swapped = EMABaseline(alpha=0.5)
    adv = swapped.advantages([4.0, 2.0, 1.0], [("x",)] * 3, ["t2", "t1", "t1"])
    assert list(adv) == pytest.approx([4.0, 0.0, -1.0])
    assert swapped.baselines[("x",)] == pytest.approx(0.5 * 2.0 + 0.5 * 2.0)
    # The baseline carries over to the next batch: A = 3 - 2.5 = 0.5.
    assert ema.advantages([3.0], [("x",)], ["t4"]) == pytest.approx([0.5])


def test_ema_updates_with_the_trajectory_return_g1() -> None:
    # gamma 0.9, one seat with rewards [0, 0, 1]: G = [0.81, 0.9, 1]. Its first turn is not
    # trained, so the samples are turns 1 and 2 (G 0.9 and 1), but R = G_1 = 0.81.
    # alpha 0.5, b0 = 0: A = [0.9, 1.0]; b = 0.5 * 0 + 0.5 * 0.81 = 0.405 (0.45 if the first
    # sample's G stood in for R).
    turns = [
        turn("t", 0, "player_0", trained=False),
        turn("t", 1, "player_0"),
        turn("t", 2, "player_0", reward=1.0),
    ]
    samples = episode_samples(episode("t", turns), gamma=0.9)
    assert [s.ret for s in samples] == pytest.approx([0.9, 1.0])
    assert [s.traj_return for s in samples] == pytest.approx([0.81, 0.81])
    ema = EMABaseline(alpha=0.5)
    adv = compute_advantages("ema", **ema_inputs(samples), ema=ema)
    assert list(adv) == pytest.approx([0.9, 1.0])
    assert ema.baselines == pytest.approx({("g", "player_0"): 0.405})
    # Without trajectory returns (None), the trajectory's first sample's G stands in: 0.45.
    ema = EMABaseline(alpha=0.5)
    ema.advantages([0.9, 1.0], [("k",)] * 2, ["t", "t"], [None, None])
    assert ema.baselines == pytest.approx({("k",): 0.45})


def test_ema_state_dict_round_trip() -> None:
    # What the learner checkpoints goes through JSON: tuple keys become lists and back.
    ema = EMABaseline(alpha=0.95)
    compute_advantages("ema", **ema_inputs(episode_samples(five_turn_episode(), 1.0)), ema=ema)
    restored = EMABaseline(alpha=0.5)
    restored.load_state_dict(json.loads(json.dumps(ema.state_dict())))
    assert restored.alpha == 0.95
    assert restored.baselines == ema.baselines  # exactly: JSON keeps every bit of a float
    assert restored.baselines == pytest.approx({("g", "player_0"): 0.05, ("g", "player_1"): -0.05})
    # Both continue alike: A = 1 - 0.05 = 0.95.
    assert restored.advantages([1.0], [("g", "player_0")], ["n"]) == pytest.approx([0.95])


def test_whiten() -> None:
    # [1, 2, 3]: mean 2, std sqrt(2/3) = 0.816497 -> [-1.224743, 0, 1.224743] (eps 1e-6)
    assert whiten([1.0, 2.0, 3.0]) == pytest.approx([-1.224743, 0.0, 1.224743], abs=1e-5)
    assert list(whiten([4.0, 4.0])) == [4.0, 4.0]
    adv = compute_advantages(
        "group",
        [1.0, 3.0, 10.0, 30.0],
        [0.0] * 4,
        [("k",)] * 4,
        ["a", "a", "b", "b"],
        whiten_all=True,
    )
    # group-normalized [-1, 1, -1, 1] already has mean 0 and std 1
    assert adv == pytest.approx([-1.0, 1.0, -1.0, 1.0], abs=1e-5)


def test_turn_advantage_applies_to_every_generated_token() -> None:
    samples = episode_samples(three_turn_two_seat(), gamma=0.9)
    samples[0].advantage, samples[1].advantage = 0.5, -2.0
    samples[0].response_ids = np.array([4, 5, 6], dtype=np.int32)
    samples[0].sampler_logprobs = np.full(3, -1.0, dtype=np.float32)
    mb = collate(samples[:2], pad_id=0)
    assert mb.advantages.tolist() == [0.5, 0.5, 0.5, -2.0, -2.0]


def test_unknown_mode_and_missing_ema() -> None:
    with pytest.raises(ValueError):
        compute_advantages("nope", [1.0], [1.0], [("k",)], [""])
    for mode in ("ema", "ema-turn"):
        with pytest.raises(ValueError):
            compute_advantages(mode, [1.0], [1.0], [("k",)], [""])
    with pytest.raises(ValueError, match="trajectory"):  # ema without trajectory ids
        compute_advantages("ema", [1.0], [1.0], [("k",)], [""], ema=EMABaseline(0.9))
    assert math.isfinite(float(compute_advantages("batch", [1.0], [1.0], [("k",)], [""])[0]))


def test_config_key_and_modes() -> None:
    assert AdvantageConfig().key == ["game", "agent"]
    assert AdvantageConfig(mode="ema-turn").mode == "ema-turn"
    assert AdvantageConfig(key=["game", "role", "seat", "group", "agent"]).key[-1] == "agent"
    for key in (["game", "player"], []):
        with pytest.raises(ValueError):
            AdvantageConfig(key=key)
    with pytest.raises(ValueError):
        AdvantageConfig(mode="ema_turn")


def test_agent_rule() -> None:
    assert agent_of("player", "player_1") == "player_1"  # self-play: the seat
    assert agent_of("solver", "solver_1") == "solver"  # role game: the role
    assert agent_of("proposer", "proposer_0") == "proposer"


def test_default_key_separates_self_play_seats() -> None:
    # Two self-play episodes, gamma 1, each seat plays two turns, the outcome on its last turn:
    #   e1: player_0 wins (+1), player_1 loses (-1); e2: a draw (0, 0). G = outcome on all turns.
    # Default key (game, agent) = (g, player_0) and (g, player_1):
    #   player_0: [1, 1, 0, 0], mean 0.5, std 0.5 -> A = +-0.5 / 0.500001 = +-0.999998
    #   player_1: [-1, -1, 0, 0], mean -0.5, std 0.5 -> e1: -0.999998, e2 (the draw): +0.999998
    # Pooled by (game, role), the draw would be 0 for both seats (mean 0 over all eight).
    episodes = []
    for eid, outcome in (("e1", 1.0), ("e2", 0.0)):
        rewards = {2: outcome, 3: -outcome}
        turns = [turn(eid, k, f"player_{k % 2}", reward=rewards.get(k, 0.0)) for k in range(4)]
        episodes.append(episode(eid, turns))
    samples = [s for ep in episodes for s in episode_samples(ep, gamma=1.0)]
    keys = [s.key(AdvantageConfig().key) for s in samples]
    assert sorted(set(keys)) == [("g", "player_0"), ("g", "player_1")]
    returns = [s.ret for s in samples]
    adv = compute_advantages("batch", returns, [0.0] * 8, keys, [""] * 8)
    a = 0.5 / (0.5 + 1e-6)
    expected = {("e1", "player_0"): a, ("e2", "player_0"): -a, ("e1", "player_1"): -a}
    expected[("e2", "player_1")] = a
    for s, got in zip(samples, adv, strict=True):
        assert got == pytest.approx(expected[(s.episode_id, s.seat)], abs=1e-9)
    means = stats_by_key(returns, keys)
    assert means[("g", "player_0")]["mean"] == 0.5 and means[("g", "player_1")]["mean"] == -0.5
    pooled = compute_advantages(
        "batch", returns, [0.0] * 8, [s.key(["game", "role"]) for s in samples], [""] * 8
    )
    assert [p for s, p in zip(samples, pooled, strict=True) if s.episode_id == "e2"] == [0.0] * 4


def test_default_key_pools_solver_seats_in_a_role_game() -> None:
    # One proposer and two solvers, one turn each, gamma 1: proposer 0.5, solver_0 1, solver_1 0.
    # Default keys: (g, proposer), (g, solver), (g, solver).
    #   proposer alone -> 0; solvers [1, 0]: mean 0.5, std 0.5 -> [0.999998, -0.999998]
    roles = {"proposer_0": "proposer", "solver_0": "solver", "solver_1": "solver"}
    turns = [
        turn("r", i, seat, role=roles[seat], reward=r)
        for i, (seat, r) in enumerate([("proposer_0", 0.5), ("solver_0", 1.0), ("solver_1", 0.0)])
    ]
    samples = episode_samples(episode("r", turns, roles=roles), gamma=1.0)
    keys = [s.key(AdvantageConfig().key) for s in samples]
    assert keys == [("g", "proposer"), ("g", "solver"), ("g", "solver")]
    adv = compute_advantages("batch", [s.ret for s in samples], [0.0] * 3, keys, [""] * 3)
    a = 0.5 / (0.5 + 1e-6)
    assert list(adv) == pytest.approx([0.0, a, -a], abs=1e-9)
    assert adv[0] == 0.0


def test_seat_without_trained_turns_yields_no_samples() -> None:
    # Seat b's turns are all untrained (trained=False on a trained seat): only a's turns come out.
    turns = [turn("u", k, "ab"[k % 2], trained=k % 2 == 0, reward=1.0) for k in range(4)]
    samples = episode_samples(episode("u", turns), gamma=1.0)
    assert [(s.seat, s.turn_index) for s in samples] == [("a", 0), ("a", 2)]
    # No trained turn at all: no samples; the inbox accepts the episode and counts it.
    turns = [turn("v", k, "ab"[k % 2], trained=False) for k in range(4)]
    assert episode_samples(episode("v", turns), gamma=1.0) == []
    counters: Counter[str] = Counter()
    inbox = Inbox(1.0, counters)
    assert inbox.add(episode("v", turns)) and len(inbox) == 0
    assert counters["episodes_without_trained_turns"] == 1


def test_single_sample_key_is_zero_and_counted() -> None:
    # Key (g, lone) has one sample: A = 0 exactly, not NaN; it still shows in the statistics.
    keys = [("g", "a"), ("g", "a"), ("g", "lone")]
    for mode in ("batch", "group", "broadcast"):
        adv = compute_advantages(mode, [1.0, 3.0, 5.0], [1.0, 3.0, 5.0], keys, ["q"] * 3)
        assert adv[2] == 0.0 and not np.any(np.isnan(adv))
    stats = stats_by_key(adv, keys)
    assert stats[("g", "lone")] == {"mean": 0.0, "std": 0.0, "min": 0.0, "max": 0.0, "count": 1.0}
    assert list(compute_advantages("batch", [2.0], [0.0], [("k",)], [""], whiten_all=True)) == [0.0]


def test_the_prompt_key_gives_each_prompt_its_own_baseline() -> None:
    """Key ``prompt``: turns that saw the same prompt share a baseline (with ``ema-turn``, a
    value per information state of a memoryless game), whatever their seat or episode."""
    from trainers.batch import Sample

    def sample(prompt: list[int], ret: float, name: str) -> Sample:
        ids = np.asarray(prompt, np.int32)
        fields = {"game": "g", "role": "player", "seat": "player_0", "group": ""}
        return Sample(
            name,
            0,
            **fields,
            prompt_ids=ids,
            response_ids=ids,
            sampler_logprobs=np.zeros(2, np.float32),
            valid=True,
            policy_version=0,
            ret=ret,
            outcome=ret,
        )

    samples = [sample([1, 2], 2.0, "a"), sample([1, 3], -1.0, "b"), sample([1, 2], 1.0, "c")]
    keys = [s.key(["game", "prompt"]) for s in samples]
    assert keys[0] == keys[2] != keys[1]
    ema = EMABaseline(alpha=0.5)
    returns = [s.ret for s in samples]
    got = compute_advantages("ema-turn", returns, returns, keys, ["", "", ""], ema=ema)
    # [1 2]: 2 - 0, then its baseline is 1.0 and the third turn gets 1 - 1; [1 3]: -1 - 0
    assert got.tolist() == [2.0, -1.0, 0.0]
    assert AdvantageConfig(key=["game", "prompt"]).key == ["game", "prompt"]


def test_sigma_is_the_population_std_and_eps_is_added_to_it() -> None:
    # G = [1, 2, 6] on one key: mu 3, population variance (4 + 1 + 9) / 3 = 14/3, sigma 2.160247
    #   (the sample std, 2.645751, would give [-0.755929, -0.377964, 1.133893]):
    #   A = [-2, -1, 3] / 2.161247 = [-0.925820, -0.462910, 1.388730]
    adv = normalize_by_key([1.0, 2.0, 6.0], [("k",)] * 3)
    assert list(adv) == pytest.approx([-0.925820, -0.462910, 1.388730], abs=1e-6)
    # eps 0.5 on [1, 3]: mu 2, sigma 1, A = -+1 / 1.5
    assert list(normalize_by_key([1.0, 3.0], [("k",)] * 2, eps=0.5)) == pytest.approx(
        [-2 / 3, 2 / 3], abs=1e-12
    )
    # batch, then whitening over the batch: key a [1, 3] -> -+1 / 1.000001 = -+0.999999,
    #   key b [0, 4] -> -+2 / 2.000001 = -+0.9999995; whitened: mean 0, population std
    #   sqrt((0.999999^2 + 0.9999995^2) / 2) = 0.99999925, so -+0.999999 / 1.00000025 and
    #   -+0.9999995 / 1.00000025
    keys = [("a",), ("a",), ("b",), ("b",)]
    got = compute_advantages(
        "batch", [1.0, 3.0, 0.0, 4.0], [0.0] * 4, keys, [""] * 4, whiten_all=True
    )
    expected = [-0.99999875, 0.99999875, -0.99999925, 0.99999925]
    assert list(got) == pytest.approx(expected, abs=1e-8)


def test_the_batch_is_the_fresh_turns_in_episode_id_order(fresh_tiny) -> None:
    """What "this batch" and "batch order" are in a learner step (the module docstring's
    **The batch**): its episodes sorted by id whatever their arrival, its stale turns left out.

    ema, alpha 0.95, one key (g, p0), one-turn episodes (G = R = the reward):
      step 1: e2 (R = 1) arrives before e1 (R = -1); by id, e1 goes first:
        e1: A = -1 - 0 = -1, b = 0.05 * -1 = -0.05; e2: A = 1 - (-0.05) = 1.05,
        b = 0.95 * -0.05 + 0.05 * 1 = 0.0025 (arrival order: A = 1, -1.05 and b = -0.0025).
      step 2, learner at version 1, max_staleness 0: e3 (version 0, R = 5) is stale and left
        out; e4 (version 1, R = 1): A = 1 - 0.0025 = 0.9975, b = 0.95 * 0.0025 + 0.05 = 0.052375
        (had e3 counted, first by id: A(e3) = 4.9975, b = 0.252375, A(e4) = 0.747625).
    """
    config = make_config(advantage={"mode": "ema"}, batch={"max_staleness": 0})
    learner = Learner(config, *fresh_tiny)
    learner.add_episodes([bandit_episode("e2", [5, 6], 7, -1.0, 1.0)])
    learner.add_episodes([bandit_episode("e1", [5, 6], 8, -1.0, -1.0)])
    first = learner.step()
    assert first is not None and first["version"] == 1.0
    assert first["adv/g/p0/min"] == pytest.approx(-1.0, abs=1e-12)
    assert first["adv/g/p0/max"] == pytest.approx(1.05, abs=1e-12)
    assert learner.ema.baselines == pytest.approx({("g", "p0"): 0.0025}, abs=1e-12)
    learner.add_episodes([bandit_episode("e3", [5, 6], 7, -1.0, 5.0, version=0)])
    learner.add_episodes([bandit_episode("e4", [5, 6], 7, -1.0, 1.0, version=1)])
    second = learner.step()
    assert second is not None and second["filtered/stale_rejected"] == 1.0
    assert second["adv/g/p0/count"] == 1.0
    assert second["adv/g/p0/mean"] == pytest.approx(0.9975, abs=1e-12)
    assert learner.ema.baselines == pytest.approx({("g", "p0"): 0.052375}, abs=1e-12)
