"""An honest learning test: the learner must raise the reward of a bandit with a known optimum.

The bandit: four prompts; the policy answers with one token, sampled from the tiny model itself
(plain torch sampling); the reward is 1 when the token id is odd, else 0. The optimum is 1.
The expected reward under the policy, P(odd token), is computed exactly from the softmax, so
the before/after numbers carry no sampling noise. The untrained policy scores about 0.41 (its
mode is the even ':' token, at 18 %).

Determinism, and what it cannot reach. Sampling draws from a dedicated ``torch.Generator``
(seed 0), so no other test, fixture or library call that touches torch's global RNG changes the
samples, and torch runs on one thread inside the test (restored afterwards), so the machine's
core count cannot change a reduction's order. What remains is the CPU kernel: AVX2 and AVX-512
machines of the same kind compute the logits with different vector widths, the last bits
differ, a sampled token flips where it sat on a boundary of the cumulative distribution, and
from there the run follows another trajectory. Each machine kind is deterministic; they do not
agree. (The earlier version, 30 group steps with a 0.9 bar, read 0.997 on the AVX-512 machine
and 0.878 on an AVX2 one: the same trajectory as ``ATEN_CPU_CAPABILITY=avx2`` gives here.)

So the bars come from the spread over trajectories, measured here (AMD EPYC with AVX-512, one
thread) with many sampler seeds under each kernel, ``ATEN_CPU_CAPABILITY=avx2`` and the native
AVX-512 (two threads gave the same ``group`` numbers on the 12 seeds tried):

- ``group`` (GRPO), 120 runs (60 seeds under each kernel): after 30 steps anywhere from 0.54
  to 1.0, half the runs under 0.9, so the old bar was a coin flip per machine kind; after 40
  steps at least 0.825, after 50 at least 0.927, after 60 at least 0.995. The test runs 60
  steps and asks for 0.9: every run measured had passed 0.9 ten steps earlier, and the worst
  final value is 0.095 above the bar.
- ``ema`` (one shared baseline over the four prompts), 72 runs (36 seeds under each kernel),
  moves in levels: a prompt it has not solved sits near P(odd) = 0.5, one it has solved near
  1.0, so the mean reads about 0.50-0.53 (no prompt solved), 0.63-0.66 (one), 0.75-0.77 (two),
  0.88 or 1.0. After 20 steps 33 of the 72 runs were still at the first level; from step 30 on
  every run had solved at least one prompt (worst 0.627 after 30 steps, 0.629 after 40), and
  the median after 40 steps is 0.999; some runs stay on the one- or two-prompt level for tens
  of steps (the worst reads 0.648 after 60 steps, 0.772 after 80). The old bar of 0.6 after
  40 steps tested the right thing (at least one prompt solved) but sat 0.03 under the level it
  must separate. The test keeps 40 steps and asks for 0.58, midway between the first two
  levels: every run measured crossed it at least ten steps earlier, and a run that solved
  nothing fails.

Run with `.venv/bin/python -m pytest -q tests/trainers/test_learning.py -s` (``-s`` prints the
before/after numbers).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch
from synthetic import bandit_episode

from trainers.config import LearnerConfig
from trainers.learner import Learner

PROMPTS = ["Pick a color:", "Name a number", "Say something", "Your move:"]
SAMPLER_SEED = 0


@pytest.fixture
def one_thread() -> Iterator[None]:
    """torch on one thread for the test, so the core count cannot reorder a reduction."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def expected_reward(model: torch.nn.Module, prompts: list[list[int]]) -> float:
    with torch.no_grad():
        total = 0.0
        for prompt in prompts:
            probs = model(input_ids=torch.tensor([prompt])).logits[0, -1].softmax(-1)
            total += float(probs[1::2].sum())  # odd token ids
    return total / len(prompts)


def sample_episodes(
    model: torch.nn.Module,
    prompts: list[list[int]],
    per_prompt: int,
    version: int,
    start: int,
    generator: torch.Generator,
) -> list:
    episodes = []
    with torch.no_grad():
        for group, prompt in enumerate(prompts):
            logp = model(input_ids=torch.tensor([prompt])).logits[0, -1].log_softmax(-1)
            tokens = torch.multinomial(
                logp.exp(), per_prompt, replacement=True, generator=generator
            )
            for token in tokens.tolist():
                ep = bandit_episode(
                    f"e{start + len(episodes)}",
                    prompt,
                    token,
                    float(logp[token]),
                    reward=float(token % 2),
                    version=version,
                )
                ep.turns[0].group = f"prompt{group}"
                episodes.append(ep)
    return episodes


@pytest.mark.parametrize("mode, steps, threshold", [("group", 60, 0.9), ("ema", 40, 0.58)])
def test_learner_raises_the_bandit_reward(
    fresh_tiny, one_thread: None, mode: str, steps: int, threshold: float
) -> None:
    model, tokenizer = fresh_tiny
    prompts = [tokenizer.encode(p) for p in PROMPTS]
    config = LearnerConfig.from_dict(
        {
            "optim": {"lr": 1e-2},
            "advantage": {"mode": mode},
            "batch": {"micro_batch_tokens": 1024, "max_seq_len": 32},
        }
    )
    learner = Learner(config, model, tokenizer)
    generator = torch.Generator().manual_seed(SAMPLER_SEED)
    before = expected_reward(model, prompts)
    start = time.perf_counter()
    for step in range(steps):
        episodes = sample_episodes(model, prompts, 16, learner.version, 64 * step, generator)
        learner.add_episodes(episodes)
        learner.step()
    after = expected_reward(model, prompts)
    print(
        f"\nbandit ({mode}): expected reward {before:.3f} -> {after:.3f} in {steps} steps, "
        f"{time.perf_counter() - start:.1f}s, version {learner.version}, "
        f"{torch.backends.cpu.get_cpu_capability()}"
    )
    assert before < 0.5
    assert after >= threshold
