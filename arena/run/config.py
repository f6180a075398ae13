"""The run config of ``arena train``: one dataclass per section, one docstring per field.

``load_run_config("configs/selfplay.yaml", ["steps=4", "learner.optim.lr=1e-5"])`` merges, in
order, the schema's defaults, the YAML file (after the file it ``extends``, if any), and
``a.b=c`` overrides (:mod:`arena.core.config`). An unknown key or a wrong type is a
:class:`~arena.core.errors.ConfigError` naming the key and its nearest valid name, before
anything starts. The sections that playing episodes needs live in :mod:`arena.play.config`,
the learner's in :mod:`trainers.config`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from arena.bus.peers import ROUTINGS
from arena.core.config import load_config, schema_defaults, to_yaml
from arena.core.errors import ConfigError, check_choice
from arena.play.config import (
    MAX_EPISODE_TURNS,
    GameConfig,
    OpponentConfig,
    PlayConfig,
    PolicySpec,
    SamplingConfig,
    check_distinct_games,
)
from arena.policies.config import InferenceConfig
from arena.run.bus_config import BusConfig, WaitConfig
from arena.run.config_checks import (
    check_groups,
    check_per_state,
    check_policies,
    check_trainable_backend,
)
from arena.run.ray_config import RayConfig, RayResources, RayResourcesConfig
from trainers.config import LearnerConfig

__all__ = [
    "BusConfig",
    "ConfigError",
    "EvalConfig",
    "GameConfig",
    "InferenceConfig",
    "OpponentConfig",
    "RayConfig",
    "RayResources",
    "RayResourcesConfig",
    "RolloutConfig",
    "RunConfig",
    "SamplingConfig",
    "WaitConfig",
    "load_run_config",
    "to_yaml",
]

MODES = ("sync", "async")
LAUNCHERS = ("local", "ray")
"""What starts a run's processes: local children, or Ray actors on a cluster."""


@dataclass
class RolloutConfig:
    actors: int = 2
    """Rollout actor processes that ``arena train`` starts itself (``rollout-0`` to
    ``rollout-<actors-1>``); 0 starts none. Rollout actors started elsewhere (``arena rollout
    --connect ADDR --config RUN_DIR/config.yaml --index I``) join the run too: every collect is
    split over the rollout actors on the bus at that moment (see ``wait.rollout_actors``)."""
    concurrency: int = 16
    """Episodes each rollout actor plays at once (their requests batch together)."""
    episodes_per_step: int = 32
    """Episodes that make one learner step; a multiple of ``group_size``. Sync mode collects
    exactly this many a step. Async mode starts a step once at least this many were delivered
    and trains on every episode delivered by then (more where the rollouts outpace the
    learner, e.g. the first step after a resume: the console's step line says how many;
    ``learner.batch.max_batch_samples`` caps the turns of a step), and paces its orders by it
    (``learner.batch.max_staleness``)."""
    group_size: int = 1
    """Episodes per group: each group plays ``group_size`` episodes of one game from one seed
    (the same deal or board), with the same seats and opponent, and its turns share a group id
    per seat (``game:seed:seat``), so the ``group`` and ``broadcast`` advantage modes compare
    the attempts of one seat from one start (GRPO). Those modes need at least 2: a group of one
    episode has no spread, and every advantage would be 0."""
    transcripts_every: int = 1
    """Save a sampled episode transcript every this many steps (0 disables)."""
    invalid_penalty: float = 0.0
    """Reward subtracted from a turn whose action the game rejected (shaping; the forfeit
    penalty of the game itself comes on top)."""
    max_restarts: int = 3
    """Times the launcher restarts a crashed rollout actor before the run fails (and times a
    collect leases again the job of an actor that failed it)."""
    lease_timeout: float = 3600.0
    """Seconds an order (a leased job) may take before the job is leased to another rollout
    actor; the straggler's late episodes are then dropped by the learner as duplicates."""
    max_episode_turns: int = MAX_EPISODE_TURNS
    """Turns one episode may play (every seat's, rejected ones included) and not be over: past
    it that episode fails, naming its game, its id and this bound, and is dropped and counted
    like any failed one while the others go on. A game that never ends (a plugin's huge
    ``max_turns``) would otherwise hold its job until ``lease_timeout``, then loop again. The
    shipped games play at most 600 (``pettingzoo-chess-v0``: 200 moves, each tried 3 times);
    evaluations and tournaments bound their episodes by the default, 1000."""
    episode_timeout: float = 1800.0
    """Seconds one episode may play, likewise; keep it below ``lease_timeout``. Checked while it
    waits on a policy, a simulator or a bot's move (bots play off the event loop, each move also
    bounded by :data:`arena.play.config.BOT_MOVE_TIMEOUT`, 120 s, :mod:`arena.play.bot_moves`);
    a game's own ``step`` that never returns is not (its actor is then found hung)."""
    max_empty_steps: int = 3
    """Steps in a row that leave the learner no turn to train on (every episode failed: a
    simulator or bot that raises, say) before the run stops, with exit status 1 and one line
    naming the first failure's reason (:mod:`arena.run.failures`). Each such step is shown
    (``failed 8/8``), logged in ``events.log`` and collected again; it does not count as a step.
    Only the run's own learner counts here: a named policy's own learner that trains nothing
    while the run's trains is told in ``events.log`` each such step, and does not stop the run."""

    def __post_init__(self) -> None:
        if self.max_empty_steps < 1:
            raise ConfigError(f"rollout.max_empty_steps must be >= 1, got {self.max_empty_steps}")
        for key, value in (
            ("max_episode_turns", self.max_episode_turns),
            ("episode_timeout", self.episode_timeout),
        ):
            if not value > 0:
                raise ConfigError(f"rollout.{key} must be > 0, got {value}")


