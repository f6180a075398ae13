"""AdamW with decay on matrices only, and the learning-rate schedule as a pure function of the
step (so a resume needs no scheduler state: the step is enough). A resume takes the optimizer's
moments from the checkpoint but its settings from the config (:func:`apply_settings`), so that
``resume=RUN learner.optim.weight_decay=0.1`` does what it prints."""

from __future__ import annotations

import math

import torch
from torch import nn

from trainers.config import OptimConfig


def build_optimizer(
    model: nn.Module, config: OptimConfig, device: torch.device
) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; norms, biases and other vectors get no decay."""
    decay, no_decay = [], []
    for param in model.parameters():
        if param.requires_grad:
            (decay if param.ndim >= 2 else no_decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]],
        lr=learning_rate(0, config),
        betas=(config.betas[0], config.betas[1]),
        eps=config.eps,
        fused=device.type == "cuda" or None,
    )


def apply_settings(optimizer: torch.optim.Optimizer, config: OptimConfig) -> None:
    """Set ``config``'s betas, eps and weight decay (matrices only, as :func:`build_optimizer`)
    on every group of ``optimizer``: loading a checkpoint's optimizer state also loads the
    settings it was saved with, which would silently override a resumed run's new ones."""
    for group in optimizer.param_groups:
        matrices = any(p.ndim >= 2 for p in group["params"])
        group["weight_decay"] = config.weight_decay if matrices else 0.0
        group["betas"] = (config.betas[0], config.betas[1])
        group["eps"] = config.eps


def learning_rate(step: int, config: OptimConfig) -> float:
    """LR of the update that follows ``step`` completed updates.

    Linear warmup over ``warmup_steps`` (lr * (step + 1) / warmup_steps), then ``constant``,
    or a ``linear`` / ``cosine`` decay from lr to min_lr_ratio * lr at ``total_steps``. The
    decay starts where the warmup ends::

        progress = min(max(step - warmup_steps, 0) / max(total_steps - warmup_steps, 1), 1)
        factor   = 1 - progress  (linear)   or   (1 + cos(pi * progress)) / 2  (cosine)
        lr_step  = lr * (min_lr_ratio + (1 - min_lr_ratio) * factor)

    e.g. lr 1, warmup 2, cosine over total 10: steps 0, 1 -> 0.5, 1.0; step 6 (half way through
    the 8 decaying steps) -> 0.5; step 10 and later -> 0.
    """
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    if config.schedule == "constant":
        return config.lr
    if config.total_steps is None:
        raise ValueError(
            f"optim.schedule={config.schedule} decays over optim.total_steps, which is not set "
            "(arena train sets it to the run's steps; set it when building a learner yourself)"
        )
    span = max(config.total_steps - config.warmup_steps, 1)
    progress = min(max(step - config.warmup_steps, 0) / span, 1.0)
    floor = config.min_lr_ratio
    if config.schedule == "linear":
        factor = 1.0 - progress
    else:
        factor = 0.5 * (1.0 + math.cos(math.pi * progress))
    return config.lr * (floor + (1.0 - floor) * factor)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
