"""Scoring continuations: the memo that lets a repeated prompt reach the model once per set of
weights (arena/policies/scoring.py), alone and inside the HF backend.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_scoring.py``.
"""

from __future__ import annotations

import numpy as np
import torch

from arena.models.adapter_shape import AdapterShape
from arena.models.lora import adapter_parameters, add_adapters
from arena.policies.hf import HFPolicy
from arena.policies.scoring import ScoreMemo
from arena.policies.types import Prompt


def ids(*tokens: int) -> np.ndarray:
    return np.array(tokens, dtype=np.int32)


def fake_scores(items, calls: list[list[int]]):
    """A compute function recording its calls; item i scores every token as -(i + 1)."""

    def compute(indices: list[int]) -> list[list[np.ndarray]]:
        calls.append(indices)
        return [
            [np.full(len(r), -(i + 1.0), dtype=np.float32) for r in items[i][1]] for i in indices
        ]

    return compute


def test_the_memo_computes_each_distinct_request_once_and_answers_repeats() -> None:
    a, b = (ids(1, 2, 3), [ids(4), ids(5, 6)]), (ids(1, 2), [ids(4)])
    items = [a, b, a, a]
    calls: list[list[int]] = []
    memo = ScoreMemo()
    out = memo.score(items, [None] * 4, fake_scores(items, calls))
    assert calls == [[0, 1]]  # the first occurrence of each distinct request
    assert [o[0][0] for o in out] == [-1.0, -2.0, -1.0, -1.0]
    assert [len(o) for o in out] == [2, 1, 2, 2]
    assert (memo.hits, memo.misses) == (2, 2)
    # a later call finds both held: the model is not called at all
    again = memo.score([b, a], [None, None], fake_scores([b, a], calls))
    assert calls == [[0, 1]]
    assert [o[0][0] for o in again] == [-2.0, -1.0]
    assert (memo.hits, memo.misses) == (4, 2)


def test_the_tag_separates_one_prompt_under_two_adapters_and_clear_forgets() -> None:
    item = (ids(1, 2), [ids(3)])
    calls: list[list[int]] = []
    memo = ScoreMemo()
    memo.score([item, item], ["solver", None], fake_scores([item, item], calls))
    assert calls == [[0, 1]]
    memo.clear()
    memo.score([item], ["solver"], fake_scores([item], calls))
    assert calls == [[0, 1], [0]]


def test_the_memo_keeps_the_most_recently_used_within_its_capacity() -> None:
    items = [(ids(k), [ids(9)]) for k in range(3)]
    calls: list[list[int]] = []
    memo = ScoreMemo(capacity=2)
    memo.score(items[:2], [None] * 2, fake_scores(items[:2], calls))
    memo.score(items[:1], [None], fake_scores(items[:1], calls))  # 0 is now the most recent
    memo.score(items[2:], [None], fake_scores(items[2:], calls))  # evicts 1, not 0
    memo.score(items[:1], [None], fake_scores(items[:1], calls))
    assert calls == [[0, 1], [0]]
    memo.score(items[1:2], [None], fake_scores(items[1:2], calls))
    assert calls == [[0, 1], [0], [0]]


PROMPT = Prompt(ids=ids(1, 5, 9, 12, 30, 40))
REPLIES = [ids(3, 4), ids(7)]


def test_hf_scores_a_repeated_prompt_once_and_rescores_after_a_weight_update(tiny_model) -> None:
    model, tokenizer = tiny_model
    policy = HFPolicy(model, tokenizer, max_batch=8)
    first, repeat = policy.score([PROMPT, PROMPT], [REPLIES, REPLIES])
    assert (policy.scored.hits, policy.scored.misses) == (1, 1)
    for got, want in zip(repeat.logprobs, first.logprobs, strict=True):
        np.testing.assert_array_equal(got, want)
    (later,) = policy.score([PROMPT], [REPLIES])
    assert (policy.scored.hits, policy.scored.misses) == (2, 1)
    # new weights: the memo is forgotten and the new scores are the new model's
    state = {name: t.clone() for name, t in policy.state_dict().items()}
    head = next(name for name in state if name.endswith("lm_head.weight"))
    state[head] += torch.randn(state[head].shape, generator=torch.Generator().manual_seed(1))
    policy.update_weights(state, version=1)
    (updated,) = policy.score([PROMPT], [REPLIES])
    assert policy.scored.misses == 2 and updated.version == 1
    assert not np.allclose(updated.sums, later.sums, atol=1e-3)


def test_hf_loading_an_adapter_forgets_what_the_old_adapter_scored(tiny_model) -> None:
    model, tokenizer = tiny_model
    shape = AdapterShape(r=2, alpha=4.0, target_modules=("q_proj", "v_proj"))
    add_adapters(model, ["solver"], shape)
    policy = HFPolicy(model, tokenizer, max_batch=8)
    (before,) = policy.score([PROMPT], [REPLIES], ["solver"])
    generator = torch.Generator().manual_seed(3)
    changed = {
        name: t + torch.randn(t.shape, generator=generator)
        for name, t in policy.adapter_state("solver").items()
    }
    policy.load_adapter("solver", changed)
    (after,) = policy.score([PROMPT], [REPLIES], ["solver"])
    assert policy.scored.misses == 2
    assert not np.allclose(after.sums, before.sums, atol=1e-3)
    assert len(adapter_parameters(model, "solver")) > 0
