"""Setting up a run: its directory, the settings that depend on it, its broker address, the
plan ``--dry-run`` prints, and the checks that every game, role and bot a config names exists.

A run whose ``bus.address`` is unset starts a broker of its own on ``ipc://`` in its run
directory; one whose address is set connects to the broker already running there
(:func:`own_broker`). The resolved config keeps the address unset in the first case, so that a
resumed run starts its own broker again rather than looking for one."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from arena.core.errors import ConfigError
from arena.models import to_dtype
from arena.play.config import GameConfig
from arena.run.config import RunConfig

if TYPE_CHECKING:
    from games.text_env import TextGame


def sampling_dtype(config: RunConfig) -> str:
    """The dtype the run's inference actors hold the trained weights in, ``auto`` resolved on
    this machine: where it is bf16, the learner rounds its float32 weights to bf16 first."""
    inference = config.inference
    return str(to_dtype(inference.dtype, inference.device)).removeprefix("torch.")


def make_run_dir(config: RunConfig) -> Path:
    """The run's directory: ``resume``'s, ``run_dir``, or a new ``<output_dir>/<name>/<time>/``."""
    if config.resume:
        run_dir = Path(config.resume)
        if not (run_dir / "config.yaml").exists():
            raise FileNotFoundError(
                f"resume={run_dir}: no config.yaml there; is it a run directory?"
            )
        return run_dir
    if config.run_dir:
        run_dir = Path(config.run_dir)
        if (run_dir / "config.yaml").exists():
            raise ConfigError(
                f"run_dir={run_dir} already holds a run; resume={run_dir} continues it"
            )
        run_dir.mkdir(parents=True, exist_ok=True)
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
            # absolute: a learner started by hand elsewhere reads it from learner.yaml
            dir=str(run_dir.resolve() / "checkpoints"),
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
        sampled_in=sampling_dtype(config),
    )
    ray = config.ray
    if config.launcher == "ray" and config.bus.address is None and not ray.broker_port:
        ray = replace(ray, broker_port=free_port())  # the broker runs on this node
    return replace(config, learner=learner, ray=ray)


def local_address(run_dir: Path) -> str:
    """The address of a run's own broker: a socket file in its run directory."""
    return f"ipc://{run_dir.resolve()}/bus.sock"


def own_address(config: RunConfig, run_dir: Path | None) -> str:
    """Where a run's own broker listens: :func:`local_address`, or under ``launcher=ray``
    (whose processes may run on other nodes) ``tcp://ray.broker_host:ray.broker_port``."""
    if config.launcher == "ray":
        return f"tcp://{config.ray.broker_host}:{config.ray.broker_port or '<port>'}"
    return local_address(run_dir) if run_dir is not None else "ipc://<run_dir>/bus.sock"