@dataclass
class EvalConfig:
    games: int = 200
    """Games per game id and per opponent in each evaluation (tasks per role in a role game);
    0 evaluates nothing: no evaluation before, during or after training, no random mover,
    no before/after table and, unless ``exploitability`` is set true, no strategy reads."""
    every: int = 0
    """Evaluate every this many steps (0: only before and after training)."""
    before: bool = True
    """Evaluate the starting policy before training. Off saves that evaluation where its figures
    are known already: the other arm of an A/B from the same start and seed plays the very same
    games (each request carries its own seed), and its "before" stands for both."""
    opponents: list[str] = field(default_factory=lambda: ["random-v0", "strongest"])
    """Bot ids to play against; ``strongest`` is each game's strongest reference bot."""
    opponents_before: list[str] | None = None
    """Bot ids of the evaluation before training, where they differ from ``opponents``; None:
    ``opponents``. A base model that forfeits most games with invalid replies scores about 0
    against any bot, so a strong bot there costs a whole evaluation (its invalid replies are
    the slowest to play) and says nothing that the score against random does not."""
    temperature: float = 0.0
    """Sampling temperature of the policy during evaluation (0 = greedy)."""
    concurrency: int = 64
    """Evaluation games played at once."""
    exploitability: bool | None = None
    """Read the policy at every information state of Kuhn and Leduc poker before and after
    training and at each checkpoint, and report its exact exploitability (Kuhn: seconds;
    Leduc's 936 states: about 13 minutes a read on a 2-core CPU). None (the default): read
    unless ``games`` is 0, so ``eval.games=0`` turns every evaluation off; true reads even
    then, false never."""

    @property
    def reads_strategy(self) -> bool:
        """Whether the run reads the exploitability of its poker games (see ``exploitability``)."""
        if self.exploitability is None:
            return self.games > 0
        return self.exploitability

    def __post_init__(self) -> None:
        if self.games < 0:
            raise ConfigError(f"eval.games must be >= 0 (0: no evaluation), got {self.games}")
        if self.opponents_before is not None and not self.opponents_before:
            raise ValueError("eval.opponents_before is empty; null plays eval.opponents")

    def opponents_at(self, label: str) -> list[str]:
        """The opponents of the evaluation ``label`` (``before``, ``after``, ``step N``)."""
        if label == "before" and self.opponents_before is not None:
            return list(self.opponents_before)
        return list(self.opponents)


