"""Two models in one run against one: episodes per second of the same games, side by side.

Both arms are ``arena train`` runs of Kuhn Poker played by choice, in sync mode, with the same
steps, episodes per step and seed:

- **one**: the shared policy plays both seats (one inference actor, one learner);
- **two**: the second seat plays a named policy on a model of its own
  (``policies: {second: {model: M}}``), served by its own inference actor and trained by its own
  learner (``docs/training.md``, "Several models in one run").

Each episode has the same turns in both arms, so the ratio of episodes per second is the ratio
per model-turn. The arms alternate for ``--rounds`` rounds; the figures are medians of each run's
own ``episodes_per_s`` (``run_summary.jsonl``: over its training steps, start-up excluded).

Usage: python bench/models.py [--model tiny] [--steps 4] [--episodes 16] [--rounds 1]
Ends with one JSON line: ``one_episodes_per_s``, ``two_episodes_per_s``,
``rate_ratio_two_vs_one`` (the goal: >= 0.7).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def config_text(model: str, two: bool, steps: int, episodes: int) -> str:
    policies = (
        f"policies: {{second: {{model: {model}}}}}\nseat_policies: {{player_1: second}}\n"
        if two
        else ""
    )
    return f"""extends: {ROOT}/configs/smoke.yaml
name: models-{"two" if two else "one"}
model: {model}
steps: {steps}
checkpoint_every: {steps}
games:
  - id: kuhn-poker-v0
    act: choice
rollout: {{actors: 1, episodes_per_step: {episodes}, concurrency: {episodes}}}
eval: {{games: 0, exploitability: false}}
{policies}"""


def run_arm(model: str, two: bool, steps: int, episodes: int, folder: Path) -> dict:
    config = folder / f"{'two' if two else 'one'}-{time.monotonic_ns()}.yaml"
    config.write_text(config_text(model, two, steps, episodes))
    run_dir = folder / config.stem
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "arena", "train", str(config), f"run_dir={run_dir}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"arena train failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    summary = json.loads((run_dir / "run_summary.jsonl").read_text().splitlines()[-1])
    return {"episodes_per_s": summary["episodes_per_s"], "wall_s": time.monotonic() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="the model of both arms' policies")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--episodes", type=int, default=16, help="episodes per step")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {"one": [], "two": []}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for arm in ("one", "two") if round_ % 2 == 0 else ("two", "one"):
                result = run_arm(args.model, arm == "two", args.steps, args.episodes, Path(tmp))
                runs[arm].append(result)
                print(f"round {round_ + 1} {arm}: {result['episodes_per_s']:.2f} episodes/s")
    one = statistics.median(r["episodes_per_s"] for r in runs["one"])
    two = statistics.median(r["episodes_per_s"] for r in runs["two"])
    print(
        json.dumps(
            {
                "bench": "models",
                "model": args.model,
                "steps": args.steps,
                "episodes_per_step": args.episodes,
                "rounds": args.rounds,
                "one_episodes_per_s": round(one, 3),
                "two_episodes_per_s": round(two, 3),
                "rate_ratio_two_vs_one": round(two / one, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
