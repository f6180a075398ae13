"""The plan ``arena train --dry-run`` prints: the broker, the actors (started here, or awaited
from elsewhere), the games with who plays each seat, the simulators' policies, the evaluation,
the CPU threads and the launcher."""

from __future__ import annotations

from pathlib import Path

from arena.play.acting import CHOICE
from arena.play.config import GameConfig, PlayConfig
from arena.run.addresses import own_address, own_broker
from arena.run.bases import lora_of, own_bases, pooled_bases, shared_adapters
from arena.run.config import RunConfig
from arena.run.inference_actors import pool_actor, pool_policy
from arena.run.join_commands import broker_hint, simulator_command, start_command
from arena.run.memory_plan import elsewhere_lines, gib, host_memory, memory_plan
from arena.run.resources import cpu_threads
from trainers.config import LearnerConfig


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
        broker = (
            f"{address} (already running, not started here: {broker_hint(address, config.bus)})"
        )
    learner = (
        "started here"
        if config.start_learner
        else f"joins: {start_command(config, Path(where), address, 'learner')}"
    )
    lines = [
        f"run {config.name!r}: {config.mode} mode, {config.steps} steps, model {config.model}",
        f"  broker       {broker}",
        f"  inference x{config.inference.actors}  backend={config.inference.backend} "
        f"service=policy:{config.learner.name} max_batch={config.inference.max_batch}; "
        f"waits for {inference} on the bus",
        f"  learner      advantage={config.learner.advantage.mode} key={config.learner.advantage.key} "
        f"{update_line(config.learner)} lora={lora_word(config)} ({learner})",
        f"  rollout x{config.rollout.actors}    {config.rollout.episodes_per_step} episodes/step, "
        f"concurrency {config.rollout.concurrency}, opponents={config.opponents.mode}; "
        f"waits for {rollout} on the bus, more may join",
    ]
    for game in config.games:
        lines.append(
            f"  game         {game.id} (weight {game.weight}) {seat_line(game, config.play)}"
        )
    adapters = shared_adapters(config.play)
    if adapters:
        lora = config.learner.lora
        lines.append(
            f"  policies     {', '.join(adapters)}: a LoRA adapter each (r={lora.r}, "
            f"alpha={lora.alpha}, {'/'.join(lora.target_modules)}) on the frozen base, served "
            "by every inference actor, trained in one learner step (seat=role@policy above)"
        )
        for name in adapters:
            if note := sampling_note(config, name):
                lines.append(f"  policy       {name}: an adapter on the shared base{note}")
    for name, spec in own_bases(config.play).items():
        shaped = lora_of(spec, config.learner.lora, f"policies.{name}")
        trains = (
            f"trained by learner-{name} (service learner:{name}, "
            + (f"a LoRA adapter r={shaped.r})" if shaped.enabled else "full weights)")
            if spec.train
            else "frozen (train: false; its turns are not trained)"
        )
        lines.append(
            f"  policy       {name}: its own model {spec.model}, served by inference-{name} as "
            f"policy:{name}{joins(config, address, where, f'inference-{name}')}, "
            f"{trains}{sampling_note(config, name)}"
        )
    if config.opponents.mode == "population":
        o = config.opponents
        kept = config.learner.checkpoint.keep
        pool = f"{o.pool_size} checkpoints"
        if kept < o.pool_size:  # pruned checkpoints cannot be drawn
            pool = (
                f"{kept} checkpoints on disk (pool_size {o.pool_size}, "
                f"learner.checkpoint.keep {kept})"
            )
        lines.append(
            f"  pool         {pool_actor()} serves policy:{pool_policy()}"
            f"{joins(config, address, where, pool_actor())}: one draw per collect "
            f"(latest_prob={o.latest_prob:g}, else uniformly the initial model or one of the "
            f"last {pool})"
        )
    for name in pooled_bases(config.play):
        lines.append(
            f"  pool         {pool_actor(name)} serves policy:{pool_policy(name)}"
            f"{joins(config, address, where, pool_actor(name))}: {name}'s own "
            f"checkpoint of the drawn step (checkpoints/policies/{name}/)"
        )
    plans = memory_plan(config)
    host = host_memory()
    of_host = f" of this host's {gib(host)}" if host is not None else ""
    this_host = f" (this host: {gib(host)})" if host is not None else ""
    if plans:
        lines.append(
            "  memory       per base, its processes started here (weights, optimizer, KV cache):"
        )
        lines += [f"    {p.line()}" for p in plans]
        lines.append(f"    total {gib(sum(p.total for p in plans))}{of_host}")
    else:
        lines.append(f"  memory       nothing started here holds a model{this_host}")
    elsewhere = elsewhere_lines(config)
    if elsewhere:
        lines.append("  elsewhere    what each process started on another host needs there:")
        lines += [f"    {line}" for line in elsewhere]
    for name, seats in simulator_policies(config).items():
        lines.append(
            f"  simulators   policy:{name} for {', '.join(seats)}: waits for it, not started here "
            f"({simulator_command(address, name)})"
        )
    before = config.eval.opponents_before
    lines.append(
        f"  eval         {config.eval.games} games x {config.eval.opponents}, every "
        f"{config.eval.every or ('start/end' if config.eval.before else 'end')}"
        + (f" (before: x {before})" if before and config.eval.before else "")
        + ("" if config.eval.before else ", none before training (eval.before: false)")
        if config.eval.games
        else "  eval         none (eval.games=0)"
    )
    threads = cpu_threads(config)
    lines.append(f"  cpu threads  {threads or 'from OMP_NUM_THREADS'}")
    lines.append(f"  launcher     {launcher_line(config)}")
    return "\n".join(lines)


