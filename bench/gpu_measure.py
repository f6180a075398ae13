"""The in-process parts of bench/gpu_check.py: the HF backend's throughput (``hf``), the learner's
step against a bare torch loop (``learner``) and the weight sync (``weight_sync``, with the
same-GPU path through bench/ipc_sync.py on CUDA).

Each takes the device and gpu_check's ``SIZES`` row; ``hf`` and ``weight_sync`` fill in their
``out`` as each figure is measured, so that a part cut off by gpu_check's guard keeps what it
measured. gpu_check runs them in order, bounds them and prints the one JSON line; the
subprocess parts (the ``[cuda]`` tests, the training run) live there.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import torch
from adapters import one_update
from gpu_guard import CHILDREN
from learner import CHOICE_SHAPES, bare_step_fn, interleaved, learner_step_fn, make_episodes
from shapes import parameters, random_model

from arena.models.adapter_shape import DEFAULT_TARGET_MODULES, AdapterShape
from arena.models.lora import add_adapters
from arena.policies.hf import HFPolicy
from arena.policies.types import Prompt, SamplingParams
from arena.weights.cuda_ipc import choose, device_id
from arena.weights.publisher import WeightPublisher
from trainers.adapters import NamedAdapters
from trainers.config import LearnerConfig
from trainers.learner import Learner
from trainers.trained_model import hf_state_dict

ROOT = Path(__file__).resolve().parents[1]


def synchronize(device: torch.device) -> None:
    """Wait for the GPU's queued work, so that a clock read after it sees that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def hf_throughput(device: torch.device, sizes: dict[str, Any], out: dict[str, Any]) -> None:
    """Generated and scored tokens/s of an HFPolicy, per number of requests in flight, into
    ``out`` as each is measured (a part cut off keeps what it measured)."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model, tokenizer = random_model(sizes["shape"], device=str(device), dtype=dtype)
    vocab = int(model.config.vocab_size)
    prompt_len, count, length = CHOICE_SHAPES["tictactoe"]
    rng = np.random.default_rng(0)

    def choice_turns(n: int) -> tuple[list[Prompt], list[list[np.ndarray]]]:
        # fresh random ids each call: no memo or prefix-cache hit makes scoring look cheap
        prompts = [Prompt(ids=rng.integers(10, vocab, size=prompt_len)) for _ in range(n)]
        replies = [[rng.integers(10, vocab, size=length) for _ in range(count)] for _ in range(n)]
        return prompts, replies

    out.update(shape=sizes["shape"], params=parameters(model), dtype=str(dtype))
    for n in sizes["in_flight"]:
        chats = [[{"role": "user", "content": f"Count to {i}."}] for i in range(n)]
        # other prompts of the same batch shape: a warm-up on the timed prompts would leave
        # their KV blocks in the prefix cache, and the timed run would skip their prefill
        warm = [[{"role": "user", "content": f"Count from {i}."}] for i in range(n)]
        params = SamplingParams(max_new_tokens=sizes["max_new_tokens"])
        for mode, suffix in (("on", ""), ("off", "_loop")):
            policy = HFPolicy(model, tokenizer, max_batch=n, static_decode=mode)
            # warm-up, the same for both: kernels, allocator, the shared system-prompt blocks
            # of the prefix cache, and the static path's graph for this batch shape
            policy.generate(warm, params)
            synchronize(device)
            started = time.perf_counter()
            generations = policy.generate(chats, params)
            synchronize(device)
            seconds = time.perf_counter() - started
            tokens = sum(len(g.token_ids) for g in generations)
            out[f"gen_tok_s_{n}{suffix}"] = round(tokens / seconds, 1)
            if policy.static is not None:
                out[f"graphs_{n}"] = policy.static.captured
        # warm-up at the timed batch's shape (fresh ids: no memo or prefix-cache hit), so that
        # the first call's kernel choice and allocations at that shape are not timed; then the
        # fastest of three calls, each on fresh turns
        policy.score(*choice_turns(n))
        times = []
        for _ in range(3):
            prompts, replies = choice_turns(n)
            synchronize(device)
            started = time.perf_counter()
            policy.score(prompts, replies)
            synchronize(device)
            times.append(time.perf_counter() - started)
        seconds = min(times)
        # tokens the forward computes: the prompt once (its KV shared) and every reply's tokens
        out[f"score_tok_s_{n}"] = round(n * (prompt_len + count * length) / seconds, 1)
        out[f"score_turns_s_{n}"] = round(n / seconds, 2)
    return out


def learner_step(device: torch.device, sizes: dict[str, Any]) -> dict[str, Any]:
    """bench/learner.py's bare loop and learner step, interleaved, on a random model."""
    batch, seq_len, rounds = sizes["learner_batch"], sizes["learner_seq_len"], sizes["rounds"]
    prompt_len, tokens, lr = seq_len // 2, batch * seq_len, 1e-6
    autocast = "bfloat16" if device.type == "cuda" else None
    base, tokenizer = random_model(sizes["shape"], device=str(device))
    vocab, params = int(base.config.vocab_size), parameters(base)
    config = LearnerConfig.from_dict(
        {
            "model": f"random {sizes['shape']}",
            "device": str(device),
            "autocast": autocast,
            "optim": {"lr": lr, "grad_clip": 1.0},
            "batch": {"micro_batch_tokens": tokens, "max_seq_len": seq_len},
        }
    )
    cases: dict[str, Callable[[], None]] = {
        "bare": bare_step_fn(
            copy.deepcopy(base),
            make_episodes(batch, seq_len, prompt_len, vocab, "b"),
            lr,
            device,
            autocast,
        ),
        "learner": learner_step_fn(
            Learner(config, base, tokenizer), batch, seq_len, prompt_len, vocab
        ),
    }
    times = interleaved(cases, rounds)
    rates = {case: tokens / statistics.median(t) for case, t in times.items()}
    return {
        "tokens_per_step": tokens,
        "autocast": autocast,
        "bare_tok_s": round(rates["bare"], 1),
        "learner_tok_s": round(rates["learner"], 1),
        "ratio_learner_vs_bare": round(
            statistics.median(b / t for b, t in zip(times["bare"], times["learner"], strict=True)),
            3,
        ),
        "learner_tflops": round(6 * params * rates["learner"] / 1e12, 4),
    }


