"""Does the default run learn strategy? ``arena train configs/selfplay.yaml`` (seats choosing among
their legal replies) on two seeds, judged on the goals of docs/learning.md: Kuhn Poker's
exploitability after training at most 0.25 (always bet is 1/3), and at most the card rule's
1/6; Tic-Tac-Toe's score against ``random-v0`` above the upper end of a random mover's 95%
interval on the same games, its optimal-move rate at least 0.10 above the rate before
training, and more draws against ``minimax-v0`` than the random mover gets (a score there is
half the draws: minimax never loses).
``--config configs/selfplay_text.yaml`` judges the free-generation run instead, on its own goal:
invalid replies at most 5% after training.

Each seed is one full run, so this is not part of ``make test``. ``--use RUN_DIR ...`` judges
finished runs instead of starting new ones. Ends with one JSON line.

Run: .venv/bin/python bench/learning.py [key=value ...] [--seeds 0 1] [--config CONFIG]
[--use RUN_DIR ...] (config overrides for every run come before ``--seeds``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TTT, KUHN = "tictactoe-v0", "kuhn-poker-v0"
KUHN_GOAL = 0.25
"""Kuhn exploitability after training: below always bet's 1/3 by a margin no card-blind policy
reaches."""
CARD_RULE = 1 / 6
"""Kuhn exploitability of the card rule (bet or call with the king, check or fold the jack, check
or call the queen): the goal of scoring at the matmul limit (issue 40), more learning a minute."""
OPTIMAL_MOVE_GAIN = 0.10


def train(seed: int, overrides: list[str], config: str) -> tuple[Path, float]:
    """One run of ``config``; its directory and its minutes."""
    name = f"{Path(config).stem}-s{seed}"
    started = time.monotonic()
    argv = [sys.executable, "-m", "arena", "train", config, f"seed={seed}"]
    subprocess.run([*argv, f"name={name}", *overrides], cwd=ROOT, check=True)
    minutes = (time.monotonic() - started) / 60
    return sorted((ROOT / "runs" / name).iterdir())[-1], minutes


def invalid_trend(run_dir: Path, game: str) -> list[float]:
    """The training invalid rate of ``game`` per step, from ``metrics.jsonl``."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r[f"invalid_rate/{game}/player"] for r in rows if f"invalid_rate/{game}/player" in r]


def judge(run_dir: Path, minutes: float | None) -> dict[str, Any]:
    """The figures of one run, from its ``eval_summary.json`` and ``metrics.jsonl``."""
    summary = json.loads((run_dir / "eval_summary.json").read_text())
    out: dict[str, Any] = {"run": str(run_dir.relative_to(ROOT))}
    if minutes is not None:
        out["minutes"] = round(minutes, 1)
    for game, short in ((TTT, "ttt"), (KUHN, "kuhn")):
        row = summary.get(game, {})
        for key in ("invalid_rate_before", "invalid_rate_after"):
            out[f"{short}_{key.replace('_rate', '')}"] = row.get(key)
        out[f"{short}_score_before"] = row.get("score_vs_random_before")
        out[f"{short}_score_after"] = row.get("score_vs_random_after")
        out[f"{short}_random_baseline_score"] = row.get("random_baseline_score")
        out[f"{short}_random_baseline_score_ci"] = row.get("random_baseline_score_ci")
        # against the strongest bot (minimax, the Kuhn Nash policy), where the run played it
        out[f"{short}_score_vs_strongest_after"] = row.get("score_vs_strongest_after")
        out[f"{short}_random_baseline_score_vs_strongest"] = row.get(
            "random_baseline_score_vs_strongest"
        )
        last = invalid_trend(run_dir, game)[-3:]
        out[f"{short}_invalid_last3"] = [round(v, 3) for v in last]
        out[f"{short}_invalid_rising"] = len(last) == 3 and last[0] < last[1] < last[2]
    out["kuhn_exploitability_before"] = summary.get(KUHN, {}).get("kuhn_exploitability_before")
    out["kuhn_exploitability_after"] = summary.get(KUHN, {}).get("kuhn_exploitability_after")
    out["kuhn_exploitability_temperature"] = summary.get(KUHN, {}).get(
        "kuhn_exploitability_temperature"
    )
    for when in ("before", "after"):
        key = f"optimal_move_rate_{when}"
        out[f"ttt_{key}"] = summary.get(TTT, {}).get(key)
    return out


def goals(run: dict[str, Any], text: bool = False) -> dict[str, bool]:
    """The goals (docs/learning.md) for one seed: the choice run's, or with ``text`` the
    free-generation run's."""

    def known(*keys: str) -> bool:
        return all(run.get(k) is not None for k in keys)

    if text:
        return {
            "invalid_at_most_5pct": known("ttt_invalid_after", "kuhn_invalid_after")
            and run["ttt_invalid_after"] <= 0.05
            and run["kuhn_invalid_after"] <= 0.05
        }
    ci = run.get("ttt_random_baseline_score_ci") or [None, None]
    return {
        "kuhn_exploitability_at_most_0.25": known("kuhn_exploitability_after")
        and run["kuhn_exploitability_after"] <= KUHN_GOAL,
        "kuhn_exploitability_at_most_card_rule": known("kuhn_exploitability_after")
        and run["kuhn_exploitability_after"] <= CARD_RULE,
        "ttt_above_random_mover_interval": known("ttt_score_after")
        and ci[1] is not None
        and run["ttt_score_after"] > ci[1],
        "ttt_optimal_moves_up_0.10": known(
            "ttt_optimal_move_rate_before", "ttt_optimal_move_rate_after"
        )
        and run["ttt_optimal_move_rate_after"]
        >= run["ttt_optimal_move_rate_before"] + OPTIMAL_MOVE_GAIN,
        "ttt_more_draws_vs_minimax_than_random": known(
            "ttt_score_vs_strongest_after", "ttt_random_baseline_score_vs_strongest"
        )
        and run["ttt_score_vs_strongest_after"] > run["ttt_random_baseline_score_vs_strongest"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--use", nargs="+", default=None, help="judge these finished runs")
    parser.add_argument("--config", default="configs/selfplay.yaml", help="the run config")
    parser.add_argument("overrides", nargs="*", help="key=value for every run")
    args = parser.parse_args()
    if args.use:
        runs = [judge(Path(path).resolve(), None) for path in args.use]
    else:
        runs = [judge(*train(seed, args.overrides, args.config)) for seed in args.seeds]
    text = Path(args.config).stem == "selfplay_text"
    for run in runs:
        run["goals"] = goals(run, text)
        print(json.dumps(run))
    minutes = [r["minutes"] for r in runs if "minutes" in r]
    print(
        json.dumps(
            {
                "bench": "learning",
                "config": args.config,
                "minutes": max(minutes) if minutes else None,
                "runs": runs,
                "all_goals_met": all(all(r["goals"].values()) for r in runs),
            }
        )
    )


if __name__ == "__main__":
    main()
