"""bench/shapes.py (random-init models of a named shape) and the two benches that take
``--shape`` and ``--device``: each runs and ends with one JSON line.

Run with ``.venv/bin/python -m pytest -q tests/bench/test_shapes.py`` (the bench runs are marked
``slow``: about three minutes on two busy cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from bench.shapes import SHAPES, parameters, parse_shape, random_model, shape_config

ROOT = Path(__file__).resolve().parents[2]


def test_named_shapes_have_the_documented_parameter_counts(tiny_tokenizer) -> None:
    counts = {}
    for name in SHAPES:
        with torch.device("meta"):  # sizes only, no memory
            counts[name] = parameters(LlamaForCausalLM(shape_config(name, tiny_tokenizer)))
    assert counts == {
        "tiny": 3_219_776,
        "135m": 134_515_008,  # SmolLM2-135M's count (tests/arena/test_models.py)
        "360m": 361_821_120,
        "1b": 1_073_809_408,
        "1.7b": 1_711_376_384,
    }


def test_a_shape_by_sizes_fills_in_heads_kv_and_inter() -> None:
    assert parse_shape("layers=4,hidden=256") == {
        "layers": 4,
        "hidden": 256,
        "heads": 4,
        "kv": 4,
        "inter": 704,
    }
    assert parse_shape("layers=2, hidden=192, heads=6, kv=2")["heads"] == 6
    assert parse_shape("135m") == SHAPES["135m"] and parse_shape("135m") is not SHAPES["135m"]
    for bad, words in [
        ("2b", "expected one of"),
        ("layers=2", "layers= and hidden= are required"),
        ("layers=2,hidden=100,heads=3", "hidden must divide by heads"),
        ("layers=0,hidden=64", "positive integers"),
        ("layers=2,hidden=64,depth=3", "expected one of"),
    ]:
        with pytest.raises(ValueError, match=words):
            parse_shape(bad)


def test_a_random_model_is_seeded_and_speaks_smollm2s_vocabulary(tiny_tokenizer) -> None:
    a, tokenizer = random_model("tiny", device="cpu")
    b, _ = random_model("tiny", device="cpu")
    c, _ = random_model("tiny", device="cpu", seed=1)
    assert a.config.vocab_size == len(tokenizer) == len(tiny_tokenizer)
    assert a.config.eos_token_id == tokenizer.eos_token_id and not a.training
    assert torch.equal(a.lm_head.weight, b.lm_head.weight)
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)


def last_json(argv: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_learner_bench_runs_a_random_shape_on_a_device(device: str) -> None:
    out = last_json(["bench/learner.py", "--quick", "--shape", "tiny", "--device", device])
    assert out["bench"] == "learner" and out["shape"] == "tiny" and out["params"] == 3_219_776
    assert (out["device"] == "cpu") == (device == "cpu")
    assert out["bare_tok_s"] > 0 and out["learner_tok_s"] > 0 and out["learner_tflops"] > 0


@pytest.mark.slow
def test_the_rollout_bench_runs_a_random_shape_on_a_device(device: str) -> None:
    out = last_json(["bench/rollout.py", "--quick", "--shape", "tiny", "--device", device])
    assert out["bench"] == "rollout" and out["shape"] == "tiny" and out["params"] == 3_219_776
    assert out["service_tok_s"] > 0 and out["weight_update_s"] > 0
    assert out["weights_mb"] == pytest.approx(3_219_776 * 4 / 1e6, abs=1e-3)  # tied: once
