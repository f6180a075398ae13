"""Matches per second of a tournament: one match at a time against the concurrent scheduler.

The Tic-Tac-Toe round robin of ``configs/tournament.yaml`` (the random bot, minimax, and three
participants of the embedded SmolLM2, all served by one inference actor: ten pairings,
seat-swapped pairs) is played twice through
:func:`arena.tournament.runner.run_tournament`: with ``concurrency=1`` (sequential, one match at
a time) and with ``concurrency=32`` (matches concurrent, every model request batched by the one
inference actor the model participants share). With ``--act choice`` (the default) every model
participant plays by choice (``arena/play/choice.py``: its turns are scoring requests, which the
actor computes a batch at a time, prompts and replies in one forward); ``--act text`` keeps the
config's acting (two participants generate). Only the playing is timed: each run's model loading
is excluded. Both runs must record the same outcomes (the same seeds, whatever the concurrency):
the line says how many matches differ. Ends with one JSON line.

Run: .venv/bin/python bench/tournament.py [--pairs 4] [--act choice|text] [--dtype auto]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
from pathlib import Path

from arena.tournament.config import load_tournament_config
from arena.tournament.runner import run_tournament

ROOT = Path(__file__).resolve().parents[1]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            flags = Path("/proc/cpuinfo").read_text()
            bf16 = "avx512_bf16" in flags
            return f"{line.split(':', 1)[1].strip()} (AVX512-BF16: {'yes' if bf16 else 'no'})"
    return platform.processor()


def play(
    pairs: int, concurrency: int, out: Path, backend: str, dtype: str, act: str
) -> tuple[int, float, dict[str, tuple[str, ...]]]:
    """(matches played, seconds of play, each match's outcome by id)."""
    overrides = [f"pairs={pairs}", f"concurrency={concurrency}", f"out={out}"]
    overrides += ["exploitability=false"]
    for i in (2, 3, 4):  # the model participants
        overrides += [f"participants.{i}.backend={backend}", f"participants.{i}.dtype={dtype}"]
        if act == "choice":
            overrides += [f"participants.{i}.act=choice"]
    config = load_tournament_config(str(ROOT / "configs" / "tournament.yaml"), overrides)
    result = run_tournament(config, on_line=lambda line: None)
    outcomes = {}
    for line in (out / "matches.jsonl").read_text().splitlines():
        record = json.loads(line)
        outcomes[record["id"]] = tuple(
            str(record.get(key)) for key in ("scores", "moves", "turns", "tokens", "termination")
        )
    return result.played, result.seconds, outcomes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=4, help="seat-swapped pairs per pairing")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--backend", default="hf", choices=("hf", "vllm"), help="model serving")
    parser.add_argument("--dtype", default="auto", help="model dtype (auto: the fastest here)")
    parser.add_argument("--act", default="choice", choices=("choice", "text"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        arms = [(1, "sequential"), (args.concurrency, "parallel")]
        (n_seq, s_seq, seq), (n_par, s_par, par) = (
            play(args.pairs, c, Path(tmp) / name, args.backend, args.dtype, args.act)
            for c, name in arms
        )
    sequential, parallel = n_seq / s_seq, n_par / s_par
    print(f"sequential: {n_seq} matches in {s_seq:.1f} s")
    print(f"concurrent ({args.concurrency}): {n_par} matches in {s_par:.1f} s")
    print(
        json.dumps(
            {
                "bench": "tournament",
                "cpu": cpu_name(),
                "backend": args.backend,
                "dtype": args.dtype,
                "act": args.act,
                "matches": n_par,
                "sequential_matches_per_s": round(sequential, 3),
                "parallel_matches_per_s": round(parallel, 3),
                "speedup": round(parallel / sequential, 2),
                "outcomes_differ": sum(seq[k] != par.get(k) for k in seq),
            }
        )
    )


if __name__ == "__main__":
    main()
