"""Policies on models of their own: which they are, and what a run starts for each.

A run's named ``policies`` are LoRA adapters on the shared base (``model``) unless one names a
``model`` of its own (:class:`arena.play.config.PolicySpec`). Each such policy gets

- inference actors of its own, ``inference-<policy>``, serving ``policy:<policy>`` on its model
  (an adapter of its own when its spec has a ``lora`` section, served unmerged), and,
- when it trains, a learner of its own: ``learner-<policy>``, offering service
  ``learner:<policy>``, configured by ``learner-<policy>.yaml`` in the run directory (the run's
  learner section with the policy's name, model and adapter), checkpointing under
  ``checkpoints/policies/<policy>/``. It trains only the turns of seats its policy played
  (``learner.batch.policy``); the run's own learner then trains only the shared policy's.

Every rollout actor sends every episode to every learner of the run (:func:`learner_services`),
and each keeps its own policy's turns: an episode without any counts as received, so the
coordinator waits for the same number of deliveries from each.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from arena.core.errors import ConfigError
from arena.play.config import PlayConfig, PolicySpec, SamplingConfig
from trainers.checkpoint_dirs import list_checkpoints
from trainers.config import LearnerConfig, LoRAConfig

MAIN_SERVICE = "learner"
"""The service of the run's own learner (the shared base and its adapters)."""
POLICIES_DIR = "policies"
"""Under ``checkpoints/``: one checkpoint directory per policy with a learner of its own."""


def own_bases(play: PlayConfig) -> dict[str, PolicySpec]:
    """The named policies with a model of their own, by name."""
    return {name: spec for name, spec in play.policies.items() if spec.own_base}


def shared_adapters(play: PlayConfig) -> list[str]:
    """The named policies that are adapters on the shared base."""
    return [name for name, spec in play.policies.items() if not spec.own_base]


def trained_bases(play: PlayConfig) -> list[str]:
    """The policies with a model and a learner of their own."""
    return [name for name, spec in own_bases(play).items() if spec.train]


def pooled_bases(play: PlayConfig) -> list[str]:
    """The policies with a model of their own whose past snapshots population opponents play,
    each from a pool actor of its own (``inference-pool-<policy>``): those that train, in
    ``population`` mode (a frozen one has no snapshot but its model)."""
    return trained_bases(play) if play.opponents.mode == "population" else []


def learner_service(policy: str | None) -> str:
    """The service of the learner that trains ``policy`` (None: the run's own learner)."""
    return MAIN_SERVICE if policy is None else f"{MAIN_SERVICE}:{policy}"


def learner_services(play: PlayConfig) -> list[str]:
    """Every learner service of a run: its own, then one per policy with a learner of its own."""
    return [MAIN_SERVICE, *(learner_service(name) for name in trained_bases(play))]


def learner_file(policy: str | None) -> str:
    """The learner config a run writes into its directory for ``policy``'s learner."""
    return "learner.yaml" if policy is None else f"learner-{policy}.yaml"


def lora_of(spec: PolicySpec, shape: LoRAConfig, where: str) -> LoRAConfig:
    """The adapter a policy with its own model trains: ``shape`` (the run's ``learner.lora``)
    with the spec's ``lora`` fields on top, enabled; disabled (full weights) without a section.
    An unknown field is a config error naming it."""
    if spec.lora is None:
        return replace(shape, enabled=False)
    known = set(vars(shape))
    for key in spec.lora:
        if key not in known or key == "enabled":
            raise ConfigError(
                f"{where}.lora.{key} is not a LoRA setting; use {', '.join(sorted(known - {'enabled'}))}"
            )
    return replace(shape, **spec.lora, enabled=True)


def policy_adapter_dir(run_dir: Path, name: str) -> Path:
    """Where a run keeps the fresh adapter that ``name``'s inference actors start serving (a
    policy with a model of its own and a ``lora`` section)."""
    return run_dir.resolve() / "adapters" / POLICIES_DIR / name


def policy_checkpoints(run_dir: Path, name: str) -> Path:
    """Where ``name``'s own learner keeps its checkpoints (``step-N/`` as the run's step N)."""
    return run_dir.resolve() / "checkpoints" / POLICIES_DIR / name


def policy_checkpoint(run_dir: Path, name: str, step: int) -> tuple[int, Path] | None:
    """(step, directory) of ``name``'s newest complete checkpoint with a ``model/`` at or before
    the run's ``step``, or None where it has none: what the policy played at that step."""
    found = [
        (s, p)
        for s, p in list_checkpoints(policy_checkpoints(run_dir, name))
        if s <= step and (p / "model").is_dir()
    ]
    return found[-1] if found else None


def policy_learner(
    main: LearnerConfig,
    name: str,
    spec: PolicySpec,
    run_dir: Path,
    serve_adapter: bool,
    sampling: SamplingConfig,
) -> LearnerConfig:
    """The learner config of ``name``'s own learner, from the run's resolved one: its name,
    service, model and adapter (``serve_adapter``: its updates carry the adapter alone, served
    unmerged), its own checkpoints, and only its own seats' turns. ``sampling`` is how the
    policy samples (:meth:`~arena.play.config.PlayConfig.sampling_of`): its
    learner re-scores the turns at that temperature, and its generation limit is the one the
    overlong filter knows."""
    checkpoints = policy_checkpoints(run_dir, name)
    lora = lora_of(spec, main.lora, f"policies.{name}")
    if lora.enabled:
        lora = replace(lora, serve="adapter" if serve_adapter else "merged")
    return replace(
        main,
        name=name,
        service=learner_service(name),
        model=str(spec.model),
        lora=lora,
        adapters={},
        batch=replace(
            main.batch,
            policy=name,
            max_response_tokens=sampling.max_new_tokens,
        ),
        # its turns were sampled at its own temperature (trainers/logprobs.py)
        loss=replace(main.loss, temperature=sampling.temperature),
        checkpoint=replace(main.checkpoint, dir=str(checkpoints)),
    )
