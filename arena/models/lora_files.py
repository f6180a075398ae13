"""An adapter on disk: a peft LoRA directory (``adapter_config.json`` and
``adapter_model.safetensors`` with keys ``base_model.model.<module>.lora_A.weight``), so peft and
vLLM's ``LoRARequest`` load what :func:`save_adapter` writes, and :func:`read_adapter` refuses
one made for another base, naming both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from arena.models.adapter_shape import AdapterError, AdapterShape
from arena.models.lora import adapter_shape, adapter_state

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


def save_adapter(path: str | Path, model: nn.Module, name: str, base: str) -> Path:
    """Write adapter ``name`` as a peft LoRA directory made for ``base`` (the base model's id
    or path, which :func:`read_adapter` checks)."""
    return write_adapter(path, adapter_shape(model), adapter_state(model, name), base)


def write_adapter(
    path: str | Path, shape: AdapterShape, state: Mapping[str, torch.Tensor], base: str
) -> Path:
    """Write an adapter of ``shape`` from its tensors (peft names, as peft's own
    ``get_peft_model_state_dict`` gives them) as a peft LoRA directory made for ``base``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, str(path / WEIGHTS_FILE))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": shape.r,
        "lora_alpha": shape.alpha,
        "lora_dropout": 0.0,
        "target_modules": list(shape.target_modules),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
    }
    (path / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    return path


def read_adapter(path: str | Path, base: str) -> tuple[AdapterShape, dict[str, torch.Tensor]]:
    """An adapter directory's shape and tensors; refused when it was made for another base."""
    path = Path(path)
    config_path = path / CONFIG_FILE
    if not config_path.is_file() or not (path / WEIGHTS_FILE).is_file():
        raise AdapterError(f"{path} is not an adapter: it needs {CONFIG_FILE} and {WEIGHTS_FILE}")
    try:
        config = json.loads(config_path.read_text())
        shape = AdapterShape(
            r=int(config["r"]),
            alpha=float(config["lora_alpha"]),
            target_modules=tuple(config["target_modules"]),
        )
    except (ValueError, KeyError, TypeError) as err:
        raise AdapterError(f"{config_path}: not a LoRA adapter config ({err})") from err
    made_for = str(config.get("base_model_name_or_path", ""))
    if made_for != base:
        raise AdapterError(
            f"{path} was made for base model {made_for!r}, but the served base is {base!r}"
        )
    return shape, load_file(str(path / WEIGHTS_FILE))
