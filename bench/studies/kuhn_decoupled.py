"""Is Kuhn's card hard to learn because every state's update moves every other state?

The choice policy's Kuhn runs end card-blind: always bet, exploitability 1/3 (docs/learning.md,
section 1). This study separates the two suspects, noise and coupling, by taking noise out: each
step uses the *exact* counterfactual values of the current policy in self-play (a walk of the
game tree, no sampled hands), and asks every one of the 12 information states to move its
log-odds of betting (or calling) by ``--eta`` times the value of that action over the other.

The targets go into one LoRA adapter (r = 8 on every projection of the frozen base) two ways,
each from the same start, and each step the same length in parameter space:

- ``plain``: the gradient step, ``J^T dz`` (``J``: the 12 states' log-odds gradients). Two
  states whose prompts differ by the card's token alone have nearly the same gradient, so a step
  that raises the king's call raises the jack's too (``coupling`` reports how near: the norm of
  the difference of the jack's and the king's calling gradients over the norm of the jack's).
- ``decoupled``: ``J^T (J J^T + damping)^-1 dz``, the step that, to first order, moves each
  state's log-odds by its own target and no other (a natural gradient in the space of the 12
  states' log-odds).

A third arm, ``sampled``, takes the decoupled step on values estimated from ``--hands``
self-play hands a step (the mean return after each action, per state) instead of the exact ones:
what a learner would have.

The policy is read exactly after each step (softmax over the legal replies at T = 1) and its
exploitability computed. Ends with one JSON line: each arm's exploitability per step, its
P(call) holding J / Q / K at the end, and how far the states moved against their targets.

Run: .venv/bin/python bench/studies/kuhn_decoupled.py [--steps 8] [--eta 0.05] [--damping 1e-4]
About 1 minute per step of each arm on 2 CPU cores (float32).

Answered in docs/learning.md, section 1, "What holds the card back: coupling first, then
noise" (coupling: with exact values the plain step ends card-blind, the decoupled one reads the
card), and its ``ppo`` arm under "The per-state step: Kuhn reads its card"; the latest figures
are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import pyspiel
import torch
from kuhn_choose import GAME, LegalPolicy, play
from torch.nn.utils import parameters_to_vector

from arena.eval.exploitability import exploitability
from arena.models.adapter_shape import DEFAULT_TARGET_MODULES, AdapterShape
from arena.models.lora import adapter_parameters, add_adapters

PROJECTIONS = DEFAULT_TARGET_MODULES
"""Every projection of each layer: ``learner.lora``'s default modules."""
ARMS = ("plain", "decoupled", "sampled", "ppo")
"""``sampled``: the decoupled step on values estimated from ``--hands`` self-play hands;
``ppo``: the learner's clipped step on those hands, ``--epochs`` Adam steps a batch."""


def sampled_values(
    table: dict[str, list[float]], hands: int, rng: np.random.Generator
) -> dict[str, float]:
    """Per information state, the mean return after bet (or call) minus after pass (or fold)
    over ``hands`` self-play hands; 0 where either action went unplayed."""
    returns: dict[tuple[str, int], list[float]] = {}
    for _, key, action, result in play(table, hands, rng):
        returns.setdefault((key, action), []).append(result)
    return {
        key: float(np.mean(returns[key, 1]) - np.mean(returns[key, 0]))
        if (key, 0) in returns and (key, 1) in returns
        else 0.0
        for key in table
    }


