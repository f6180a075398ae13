"""The learner's view of a causal LM: logprobs and entropies of the trained tokens only.

:class:`TokenLogprobs` wraps a Hugging Face causal LM. Its forward runs the decoder over the
padded rows and applies the LM head only at the masked positions (``sparse``): prompts are
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
    """forward(batch tensors) -> (logprob [N], entropy [N]) of the N masked target tokens."""

    def __init__(self, model: nn.Module, temperature: float = 1.0, sparse: bool = True) -> None:
        super().__init__()
        self.model = model
        self.temperature = temperature
        self.sparse = sparse

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        target_ids: torch.Tensor,
        loss_mask: torch.Tensor,
        entropy_grad: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # An all-ones mask lets attention take its fused causal path.
        mask = None if bool(attention_mask.all()) else attention_mask
        if self.sparse:
            base = unwrap_peft(self.model)
            hidden = base.get_decoder()(input_ids=input_ids, attention_mask=mask, use_cache=False)
            logits = base.get_output_embeddings()(hidden.last_hidden_state[loss_mask])
        else:
            logits = self.model(input_ids=input_ids, attention_mask=mask, use_cache=False).logits
            logits = logits[loss_mask]
        return token_logprobs(logits, target_ids[loss_mask], self.temperature, entropy_grad)


def token_logprobs(
    logits: torch.Tensor,
    targets: torch.Tensor,
    temperature: float = 1.0,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """log softmax(logits / T)[target] and the entropy -sum p log p of each row, in fp32.

    The entropy is detached unless ``entropy_grad`` (only an entropy bonus needs its gradient,
    and skipping it saves a [N, vocab] buffer in the graph).
    """
    logits = logits.float()
    if temperature != 1.0:
        logits = logits / temperature
    log_z = torch.logsumexp(logits, dim=-1)
    logprob = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - log_z
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        probs = torch.softmax(logits, dim=-1)
        entropy = log_z - (probs * logits).sum(-1)
    return logprob, entropy
