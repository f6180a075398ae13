"""The run config's checks that read several sections at once, run as the config loads.

:class:`arena.run.config.RunConfig` calls each from its ``__post_init__``, so a config that
cannot train fails with one :class:`~arena.core.errors.ConfigError` naming the key before
anything starts: a backend that takes no weight updates, named policies with settings they
cannot work with, groups that a learner step would split, a per-state step over free-text
games. Each takes the sections it reads, not the run config (which imports this module).
What exists (games, roles, bots, simulators) is checked later, by :mod:`arena.run.validation`.
"""

from __future__ import annotations

from collections.abc import Sequence

from arena.core.errors import ConfigError, check_choice
from arena.play.acting import CHOICE
from arena.play.config import (
    GameConfig,
    OpponentConfig,
    PolicySpec,
    SamplingConfig,
    check_seat_policies,
)
from trainers.config import LearnerConfig

TRAINABLE_BACKENDS = ("hf", "vllm")
"""Backends that take weight updates: the ones a run can train."""


def check_trainable_backend(backend: str) -> None:
    """``inference.backend`` must take weight updates (hf, vllm). A plugin backend cannot be
    trained, but it can play: the error says where (one line, naming the backend)."""
    if backend in TRAINABLE_BACKENDS:
        return
    from arena.core.registry import RegistryError
    from arena.policies.factory import backends

    try:
        plugin = backends.entry(backend).plugin
    except RegistryError:
        plugin = None
    if plugin is None:  # unknown, or built in (remote, scripted, openai): the nearest choice
        check_choice("inference.backend", backend, TRAINABLE_BACKENDS)
    raise ConfigError(
        f"inference.backend = {backend!r} is a plugin policy backend (from {plugin}), but a run "
        "trains its policy and only hf and vllm take weight updates; play it as a tournament "
        f"participant (backend: {backend}), with `arena eval --model M --backend {backend}`, or "
        f"as a simulator's policy in a run (`arena inference --connect ADDR --backend {backend} "
        "--name NAME`, then simulators.SEAT.policy: NAME)"
    )


def check_groups(group_size: int, episodes_per_step: int, advantage_mode: str) -> None:
    """Groups (``rollout.group_size``) are whole within a learner step
    (``rollout.episodes_per_step``), and the group modes (``learner.advantage.mode``) have
    groups to compare."""
    if group_size < 1:
        raise ConfigError(f"rollout.group_size must be >= 1, got {group_size}")
    if episodes_per_step < 1 or episodes_per_step % group_size:
        raise ConfigError(
            f"rollout.episodes_per_step ({episodes_per_step}) must be a positive multiple "
            f"of rollout.group_size ({group_size}): a step trains on whole groups"
        )
    if advantage_mode in ("group", "broadcast") and group_size < 2:
        raise ConfigError(
            f"learner.advantage.mode={advantage_mode} normalizes over the episodes of a group: "
            "set rollout.group_size >= 2 (with 1, a group is one trajectory and every "
            "advantage is 0)"
        )


def check_policies(
    policies: dict[str, PolicySpec],
    seat_policies: dict[str, str],
    *,
    opponents: OpponentConfig,
    sampling: SamplingConfig,
    learner: LearnerConfig,
    games: Sequence[GameConfig] = (),
) -> None:
    """Named policies: mapped seats, and the settings they work with."""
    if opponents.mode == "population" and "pool" in policies:
        raise ConfigError(
            "policies.pool: with opponents.mode=population, policy:pool is the name the "
            "population's inference actor serves past checkpoints under: rename the policy"
        )
    check_seat_policies(policies, seat_policies, games)
    for name, spec in policies.items():
        spec.sampling_over(sampling, name)
    if not policies:
        return
    if learner.name in policies:
        frozen = "" if policies[learner.name].train else " (a frozen one, train: false)"
        raise ConfigError(
            f"learner.name={learner.name!r} names a policy of policies{frozen}: the run's "
            "own learner trains the shared policy; a policy with a model of its own gets a "
            "learner of its own, and a frozen one none. Rename one of them"
        )
    if not any(not spec.own_base for spec in policies.values()):
        return  # models of their own only: the shared policy trains as without policies
    if learner.lora.enabled:
        raise ConfigError(
            "policies: named policies train a LoRA adapter each on a frozen base; "
            "learner.lora.enabled (one peft adapter for the shared policy) cannot be on too"
        )


def check_per_state(learner: LearnerConfig, games: Sequence[GameConfig]) -> None:
    """The per-state step moves choice turns only (trainers/per_state.py)."""
    if not learner.per_state.enabled:
        return
    for game in games:
        if game.act != CHOICE:
            raise ConfigError(
                f"learner.per_state trains choice turns only, but {game.id} is played with "
                f"act: {game.act}: give it act: choice, or turn learner.per_state.enabled off"
            )
