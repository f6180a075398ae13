"""Setting up a run: its directory, the settings that depend on it, the plan ``--dry-run``
prints, and the checks that every game, role and bot a config names exists."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

from arena.run.config import RunConfig


def make_run_dir(config: RunConfig) -> Path:
    if config.resume:
        run_dir = Path(config.resume)
        if not (run_dir / "config.yaml").exists():
            raise FileNotFoundError(
                f"resume={run_dir}: no config.yaml there; is it a run directory?"
            )
        return run_dir
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(config.output_dir) / config.name / stamp
    run_dir.mkdir(parents=True, exist_ok=False)
    return run_dir


def resolve_for_run(config: RunConfig, run_dir: Path) -> RunConfig:
    """Fill in what depends on the run directory and the run-level settings."""
    learner = config.learner
    learner = replace(
        learner,
        model=config.model,
        checkpoint=replace(
            learner.checkpoint,
            dir=str(run_dir / "checkpoints"),
            every=max(1, config.checkpoint_every),
            resume=True,
        ),
        batch=replace(
            learner.batch,
            max_response_tokens=config.sampling.max_new_tokens,
            # the trainer requests every step (in both modes); a learner stepping on
            # its own as well would take batches the trainer then finds missing
            batch_samples=0,
        ),
        # Training samples are drawn at sampling.temperature and the samplers report their
        # logprobs under that tempered distribution (arena/policies/sampling.py). The learner
        # divides its logits by the same T, so the policy it optimizes is the one that
        # sampled, and its importance ratios (TIS, PPO) compare that policy with itself. A
        # learner at T = 1 would take the gradient of another distribution than the samples'.
        loss=replace(learner.loss, temperature=config.sampling.temperature),
    )
    address = config.bus.address or f"ipc://{run_dir.resolve()}/bus.sock"
    return replace(config, learner=learner, bus=replace(config.bus, address=address))


def plan(config: RunConfig) -> str:
    """What ``--dry-run`` prints: actors, addresses, games, roles and policies."""
    lines = [
        f"run {config.name!r}: {config.mode} mode, {config.steps} steps, model {config.model}",
        f"  broker       {config.bus.address or 'ipc://<run_dir>/bus.sock'}",
        f"  inference x{config.inference.actors}  backend={config.inference.backend} "
        f"service=policy:{config.learner.name} max_batch={config.inference.max_batch}",
        f"  learner      advantage={config.learner.advantage.mode} key={config.learner.advantage.key} "
        f"lr={config.learner.optim.lr} lora={config.learner.lora.enabled}",
        f"  rollout x{config.rollout.actors}    {config.rollout.episodes_per_step} episodes/step, "
        f"concurrency {config.rollout.concurrency}, opponents={config.opponents.mode}",
    ]
    for game in config.games:
        lines.append(
            f"  game         {game.id} (weight {game.weight}) role={game.role} {game.role_kwargs or ''}"
        )
    lines.append(
        f"  eval         {config.eval.games} games x {config.eval.opponents}, every {config.eval.every or 'start/end'}"
    )
    threads = cpu_threads(config)
    lines.append(f"  cpu threads  {threads or 'from OMP_NUM_THREADS'}")
    return "\n".join(lines)


def cpu_threads(config: RunConfig, cores: int | None = None) -> dict[str, int]:
    """Torch threads per computing process (``inference`` actors and the ``learner``), or an
    empty dict when the environment's ``OMP_NUM_THREADS`` decides (see ``cpu_threads``)."""
    if config.cpu_threads:
        return {"inference": config.cpu_threads, "learner": config.cpu_threads}
    if os.environ.get("OMP_NUM_THREADS"):
        return {}
    cores = cores or len(os.sched_getaffinity(0))
    generating = config.inference.actors + (config.opponents.mode == "population")
    if config.mode == "async":  # generation and training run at once
        share = max(1, cores // (generating + 1))
        return {"inference": share, "learner": share}
    # sync: the learner trains while generation waits for its weights
    return {"inference": max(1, cores // generating), "learner": cores}


def device_for(device: str) -> str:
    """The device a child process is told to use: ``auto`` is resolved here, once, so every
    inference actor of a run agrees (:func:`arena.models.resolve_device`)."""
    from arena.models import resolve_device  # imports torch: not needed for --dry-run

    return str(resolve_device(device))


def validate(config: RunConfig) -> None:
    """Every game, role and bot the config names must exist: fail before anything starts."""
    import games
    import games.bots
    import roles
    from arena.core.errors import ConfigError
    from arena.core.registry import RegistryError
    from arena.play.seating import resolve_opponent

    try:
        for game in config.games:
            games.registry.entry(game.id)
            roles.registry.entry(game.role)
            bots = [*config.eval.opponents] + (
                [config.opponents.fixed] if config.opponents.mode == "fixed" else []
            )
            for bot in bots:
                games.bots.registry.entry(resolve_opponent(bot, game.id))
    except RegistryError as err:
        raise ConfigError(str(err)) from None
