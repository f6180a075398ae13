"""How many self-play games the per-state step needs on Tic-Tac-Toe, measured on a table.

The default run (``configs/selfplay.yaml``) trains Tic-Tac-Toe by the per-state step
(``trainers/per_state.py``): a state seen at least ``min_visits`` times in a step moves its
log-odds over its first reply by ``eta`` times its replies' mean-advantage gap, clipped to
``max_move``. On SmolLM2 that costs about 1 s of scoring a turn and 1 s of the learner's per
(state, reply) row on this CPU, so 8 games a step is what fits the 30-minute budget, for 8 steps.

This study asks what that budget could buy at best, with the model taken out: the policy is a
table of logits per position (a softmax over the legal moves, at temperature 1), which the same
targets move *exactly*, as the per-state step moves the model's log-odds to first order. The
table cannot generalize from one position to another, as a model might; it also never moves a
position it did not ask to move, as a model's shared weights do. Each step plays ``--games``
self-play games with the table in both seats, takes each turn's advantage against the mean
return of its own position in the step (``key: [game, agent, prompt]``, unscaled), and moves
each position seen ``--min-visits`` times. At the listed steps it plays ``--eval-games``
against the uniformly random mover (alternating seats) and reports:

- **score** against random, win 1, draw 0.5, loss 0 (the run's eval score);
- **optimal-move rate**: the share of the table's moves that keep the best outcome minimax can
  force (``arena.eval.optimal_moves``), over those games.

Step 0 is the uniform table: the random mover itself. The Tic-Tac-Toe goals of issue 28 ask for
a score above the random mover's 95% interval and an optimal-move rate 0.10 above the start.

Usage: python bench/studies/ttt_tabular.py [--games 8 64 512] [--steps 512] [--eta 0.1] [--seed 0]
Ends with one JSON line.

Answered in docs/learning.md, section 1, "How many games Tic-Tac-Toe needs: the data budget,
not the step" (about 16,000 games at 64 a step); the latest figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections import defaultdict

import numpy as np

from arena.eval.optimal_moves import move_values, outcome
from games.tictactoe import Board

Table = dict[Board, np.ndarray]


def probabilities(table: Table, board: Board) -> np.ndarray:
    logits = table.get(board)
    if logits is None:
        return np.full(len(board.moves()), 1.0 / len(board.moves()))
    e = np.exp(logits - logits.max())
    return e / e.sum()


def self_play(table: Table, rng: random.Random) -> list[tuple[Board, int, float]]:
    """One game, the table in both seats: (position, move index, the mover's final return)."""
    board, turns = Board(), []
    while board.result() is None:
        index = rng.choices(range(len(board.moves())), probabilities(table, board))[0]
        turns.append((board, index, board.player))
        board = board.play(board.moves()[index])
    result = board.result()
    assert result is not None
    return [(b, i, result[player]) for b, i, player in turns]


def per_state_step(
    table: Table,
    turns: list[tuple[Board, int, float]],
    eta: float,
    max_move: float,
    min_visits: int,
) -> int:
    """Move each position seen ``min_visits`` times as ``trainers/per_state.py`` asks; returns
    how many positions moved."""
    returns: dict[Board, list[float]] = defaultdict(list)
    for board, _, ret in turns:
        returns[board].append(ret)
    sums: dict[Board, np.ndarray] = {}
    visits: dict[Board, np.ndarray] = {}
    for board, index, ret in turns:
        k = len(board.moves())
        sums.setdefault(board, np.zeros(k))[index] += ret - np.mean(returns[board])
        visits.setdefault(board, np.zeros(k))[index] += 1
    moved = 0
    for board, count in visits.items():
        if count.sum() < min_visits:
            continue
        mean = np.divide(sums[board], count, out=np.zeros_like(count), where=count > 0)
        dz = np.clip(eta * (mean[1:] - mean[0]), -max_move, max_move)
        logits = table.setdefault(board, np.zeros(len(count)))
        logits[1:] += dz
        moved += 1
    return moved


def evaluate(table: Table, games: int, rng: random.Random) -> tuple[float, float]:
    """(score, optimal-move rate) of the table against the random mover, alternating seats."""
    points, optimal, moves = 0.0, 0, 0
    for game in range(games):
        seat, board = game % 2, Board()
        while board.result() is None:
            legal = board.moves()
            if board.player == seat:
                index = rng.choices(range(len(legal)), probabilities(table, board))[0]
                values = move_values(board)
                best = max(outcome(v) for v in values.values())
                optimal += outcome(values[legal[index]]) == best
                moves += 1
            else:
                index = rng.randrange(len(legal))
            board = board.play(legal[index])
        result = board.result()
        assert result is not None
        points += (result[seat] + 1) / 2
    return points / games, optimal / moves


def wilson(p: float, n: int) -> tuple[float, float]:
    z = 1.959964
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--games", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--eta", type=float, default=0.1)
    parser.add_argument("--max-move", type=float, default=0.5)
    parser.add_argument("--min-visits", type=int, default=2)
    parser.add_argument("--eval-games", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    checkpoints = sorted({0, 8, *(2**k for k in range(4, 20) if 2**k <= args.steps), args.steps})
    started = time.perf_counter()
    runs = []
    for games in args.games:
        rng, table = random.Random(args.seed), {}
        curve = []
        for step in range(args.steps + 1):
            if step in checkpoints:
                score, rate = evaluate(table, args.eval_games, random.Random(args.seed + 1))
                curve.append({"step": step, "score": round(score, 3), "optimal": round(rate, 3)})
                print(f"games {games:>4} step {step:>4}: score {score:.3f}  optimal {rate:.3f}")
            if step < args.steps:
                turns = [t for _ in range(games) for t in self_play(table, rng)]
                per_state_step(table, turns, args.eta, args.max_move, args.min_visits)
        start = curve[0]
        _, score_high = wilson(start["score"], args.eval_games)
        goal = next(
            (
                c["step"]
                for c in curve
                if c["optimal"] >= start["optimal"] + 0.10 and c["score"] > score_high
            ),
            None,
        )
        runs.append(
            {
                "games_per_step": games,
                "curve": curve,
                "first_checkpoint_meeting_both_goals": goal,
                "games_to_goal": None if goal is None else goal * games,
            }
        )
    eight = next((r for r in runs if r["games_per_step"] == 8), None)
    out = {
        "bench": "ttt_tabular",
        "eta": args.eta,
        "min_visits": args.min_visits,
        "eval_games": args.eval_games,
        "runs": runs,
        "budget_8_games_8_steps": None if eight is None else eight["curve"][1],
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