def ppo_step(
    policy: AdaptedPolicy,
    optimizer: torch.optim.Optimizer,
    table: dict[str, list[float]],
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> None:
    """``--epochs`` Adam steps on PPO's clipped surrogate over ``--hands`` self-play hands, each
    turn's advantage its return less the mean return of its information state, over the batch's
    standard deviation. Turns of one (state, action) share a ratio, so they enter as counts."""
    turns = play(table, args.hands, rng)
    by_state: dict[str, list[float]] = {}
    for _, key, _, result in turns:
        by_state.setdefault(key, []).append(result)
    centered = np.array([r - np.mean(by_state[k]) for _, k, _, r in turns])
    scale = centered.std() + 1e-6
    weight = torch.zeros(len(policy.keys), 2, dtype=torch.float64)
    for (_, key, action, _), value in zip(turns, centered / scale, strict=True):
        weight[policy.keys.index(key), action] += value / len(turns)
    old = torch.log(torch.as_tensor([table[k] for k in policy.keys], dtype=torch.float64))
    for _ in range(args.epochs):
        log_pi = policy.log_policy(policy.keys).double()
        ratio = (log_pi - old).exp()
        clipped = ratio.clamp(1 - args.clip, 1 + args.clip)
        loss = -torch.minimum(ratio * weight, clipped * weight).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def action_values(table: dict[str, list[float]]) -> dict[str, float]:
    """Per information state, the counterfactual value of bet (or call) minus pass (or fold) for
    the player to move, when both seats play ``table``: each history of the state weighted by its
    probability (own reach is the same across one state's histories, so it cancels)."""
    game = pyspiel.load_game("kuhn_poker")
    gap = dict.fromkeys(table, 0.0)
    reach = dict.fromkeys(table, 0.0)

    def walk(state: Any, p: float) -> np.ndarray:
        if state.is_terminal():
            return np.asarray(state.returns())
        if state.is_chance_node():
            return sum(q * walk(state.child(a), p * q) for a, q in state.chance_outcomes())
        player = state.current_player()
        key = state.information_state_string(player)
        pi = np.asarray(table[key]) / sum(table[key])
        values = [walk(state.child(a), p * pi[a]) for a in (0, 1)]
        gap[key] += p * (values[1][player] - values[0][player])
        reach[key] += p
        return pi[0] * values[0] + pi[1] * values[1]

    walk(game.new_initial_state(), 1.0)
    return {key: gap[key] / reach[key] for key in table}


class AdaptedPolicy(LegalPolicy):
    """The legal-reply policy of :class:`kuhn_choose.LegalPolicy` through one LoRA adapter,
    the only weights that train."""

    def __init__(self, config: str, seed: int) -> None:
        torch.manual_seed(seed)
        super().__init__(config, 1.0, "float32")
        add_adapters(self.model, ["arm"], AdapterShape(r=8, alpha=16.0, target_modules=PROJECTIONS))
        self.adapter = "arm"
        self.model.requires_grad_(False)
        self.params = adapter_parameters(self.model, "arm")
        for weight in self.params:
            weight.requires_grad_(True)
        self.keys = list(self.prompts)

    def log_odds_gradients(self) -> torch.Tensor:
        """[12, P] the gradient of each state's log-odds of bet over pass."""
        rows = []
        for key in self.keys:
            for weight in self.params:
                weight.grad = None
            log_pi = self.log_policy([key])[0]
            (log_pi[1] - log_pi[0]).backward()
            rows.append(parameters_to_vector(w.grad for w in self.params))
        return torch.stack(rows).double()

    def move(self, delta: torch.Tensor) -> None:
        """Add ``delta`` in place (the adapter's weights are views of one buffer: keep them)."""
        with torch.no_grad():
            offset = 0
            for weight in self.params:
                weight += delta[offset : offset + weight.numel()].view_as(weight)
                offset += weight.numel()


def log_odds(table: dict[str, list[float]], keys: list[str]) -> np.ndarray:
    return np.array([np.log(table[k][1] / table[k][0]) for k in keys])


def run_arm(args: argparse.Namespace, arm: str) -> dict[str, Any]:
    policy = AdaptedPolicy(args.config, args.seed)
    keys = policy.keys
    rng = np.random.default_rng(args.seed)
    curve, tracking, coupling = [], [], None
    table = policy.table()
    optimizer = torch.optim.Adam(policy.params, lr=args.lr)
    for step in range(args.steps + 1):
        curve.append(round(exploitability(GAME, table), 3))
        call = {card: round(table[f"{i}b"][1], 2) for i, card in enumerate("JQK")}
        print(f"{arm}: step {step} exploitability {curve[-1]} P(call) {call}", flush=True)
        if step == args.steps:
            break
        if arm == "ppo":
            ppo_step(policy, optimizer, table, args, rng)
            table = policy.table()
            continue
        if arm == "sampled":
            values = sampled_values(table, args.hands, rng)
        else:
            values = action_values(table)
        target = np.array([args.eta * values[k] for k in keys])
        grads = policy.log_odds_gradients()
        if coupling is None:
            jack, king = grads[keys.index("0b")], grads[keys.index("2b")]
            coupling = round(float((jack - king).norm() / jack.norm()), 4)
        gram = grads @ grads.T
        gram += args.damping * gram.diagonal().mean() * torch.eye(len(keys), dtype=gram.dtype)
        decoupled = grads.T @ torch.linalg.solve(gram, torch.as_tensor(target))
        if arm == "plain":
            plain = grads.T @ torch.as_tensor(target)
            delta = plain * (decoupled.norm() / plain.norm())
        else:
            delta = decoupled
        before = log_odds(table, keys)
        policy.move(delta.float())
        table = policy.table()
        moved = log_odds(table, keys) - before
        # the share of each state's move that went the way its target asked
        tracking.append(round(float(np.mean(np.sign(moved) == np.sign(target))), 3))
    return {
        "exploitability": curve,
        "call_after": call,
        "moved_with_target": tracking,
        "coupling": coupling,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/selfplay.yaml", help="run config (seat)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--eta", type=float, default=0.05, help="log-odds per chip of value")
    parser.add_argument("--damping", type=float, default=1e-4, help="of the Gram's mean diagonal")
    parser.add_argument("--hands", type=int, default=64, help="per step of the sampled arm")
    parser.add_argument("--epochs", type=int, default=8, help="Adam steps a batch (ppo arm)")
    parser.add_argument("--lr", type=float, default=1e-4, help="Adam's (ppo arm)")
    parser.add_argument("--clip", type=float, default=0.2, help="PPO's ratio clip (ppo arm)")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    out: dict[str, Any] = {"bench": "kuhn_decoupled", **vars(args)}
    for arm in args.arms:
        result = run_arm(args, arm)
        coupling = result.pop("coupling")
        if coupling is not None:
            out["coupling"] = coupling
        out.update({f"{arm}_{name}": value for name, value in result.items()})
    for arm in args.arms:
        out[f"{arm}_below_0.25"] = out[f"{arm}_exploitability"][-1] <= 0.25
    out["minutes"] = round((time.monotonic() - started) / 60, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
