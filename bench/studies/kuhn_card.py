"""How fast can the model learn to play Kuhn Poker by its card, with perfect labels?

The default run's Kuhn policy ends card-blind (docs/learning.md, issue 12): reinforcement learning moves
the part of the policy that ignores the card within a few steps and not the part that reads it.
This study asks whether the card is hard to learn at all, with no RL noise: supervised steps on
the exact reply of a target policy at all 12 information states, side by side for

- ``card_rule``: bet or call with the king, pass or fold with the jack, check and call with the
  queen (exploitability 1/6: it plays its card);
- ``always_bet``: bet or call at every state (exploitability 1/3, the best policy that ignores
  the card).

Same model, prompts (the run config's seat, as training renders them), learning rate and seed
for both. Each step is one AdamW step on the 12 (prompt, reply) pairs, the loss the reply tokens'
cross entropy; after it the policy is read exactly (:func:`arena.eval.policy_reader.read_seat`,
T = 1) and its exploitability computed. ``steps_to_play_the_card`` is the first step from which
the card rule's run stays below 1/3 (which no card-blind policy does); ``steps_to_always_bet``
the first from which the always-bet run stays within 0.01 of its 1/3 (None: never).

Run: .venv/bin/python bench/studies/kuhn_card.py [--config configs/selfplay_text.yaml] [--lr 2e-5] [--steps 20]
Ends with one JSON line. About 2 minutes per 20 steps of each target on 2 CPU cores.

Answered in docs/learning.md, section 2, "Even with perfect labels the card is slow to learn"
(8 steps to play the card, 1 to always bet); the latest figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
import torch

from arena.eval.exploitability import exploitability, information_states
from arena.eval.policy_reader import read_seat, state_prompt
from arena.models import load_model
from arena.play.seating import SeatFactory
from arena.policies.chat import ChatFormat
from arena.policies.hf import HFPolicy
from arena.run.config import load_run_config

GAME = "kuhn-poker-v0"
PASS, BET = 0, 1
TARGETS = ("card_rule", "always_bet")


def card_rule(key: str) -> int:
    """The card rule's action at an information state (key: card digit, then the betting)."""
    card, betting = int(key[0]), key[1:]
    if card == 2:  # king
        return BET
    if card == 0:  # jack
        return PASS
    return BET if betting.endswith("b") else PASS  # queen: check, call a bet


def always_bet(key: str) -> int:
    return BET


def train(config_path: str, target: str, lr: float, steps: int, seed: int) -> list[float]:
    """Exploitability before and after each supervised step toward ``target``."""
    config = load_run_config(config_path, [])
    torch.manual_seed(seed)
    model, tokenizer = load_model(config.model, dtype="float32", device="cpu")
    seat = SeatFactory(config.play, HFPolicy(model, tokenizer, name="probe"), ChatFormat(tokenizer))
    seat = seat.policy_seat(GAME, trained=False)
    choose = card_rule if target == "card_rule" else always_bet
    pairs = []
    for state in information_states(GAME):
        prompt = state_prompt(GAME, seat, state)
        reply = prompt.replies[choose(state.key)]
        ids = torch.as_tensor(np.concatenate([prompt.prompt_ids, reply]), dtype=torch.long)
        pairs.append((ids, len(prompt.prompt_ids), torch.as_tensor(reply, dtype=torch.long)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)

    def read() -> float:
        model.eval()
        reading = read_seat(GAME, seat, temperature=1.0)
        model.train()
        return exploitability(GAME, reading.table)

    curve = [read()]
    for _ in range(steps):
        optimizer.zero_grad()
        for ids, prompt_len, reply in pairs:
            logits = model(ids[None]).logits[0, prompt_len - 1 : -1].float()
            loss = torch.nn.functional.cross_entropy(logits, reply) / len(pairs)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        curve.append(read())
        print(f"{target}: step {len(curve) - 1}/{steps} exploitability {curve[-1]:.3f}", flush=True)
    return curve


def steps_until(curve: list[float], holds: Callable[[float], bool]) -> int | None:
    """The first step from which ``holds`` is true of every later value (None: never)."""
    for step in range(len(curve)):
        if all(holds(value) for value in curve[step:]):
            return step
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/selfplay_text.yaml", help="run config (seat)")
    parser.add_argument("--lr", type=float, default=2e-5, help="AdamW learning rate")
    parser.add_argument("--steps", type=int, default=20, help="supervised steps per target")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    out: dict[str, object] = {"bench": "kuhn_card", "lr": args.lr, "steps": args.steps}
    curves = {
        target: train(args.config, target, args.lr, args.steps, args.seed) for target in TARGETS
    }
    for target, curve in curves.items():
        out[f"{target}_exploitability"] = [round(v, 3) for v in curve]
    # only a policy that reads its card gets below 1/3; always bet is exactly 1/3
    out["steps_to_play_the_card"] = steps_until(curves["card_rule"], lambda e: e < 1 / 3)
    out["steps_to_always_bet"] = steps_until(curves["always_bet"], lambda e: abs(e - 1 / 3) < 0.01)
    out["minutes"] = round((time.monotonic() - started) / 60, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
