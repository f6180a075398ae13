"""From samples to padded micro-batches, each shared prompt computed once.

A row of a micro-batch is one prompt followed by the sequences that continue it: the legal
replies of a choice turn, the responses of the samples that saw the same prompt (a GRPO group's
first turns), or a single response. Each continuation attends to the prompt and to its own
earlier tokens only, and its positions restart where the prompt ends, so every token sees
exactly the context it had when sampled (PrefixGrouper's shared-prefix attention); the gradient
equals one row per sequence (``batch.shared_prefix: false``), at a fraction of the tokens. A row
with one continuation is the plain causal layout ``prompt + response[:-1]`` with a 2-D padding
mask; a micro-batch with any shared row gets a 4-D mask.

The model reads the row and scores ``M`` tokens: each continuation token, predicted at the last
prompt position (its first token) or at its own previous token; generated samples' tokens come
first, in sample order, so for a batch without choice turns the scored tokens are the loss
elements themselves. The loss has ``N`` *elements*:
one per generated token (the generated samples' tokens, in sample order), then one per choice
turn (:mod:`trainers.choice` reduces its replies' tokens to the log-probability of the played
reply under the legal-normalized policy). Per-element fields (sampler logprobs, advantages,
weights, lengths) are flat ``[N]`` vectors in that order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from trainers.batch import Sample


@dataclass
class MicroBatch:
    """Padded rows, the scored tokens, and the flat per-element fields (module docstring)."""

    input_ids: torch.Tensor
    """[B, W] token ids, right-padded."""
    attention_mask: torch.Tensor
    """[B, W] 1 for real tokens, or [B, 1, W, W] bool (True: may attend) with shared rows."""
    position_ids: torch.Tensor | None
    """[B, W] positions (continuations restart after their prompt); None for plain rows."""
    predict_at: torch.Tensor
    """[M] flat index into ``B * W`` of the position that predicts each scored token."""
    targets: torch.Tensor
    """[M] each scored token's id."""
    choice_token: torch.Tensor
    """[M] bool: the token belongs to a legal reply of a choice turn (scored at T = 1)."""
    generated: torch.Tensor
    """[N_gen] index into the M scored tokens of each generated element."""
    reply_tokens: torch.Tensor
    """[M_choice] index into the M scored tokens of each legal-reply token."""
    reply_of_token: torch.Tensor
    """[M_choice] the reply each of those tokens belongs to."""
    reply_turn: torch.Tensor
    """[R] the choice turn (0..C-1) each reply belongs to."""
    chosen_reply: torch.Tensor
    """[C] the played reply of each choice turn."""
    sampler_logprobs: torch.Tensor
    """[N] the sampler's logprob of each element."""
    advantages: torch.Tensor
    """[N] the turn's advantage, repeated on each of its elements."""
    weights: torch.Tensor
    """[N] the turn's loss weight, repeated on each of its elements."""
    seq_index: torch.Tensor
    """[N] the sample each element belongs to."""
    seq_lengths: torch.Tensor
    """[N] the element count of the sample each element belongs to (1 for a choice turn)."""
    samples: list[Sample]
    row_adapters: list[str | None] | None = None
    """The adapter of each row (named policies; ``arena/models/lora.py``), None: the base."""
    prox_logprobs: torch.Tensor | None = None
    """[N] the learner's logprobs before this batch's first update (set by the first pass)."""
    ref_logprobs: torch.Tensor | None = None
    """[N] the frozen reference's logprobs (when a KL term is on)."""
    agg_weights: torch.Tensor | None = None
    """[N] each element's aggregation weight over the global batch (trainers/losses.py)."""

    @property
    def num_tokens(self) -> int:
        """Loss elements (trained tokens, and one per choice turn)."""
        return int(self.sampler_logprobs.numel())

    @property
    def num_input_tokens(self) -> int:
        """Real input tokens, padding excluded."""
        mask = self.attention_mask
        if mask.ndim == 4:  # a real token attends at least to itself
            return int(mask[:, 0].diagonal(dim1=-2, dim2=-1).sum())
        return int(mask.sum())

    def forward_args(self) -> tuple[torch.Tensor, ...]:
        """The arguments of :class:`trainers.logprobs.TokenLogprobs`' forward."""
        position_ids = self.position_ids if self.position_ids is not None else torch.empty(0)
        return (
            self.input_ids,
            self.attention_mask,
            position_ids,
            self.predict_at,
            self.targets,
            self.choice_token,
        )

    def temperatures(
        self, default: float, by_adapter: dict[str, float]
    ) -> tuple[float | torch.Tensor, float | torch.Tensor]:
        """The temperature each scored token was sampled at (``[M]``; 1 for a legal reply's
        token, whose sequence sum is tempered as a whole) and each choice turn's (``[C]``):
        ``by_adapter`` for the rows of an adapter it names, ``default`` for the others. Both
        plain ``default`` when every turn shares it."""
        temps = [by_adapter.get(s.adapter or "", default) for s in self.samples]
        if all(t == default for t in temps):
            return default, default
        device = self.targets.device
        generated = [
            (t, len(s.response_ids))
            for t, s in zip(temps, self.samples, strict=True)
            if not s.choices
        ]
        token = torch.ones(len(self.targets), device=device)
        if generated:
            t, n = zip(*generated, strict=True)
            token[: sum(n)] = torch.repeat_interleave(
                torch.tensor(t, device=device), torch.tensor(n, device=device)
            )
        turn = [t for t, s in zip(temps, self.samples, strict=True) if s.choices]
        return token, torch.tensor(turn, device=device)

    def to(self, device: torch.device | str) -> MicroBatch:
        moved = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for name, value in moved.items():
            if isinstance(value, torch.Tensor):
                moved[name] = value.to(device, non_blocking=True)
        return MicroBatch(**moved)


