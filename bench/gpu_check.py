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
bench/gpu_guard.py; the in-process parts (``hf``, ``learner``, ``weight_sync``) are
bench/gpu_measure.py, the subprocess parts and the run of them are here.

``--device cpu --quick`` runs the same code here in under two minutes with tiny sizes (the
tiny model, a few requests, a small run): it checks the script, not the numbers.

Usage: python3 bench/gpu_check.py [--device cuda|cpu] [--quick] [--budget SECONDS] [--out PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gpu_guard import (
    SUBPROCESS_GRACE,
    WATCHDOG_GRACE,
    CutOff,
    Report,
    keep_log,
    run_bounded,
)
from gpu_measure import hf_throughput, learner_step, weight_sync
from shapes import save_random_model

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


SHARES = {"cuda_tests": 1 / 2, "hf": 1 / 6, "learner": 1 / 8, "weight_sync": 1 / 5}
"""Each part's most seconds, as a share of ``--budget`` (360 s: 180, 60, 45 and 72 s); the
training run, last, gets what is left. On an H200 the ``[cuda]`` tests took about 160 s (95 s for
20 of them, then 54 s for the rollout bench's), the other parts half their share or less
(docs/gpu.md): a part that needs more is cut off and says so, and the rest still run."""


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
