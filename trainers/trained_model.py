"""The trained model: loading it, adding LoRA, its frozen reference, and its HF weights.

:func:`hf_state_dict` is what leaves the learner (weight buckets, checkpoints): the plain
transformers state dict of the policy, with LoRA adapters merged into their base weights, so
inference actors and ``AutoModelForCausalLM.from_pretrained`` never see peft names. With
``learner.lora.serve: adapter`` a weight update carries :func:`lora_buffer` instead: the adapter
alone, in float32, which the server applies unmerged (a bf16 copy of the merged weights loses
every change below half its rounding step, which is most of an RL step's).
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as hf_logging

from trainers.config import LearnerConfig, LoRAConfig
from trainers.logprobs import unwrap_peft


def load_policy(
    config: LearnerConfig, device: torch.device
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load ``config.model`` with arena.models (imported here: a process that is handed a
    model never needs it)."""
    from arena.models import load_model

    return load_model(config.model, dtype=config.dtype, device=device)


def add_lora(model: PreTrainedModel, config: LoRAConfig) -> nn.Module:
    """Wrap ``model`` with trainable LoRA adapters; base weights are frozen."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=config.r,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def frozen_copy(model: nn.Module) -> nn.Module:
    """A frozen copy of the initial policy, the reference of the KL term (without LoRA; with
    LoRA the reference is the same model with its adapters disabled, which costs nothing)."""
    reference = copy.deepcopy(model).eval()
    for param in reference.parameters():
        param.requires_grad_(False)
    return reference


def _full_cpu(tensor: torch.Tensor, on_device: bool = False) -> torch.Tensor:
    """A full copy of ``tensor``: on the CPU, or (``on_device``) where it lives."""
    full = getattr(tensor, "full_tensor", None)  # an FSDP2 DTensor shard: gather it
    if callable(full):
        tensor = full()
    return tensor.detach().clone() if on_device else tensor.detach().to("cpu", copy=True)


def hf_state_dict(model: nn.Module, on_device: bool = False) -> dict[str, torch.Tensor]:
    """CPU copies (``on_device``: copies on the model's device) of the policy's weights under
    transformers names, LoRA merged.

    Collective under FSDP2 (every rank must call it; each gets the full tensors).
    """
    base = unwrap_peft(model)
    raw = {name: _full_cpu(t, on_device) for name, t in base.state_dict().items()}
    state = {
        name.replace(".base_layer.", "."): t for name, t in raw.items() if ".lora_" not in name
    }
    for module_name, module in base.named_modules():
        scaling = getattr(module, "scaling", None)
        if not isinstance(scaling, dict) or not hasattr(module, "lora_A"):
            continue
        for adapter in module.active_adapters:
            if adapter not in module.lora_A:
                continue
            a = raw[f"{module_name}.lora_A.{adapter}.weight"].float()
            b = raw[f"{module_name}.lora_B.{adapter}.weight"].float()
            delta = (b @ a) * scaling[adapter]
            if getattr(module, "fan_in_fan_out", False):
                delta = delta.T
            weight = state[f"{module_name}.weight"]
            state[f"{module_name}.weight"] = (weight.float() + delta).to(weight.dtype)
    return state


def lora_buffer(model: nn.Module, on_device: bool = False) -> torch.Tensor:
    """The peft adapter as one float32 CPU buffer in :mod:`arena.models.lora`'s layout: each
    adapted layer's A then B, flattened, in model order, which is the order of a served
    adapter's buffer (:func:`arena.models.lora.adapter_flat`) of the same shape. Collective
    under FSDP2, like :func:`hf_state_dict`."""
    parts = []
    for _, module in unwrap_peft(model).named_modules():
        scaling = getattr(module, "scaling", None)
        if not isinstance(scaling, dict) or not hasattr(module, "lora_A"):
            continue
        for adapter in module.active_adapters:
            if getattr(module, "fan_in_fan_out", False):
                raise ValueError("lora.serve=adapter needs fan_in_fan_out off (Llama's layers)")
            parts += [module.lora_A[adapter].weight, module.lora_B[adapter].weight]
    return torch.cat([_full_cpu(p, on_device).float().reshape(-1) for p in parts])


def save_hf(
    model: nn.Module,
    state: dict[str, torch.Tensor],
    tokenizer: PreTrainedTokenizerBase | None,
    path: Path,
) -> None:
    """An HF directory (config, safetensors weights, tokenizer) that ``from_pretrained`` loads."""
    base = unwrap_peft(model)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a bar per checkpoint is noise in a training log
    try:
        base.save_pretrained(path, state_dict=state, safe_serialization=True)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if tokenizer is not None:
        tokenizer.save_pretrained(path)


def load_hf_weights(model: nn.Module, path: Path) -> None:
    """Load weights saved by :func:`save_hf` into a model without LoRA (tied weights follow)."""
    state: dict[str, torch.Tensor] = {}
    for file in sorted(path.glob("*.safetensors")):
        state.update(load_file(file))
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    if unexpected or set(missing) - tied:
        raise RuntimeError(
            f"checkpoint {path} does not fit the model: missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}"
        )


def lora_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapter weights (peft names), for resuming LoRA training."""
    from peft import get_peft_model_state_dict

    return {name: _full_cpu(t) for name, t in get_peft_model_state_dict(model).items()}


def load_lora_state_dict(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(model, state)
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise RuntimeError(f"adapter checkpoint has unexpected keys, e.g. {unexpected[:3]}")