Row = tuple[np.ndarray, list[tuple[np.ndarray, int, int]]]
"""A prompt and its continuations, each with its sample's index in the micro-batch and its
reply index (-1 for a generated response). A row's samples share one adapter."""


def row_width(prompt: np.ndarray, continuations: list[np.ndarray]) -> int:
    """Input tokens of a row: the prompt, then each continuation less its last token."""
    return len(prompt) + sum(len(c) - 1 for c in continuations)


def units_of(
    samples: list[Sample], shared_prefix: bool = True, budget: int | None = None
) -> list[list[int]]:
    """Indices of the samples that share a row: those with one prompt and one adapter (split
    where the row would pass ``budget``), or each sample alone without ``shared_prefix``."""
    if not shared_prefix:
        return [[i] for i in range(len(samples))]
    by_prompt: dict[tuple[bytes, str | None], list[int]] = {}
    for i, sample in enumerate(samples):
        by_prompt.setdefault((sample.prompt_ids.tobytes(), sample.adapter), []).append(i)
    units: list[list[int]] = []
    for members in by_prompt.values():
        unit: list[int] = []
        for i in members:
            grown = [c for j in [*unit, i] for c in samples[j].continuations()]
            if unit and budget is not None and row_width(samples[i].prompt_ids, grown) > budget:
                units.append(unit)
                unit = []
            unit.append(i)
        units.append(unit)
    return units


def rows_of(samples: list[Sample], units: list[list[int]], shared_prefix: bool) -> list[Row]:
    """The rows of ``units``: one per unit with ``shared_prefix``, else one per continuation."""
    rows: list[Row] = []
    for unit in units:
        conts = [
            (ids, i, k if samples[i].choices else -1)
            for i in unit
            for k, ids in enumerate(samples[i].continuations())
        ]
        prompt = samples[unit[0]].prompt_ids
        rows += [(prompt, conts)] if shared_prefix else [(prompt, [c]) for c in conts]
    return rows


