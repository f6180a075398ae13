"""The learner's view of a causal LM: logprobs and entropies of the trained tokens only.

:class:`TokenLogprobs` wraps a Hugging Face causal LM. Its forward runs the decoder over the
padded rows (:mod:`trainers.microbatch`) and applies the LM head only at the positions that
predict a scored token (``sparse``): prompts are
usually much longer than responses in multi-turn games, and the head over a 49k vocabulary is
the largest matmul of a small model. It is an ``nn.Module`` so DDP and FSDP2 wrap it as their
root: their hooks then see every forward, which calling submodules directly would bypass.

Logits are divided by ``temperature`` (``loss.temperature``, set to the run's sampling
temperature) before the softmax: the samplers report ``log_softmax(logits / T)`` of each sampled
token (:mod:`arena.policies.sampling`), so the learner's logprobs, its entropy and the
reference's are of the same tempered distribution that drew the samples. That distribution
is the one the policy gradient is taken of, and the importance ratios compare it with itself.
"""

from __future__ import annotations

import torch
from torch import nn


def unwrap_peft(model: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper (LoRA layers stay injected and active)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


class TokenLogprobs(nn.Module):
    """forward(a micro-batch's :meth:`~trainers.microbatch.MicroBatch.forward_args`) ->
    (logprob [M], entropy [M]) of its M scored tokens."""

    def __init__(self, model: nn.Module, temperature: float = 1.0, sparse: bool = True) -> None:
        super().__init__()
        self.model = model
        self.temperature = temperature
        self.sparse = sparse

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        predict_at: torch.Tensor,
        targets: torch.Tensor,
        choice_token: torch.Tensor,
        entropy_grad: bool = False,
        token_temperature: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Legal-reply tokens of choice turns (``choice_token``) are scored at T = 1 (their
        sequence sums are tempered as a whole: trainers/choice.py), the others at
        ``temperature``, or at ``token_temperature``'s (``[M]``, one per scored token: rows of
        adapters sampled at temperatures of their own, :meth:`MicroBatch.temperatures`). An
        empty ``position_ids`` lets the model count positions itself."""
        base = unwrap_peft(self.model)
        mask: torch.Tensor | None = attention_mask
        if attention_mask.ndim == 4:
            if base.config._attn_implementation != "sdpa":  # eager adds the mask to the scores
                blocked = torch.finfo(torch.float32).min
                mask = torch.zeros(attention_mask.shape, device=attention_mask.device)
                mask = mask.masked_fill(~attention_mask, blocked)
        elif bool(attention_mask.all()):
            mask = None  # an all-ones mask lets attention take its fused causal path
        positions = position_ids if position_ids.numel() else None
        if self.sparse:
            hidden = base.get_decoder()(
                input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False
            ).last_hidden_state
            flat = hidden.reshape(-1, hidden.shape[-1])[predict_at]
            logits = base.get_output_embeddings()(flat)
        else:
            logits = self.model(
                input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=False
            ).logits
            logits = logits.reshape(-1, logits.shape[-1])[predict_at]
        temperature: float | torch.Tensor = self.temperature
        if token_temperature is not None:
            temperature = torch.where(choice_token, 1.0, token_temperature)[:, None]
        elif self.temperature != 1.0 and bool(choice_token.any()):
            temperature = torch.where(choice_token, 1.0, self.temperature)[:, None]
        return token_logprobs(logits, targets, temperature, entropy_grad)


def token_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    temperature: float | torch.Tensor = 1.0,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """log softmax(logits / T)[target] and the entropy -sum p log p of each row, in fp32.

    The entropy is detached unless ``entropy_grad`` (only an entropy bonus needs its gradient,
    and skipping it saves a [N, vocab] buffer in the graph).
    """
    logits = logits.float()
    if isinstance(temperature, torch.Tensor) or temperature != 1.0:
        logits = logits / temperature
    log_z = torch.logsumexp(logits, dim=-1)
    logprob = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_z
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        probs = torch.softmax(logits, dim=-1)
        entropy = log_z - (probs * logits).sum(-1)
    return logprob, entropy