def weight_sync(device: torch.device, sizes: dict[str, Any], out: dict[str, Any]) -> None:
    """Publish (export to the CPU) and apply (bench/adapters.py's one_update) of the full model
    and of an r=8 adapter, medians over rounds, into ``out`` as each is measured."""
    r = 8
    shape = AdapterShape(r, 2.0 * r, DEFAULT_TARGET_MODULES)
    config = LearnerConfig(model="random", adapters={"solver": ""})
    config.lora.r, config.lora.alpha = r, 2 * r
    config.lora.target_modules = list(DEFAULT_TARGET_MODULES)
    full_model, tokenizer = random_model(sizes["shape"], device=str(device))
    adapted_model, _ = random_model(sizes["shape"], device=str(device))
    adapters = NamedAdapters(adapted_model, config, resume=None)
    with torch.no_grad():  # a trained adapter: B no longer zero
        for param in adapters.parameters("solver"):
            param.add_(torch.randn_like(param) * 1e-3)
    full_policy = HFPolicy(random_model(sizes["shape"], device=str(device))[0], tokenizer)
    adapter_policy = HFPolicy(random_model(sizes["shape"], device=str(device))[0], tokenizer)
    add_adapters(adapter_policy.model, ["solver"], shape)

    def timed(export: Callable[[], dict[str, torch.Tensor]], policy: HFPolicy, version: int):
        synchronize(device)
        started = time.perf_counter()
        state = export()
        published = time.perf_counter() - started
        applied = one_update(state, policy, version)
        synchronize(device)
        return published, applied, sum(t.numel() * t.element_size() for t in state.values())

    times: dict[str, list[tuple[float, float, int]]] = {"full": [], "adapter": []}
    for version in range(1, sizes["rounds"] + 2):  # the first round warms up; dropped
        times["full"].append(timed(lambda: hf_state_dict(full_model), full_policy, version))
        times["adapter"].append(timed(adapters.export, adapter_policy, version))
    out["r"] = r
    for case, rows in times.items():
        rows = rows[1:]
        out[f"{case}_mb"] = round(rows[0][2] / 1e6, 2)
        out[f"{case}_publish_s"] = round(statistics.median(p for p, _, _ in rows), 4)
        out[f"{case}_apply_s"] = round(statistics.median(a for _, a, _ in rows), 4)
    out["transport"] = choose(device_id(device), [device_id(device)], shm=True)
    if out["transport"] == "cuda_ipc":
        exports = {
            "full": lambda: hf_state_dict(full_model, on_device=True),
            "adapter": lambda: adapters.export(on_device=True),
        }
        for case, export in exports.items():
            out[f"ipc_{case}_s"] = ipc_sync(sizes["shape"], case, export, r, sizes["rounds"])


def ipc_sync(
    shape: str, case: str, export: Callable[[], dict[str, torch.Tensor]], r: int, rounds: int
) -> float:
    """Median seconds of one same-GPU update: export on the GPU, publish by CUDA IPC, and
    another process (bench/ipc_sync.py, serving the same shape) opening it and applying it,
    until its reply. The pipe to it stands in for the bus (one small message each way)."""
    argv = [sys.executable, str(ROOT / "bench" / "ipc_sync.py"), shape, case, str(r)]
    child = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    CHILDREN.add(child)
    assert child.stdin is not None and child.stdout is not None

    def reply() -> dict[str, Any]:
        line = child.stdout.readline()  # a hung child: the part's SIGALRM interrupts this
        if not line:
            raise RuntimeError(f"bench/ipc_sync.py ended (returncode {child.wait()}), see stderr")
        return json.loads(line)

    try:
        ready = reply()
        publisher = WeightPublisher("gpu-check", shm=False)
        publisher.note_receiver("ipc-sync", ready["device"])
        seconds = []
        for version in range(1, rounds + 3):  # the first two open the two staging buffers
            started = time.perf_counter()
            sent: list[dict[str, Any]] = []
            publisher.publish(export(), version, sent.append)
            (body,) = sent
            frame = msgpack.packb(body)
            child.stdin.write(len(frame).to_bytes(4, "little") + frame)
            child.stdin.flush()
            answer = reply()
            if answer.get("transport") != "cuda_ipc":
                raise RuntimeError(f"the same-GPU receiver did not take it by IPC: {answer}")
            seconds.append(time.perf_counter() - started)
        return round(statistics.median(seconds[2:]), 5)
    finally:
        with contextlib.suppress(OSError):
            child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        CHILDREN.discard(child)
