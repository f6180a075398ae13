"""The per-state step: each state of a batch moves its legal policy by its own advantages.

A gradient step on a policy over legal replies moves every state by the sum of all the states'
pushes, each through its gradient. Where two states' prompts differ by one token (the card in
Kuhn Poker), their gradients are nearly parallel (they differ by 7 % of their norm in
SmolLM2-135M), so the push of the more frequent or more rewarded action wins in both, and the
policy settles on one action everywhere, however exact the values (docs/learning.md, section
1). This step asks each distinct state ``s`` of the batch (one prompt, its legal replies, its
adapter) to move its log-odds ``z_{s,a} = log pi(a | s) - log pi(0 | s)`` by its own target::

    dz_{s,a} = clamp(eta * (Abar_{s,a} - Abar_{s,0}), -max_move, max_move)    a = 1 .. K_s - 1

where ``Abar_{s,a}`` is the mean advantage of the batch's turns that played reply ``a`` in state
``s`` (0, the batch's average by construction of the advantages, for a reply nobody played).
It then takes the smallest change of the trained parameters that does so to first order::

    dtheta = J^T (J J^T + lambda I)^-1 dz,     J = dz / dtheta, one row per (s, a)

with ``lambda = damping * mean(diag(J J^T))``: a natural-gradient step in the space of the
batch's log-odds, which leaves the states that asked for nothing where they are. The step is
added to the weights directly (the optimizer's state is not used).

Costs: one forward per state and one batched backward over its rows, and ``rows x trained parameters``
float32 gradients (an adapter's, as a rule: ``learner.lora``). A state visited fewer than
``min_visits`` times is left alone (one return says little of how its replies compare); a batch
whose rows would pass ``max_jacobian_bytes`` is refused before the first backward.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from arena.models.lora import route
from trainers.batch import Sample
from trainers.choice import legal_policy
from trainers.microbatch import collate
from trainers.update import PolicyUpdate


@dataclass(eq=False)
class State:
    """One distinct state of a batch: a turn that shows it, and what its turns earned."""

    sample: Sample
    replies: int
    advantage_sums: np.ndarray = field(init=False)
    visits_by_reply: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.advantage_sums = np.zeros(self.replies)
        self.visits_by_reply = np.zeros(self.replies, dtype=np.int64)

    @property
    def visits(self) -> int:
        return int(self.visits_by_reply.sum())

    def targets(self, eta: float, max_move: float) -> np.ndarray:
        """``dz``: each reply's target move in log-odds over reply 0 (module docstring)."""
        mean = np.divide(
            self.advantage_sums,
            self.visits_by_reply,
            out=np.zeros(self.replies),
            where=self.visits_by_reply > 0,
        )
        return np.clip(eta * (mean[1:] - mean[0]), -max_move, max_move)


def states_of(samples: Sequence[Sample]) -> list[State]:
    """The distinct states of ``samples`` in order of first appearance, with each reply's
    advantage sum and visits. Every sample must be a choice turn."""
    states: dict[tuple, State] = {}
    for sample in samples:
        if sample.choices is None:
            raise ValueError(
                f"learner.per_state trains choice turns only, but turn {sample.turn_index} of "
                f"episode {sample.episode_id} ({sample.game}, seat {sample.seat}) was generated: "
                "give every game act: choice, or turn per_state off"
            )
        key = (
            sample.prompt_ids.tobytes(),
            tuple(reply.tobytes() for reply in sample.choices),
            sample.adapter,
        )
        state = states.get(key)
        if state is None:
            state = states[key] = State(sample, len(sample.choices))
        state.advantage_sums[sample.choice_index] += sample.advantage
        state.visits_by_reply[sample.choice_index] += 1
    return list(states.values())


