"""Does the card get learned when the model only ever plays legal replies?

In the default run the Kuhn seat writes free text, and format learning pushes up whichever legal
reply the prompt makes likelier, in every state alike (docs/learning.md, "Why format learning picks one
action"). This study removes format from the problem to see what reinforcement learning does with
the card alone. The policy that plays is the one :func:`arena.eval.policy_reader.read_seat`
reads: at each information state, the softmax over the legal actions of their canonical replies'
sequence log-probabilities (logits / ``--temperature``), so no reply is ever invalid. Each step:

1. read that policy exactly at all 12 information states and compute its exploitability;
2. play ``--episodes`` self-play hands with it (OpenSpiel's ``kuhn_poker``, both seats the same
   policy); each decision is a turn whose return is its seat's result of the hand;
3. normalize the returns into advantages per key: ``seat`` (the default run's MARS keying,
   game and seat) or ``state`` (one baseline per information state: an action is compared only
   with the other actions taken where the same card and betting were seen);
4. ``--minibatches`` AdamW steps on REINFORCE over the legal-normalized log-probability
   (gradient through every legal reply, so the mass left to invalid replies gets none), minus
   ``--entropy`` times the entropy of the policy over the legal replies.

Two arms run side by side from the same model, seed and hands' random stream: ``seat`` with no
entropy bonus, and ``state`` with the bonus. ``below_one_third`` counts the reads below 1/3,
which only a policy that plays its card reaches (always bet: exactly 1/3).

Run: .venv/bin/python bench/studies/kuhn_choose.py [--steps 12] [--episodes 24] [--seed 0]
Ends with one JSON line. About 1 minute per step of each arm on 2 CPU cores (float32).

Answered in docs/learning.md, section 2, after "bf16 and float16 ties" (the paragraphs from
"The float32 runs": the card shows only in the second decimal after 12 steps); the latest
figures are in docs/benchmarks.md. ``bench/scoring.py`` and the other Kuhn studies reuse its
:class:`LegalPolicy`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from typing import Any

import numpy as np
import pyspiel
import torch

from arena.eval.exploitability import exploitability, information_states
from arena.eval.policy_reader import StatePrompt, state_prompt
from arena.models import fast_dtype, load_model
from arena.models.lora import route
from arena.play.seating import SeatFactory
from arena.policies.chat import ChatFormat
from arena.policies.hf import HFPolicy
from arena.run.config import load_run_config

GAME = "kuhn-poker-v0"
CHUNK = 8
"""Turns per forward and backward pass."""
ARMS = {"seat": ("seat", 0.0), "state+entropy": ("state", 0.05)}
"""Arm name -> (advantage key, entropy coefficient)."""


class LegalPolicy:
    """The model's policy over each information state's legal replies, differentiable."""

    def __init__(self, config_path: str, temperature: float, compute: str) -> None:
        config = load_run_config(config_path, [])
        self.model, tokenizer = load_model(config.model, dtype="float32", device="cpu")
        self.tokenizer = tokenizer
        seats = SeatFactory(config.play, HFPolicy(self.model, tokenizer), ChatFormat(tokenizer))
        seat = seats.policy_seat(GAME, trained=False)
        self.prompts: dict[str, StatePrompt] = {
            s.key: state_prompt(GAME, seat, s) for s in information_states(GAME)
        }
        self.temperature = temperature
        self.adapter: str | None = None
        """The LoRA adapter (``arena.models.lora``) the model plays through; None: the base."""
        self.compute_in(fast_dtype("cpu") if compute == "auto" else compute)

    def compute_in(self, compute: str) -> None:
        """Run the model's matmuls in ``compute`` (bf16: autocast over the float32 weights)."""
        bf16 = compute == "bfloat16"
        self.autocast = (
            (lambda: torch.autocast("cpu", dtype=torch.bfloat16))
            if bf16
            else contextlib.nullcontext
        )

    def log_policy(self, keys: list[str]) -> torch.Tensor:
        """[len(keys), 2] log-probabilities of pass and bet, normalized over the two."""
        rows = [
            np.concatenate([self.prompts[k].prompt_ids, self.prompts[k].replies[a]])
            for k in keys
            for a in (0, 1)
        ]
        reply_lengths = [len(self.prompts[k].replies[a]) for k in keys for a in (0, 1)]
        width = max(len(r) for r in rows)
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(rows):
            ids[i, width - len(row) :] = torch.as_tensor(row)
            mask[i, width - len(row) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        # the logits of the reply positions only: the vocabulary (49k) is most of the memory
        keep = max(reply_lengths) + 1
        routed = route(self.model, [self.adapter] * len(rows)) if self.adapter else None
        with self.autocast(), routed or contextlib.nullcontext():
            logits = self.model(
                input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep
            ).logits
        sums = []
        for i, length in enumerate(reply_lengths):
            scores = logits[i, keep - length - 1 : keep - 1].float() / self.temperature
            tokens = ids[i, width - length :]
            sums.append(torch.log_softmax(scores, -1).gather(-1, tokens[:, None]).sum())
        return torch.log_softmax(torch.stack(sums).view(len(keys), 2), -1)

    def table(self) -> dict[str, list[float]]:
        keys = list(self.prompts)
        self.model.eval()
        with torch.no_grad():
            probs = self.log_policy(keys).exp().tolist()
        self.model.train()
        return dict(zip(keys, probs, strict=True))


def play(table: dict[str, list[float]], hands: int, rng: np.random.Generator) -> list[tuple]:
    """(seat, information state, action, seat's return) of every decision in ``hands`` hands."""
    game = pyspiel.load_game("kuhn_poker")
    turns = []
    for _ in range(hands):
        state, decisions = game.new_initial_state(), []
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes, probs = zip(*state.chance_outcomes(), strict=True)
                state.apply_action(int(rng.choice(outcomes, p=probs)))
                continue
            seat = state.current_player()
            key = state.information_state_string(seat)
            action = int(rng.choice(2, p=np.asarray(table[key]) / sum(table[key])))
            decisions.append((seat, key, action))
            state.apply_action(action)
        returns = state.returns()
        turns += [(seat, key, action, returns[seat]) for seat, key, action in decisions]
    return turns


def advantages(turns: list[tuple], key: str) -> np.ndarray:
    """Returns normalized to mean 0, std 1 within each key; a key seen once gets 0."""
    groups: dict[Any, list[int]] = {}
    for i, (seat, state, _, _) in enumerate(turns):
        groups.setdefault(seat if key == "seat" else state, []).append(i)
    out = np.zeros(len(turns))
    for index in groups.values():
        returns = np.array([turns[i][3] for i in index])
        if len(index) > 1:
            out[index] = (returns - returns.mean()) / (returns.std() + 1e-6)
    return out


def train(args: argparse.Namespace, key: str, entropy: float) -> list[dict[str, Any]]:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    policy = LegalPolicy(args.config, args.temperature, args.compute)
    params = policy.model.parameters()
    if args.optimizer == "sgd":
        optimizer: torch.optim.Optimizer = torch.optim.SGD(params, lr=args.lr)
    else:
        optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    curve = []
    for step in range(args.steps + 1):
        table = policy.table()
        bet = {card: round(table[c][1], 2) for card, c in zip("JQK", "012", strict=True)}
        curve.append({"exploitability": round(exploitability(GAME, table), 3), "bet_first": bet})
        print(f"{key} entropy {entropy}: step {step} {curve[-1]}", flush=True)
        if step == args.steps:
            return curve
        turns = play(table, args.episodes, rng)
        adv = advantages(turns, key)
        for part in np.array_split(rng.permutation(len(turns)), args.minibatches):
            optimizer.zero_grad()
            # a few turns per pass keeps float32 logits (vocabulary 49k) within memory
            for chunk in np.array_split(part, max(1, len(part) // CHUNK)):
                log_pi = policy.log_policy([turns[i][1] for i in chunk])
                actions = torch.tensor([turns[i][2] for i in chunk])
                chosen = log_pi.gather(-1, actions[:, None])[:, 0]
                bonus = -(log_pi.exp() * log_pi).sum(-1)
                weight = torch.tensor(adv[chunk], dtype=torch.float32)
                loss = (-weight * chosen - entropy * bonus).sum() / len(turns)
                loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.model.parameters(), 1.0)
            optimizer.step()
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/selfplay_text.yaml", help="run config (seat)")
    parser.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw")
    parser.add_argument("--lr", type=float, default=3e-6, help="learning rate")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--episodes", type=int, default=24, help="hands per step")
    parser.add_argument("--minibatches", type=int, default=2, help="optimizer steps per batch")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument(
        "--compute",
        choices=("auto", "float32", "bfloat16"),
        default="float32",
        help="matmul dtype (float32 weights either way; bench/studies/bf16_step.py: why not bf16)",
    )
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.monotonic()
    out: dict[str, Any] = {"bench": "kuhn_choose", **vars(args)}
    for arm in args.arms:
        key, entropy = ARMS[arm]
        curve = train(args, key, entropy)
        values = [c["exploitability"] for c in curve]
        out[f"{arm}_exploitability"] = values
        out[f"{arm}_bet_first_after"] = curve[-1]["bet_first"]
        out[f"{arm}_below_one_third"] = sum(v < 1 / 3 for v in values)
    out["minutes"] = round((time.monotonic() - started) / 60, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
