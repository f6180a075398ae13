"""What a process that holds no model pays to start: Arena's chat tokenizer against transformers'.

A rollout actor, a run's own process, an evaluation's host and ``arena play`` render chat
prompts and decode sampled ids; they run no model. Each side starts a fresh Python, imports what
it needs, loads SmolLM2's tokenizer and renders and encodes one prompt, as a rollout actor does
at its start:

- ``arena``: :func:`arena.models.chat_tokenizer` (the ``tokenizers`` library and jinja2);
- ``transformers``: :func:`arena.models.load_tokenizer` (transformers' ``TokenizersBackend``).

Both give the same ids (checked here, and in ``tests/arena/models/test_tokenizing.py``). Then
whole ``arena train configs/smoke.yaml`` runs are timed, as the end-to-end tests start them, in
turn with ``preload=true`` (the learner and the inference actor forked from one process that
imported torch and transformers once: :mod:`arena.run.preload`) and ``preload=false`` (each
imports them itself). Ends with one JSON line: CPU seconds (user + system, best of
``--repeats``) per tokenizer side and their ratio; and per smoke-run side the median wall and
CPU seconds (every process of the run) of ``--runs`` runs, and their ratios.

    .venv/bin/python bench/startup.py [--repeats 5] [--runs 3] [--no-run]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys
from arena.policies.chat import ChatFormat
from arena.models import {function}
chat = ChatFormat({function}("tiny"))
ids = chat.encode_text(chat.render([{{"role": "user", "content": "Your move?"}}]))
print(json.dumps({{"ids": ids.tolist(), "torch": "torch" in sys.modules,
                  "transformers": "transformers" in sys.modules}}))
"""
SIDES = {"arena": "chat_tokenizer", "transformers": "load_tokenizer"}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start(function: str) -> tuple[float, dict]:
    """CPU seconds of one fresh process that loads the tokenizer and encodes a prompt."""
    before = children_cpu()
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(function=function)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return children_cpu() - before, json.loads(done.stdout)


def smoke_run(preload: bool) -> tuple[float, float]:
    """Wall and CPU seconds of one smoke run (the CPU of all its processes: each is waited for
    by its parent, up to this one)."""
    with tempfile.TemporaryDirectory(prefix="arena-startup-") as tmp:
        before = children_cpu()
        began = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "arena",
                "train",
                "configs/smoke.yaml",
                f"run_dir={tmp}/run",
                f"preload={str(preload).lower()}",
            ],  # fmt: skip
            cwd=ROOT,
            capture_output=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")},
        )
        return time.perf_counter() - began, children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per side")
    parser.add_argument("--runs", type=int, default=3, help="smoke runs per side")
    parser.add_argument("--no-run", action="store_true", help="skip the smoke runs")
    args = parser.parse_args()
    start("chat_tokenizer")  # the tokenizer's cache is built before anything is timed
    cpu: dict[str, list[float]] = {side: [] for side in SIDES}
    seen: dict[str, dict] = {}
    for _ in range(args.repeats):  # interleaved: a change in the machine's load hits both
        for side, function in SIDES.items():
            seconds, seen[side] = start(function)
            cpu[side].append(seconds)
    if seen["arena"]["ids"] != seen["transformers"]["ids"]:
        raise SystemExit("the two tokenizers gave different ids")
    best = {side: min(times) for side, times in cpu.items()}
    result = {
        "bench": "startup",
        "arena_cpu_s": round(best["arena"], 3),
        "transformers_cpu_s": round(best["transformers"], 3),
        "transformers_over_arena": round(best["transformers"] / best["arena"], 2),
        "arena_imports_transformers": seen["arena"]["transformers"],
        "arena_imports_torch": seen["arena"]["torch"],
        "same_ids": True,
    }
    if not args.no_run:
        runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for _ in range(args.runs):  # interleaved, as above
            for preload in runs:
                runs[preload].append(smoke_run(preload))
        for preload, side in ((True, "preload"), (False, "fresh")):
            result[f"smoke_{side}_wall_s"] = round(median(w for w, _ in runs[preload]), 1)
            result[f"smoke_{side}_cpu_s"] = round(median(c for _, c in runs[preload]), 1)
        for figure in ("wall", "cpu"):
            ratio = result[f"smoke_preload_{figure}_s"] / result[f"smoke_fresh_{figure}_s"]
            result[f"preload_over_fresh_{figure}"] = round(ratio, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