def lora_word(config: RunConfig) -> str:
    """What the run's learner trains as LoRA: ``adapters`` for named policies on the shared
    base (``learner.lora.enabled`` is off there, yet it trains an adapter each), else whether
    ``learner.lora`` puts one on the shared policy."""
    return "adapters" if shared_adapters(config.play) else str(config.learner.lora.enabled)


def joins(config: RunConfig, address: str, where: str, actor: str) -> str:
    """Empty where the run starts ``actor`` (one of its named inference actors) itself; else
    `` (not started here, joins: <its command line>)`` (arena/run/inference_actors.py)."""
    if config.inference.actors:
        return ""
    command = start_command(config, Path(where), address, "inference", actor)
    return f" (not started here, joins: {command})"


def sampling_note(config: RunConfig, name: str) -> str:
    """``; samples with temperature=0.3 max_new_tokens=64 (...)`` where policy ``name``'s own sampling
    differs from the run's (those fields only); empty where it samples as the run."""
    own, run = vars(config.play.sampling_of(name)), vars(config.sampling)
    differ = [f"{key}={value:g}" for key, value in own.items() if value != run[key]]
    return f"; samples with {' '.join(differ)} (the run's sampling otherwise)" if differ else ""


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


def seat_line(game: GameConfig, play: PlayConfig | None = None) -> str:
    """Who plays which seat of ``game``: the role of each seat (the game's own, or the config's
    override), the named policy (adapter) it plays where the run names its policies, and the
    simulators, with the role kwargs."""
    import games
    from arena.play.seating import seat_role, seat_role_id

    env = games.make(game.id, **game.kwargs)
    seats = []
    for agent in env.possible_agents:
        if agent in game.simulators:
            spec = game.simulators[agent]
            on = f"@{spec.policy}" if spec.policy else ""
            seats.append(f"{agent}=simulator:{spec.id}{on}")
            continue
        role_id = seat_role_id(game, env, agent)
        policy = ""
        if play is not None and play.policies:
            name = seat_role(game, env, agent).name
            policy = f"@{play.seat_policy(game.id, agent, role_id, name) or play.policy_name}"
        seats.append(f"{agent}={role_id}{policy}")
    if len({s.split("=", 1)[1] for s in seats}) == 1 and not game.simulators:
        seats = [f"role={seats[0].split('=', 1)[1]}"]
    kwargs = f" {game.role_kwargs}" if game.role_kwargs else ""
    act = " act=choice (among the legal replies)" if game.act == CHOICE else ""
    return " ".join(seats) + act + kwargs


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


def update_line(learner: LearnerConfig) -> str:
    """How the learner moves the weights: the optimizer's steps, or the per-state step."""
    if learner.per_state.enabled:
        ps = learner.per_state
        return (
            f"per-state step (eta={ps.eta:g}, max_move={ps.max_move:g}, min_visits={ps.min_visits})"
        )
    steps = learner.loss.ppo_epochs * learner.loss.minibatches
    return f"lr={learner.optim.describe()} optimizer_steps={steps}"
