"""The loss of choice turns: the policy over the legal replies, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from arena.models.scoring import legal_log_softmax
from trainers.batch import Sample
from trainers.choice import element_logprobs
from trainers.config import LossConfig
from trainers.losses import policy_loss
from trainers.microbatch import collate


def choice_sample(prompt: list[int], replies: list[list[int]], played: int, **kw) -> Sample:
    return Sample(
        episode_id=kw.pop("episode_id", "e"),
        turn_index=0,
        game="g",
        role="player",
        seat="player_0",
        group="",
        prompt_ids=np.asarray(prompt, np.int32),
        response_ids=np.asarray(replies[played], np.int32),
        sampler_logprobs=np.array([kw.pop("sampler", -0.5)], np.float32),
        valid=True,
        policy_version=0,
        ret=0.0,
        outcome=0.0,
        choices=[np.asarray(r, np.int32) for r in replies],
        choice_index=played,
        **kw,
    )


def test_legal_log_softmax_by_hand() -> None:
    # turn 0: scores 0 and ln 3 -> pi = 1/4, 3/4; turn 1: three equal scores -> 1/3 each
    scores = torch.tensor([0.0, math.log(3.0), 2.0, 2.0, 2.0])
    log_pi, entropy = legal_log_softmax(scores, torch.tensor([0, 0, 1, 1, 1]), 2)
    assert log_pi.exp().tolist() == pytest.approx([0.25, 0.75, 1 / 3, 1 / 3, 1 / 3], abs=1e-7)
    h0 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert entropy.tolist() == pytest.approx([h0, math.log(3.0)], abs=1e-6)


def test_the_two_action_gradient_is_the_softmax_gradient() -> None:
    """d(-A log pi(k)) / dS_a = -A (1[a = k] - pi(a)) / T, at ratio 1 (the first PPO pass)."""
    temperature, advantage = 0.7, 1.3
    sums = torch.tensor([-2.0, -3.5], requires_grad=True)
    log_pi, _ = legal_log_softmax(sums / temperature, torch.tensor([0, 0]), 1)
    chosen = log_pi[1:2]
    out = policy_loss(
        chosen,
        torch.zeros(1),
        chosen.detach(),
        chosen.detach(),
        torch.tensor([advantage]),
        torch.ones(1),
        torch.ones(1),
        LossConfig(),
    )
    out.loss.backward()
    pi = torch.softmax(torch.tensor([-2.0, -3.5]) / temperature, -1)
    analytic = -advantage * (torch.tensor([0.0, 1.0]) - pi) / temperature
    assert sums.grad is not None
    assert torch.allclose(sums.grad, analytic, atol=1e-5)
    assert abs(float(analytic[1])) > 0.1  # the check has power


def test_element_logprobs_reduce_reply_tokens_to_the_played_replys_logprob() -> None:
    # prompt [1 2], replies [3] and [4 5], reply 1 played; token logprobs given by hand
    sample = choice_sample([1, 2], [[3], [4, 5]], played=1)
    mb = collate([sample], pad_id=0)
    assert mb.targets.tolist() == [3, 4, 5] and mb.choice_token.tolist() == [True] * 3
    # reply 0 is predicted at the prompt's end (col 1); reply 1 there and at its own col 2
    assert mb.predict_at.tolist() == [1, 1, 2]
    assert mb.input_ids.tolist() == [[1, 2, 4]]
    # the reply [4 5] attends to the prompt and to itself
    assert mb.attention_mask[0, 0].int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert mb.position_ids is not None and mb.position_ids.tolist() == [[0, 1, 2]]
    token_lp = torch.tensor([-1.0, -0.5, -0.25])  # S = -1, -0.75
    lp, entropy = element_logprobs(token_lp, torch.zeros(3), mb, temperature=0.5)
    scaled = torch.tensor([-2.0, -1.5])
    want = torch.log_softmax(scaled, -1)[1]
    assert lp.tolist() == pytest.approx([float(want)], abs=1e-6)
    p = torch.softmax(scaled, -1)
    assert entropy.tolist() == pytest.approx([float(-(p * p.log()).sum())], abs=1e-6)
    assert mb.sampler_logprobs.tolist() == [-0.5] and mb.seq_lengths.tolist() == [1.0]


def test_the_learner_moves_the_policy_over_the_legal_replies(fresh_tiny) -> None:
    """A two-reply bandit on the tiny model: reply A pays 1, reply B pays 0. Each step samples
    16 choices from the model's own legal policy and trains on them; P(A), read exactly from
    the model's scores, must rise well above where it started."""
    from synthetic import episode, make_config

    from arena.policies.scoring import continuation_logprobs
    from arena.records import Turn
    from trainers.learner import Learner

    model, tokenizer = fresh_tiny
    prompt = np.array([1, 9690, 198, 2683, 30, 2, 198, 1, 520, 9531, 198], np.int32)
    replies = [np.array([339, 2], np.int32), np.array([1136, 2], np.int32)]
    learner = Learner(
        make_config(optim={"lr": 3e-3}, advantage={"mode": "batch"}), model, tokenizer
    )
    rng = np.random.default_rng(0)

    def p_first() -> tuple[float, np.ndarray, list[np.ndarray]]:
        (scored,) = continuation_logprobs(learner.model, [(prompt, replies)])
        sums = np.array([lp.sum() for lp in scored])
        return float(np.exp(sums[0] - np.logaddexp(*sums))), sums, scored

    before = p_first()[0]
    for step in range(6):
        episodes = []
        for i in range(16):
            p, sums, scored = p_first()
            played = 0 if rng.random() < p else 1
            log_pi = sums[played] - np.logaddexp(*sums)
            t = Turn(
                episode_id=f"s{step}-{i}",
                index=0,
                game="bandit",
                seat="p0",
                role="player",
                prompt_ids=prompt,
                response_ids=replies[played],
                response_logprobs=scored[played],
                text="",
                action=played,
                valid=True,
                reward=float(played == 0),
                policy_version=learner.version,
                choice_ids=np.concatenate(replies),
                choice_lengths=np.array([2, 2], np.int32),
                choice_logprobs=sums.astype(np.float32),
                choice_index=played,
                choice_logprob=float(log_pi),
            )
            episodes.append(episode(t.episode_id, [t], final_rewards={"p0": float(played == 0)}))
        learner.add_episodes(episodes)
        metrics = learner.step()
        assert metrics is not None and "skipped" not in metrics, metrics
    after = p_first()[0]
    assert after > before + 0.2, (before, after)