@dataclass
class RunConfig:
    name: str = "selfplay"
    """Run name; output goes to ``<output_dir>/<name>/<time>/``."""
    seed: int = 0
    """Seeds every actor (each adds its own offset)."""
    mode: str = "sync"
    """``sync``: generate, train, publish, repeat. ``async``: rollouts continue while the
    learner trains; no trained turn is more than ``learner.batch.max_staleness`` versions old
    (paced at admission: :class:`arena.run.stream.CollectStream`)."""
    steps: int = 10
    """Learner steps to train."""
    model: str = "smollm2-135m"
    """Model spec: ``smollm2-135m`` (embedded default), ``tiny`` (tests) or a local HF path."""
    games: list[GameConfig] = field(default_factory=lambda: [GameConfig()])
    """The training mixture."""
    opponents: OpponentConfig = field(default_factory=OpponentConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    policies: dict[str, PolicySpec] = field(default_factory=dict)
    """Named policies (arena.play.config.PolicySpec). By default a LoRA adapter each on the
    frozen shared base in ``learner.lora``'s shape, all served by every inference actor and
    trained in one learner step (``{proposer: {}, solver: {}}``). One with a ``model`` of its
    own gets inference actors and, unless ``train: false``, a learner of its own
    (``{judge: {model: tiny, train: false}}``; arena/run/bases.py). Empty: one shared policy
    trains every weight."""
    seat_policies: dict[str, str] = field(default_factory=dict)
    """Which named policy each trained seat plays: by ``GAME:SEAT``, by seat or by role (id or
    name), tried in that order (``{player_0: first, solver-v0: solver}``). Every trained seat
    needs one when adapters on the shared base are declared; where every named policy has a
    model of its own, a seat none maps plays the shared policy. ``--dry-run`` prints the
    mapping."""
    inference: InferenceConfig = field(
        default_factory=lambda: InferenceConfig(
            model="${model}", name="${learner.name}", timeout=600.0
        )
    )
    """The inference actors (arena.policies.config.InferenceConfig); ``model`` and ``name``
    follow the run's model and the learner's policy name by default. Its ``timeout`` bounds
    each policy request of the rollout actors and of the run's evaluations: 600 s by default,
    since such a request waits behind whole batches of up to ``concurrency`` episodes' turns
    (on a CPU, minutes), where a lone ``remote`` policy's 120 s suffices."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    learner: LearnerConfig = field(default_factory=lambda: LearnerConfig(model="${model}"))
    """The learner (trainers.config.LearnerConfig); ``model`` follows the run's by default."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    bus: BusConfig = field(default_factory=BusConfig)
    wait: WaitConfig = field(default_factory=WaitConfig)
    start_learner: bool = True
    """Start the learner as a child process. False: the run starts none and waits for a
    learner started elsewhere (``arena learner --connect ADDR --config RUN_DIR/learner.yaml``,
    the file this run writes into its run directory) to offer service ``learner``."""
    learner_max_restarts: int = 3
    """Times the launcher restarts a learner it started that died, before the run fails. The
    new one resumes from the last checkpoint and the run continues from that step
    (:mod:`arena.run.learner_restart`); a learner started elsewhere may be restarted there."""
    inference_max_restarts: int = 3
    """Times the launcher restarts an inference actor it started that died or hung
    (:mod:`arena.run.hangs`), before the run fails. The new one loads the learner's current
    weights (it re-publishes them when an inference actor joins); meanwhile the rollout actors
    wait for a server and send their requests again (:mod:`arena.policies.remote`)."""
    output_dir: str = "runs"
    """Parent directory of run directories."""
    run_dir: str | None = None
    """The run directory itself, instead of ``<output_dir>/<name>/<time>/``: a path known in
    advance, so that processes started by hand elsewhere can be given its ``config.yaml`` and
    ``learner.yaml`` (written there before anything starts). It must not hold a run already
    (``resume`` continues one)."""
    resume: str | None = None
    """A run directory to continue from its last checkpoint, with the config it ran with and
    the command line's other overrides on top (:mod:`arena.run.resume`; ``arena train --help``)."""
    checkpoint_every: int = 5
    """Save a checkpoint every this many steps (and at the end)."""
    launcher: str = "local"
    """What starts the run's processes: ``local`` (children of ``arena train`` on this
    machine) or ``ray`` (Ray actors on a Ray cluster, see ``ray``; each runs the same ``arena``
    command line as a subprocess on the node Ray chose)."""
    ray: RayConfig = field(default_factory=RayConfig)
    """Cluster, broker address and resources under ``launcher=ray``."""
    preload: bool = True
    """Under ``launcher=local``: fork the learners, inference and rollout actors from one
    ``arena preload`` process that imports torch and transformers once for all of them (and for
    their restarts), instead of each importing them itself (7-9 CPU-seconds each on a small CPU).
    Each is still its own process with its own command line (:mod:`arena.run.preload`). With
    ``ARENA_PRELOAD`` in the environment, that process is the shared ``arena preload
    --listen`` server it names."""
    cpu_threads: int = 0
    """Torch CPU threads of each inference actor and of the learner. 0 splits the cores among
    the processes that compute at the same time: the inference actors share them while they
    generate (those of policies with models of their own too), the learners while they step,
    and in async mode both at once (oversubscribed cores slow every process down).
    ``OMP_NUM_THREADS`` in the environment, when set, wins over 0."""

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, MODES)
        check_choice("launcher", self.launcher, LAUNCHERS)
        check_trainable_backend(self.inference.backend)
        if self.bus.routing is not None:
            check_choice("bus.routing", self.bus.routing, ROUTINGS)
        if self.cpu_threads < 0:
            raise ConfigError(f"cpu_threads must be >= 0, got {self.cpu_threads}")
        if self.steps < 0:
            raise ConfigError(f"steps must be >= 0, got {self.steps}")
        if self.learner.optim.total_steps is None:  # the LR schedule decays over the whole run
            self.learner.optim.total_steps = self.steps
        self._check_actors()
        self.ray.check(
            self.launcher, {"inference": self.inference.device, "learner": self.learner.device}
        )
        if not self.games:
            raise ConfigError("games must list at least one game")
        check_distinct_games(self.games)
        if not any(game.weight > 0 for game in self.games):
            raise ConfigError(
                "games: every game's weight is 0, so the mixture draws none: give one a weight > 0"
            )
        check_groups(
            self.rollout.group_size, self.rollout.episodes_per_step, self.learner.advantage.mode
        )
        self.sampling.check_trainable("sampling")
        check_policies(
            self.policies,
            self.seat_policies,
            opponents=self.opponents,
            sampling=self.sampling,
            learner=self.learner,
            games=self.games,
        )
        check_per_state(self.learner, self.games)

    def _check_actors(self) -> None:
        """Counts of actors: what the run starts may be 0, what it waits for may not."""
        for key, value in (
            ("rollout.actors", self.rollout.actors),
            ("inference.actors", self.inference.actors),
            ("rollout.max_restarts", self.rollout.max_restarts),
            ("bus.max_restarts", self.bus.max_restarts),
            ("learner_max_restarts", self.learner_max_restarts),
            ("inference_max_restarts", self.inference_max_restarts),
        ):
            if value < 0:
                raise ConfigError(f"{key} must be >= 0, got {value}")
        for key, value in (
            ("wait.rollout_actors", self.wait.rollout_actors),
            ("wait.inference_actors", self.wait.inference_actors),
        ):
            if value is not None and value < 1:
                raise ConfigError(
                    f"{key} must be >= 1 (a run needs at least one), got {value}; leave it "
                    "unset to wait for the actors the run starts itself"
                )

    def awaited(self) -> tuple[int, int]:
        """(rollout actors, inference actors) the run waits for before it starts: ``wait.*``,
        or the number it starts itself, at least 1."""
        rollout, inference = self.wait.rollout_actors, self.wait.inference_actors
        return (
            max(1, self.rollout.actors) if rollout is None else rollout,
            max(1, self.inference.actors) if inference is None else inference,
        )

    @property
    def play(self) -> PlayConfig:
        """The sections rollout actors and evaluation need."""
        return PlayConfig(
            games=self.games,
            opponents=self.opponents,
            sampling=self.sampling,
            policy_name=self.learner.name,
            invalid_penalty=self.rollout.invalid_penalty,
            policies=self.policies,
            seat_policies=self.seat_policies,
        )


def preload() -> None:
    """Build the defaults of the configs a run's processes read (the run's and its learner's),
    for the processes ``arena preload`` forks (about 0.1 s each)."""
    schema_defaults(RunConfig)
    schema_defaults(LearnerConfig)


def load_run_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Defaults, then the YAML file (and what it extends), then ``a.b=c`` overrides."""
    return load_config(RunConfig, path, overrides)