class PerStateUpdate(PolicyUpdate):
    """:class:`~trainers.update.PolicyUpdate`'s interface, the per-state step inside."""

    def run(
        self,
        kept: list[Sample],
        step: int,
        counters: Counter[str],
        silent: Sequence[Sample] = (),
    ) -> dict[str, float]:
        """One per-state step on the states of ``kept`` and ``silent`` (the zero-advantage
        turns count in each reply's mean advantage); metrics as :meth:`PolicyUpdate.run`'s,
        with ``per_state/*``."""
        if self.dist.world > 1:
            raise RuntimeError("learner.per_state runs in one process; it has no torchrun form")
        cfg = self.config.per_state
        start = time.perf_counter()
        states = states_of([*kept, *silent])
        trained = [s for s in states if s.visits >= cfg.min_visits and s.replies > 1]
        targets = [s.targets(cfg.eta, cfg.max_move) for s in trained]
        params = [p for p in self.model.parameters() if p.requires_grad]
        size = sum(p.numel() for p in params)
        rows = sum(len(t) for t in targets)
        if rows * size * 4 > cfg.max_jacobian_bytes:
            raise ValueError(
                f"the per-state step needs {rows} gradient rows of {size} parameters "
                f"({rows * size * 4 / 2**30:.1f} GiB), over per_state.max_jacobian_bytes "
                f"({cfg.max_jacobian_bytes / 2**30:.1f} GiB): train an adapter (learner.lora), "
                "fewer episodes a step, or raise per_state.min_visits"
            )
        turns = sum(s.visits for s in trained)
        metrics = {
            "per_state/states": float(len(trained)),
            "per_state/rows": float(rows),
            "per_state/left_turns": float(sum(s.visits for s in states) - turns),
        }
        if rows == 0:  # nothing to move: the step counts, the weights stay
            return {**metrics, "optimizer_steps": 0.0, "tokens": 0.0, "signal_share": 0.0}
        jacobian = torch.empty((rows, size), dtype=torch.float32)
        row = 0
        entropy = 0.0
        for state in trained:
            count, state_entropy = self._log_odds_gradients(state, params, jacobian[row:])
            row += count
            entropy += state_entropy * state.visits
        wanted = torch.as_tensor(np.concatenate(targets), dtype=torch.float64)
        gram = (jacobian @ jacobian.T).double()
        gram += cfg.damping * gram.diagonal().mean() * torch.eye(rows, dtype=torch.float64)
        delta = jacobian.T @ torch.linalg.solve(gram, wanted).float()
        norm = float(delta.norm())
        if not math.isfinite(norm):
            counters["skipped_nonfinite"] += 1
            return {"skipped": 1.0, **metrics}
        with torch.no_grad():
            offset = 0
            for param in params:
                param.add_(delta[offset : offset + param.numel()].view_as(param).to(param))
                offset += param.numel()
        elapsed = time.perf_counter() - start
        metrics.update(
            {
                "per_state/target_move": float(wanted.abs().mean()),
                "entropy": entropy / turns,
                "step_norm": norm,
                "optimizer_steps": 1.0,
                "tokens": float(turns),
                "signal_share": turns / max(len(kept) + len(silent), 1),
                "update_time": elapsed,
            }
        )
        return metrics

    def _log_odds_gradients(
        self, state: State, params: list[torch.nn.Parameter], out: torch.Tensor
    ) -> tuple[int, float]:
        """Write the gradient of each of ``state``'s log-odds over reply 0 into ``out``'s first
        rows (one forward, one batched backward); the row count and the legal entropy."""
        mb = collate([state.sample], self.pad_id).to(self.device)
        with route(self.model, mb.row_adapters or []), self.autocast():
            tokens, _ = self.policy(*mb.forward_args())
        loss = self.config.loss
        _, temperature = mb.temperatures(loss.temperature, loss.adapter_temperatures)
        log_pi, entropy = legal_policy(tokens, mb, temperature)
        log_odds = log_pi[1:] - log_pi[0]
        count = len(log_odds)
        # all of the state's rows in one batched backward (one vector-Jacobian product each)
        grads = torch.autograd.grad(
            log_odds,
            params,
            grad_outputs=torch.eye(count, dtype=log_odds.dtype, device=log_odds.device),
            is_grads_batched=True,
            allow_unused=True,
        )
        offset = 0
        for grad, param in zip(grads, params, strict=True):
            if grad is None:
                out[:count, offset : offset + param.numel()] = 0.0
            else:
                out[:count, offset : offset + param.numel()] = grad.reshape(count, -1)
            offset += param.numel()
        return count, float(entropy.detach().sum())
