"""One command that checks Arena on a GPU host: five parts, one JSON line, inside its budget.

A lent GPU host is held for minutes at a time (``docs/gpu.md``), so everything worth
knowing about a GPU is gathered in one run, and each part reports even where another fails
(its error goes into the JSON under the part's name). In order:

- ``cuda_tests``: the ``[cuda]`` test variants (``pytest -k cuda tests/``, a subprocess):
  passed / failed counts and the failures' names. On a CPU: skipped, ``no cuda``.
- ``hf``: the HF backend (:class:`arena.policies.hf.HFPolicy`, in this process) at
  SmolLM2-135M's shape with random weights: generated tokens/s and scored tokens/s with 64 and
  256 requests in one call (``max_batch`` alike, so all are in flight together). Generation
  runs twice, ``static_decode`` on (``gen_tok_s_N``: static KV cache, CUDA graphs on CUDA,
  :mod:`arena.policies.static_decode`) and off (``gen_tok_s_N_loop``: the per-token loop),
  each after a warm-up of the same batch (which captures the static path's graphs). Scoring uses
  Tic-Tac-Toe-shaped choice turns (``bench/learner.py``'s ``CHOICE_SHAPES``), each prompt new,
  so neither the score memo nor the prefix cache answers.
- ``learner``: our learner's step against a bare torch loop on the same tokens
  (``bench/learner.py``'s functions, imported): tokens/s of each, their ratio, TFLOP/s.
- ``weight_sync``: publish (the learner's CPU export) and apply (``bench/adapters.py``'s
  ``one_update``: buckets, checksums, assembly, copy into the served model) of the full model
  and of an r=8 adapter on every projection. The bus transfer itself is not in it. On CUDA
  also the same-GPU path (``ipc_*``, :mod:`arena.weights.cuda_ipc`): the learner's export on
  the GPU, the staging copy, and another process (``bench/ipc_sync.py``) opening the handle
  and copying into its served model, timed from export to that process's reply, per update.
- ``train``: ``arena train configs/selfplay_gpu.yaml`` (a subprocess) for a few steps on the
  same random 135M, evaluation off: episodes/s, generated tokens/s, the learner's share of the
  steps' wall time, the learner's trained tokens/s and the scored tokens/s of turns by choice
  (``scored_tokens_per_s``: each prompt and all its candidate replies), from the run's
  ``metrics.jsonl``. It gets what is left of ``--budget``; a run cut off by it still reports
  the steps it logged.

Each part has a share of ``--budget`` (:data:`SHARES`; the training run gets what is left)
and is cut off past it, and the whole check ends inside the budget whatever a part does: the
JSON so far is saved after every part to ``--out`` (``$OUT/gpu_check.json`` where ``$OUT`` is
set, so that it comes back from a GPU host even when the host kills the command), and printed
once, at the end, at the budget (a watchdog thread, for a part stuck where Python cannot
interrupt it) or on SIGTERM (an outer ``timeout``), with ``cut_off`` naming the part that was
running. Its own processes (pytest, ``arena train``, bench/ipc_sync.py) are stopped with it.
Under ``$OUT`` it also leaves the logs of pytest and of the training run. The guard is
bench/gpu_guard.py.

``--device cpu --quick`` runs the same code here in under two minutes with tiny sizes (the
tiny model, a few requests, a small run): it checks the script, not the numbers.

Usage: python3 bench/gpu_check.py [--device cuda|cpu] [--quick] [--budget SECONDS] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import torch
from adapters import one_update
from gpu_guard import (
    CHILDREN,
    SUBPROCESS_GRACE,
    WATCHDOG_GRACE,
    CutOff,
    Report,
    keep_log,
    run_bounded,
)
from learner import CHOICE_SHAPES, bare_step_fn, interleaved, learner_step_fn, make_episodes
from shapes import parameters, random_model, save_random_model

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

SIZES: dict[bool, dict[str, Any]] = {
    False: {  # a GPU host: SmolLM2-135M's shape, the sizes the issue asks about
        "shape": "135m",
        "in_flight": (64, 256),
        "max_new_tokens": 64,
        "learner_batch": 64,  # 64 x 256 = 16k tokens: the micro-batch measured on an H200
        "learner_seq_len": 256,
        "rounds": 3,
        "train": ["steps=2"],
    },
    True: {  # --quick: the script's code paths in a couple of minutes on a CPU
        "shape": "tiny",
        "in_flight": (4, 8),
        "max_new_tokens": 8,
        "learner_batch": 2,
        "learner_seq_len": 64,
        "rounds": 1,  # quick: the code paths once each, not a figure
        # one actor and a small step: a 2-core machine cannot run four actors of 128 games
        "train": [
            "steps=1",
            "rollout.actors=1",
            "rollout.concurrency=8",
            "rollout.episodes_per_step=24",
            "inference.dtype=float32",
            "learner.autocast=null",
        ],
    },
}


Part = Callable[[float, dict[str, Any]], "dict[str, Any] | None"]
"""A part: given its seconds and its result so far (filled in as it measures, so that a part
cut off keeps what it measured), returns its result or None (all of it in the second)."""


SHARES = {"cuda_tests": 1 / 3, "hf": 1 / 6, "learner": 1 / 8, "weight_sync": 1 / 5}
"""Each part's most seconds, as a share of ``--budget`` (360 s: 120, 60, 45 and 72 s); the
training run, last, gets what is left. On an H200 each is expected to take half its share or
less (docs/gpu.md): a part that needs more is cut off and says so, and the rest still run."""


def synchronize(device: torch.device) -> None:
    """Wait for the GPU's queued work, so that a clock read after it sees that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release(device: torch.device) -> None:
    """Give cached GPU memory back between parts: the training run's processes need it."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def outcomes(output: str) -> dict[str, Any]:
    """passed / failed / errors / skipped counts and the failures' names, from pytest's ``-v``
    lines (one per test as it ends): a run cut off still tells the tests it finished."""
    seen = dict(re.findall(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)", output, re.M))
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for outcome in seen.values():
        key = {"ERROR": "errors", "XFAIL": "skipped", "XPASS": "passed"}.get(outcome)
        counts[key or outcome.lower()] += 1
    failures = [name for name, outcome in seen.items() if outcome in ("FAILED", "ERROR")]
    # a module that could not be collected: "ERROR tests/x.py" in the short summary
    failures += re.findall(r"^ERROR (\S+\.py)\b", output, re.M)
    counts["errors"] += sum(1 for f in failures if "::" not in f)
    return {**counts, "failures": failures}


def cuda_tests(device: torch.device, timeout: float) -> dict[str, Any]:
    """The ``[cuda]`` variants of the tests (pytest in a subprocess): counts and failures."""
    # only the files whose tests take the device fixture: collecting all of tests/ costs
    # seconds, and a module that needs a package the host lacks (kubernetes) reads as an error
    files = device_test_files()
    if device.type != "cuda":
        return {"skipped": "no cuda", "files": files}
    started = time.perf_counter()
    argv = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"]
    argv += ["--continue-on-collection-errors", "-k", "cuda", *files]
    with tempfile.TemporaryDirectory(prefix="arena-gpu-check-") as folder:
        log = Path(folder) / "pytest.log"
        returncode = run_bounded(argv, log, timeout)
        output = log.read_text(errors="replace")
        keep_log(log, "cuda_tests.log")
    out = {"files": files, **outcomes(output), "returncode": returncode}
    if returncode is None:
        out["error"] = f"cut off after {timeout:.0f} s: {output[-800:]}"
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def device_test_files() -> list[str]:
    """The test files with a test that takes the ``device`` fixture (tests/conftest.py): the
    ones with ``[cuda]`` variants."""
    takes = re.compile(r"^def test_\w+\(([^)]*)\)", re.MULTILINE)
    # the benches' tests last: the slowest, they must not keep the others from running
    ordered = sorted((ROOT / "tests").rglob("test_*.py"), key=lambda p: ("bench" in p.parts, p))
    return [
        str(path.relative_to(ROOT))
        for path in ordered
        if any(re.search(r"\bdevice\b", params) for params in takes.findall(path.read_text()))
    ]


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
        policy.score(*choice_turns(2))  # warm-up
        prompts, replies = choice_turns(n)
        synchronize(device)
        started = time.perf_counter()
        policy.score(prompts, replies)
        synchronize(device)
        seconds = time.perf_counter() - started
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


def train_run(device: torch.device, sizes: dict[str, Any], timeout: float) -> dict[str, Any]:
    """A few steps of configs/selfplay_gpu.yaml; rates from the run's metrics.jsonl."""
    folder = Path(tempfile.mkdtemp(prefix="arena-gpu-check-"))
    try:
        if sizes["shape"] == "tiny":
            model = "tiny"
        else:  # the random 135M, saved for the inference and learner processes to load
            model = str(save_random_model(sizes["shape"], folder / "model"))
        run_dir = folder / "run"
        argv = [sys.executable, "-m", "arena", "train", "configs/selfplay_gpu.yaml"]
        argv += [f"model={model}", f"run_dir={run_dir}", "eval.games=0", *sizes["train"]]
        if device.type != "cuda":
            argv += ["inference.device=cpu", "learner.device=cpu"]
        started = time.perf_counter()
        returncode = run_bounded(argv, folder / "train.log", timeout)
        wall = time.perf_counter() - started
        keep_log(folder / "train.log", "train.log")
        keep_log(run_dir / "metrics.jsonl", "train_metrics.jsonl")
        tail = (folder / "train.log").read_text(errors="replace")[-1500:]
        if returncode is None:
            tail = f"cut off after {timeout:.0f} s; {tail}"
        metrics = run_dir / "metrics.jsonl"
        rows = (
            [json.loads(line) for line in metrics.read_text().splitlines()]
            if metrics.exists()
            else []
        )
        if not rows:
            return {"error": f"no step logged in {wall:.0f} s (returncode {returncode}): {tail}"}
        steps_s = sum(r["collect_s"] + r["train_s"] for r in rows)
        out = {
            "steps": len(rows),
            "returncode": returncode,
            "wall_s": round(wall, 1),
            "episodes_per_s": round(statistics.median(r["episodes_per_s"] for r in rows), 2),
            "gen_tok_s": round(statistics.median(r["gen_tokens_per_s"] for r in rows), 1),
            # per-step training time against the steps' own time (collect + train), so that
            # process start and model loading do not dilute it
            "learner_share": round(sum(r["train_s"] for r in rows) / max(steps_s, 1e-9), 3),
            "learner_tok_s": round(
                sum(r.get("learner/tokens", 0) for r in rows)
                / max(sum(r["train_s"] for r in rows), 1e-9),
                1,
            ),
            "scored_tokens": sum(r.get("scored_tokens", 0) for r in rows),
            "scored_tok_s": round(
                statistics.median(r.get("scored_tokens_per_s", 0.0) for r in rows), 1
            ),
        }
        if returncode != 0:
            out["tail"] = tail
        return out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (the GPU host) or cpu")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a CPU check")
    parser.add_argument("--budget", type=float, default=None, help="seconds (360; 200 quick)")
    parser.add_argument("--out", default=None, help="where to save the JSON after every part")
    # tests: PART raises, PART:hang loops (SIGALRM cuts it), PART:stuck ignores the signals
    parser.add_argument("--fail", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    budget = args.budget or (200.0 if args.quick else 360.0)
    out = args.out or (Path(os.environ["OUT"]) / "gpu_check.json" if "OUT" in os.environ else None)
    report = Report({"check": "gpu", "device": args.device, "quick": args.quick}, out and Path(out))
    # an outer `timeout` (SIGTERM), or the budget passed: print what there is, stop the children
    signal.signal(signal.SIGTERM, lambda *_: report.stop("cut off by SIGTERM"))

    def watchdog() -> None:  # for a part stuck where Python never sees its SIGALRM
        time.sleep(budget + min(WATCHDOG_GRACE, budget / 10))
        report.stop(f"still running past the budget ({budget:.0f} s)")

    threading.Thread(target=watchdog, daemon=True, name="gpu-check-watchdog").start()
    device = torch.device(args.device)
    sizes = SIZES[args.quick]
    with contextlib.suppress(Exception):  # a broken CUDA shows in the parts, each with its error
        if device.type == "cuda":
            report.result["device"] = torch.cuda.get_device_name(device)

    def left(share: float) -> float:
        """Seconds for the next part: its share of the budget, at most what is left."""
        spent = time.perf_counter() - report.started
        return max(min(10.0, budget / 20), min(share * budget, budget - spent))

    # (name, (seconds, result so far) -> result, whether the part bounds itself: its
    # subprocess gets the seconds less SUBPROCESS_GRACE, to stop it and read what it wrote, and
    # SIGALRM is a backstop)
    parts: list[tuple[str, Part, bool]] = [
        ("cuda_tests", lambda s, out: cuda_tests(device, s), True),
        ("hf", lambda s, out: hf_throughput(device, sizes, out), False),
        ("learner", lambda s, out: learner_step(device, sizes), False),
        ("weight_sync", lambda s, out: weight_sync(device, sizes, out), False),
        ("train", lambda s, out: train_run(device, sizes, s), True),
    ]
    if args.fail:
        parts = [injected(part, args.fail) for part in parts]
    cap = 0.0

    def on_alarm(*_: Any) -> None:
        raise CutOff(f"cut off after its {cap:.0f} s")

    signal.signal(signal.SIGALRM, on_alarm)
    for name, part, bounded in parts:
        report.running = name
        started = time.perf_counter()
        seconds = left(SHARES.get(name, 1.0))
        cap = seconds + SUBPROCESS_GRACE if bounded else seconds
        signal.setitimer(signal.ITIMER_REAL, cap)
        result: dict[str, Any] = {}
        try:
            result.update(
                part(max(1.0, seconds - SUBPROCESS_GRACE) if bounded else seconds, result) or {}
            )
        except (Exception, CutOff) as error:  # each part reports: one must not hide the others
            traceback.print_exc(file=sys.stderr)
            result["error"] = f"{type(error).__name__}: {error}"[:500]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        result.setdefault("seconds", round(time.perf_counter() - started, 1))
        report.result[name] = result
        report.save()
        release(device)
        print(f"gpu_check: {name} done", file=sys.stderr, flush=True)
    report.running = ""
    report.finish()


def injected(part: tuple[str, Part, bool], fail: str) -> tuple[str, Part, bool]:
    """``--fail PART[:hang|:stuck]`` (for tests): that part raises, loops in Python (its SIGALRM
    cuts it off), or blocks the signals and sleeps (only the watchdog ends it)."""
    name, _, how = fail.partition(":")
    if part[0] != name:
        return part

    def broken(_: float, out: dict[str, Any]) -> None:
        out["before"] = "the failure"  # what a part measured before it failed is kept
        if how == "hang":
            while True:
                time.sleep(0.1)
        if how == "stuck":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
            time.sleep(10**6)
        raise RuntimeError(f"{name}: injected failure")

    return name, broken, part[2]


if __name__ == "__main__":
    main()
