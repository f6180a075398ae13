"""The per-state step (trainers/per_state.py): targets by hand, and states whose prompts differ
by one token moved apart, each by its own target, on the tiny model's LoRA adapter."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from synthetic import make_config
from test_choice import choice_sample

from arena.policies.scoring import continuation_logprobs
from trainers.learner import Learner
from trainers.per_state import states_of

PROMPT = [1, 9690, 198, 2683, 30, 2, 198, 1, 520, 9531, 198]
REPLIES = [[339, 2], [1136, 2]]


def played(prompt: list[int], replies: list[list[int]], reply: int, advantage: float, n: int = 0):
    sample = choice_sample(prompt, replies, reply, episode_id=f"e{n}")
    sample.advantage = advantage
    return sample


def test_targets_by_hand() -> None:
    other = [5, *PROMPT[1:]]
    samples = [
        played(PROMPT, REPLIES, 0, 1.0),
        played(PROMPT, REPLIES, 1, -1.0),
        played(other, [[7], [8], [9]], 2, 2.0),
        played(PROMPT, REPLIES, 1, 0.5),
    ]
    first, second = states_of(samples)
    assert first.visits == 3 and second.visits == 1
    assert first.visits_by_reply.tolist() == [1, 2]
    # mean advantages 1.0 and -0.25: reply 1 should lose 0.1 * 1.25 in log-odds
    assert first.targets(eta=0.1, max_move=1.0) == pytest.approx([-0.125])
    # an unplayed reply counts as the batch's average, 0; the move is capped at max_move
    assert second.targets(eta=0.1, max_move=0.15) == pytest.approx([0.0, 0.15])


def test_a_generated_turn_is_refused_with_its_place() -> None:
    sample = played(PROMPT, REPLIES, 0, 1.0)
    sample.choices = None
    with pytest.raises(ValueError, match="choice turns only.*episode e0"):
        states_of([sample])


def per_state_learner(fresh_tiny, **per_state) -> Learner:
    model, tokenizer = fresh_tiny
    config = make_config(
        lora={"enabled": True, "r": 4, "alpha": 8},
        per_state={"enabled": True, "eta": 0.02, **per_state},
        batch={"filter_zero_advantage": False},
    )
    return Learner(config, model, tokenizer)


def log_odds(learner: Learner, prompt: list[int]) -> float:
    items = [(np.asarray(prompt, np.int32), [np.asarray(r, np.int32) for r in REPLIES])]
    (scored,) = continuation_logprobs(learner.model, items)
    return float(scored[1].sum() - scored[0].sum())


def test_two_states_one_token_apart_move_each_by_its_own_target(fresh_tiny) -> None:
    """State A's reply 1 earned +1 over reply 0, state B's -1: a gradient step would move the
    two nearly alike; the per-state step moves A up and B down by eta = 0.02 each, to first
    order."""
    learner = per_state_learner(fresh_tiny)
    a, b = PROMPT, [*PROMPT[:-2], 4000, PROMPT[-1]]
    before = log_odds(learner, a), log_odds(learner, b)
    samples = [
        played(a, REPLIES, 1, 0.5, 0),
        played(a, REPLIES, 0, -0.5, 1),
        played(b, REPLIES, 1, -0.5, 2),
        played(b, REPLIES, 0, 0.5, 3),
    ]
    metrics = learner.update.run(samples, 0, Counter())
    assert metrics["per_state/states"] == 2 and metrics["per_state/rows"] == 2
    moved = log_odds(learner, a) - before[0], log_odds(learner, b) - before[1]
    assert moved == pytest.approx((0.02, -0.02), rel=0.1)


def test_a_state_seen_once_is_left_alone_and_the_step_still_counts(fresh_tiny) -> None:
    learner = per_state_learner(fresh_tiny, min_visits=2)
    before = log_odds(learner, PROMPT)
    metrics = learner.update.run([played(PROMPT, REPLIES, 1, 1.0)], 0, Counter())
    assert metrics["per_state/states"] == 0 and metrics["per_state/left_turns"] == 1
    assert metrics["optimizer_steps"] == 0 and "skipped" not in metrics
    assert log_odds(learner, PROMPT) == before
    # beside a state seen twice, from the same episode: that one moves, the single one waits
    other = [5, *PROMPT[1:]]
    twice = [played(other, REPLIES, 0, 1.0, 0), played(other, REPLIES, 1, -1.0, 0)]
    metrics = learner.update.run([played(PROMPT, REPLIES, 1, 1.0, 0), *twice], 1, Counter())
    assert metrics["per_state/states"] == 1 and metrics["per_state/left_turns"] == 1
    assert metrics["tokens"] == 2 and metrics["optimizer_steps"] == 1


def test_a_batch_over_the_gradient_memory_is_refused_before_any_backward(fresh_tiny) -> None:
    learner = per_state_learner(fresh_tiny, max_jacobian_bytes=1024)
    samples = [played(PROMPT, REPLIES, 1, 1.0, 0), played(PROMPT, REPLIES, 0, -1.0, 1)]
    with pytest.raises(ValueError, match="1 gradient rows of .* parameters.*learner.lora"):
        learner.update.run(samples, 0, Counter())
