"""Returns and advantages against numbers worked out by hand (the arithmetic is in comments).

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_advantages.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from synthetic import episode, turn

from trainers.advantages import (
    EMABaseline,
    compute_advantages,
    discounted_returns,
    normalize_by_key,
    whiten,
)
from trainers.batch import collate, episode_samples


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


def test_ema_reads_the_baseline_before_updating_it() -> None:
    # alpha 0.5, key x, returns 1, 3, 2 in order; b starts at 0:
    #   A1 = 1 - 0 = 1,       then b = 0.5 * 0 + 0.5 * 1 = 0.5
    #   A2 = 3 - 0.5 = 2.5,   then b = 0.5 * 0.5 + 0.5 * 3 = 1.75
    #   A3 = 2 - 1.75 = 0.25, then b = 0.5 * 1.75 + 0.5 * 2 = 1.875
    # (Updating first would give A1 = 1 - 0.5 = 0.5.) Key y is independent: A = 4 - 0 = 4.
    ema = EMABaseline(alpha=0.5)
    adv = compute_advantages(
        "ema", [1.0, 4.0, 3.0, 2.0], [0.0] * 4, [("x",), ("y",), ("x",), ("x",)], [""] * 4, ema=ema
    )
    assert adv == pytest.approx([1.0, 4.0, 2.5, 0.25])
    assert ema.baselines == pytest.approx({("x",): 1.875, ("y",): 2.0})
    # The baseline carries over to the next batch: A = 3 - 1.875 = 1.125.
    assert ema.advantages([3.0], [("x",)]) == pytest.approx([1.125])
    # And survives a JSON-style round trip (what the learner checkpoints).
    restored = EMABaseline(alpha=0.9)
    restored.load_state_dict(ema.state_dict())
    assert restored.alpha == 0.5
    assert restored.baselines == ema.baselines


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
    with pytest.raises(ValueError):
        compute_advantages("ema", [1.0], [1.0], [("k",)], [""])
    assert math.isfinite(float(compute_advantages("batch", [1.0], [1.0], [("k",)], [""])[0]))