def free_port() -> int:
    """A tcp port free on this host now (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def own_broker(config: RunConfig, run_dir: Path | None = None) -> bool:
    """Whether the run starts its broker: ``bus.address`` unset (or, in a run directory
    written before the address stayed unset, that directory's own socket)."""
    address = config.bus.address
    return address is None or (run_dir is not None and address == local_address(run_dir))


def bus_address(config: RunConfig, run_dir: Path) -> str:
    """Where the run's processes find the broker."""
    return config.bus.address or own_address(config, run_dir)


def broker_hint(address: str) -> str:
    """The command that starts a broker others can reach at ``address``."""
    bind = address
    if address.startswith("tcp://") and ":" in address[6:]:
        bind = "tcp://*:" + address.rsplit(":", 1)[1]
    return f"arena broker --bind {bind}"


def simulator_policies(config: RunConfig) -> dict[str, list[str]]:
    """The policies, other than the trained one, that simulators talk through (a frozen
    checkpoint or an ``openai`` backend the user serves with ``arena inference --name NAME``),
    each with the ``game.seat`` names that use it."""
    out: dict[str, list[str]] = {}
    for game in config.games:
        for seat, simulator in game.simulators.items():
            if simulator.policy and simulator.policy != config.learner.name:
                out.setdefault(simulator.policy, []).append(f"{game.id}.{seat}")
    return out


def plan(config: RunConfig, run_dir: Path | None = None) -> str:
    """What ``--dry-run`` prints: the broker, the actors (started here, or awaited from
    elsewhere), games, roles and policies."""
    rollout, inference = config.awaited()
    if run_dir is None and config.run_dir:
        run_dir = Path(config.run_dir)
    where = str(run_dir) if run_dir is not None else "<run_dir>"
    if own_broker(config, run_dir):
        address = own_address(config, run_dir)
        broker = f"{address} (started here, restarted up to {config.bus.max_restarts} times)"
    else:
        address = str(config.bus.address)
        broker = f"{address} (already running, not started here: {broker_hint(address)})"
    learner = (
        "started here"
        if config.start_learner
        else f"joins: arena learner --connect {address} --config {where}/learner.yaml"
    )
    lines = [
        f"run {config.name!r}: {config.mode} mode, {config.steps} steps, model {config.model}",
        f"  broker       {broker}",
        f"  inference x{config.inference.actors}  backend={config.inference.backend} "
        f"service=policy:{config.learner.name} max_batch={config.inference.max_batch}; "
        f"waits for {inference} on the bus",
        f"  learner      advantage={config.learner.advantage.mode} key={config.learner.advantage.key} "
        f"lr={config.learner.optim.describe()} optimizer_steps="
        f"{config.learner.loss.ppo_epochs * config.learner.loss.minibatches} "
        f"lora={config.learner.lora.enabled} ({learner})",
        f"  rollout x{config.rollout.actors}    {config.rollout.episodes_per_step} episodes/step, "
        f"concurrency {config.rollout.concurrency}, opponents={config.opponents.mode}; "
        f"waits for {rollout} on the bus, more may join",
    ]
    for game in config.games:
        lines.append(f"  game         {game.id} (weight {game.weight}) {seat_line(game)}")
    for name, seats in simulator_policies(config).items():
        lines.append(
            f"  simulators   policy:{name} for {', '.join(seats)}: waits for it, not started here "
            f"(arena inference --connect {address} --name {name} --model CHECKPOINT_OR_MODEL)"
        )
    before = config.eval.opponents_before
    lines.append(
        f"  eval         {config.eval.games} games x {config.eval.opponents}, every "
        f"{config.eval.every or 'start/end'}" + (f" (before: x {before})" if before else "")
        if config.eval.games
        else "  eval         none (eval.games=0)"
    )
    threads = cpu_threads(config)
    lines.append(f"  cpu threads  {threads or 'from OMP_NUM_THREADS'}")
    lines.append(f"  launcher     {launcher_line(config)}")
    return "\n".join(lines)


def launcher_line(config: RunConfig) -> str:
    """``local``, or ``ray`` with its cluster and what each kind of process asks Ray for."""
    if config.launcher != "ray":
        return "local (children of arena train on this machine)"
    r = config.ray
    asks = ", ".join(
        f"{kind} {res.num_cpus:g} CPU {res.num_gpus:g} GPU"
        for kind, res in vars(r.resources).items()
    )
    return f"ray (cluster {r.address or 'auto, else a local one'}): each process asks {asks}"


def seat_line(game: GameConfig) -> str:
    """Who plays which seat of ``game``: the role of each seat (the game's own, or the config's
    override), and the simulators, with the role kwargs."""
    import games
    from arena.play.seating import seat_role_id

    env = games.make(game.id, **game.kwargs)
    seats = []
    for agent in env.possible_agents:
        if agent in game.simulators:
            spec = game.simulators[agent]
            on = f"@{spec.policy}" if spec.policy else ""
            seats.append(f"{agent}=simulator:{spec.id}{on}")
        else:
            seats.append(f"{agent}={seat_role_id(game, env, agent)}")
    if len({s.split("=", 1)[1] for s in seats}) == 1 and not game.simulators:
        seats = [f"role={seats[0].split('=', 1)[1]}"]
    kwargs = f" {game.role_kwargs}" if game.role_kwargs else ""
    return " ".join(seats) + kwargs


def cpu_threads(config: RunConfig, cores: int | None = None) -> dict[str, int]:
    """Torch threads per computing process (``inference`` actors and the ``learner``), or an
    empty dict when the environment's ``OMP_NUM_THREADS`` decides (see ``cpu_threads``)."""
    if config.cpu_threads:
        return {"inference": config.cpu_threads, "learner": config.cpu_threads}
    if os.environ.get("OMP_NUM_THREADS"):
        return {}
    cores = cores or len(os.sched_getaffinity(0))
    generating = config.inference.actors + (config.opponents.mode == "population")
    if config.mode == "async":  # generation and training run at once (here: those started here)
        share = max(1, cores // max(1, generating + config.start_learner))
        return {"inference": share, "learner": share}
    return {"inference": max(1, cores // max(1, generating)), "learner": cores}


def device_for(device: str) -> str:
    """The device a child process is told to use: ``auto`` is resolved here, once, so every
    inference actor of a run agrees (:func:`arena.models.resolve_device`)."""
    from arena.models import resolve_device  # imports torch: not needed for --dry-run

    return str(resolve_device(device))


def validate(config: RunConfig) -> None:
    """Every game, role, bot and simulator the config names must exist, every game must take
    its ``kwargs`` and every seat's role its role kwargs: fail before anything starts."""
    import games
    import games.bots
    import roles
    import simulators
    from arena.core.registry import RegistryError
    from arena.play.seating import resolve_opponent

    try:
        for game in config.games:
            games.registry.entry(game.id)
            roles.registry.entry(game.role)
            for role_id in game.roles.values():
                roles.registry.entry(role_id)
            bots = [*config.eval.opponents, *(config.eval.opponents_before or [])] + (
                [config.opponents.fixed] if config.opponents.mode == "fixed" else []
            )
            for bot in bots:
                games.bots.registry.entry(resolve_opponent(bot, game.id))
            env = make_game(game)
            check_roles(game, env)
            for seat, simulator in game.simulators.items():
                simulators.registry.entry(simulator.id)
                if seat not in env.possible_agents or not env.simulatable(seat):
                    allowed = [a for a in env.possible_agents if env.simulatable(a)] or "none"
                    raise ConfigError(
                        f"games[{game.id}].simulators: seat {seat!r} cannot be simulated; "
                        f"the game's simulatable seats: {allowed}"
                    )
    except RegistryError as err:
        raise ConfigError(str(err)) from None


def make_game(game: GameConfig) -> TextGame:
    """The game as its config builds it: a constructor argument it refuses is a config error."""
    import games

    try:
        return games.make(game.id, **game.kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"games[{game.id}].kwargs {game.kwargs}: {err}") from None


def check_roles(game: GameConfig, env: TextGame) -> None:
    """Build the role of every seat the policy may play, with the game's role kwargs and the
    config's ``role_kwargs`` over them: an argument no role takes (``role_kwargs.bogus=1``)
    fails here, not in the first episode."""
    from arena.play.seating import seat_role, seat_role_id

    for agent in env.possible_agents:
        if agent in game.simulators:
            continue
        try:
            seat_role(game, env, agent)
        except (TypeError, ValueError) as err:
            role_id = seat_role_id(game, env, agent)
            raise ConfigError(
                f"games[{game.id}]: seat {agent!r} plays {role_id}, which refuses role_kwargs "
                f"{game.role_kwargs}: {err}"
            ) from None