def collate(
    samples: list[Sample],
    pad_id: int,
    shared_prefix: bool = True,
    units: list[list[int]] | None = None,
) -> MicroBatch:
    """One micro-batch from ``samples`` (each with a non-empty prompt and continuations), its
    rows following ``units`` (default: :func:`units_of`)."""
    units = units if units is not None else units_of(samples, shared_prefix)
    rows = rows_of(samples, units, shared_prefix)
    width = max(row_width(p, [c for c, _, _ in conts]) for p, conts in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    segment = torch.full((len(rows), width), -1, dtype=torch.long)
    predict_at: list[int] = []
    targets: list[int] = []
    owner: list[tuple[int, int]] = []  # (sample, reply) of each scored token
    for b, (prompt, conts) in enumerate(rows):
        n = len(prompt)
        input_ids[b, :n] = torch.from_numpy(prompt.astype(np.int64))
        positions[b, :n] = torch.arange(n)
        segment[b, :n] = 0
        at = n
        for s, (ids, sample, reply) in enumerate(conts, start=1):
            body = len(ids) - 1
            input_ids[b, at : at + body] = torch.from_numpy(ids[:-1].astype(np.int64))
            positions[b, at : at + body] = torch.arange(n, n + body)
            segment[b, at : at + body] = s
            predict_at += [b * width + n - 1, *range(b * width + at, b * width + at + body)]
            targets += ids.tolist()
            owner += [(sample, reply)] * len(ids)
            at += body
    shared = any(len(conts) > 1 for _, conts in rows)
    if shared:
        query, key = segment[:, :, None], segment[:, None, :]
        causal = torch.ones(width, width, dtype=torch.bool).tril()
        mask = (causal & ((key == 0) | (key == query)))[:, None]
    else:
        mask = (segment >= 0).long()
    adapters = [samples[conts[0][1]].adapter for _, conts in rows]
    return _with_elements(
        samples,
        owner,
        predict_at,
        targets,
        row_adapters=adapters if any(a is not None for a in adapters) else None,
        input_ids=input_ids,
        attention_mask=mask,
        position_ids=positions if shared else None,
    )


def _with_elements(
    samples: list[Sample],
    owner: list[tuple[int, int]],
    predict_at: list[int],
    targets: list[int],
    row_adapters: list[str | None] | None = None,
    **tensors: torch.Tensor | None,
) -> MicroBatch:
    """The micro-batch with its scored tokens in element order (generated tokens in sample
    order, then the legal replies' tokens) and its per-element fields."""
    tokens_of: dict[int, list[int]] = {}
    for t, (sample, _) in enumerate(owner):
        tokens_of.setdefault(sample, []).append(t)
    generated = [t for i, s in enumerate(samples) if not s.choices for t in tokens_of[i]]
    choosing = [i for i, s in enumerate(samples) if s.choices]
    turn_of = {sample: c for c, sample in enumerate(choosing)}
    reply_index: dict[tuple[int, int], int] = {}
    reply_tokens, reply_of_token = [], []
    for t, (sample, reply) in enumerate(owner):
        if reply >= 0:
            reply_tokens.append(t)
            reply_of_token.append(reply_index.setdefault((sample, reply), len(reply_index)))
    order = generated + reply_tokens
    replies = sorted(reply_index, key=reply_index.__getitem__)
    gen_samples = [s for s in samples if not s.choices]
    lengths = [len(s.response_ids) for s in gen_samples] + [1] * len(choosing)
    ordered = gen_samples + [samples[i] for i in choosing]
    index = [i for i, s in enumerate(samples) if not s.choices] + choosing
    return MicroBatch(
        predict_at=torch.tensor([predict_at[t] for t in order], dtype=torch.long),
        targets=torch.tensor([targets[t] for t in order], dtype=torch.long),
        choice_token=torch.arange(len(order)) >= len(generated),
        generated=torch.arange(len(generated)),
        reply_tokens=torch.arange(len(generated), len(order)),
        reply_of_token=torch.tensor(reply_of_token, dtype=torch.long),
        reply_turn=torch.tensor([turn_of[s] for s, _ in replies], dtype=torch.long),
        chosen_reply=torch.tensor(
            [reply_index[(i, samples[i].choice_index)] for i in choosing], dtype=torch.long
        ),
        sampler_logprobs=torch.from_numpy(
            np.concatenate([s.sampler_logprobs for s in ordered]).astype(np.float32)
        ),
        advantages=torch.tensor(
            np.repeat([s.advantage for s in ordered], lengths), dtype=torch.float32
        ),
        weights=torch.tensor(np.repeat([s.weight for s in ordered], lengths), dtype=torch.float32),
        seq_index=torch.tensor(np.repeat(index, lengths), dtype=torch.long),
        seq_lengths=torch.tensor(np.repeat(lengths, lengths), dtype=torch.float32),
        samples=list(samples),
        row_adapters=row_adapters,
        **tensors,  # type: ignore[arg-type]
    )


def pack(
    samples: list[Sample], token_budget: int, pad_id: int, shared_prefix: bool = True
) -> list[MicroBatch]:
    """Micro-batches of at most ``token_budget`` padded input tokens (rows x widest row).

    Samples that share a prompt share a row (with ``shared_prefix``), widest rows first, so each
    micro-batch pads to its first row. A single sample wider than the budget raises; filter
    overlong turns first.
    """
    units = units_of(samples, shared_prefix, token_budget)

    def rows(unit: list[int]) -> list[int]:
        """The width of each row of ``unit``."""
        prompt = samples[unit[0]].prompt_ids
        conts = [c for i in unit for c in samples[i].continuations()]
        return (
            [row_width(prompt, conts)]
            if shared_prefix
            else [len(prompt) + len(c) - 1 for c in conts]
        )

    order = sorted(units, key=lambda u: (-max(rows(u)), u[0]))
    batches: list[MicroBatch] = []
    current: list[list[int]] = []
    count = width = 0

    def flush() -> None:
        members = [i for unit in current for i in unit]
        local = {i: j for j, i in enumerate(members)}
        batches.append(
            collate(
                [samples[i] for i in members],
                pad_id,
                shared_prefix,
                [[local[i] for i in unit] for unit in current],
            )
        )

    for unit in order:
        widths = rows(unit)
        if max(widths) > token_budget:
            raise ValueError(
                f"a turn of {max(widths)} tokens (its prompt and every sequence continuing it) "
                f"exceeds the micro-batch budget {token_budget}"
            )
        if current and (count + len(widths)) * width > token_budget:
            flush()
            current, count = [], 0
        if not current:
            width = max(widths)
        current.append(unit)
        count += len(widths)
    if current:
        flush()
    return batches
