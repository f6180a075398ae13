"""Does the default run learn? ``arena train configs/selfplay.yaml`` on two seeds, judged on the
goals of docs/learning.md: invalid rates, scores against random and against each game's strongest
bot beside a random mover's, Kuhn exploitability before and after (counted below 1/3 only past
:data:`CARD_MARGIN`), and Tic-Tac-Toe's optimal-move rate.

Each seed is one full run (11-12 minutes on a 2-core CPU with native bf16; 25 in float32,
measured before the evaluation after training added the strongest bots), so this is not part of
``make test``. ``--use RUN_DIR ...`` judges finished runs instead of starting new ones. Ends with
one JSON line.

Run: .venv/bin/python bench/learning.py [key=value ...] [--seeds 0 1] [--use RUN_DIR ...]
(config overrides for every run come before ``--seeds``, e.g. ``learner.loss.minibatches=2``).
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
CARD_MARGIN = 0.01
"""How far below 1/3 Kuhn's exploitability must fall to count as playing the card. "Always bet"
is exactly 1/3; a policy that bets with probability 1 - 1e-6 and leans on its card in the last
digits reads 0.33333, which no one would call playing the card (a hundredth of a chip a hand;
the card rule is 1/6)."""


def train(seed: int, overrides: list[str]) -> tuple[Path, float]:
    """One run of the default config; its directory and its minutes."""
    name = f"learning-s{seed}"
    started = time.monotonic()
    argv = [sys.executable, "-m", "arena", "train", "configs/selfplay.yaml", f"seed={seed}"]
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
    out["ttt_optimal_move_rate_after"] = summary.get(TTT, {}).get("optimal_move_rate_after")
    return out


def goals(run: dict[str, Any]) -> dict[str, bool]:
    """The goals (docs/learning.md) for one seed."""

    def below(key: str, limit: float) -> bool:
        value = run.get(key)
        return value is not None and value <= limit

    before, after = run.get("kuhn_exploitability_before"), run.get("kuhn_exploitability_after")
    return {
        "invalid_at_most_5pct": below("ttt_invalid_after", 0.05)
        and below("kuhn_invalid_after", 0.05),
        "invalid_not_rising": not run["ttt_invalid_rising"] and not run["kuhn_invalid_rising"],
        "kuhn_exploitability_down_and_below_third": before is not None
        and after is not None
        and after < before
        and after < 1 / 3 - CARD_MARGIN,
        "ttt_score_at_least_0.6": (run.get("ttt_score_after") or 0.0) >= 0.6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--use", nargs="+", default=None, help="judge these finished runs")
    parser.add_argument("overrides", nargs="*", help="key=value for every run")
    args = parser.parse_args()
    if args.use:
        runs = [judge(Path(path).resolve(), None) for path in args.use]
    else:
        runs = [judge(*train(seed, args.overrides)) for seed in args.seeds]
    for run in runs:
        run["goals"] = goals(run)
        print(json.dumps(run))
    minutes = [r["minutes"] for r in runs if "minutes" in r]
    print(
        json.dumps(
            {
                "bench": "learning",
                "minutes": max(minutes) if minutes else None,
                "runs": runs,
                "all_goals_met": all(all(r["goals"].values()) for r in runs),
            }
        )
    )


if __name__ == "__main__":
    main()
