"""What a process that holds no model pays to start: Arena's chat tokenizer against transformers'.

A rollout actor, a run's own process, an evaluation's host and ``arena play`` render chat
prompts and decode sampled ids; they run no model. Each side starts a fresh Python, imports what
it needs, loads SmolLM2's tokenizer and renders and encodes one prompt, as a rollout actor does
at its start:

- ``arena``: :func:`arena.models.chat_tokenizer` (the ``tokenizers`` library and jinja2);
- ``transformers``: :func:`arena.models.load_tokenizer` (transformers' ``TokenizersBackend``).

Both give the same ids (checked here, and in ``tests/arena/models/test_tokenizing.py``). Then
whole ``arena train configs/smoke.yaml`` runs are timed, in turn three ways:

- ``preload``: ``preload=true``, the default: the learner and the inference actor forked from
  the run's own server, which imported torch and transformers once for both
  (:mod:`arena.run.preload`);
- ``shared``: the same, forked from one ``arena preload --listen`` server that this bench
  starts once (``ARENA_PRELOAD``), as the test suite runs them; its imports are counted once,
  apart (``shared_server_cpu_s``);
- ``fresh``: ``preload=false``, each imports them itself.

Ends with one JSON line: CPU seconds (user + system, best of ``--repeats``) per tokenizer side
and their ratio; and per smoke-run side the median wall and CPU seconds (every process of the
run) of ``--runs`` runs, and their ratios to ``fresh``.

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

from arena.run.preload import PRELOAD_ENV

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


def process_cpu(pid: int, children: bool) -> float:
    """CPU seconds of process ``pid`` itself, or of its children that it has waited for."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    first = 13 if children else 11  # cutime, cstime; utime, stime
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def smoke_run(preload: bool, shared: subprocess.Popen | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one smoke run (the CPU of all its processes: each is waited for
    by its parent, up to this one, or by the ``shared`` preload server)."""
    env = {name: value for name, value in os.environ.items() if name != PRELOAD_ENV}
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    if shared is not None:
        env[PRELOAD_ENV] = shared.args[-1]
    with tempfile.TemporaryDirectory(prefix="arena-startup-") as tmp:
        before = children_cpu() + (process_cpu(shared.pid, True) if shared else 0.0)
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
            env=env,
        )
        wall = time.perf_counter() - began
        time.sleep(0.5)  # the shared server reaps the run's children on its next tick
        after = children_cpu() + (process_cpu(shared.pid, True) if shared else 0.0)
        return wall, after - before


def shared_server(folder: str) -> subprocess.Popen:
    """``arena preload --listen``, its imports made (its log says so once it forks)."""
    path = f"{folder}/preload.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "arena", "preload", "--listen", path],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while not Path(path).exists():
        if server.poll() is not None:
            raise SystemExit("arena preload --listen did not start")
        time.sleep(0.05)
    return server


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
        with tempfile.TemporaryDirectory(prefix="arena-preload-") as folder:
            result |= smoke_runs(args.runs, shared_server(folder))
    print(json.dumps(result))


def smoke_runs(count: int, shared: subprocess.Popen) -> dict[str, float]:
    """The three sides' figures, ``count`` runs each, in turn; then ``shared`` is stopped."""
    try:
        smoke_run(True, shared)  # the first fork waits for the server's imports: not timed
        import_cpu = process_cpu(shared.pid, False)
        runs: dict[str, list[tuple[float, float]]] = {"preload": [], "shared": [], "fresh": []}
        for _ in range(count):  # interleaved, as above
            runs["preload"].append(smoke_run(True))
            runs["shared"].append(smoke_run(True, shared))
            runs["fresh"].append(smoke_run(False))
    finally:
        shared.terminate()
        shared.wait()
    figures: dict[str, float] = {}
    for side, measured in runs.items():
        figures[f"smoke_{side}_wall_s"] = round(median(w for w, _ in measured), 1)
        figures[f"smoke_{side}_cpu_s"] = round(median(c for _, c in measured), 1)
    for side in ("preload", "shared"):
        for figure in ("wall", "cpu"):
            ratio = figures[f"smoke_{side}_{figure}_s"] / figures[f"smoke_fresh_{figure}_s"]
            figures[f"{side}_over_fresh_{figure}"] = round(ratio, 2)
    figures["shared_server_cpu_s"] = round(import_cpu, 1)
    return figures


if __name__ == "__main__":
    main()
