"""What playing episodes needs: the game mixture, the opponents and the sampling settings.

These sections are part of a run config (:class:`arena.run.config.RunConfig`); rollout actors
and evaluation receive them as one :class:`PlayConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from arena.core.config import from_dict
from arena.core.errors import ConfigError, check_choice, did_you_mean
from arena.play.acting import ACTS, DEFAULT_ACT
from arena.policies.types import InvalidRequest, SamplingParams

OPPONENT_MODES = ("self-play", "fixed", "population")
ADAPTER_KINDS = ("lora",)
MAX_EPISODE_TURNS = 1000
"""Turns one episode may play and not be over, wherever it is played (a run's
``rollout.max_episode_turns``, an evaluation's, a tournament's match): past it the game is taken
for one that never ends. The shipped games play at most 600 (``pettingzoo-chess-v0``: 200
moves, each tried 3 times)."""
BOT_MOVE_TIMEOUT = 120.0
"""Seconds one bot move may take, wherever a bot plays (a run's episodes, an evaluation, a
tournament, ``arena play``): past it that episode fails, naming the bot, its seat, the game and
this bound (:mod:`arena.play.bot_moves`). The same 120 s the bot check gives a whole trial game
(:data:`arena.play.bot_check.TRIAL_TIMEOUT`): a bot that passed it is not that slow on a move."""


@dataclass
class SimulatorConfig:
    """A simulator filling one seat of a game (the seat must be one the game marks
    ``simulatable``)."""

    id: str = "scripted-user-v0"
    """Registered simulator id (``arena.simulators`` entry points included)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``simulators.make``."""
    policy: str = ""
    """For a simulator that talks through a model: the served policy it uses (``main``, the
    trained policy, by default; a frozen checkpoint or an ``openai`` backend served under its own
    name otherwise)."""
    timeout: float = 60.0
    """Seconds one simulator reply may take before its episode ends with an error (> 0: the
    game config checks it, naming the seat)."""


@dataclass
class GameConfig:
    id: str = "tictactoe-v0"
    """Registered game id (see ``arena games``)."""
    weight: float = 1.0
    """Relative probability of this game in the training mixture."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``games.make`` (e.g. ``max_retries``)."""
    role: str = "player-v0"
    """Registered role id that every seat of this game plays."""
    role_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``roles.make`` of every seat's role (e.g. ``prefill: true``); they
    override the ones the game gives its seats."""
    roles: dict[str, str] = field(default_factory=dict)
    """Role games: role id per seat (``judge: judge-v0``) or per role id the game declares
    (``solver-v0: my-solver-v0``), overriding the game's own. ``role`` replaces ``player-v0``."""
    simulators: dict[str, SimulatorConfig] = field(default_factory=dict)
    """Seats filled by a simulator instead of a policy (``user: {id: scripted-user-v0}``); their
    turns are recorded but never trained on. A seat left out is played by the policy, so the
    same policy learns both sides."""
    act: str = DEFAULT_ACT
    """How the policy plays this game's seats: ``generate`` writes a reply that the role reads
    (any game); ``choice`` samples one of the legal replies by the model's log-probability of
    each (games that list their legal actions only; see ``arena/play/choice.py``): no reply is
    ever invalid, and training moves the policy over the legal actions. A command's ``--act``
    and a tournament participant's ``act`` override it (:func:`arena.play.acting.resolve_act`)."""

    def __post_init__(self) -> None:
        check_choice("act", self.act, ACTS)
        if self.weight < 0:
            raise ConfigError(f"games[{self.id}].weight must be >= 0, got {self.weight}")
        for seat, simulator in self.simulators.items():
            if simulator.timeout <= 0:
                raise ConfigError(
                    f"games[{self.id}].simulators.{seat}.timeout must be > 0, got "
                    f"{simulator.timeout}"
                )


@dataclass
class OpponentConfig:
    mode: str = "self-play"
    """``self-play``: every seat is the trained policy; ``fixed``: one seat is the trained
    policy and the others are ``fixed`` (not trained); ``population``: the others are drawn
    from past checkpoints (or the latest policy with probability ``latest_prob``), one draw per
    step; with named policies each such seat plays its own policy's snapshot of that checkpoint
    (``docs/training.md``, "Opponents")."""
    fixed: str = "random-v0"
    """Bot id for ``fixed`` mode, or ``strongest`` for each game's strongest reference bot."""
    latest_prob: float = 0.5
    """In ``population`` mode, the chance that a step's opponent seats play the current policy
    itself (one draw per step, for every opponent seat of its collect)."""
    pool_size: int = 4
    """In ``population`` mode, how many recent checkpoints stay in the pool. Without the current
    policy, the draw is uniform over the initial model and the last ``pool_size`` checkpoints
    still on disk (``learner.checkpoint.keep`` prunes older ones, so the pool holds at most that
    many): latest_prob 0.5 and 4 checkpoints give 0.5 latest, 0.1 each of the other five."""

    def __post_init__(self) -> None:
        check_choice("opponents.mode", self.mode, OPPONENT_MODES)
        if not 0.0 <= self.latest_prob <= 1.0:
            raise ConfigError(f"opponents.latest_prob must be in [0, 1], got {self.latest_prob}")


@dataclass
class SamplingConfig:
    temperature: float = 1.0
    """Sampling temperature of training rollouts."""
    top_p: float = 1.0
    """Nucleus sampling threshold (1 keeps every token)."""
    top_k: int = 0
    """Top-k sampling (0 keeps every token)."""
    max_new_tokens: int = 24
    """Longest reply per turn; a move needs only a handful of tokens."""

    def params(self) -> SamplingParams:
        """The request parameters these settings sample with (no seed, stop or adapter yet)."""
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_new_tokens,
        )

    def check_trainable(self, where: str) -> None:
        """What training refuses, named by ``where`` (``sampling``, or a trained policy's
        ``policies.NAME.sampling``): greedy sampling, and top-p or top-k truncation."""
        if not self.temperature > 0:
            raise ConfigError(
                f"{where}.temperature is {self.temperature}, but greedy sampling has "
                "no policy gradient (every attempt from one start plays the same, so nothing "
                "tells a better reply from a worse one): set it > 0 for training "
                "(eval.temperature may stay 0; a frozen policy may sample greedily)"
            )
        if self.top_p < 1.0 or self.top_k > 0:
            raise ConfigError(
                f"{where}.top_p={self.top_p}, {where}.top_k={self.top_k}: "
                "training samples from the whole tempered distribution, since the learner "
                "recomputes log_softmax(logits / T) by teacher forcing and cannot know which "
                "tokens a truncation removed (the importance weights would be biased); set "
                "top_p: 1.0 and top_k: 0 (a frozen policy may truncate)"
            )


@dataclass
class PolicySpec:
    """One named policy of a run: a LoRA adapter on the shared base (the default), or a model of
    its own, trained by a learner of its own or frozen (``docs/training.md``, "Several models
    in one run")."""

    adapter: str = "lora"
    """What a policy on the shared base trains: ``lora``, a LoRA adapter (its shape is
    ``learner.lora``'s r, alpha and target_modules; ``arena/models/lora.py``). Policies with a
    ``model`` of their own train their ``lora`` section instead."""
    model: str | None = None
    """A base of the policy's own (any model spec: ``tiny``, ``smollm2-135m``, an HF directory,
    a checkpoint's ``model/``), served by inference actors of its own as ``policy:<name>`` and
    trained by a learner of its own. None: an adapter on the run's shared ``model``."""
    train: bool = True
    """False: the policy is served and never trained (a frozen judge or simulated user); its
    turns are recorded with ``trained: false``. Needs a ``model`` of its own."""
    lora: dict[str, Any] | None = None
    """With a ``model`` of its own: train a LoRA adapter on it in this shape (``{r: 8}``; any
    field of ``learner.lora``, the rest from there) instead of every weight. None: full weights."""
    sampling: dict[str, Any] = field(default_factory=dict)
    """How this policy's seats sample, where it differs from the run: any fields of the run's
    ``sampling`` section (``{temperature: 0.3}``, ``{max_new_tokens: 64}``); each field left out
    takes the run's value, so an override of the run's ``sampling`` reaches every policy that
    does not set that field itself (:meth:`PlayConfig.sampling_of`). Empty: the run's sampling.
    A trained policy's sampling follows the run's training rules (temperature > 0, no top-p or
    top-k), and its turns are re-scored at its own temperature (by its own learner, or, for an
    adapter on the shared base, row by row in the run's learner); a frozen policy may be greedy
    (``temperature: 0``) or truncate."""

    def __post_init__(self) -> None:
        check_choice("adapter", self.adapter, ADAPTER_KINDS)

    @property
    def own_base(self) -> bool:
        """Whether the policy plays on a model of its own (not an adapter on the shared base)."""
        return self.model is not None

    def check(self, name: str) -> None:
        """The combinations that mean nothing, named by their key."""
        if self.model is not None and not str(self.model).strip():
            raise ConfigError(f"policies.{name}.model is empty: name a model, or drop the key")
        if not self.train and self.model is None:
            raise ConfigError(
                f"policies.{name}.train is false, but the policy has no model of its own: a "
                "frozen policy needs policies.{name}.model (the shared base itself is what "
                "plays when a seat maps to no policy)".replace("{name}", name)
            )
        if self.lora is not None and self.model is None:
            raise ConfigError(
                f"policies.{name}.lora shapes an adapter on a policy's own model: set "
                f"policies.{name}.model too (adapters on the shared base take learner.lora's "
                "shape)"
            )
        if self.lora is not None and not self.train:
            raise ConfigError(
                f"policies.{name}: train is false, so its lora section would never train; "
                "drop the lora section or set train: true"
            )

    def sampling_over(self, run: SamplingConfig, name: str) -> SamplingConfig:
        """The policy's sampling: its own fields over the run's ``run`` (see ``sampling``); a
        bad key or value is one line naming ``policies.NAME.sampling.KEY``."""
        if not self.sampling:
            return run
        where = f"policies.{name}.sampling"
        for key in self.sampling:
            if key not in asdict(run):
                fields = list(asdict(run))
                raise ConfigError(
                    f"{where}.{key} is not a sampling setting"
                    f"{did_you_mean(key, fields, prefix=f'{where}.')} (valid: {', '.join(fields)})"
                )
        try:
            merged = from_dict(SamplingConfig, {**asdict(run), **self.sampling}, where)
        except ConfigError as err:  # "WHERE: temperature: Value 'x' ...": one dotted key
            raise ConfigError(str(err).replace(f"{where}: ", f"{where}.", 1)) from None
        try:
            merged.params()
        except InvalidRequest as err:  # "temperature must be in [0, 100]": name the key
            message = str(err).removeprefix("invalid sampling params: ")
            value = getattr(merged, message.split()[0], None)
            raise ConfigError(f"{where}.{message}, got {value!r}") from None
        if self.train:
            merged.check_trainable(where)
        return merged


@dataclass
class PlayConfig:
    """Everything a seat factory needs to fill the seats of one episode."""

    games: list[GameConfig] = field(default_factory=lambda: [GameConfig()])
    """The game mixture."""
    opponents: OpponentConfig = field(default_factory=OpponentConfig)
    """Who fills the seats the trained policy does not."""
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    """How the trained policy samples."""
    policy_name: str = "main"
    """The trained policy's name (an inference actor serves it as ``policy:<name>``)."""
    invalid_penalty: float = 0.0
    """Reward subtracted from a turn whose action the game rejected."""
    policies: dict[str, PolicySpec] = field(default_factory=dict)
    """Named policies: LoRA adapters on the frozen shared base, or models of their own, trained
    or frozen (empty: one shared policy trains every weight, the default)."""
    seat_policies: dict[str, str] = field(default_factory=dict)
    """Which policy each trained seat plays, by ``GAME:SEAT``, by seat, or by role (id or name),
    tried in that order: ``{player_0: first, solver-v0: solver}``."""

    def __post_init__(self) -> None:
        check_seat_policies(self.policies, self.seat_policies, self.games)
        for name in self.policies:
            self.sampling_of(name)

    def seat_policy(self, game_id: str, agent: str | None, role_id: str, role: str) -> str | None:
        """The named policy a trained seat plays, or None for the run's shared policy (no named
        policies, or a seat no entry maps while every named policy has a model of its own). A
        seat no entry maps while adapters on the shared base are declared is a config error (the
        base is frozen then), and so is a seat that two entries of one kind (by seat, or by role)
        give to two policies."""
        if not self.policies:
            return None
        levels = [[f"{game_id}:{agent}", agent], [role_id, role]] if agent else [[role_id, role]]
        for keys in levels:
            claims = {self.seat_policies[k] for k in keys if k in self.seat_policies}
            if len(claims) > 1:
                raise ConfigError(
                    f"seat_policies: seat {agent or '?'} of {game_id} (role {role_id}) is "
                    f"claimed by two policies, {' and '.join(sorted(claims))}: keep one entry"
                )
            if claims:
                return claims.pop()
        if not any(not spec.own_base for spec in self.policies.values()):
            return None
        raise ConfigError(
            f"seat_policies: seat {agent or '?'} of {game_id} (role {role_id}) plays none of the "
            f"policies {', '.join(self.policies)}: map it by '{game_id}:{agent}', by "
            f"'{agent}' or by its role '{role_id}'"
        )

    def spec_of(self, policy: str | None) -> PolicySpec | None:
        """The named policy's spec; None for the shared policy."""
        return None if policy is None else self.policies[policy]

    def sampling_of(self, policy: str | None) -> SamplingConfig:
        """How ``policy``'s seats sample: its own ``sampling`` fields over the run's (None, an
        undeclared name or a policy without a section: the run's ``sampling``)."""
        spec = self.policies.get(policy) if policy is not None else None
        return self.sampling if spec is None else spec.sampling_over(self.sampling, policy)


def check_distinct_games(games: Sequence[GameConfig]) -> None:
    """Each game may be listed once: its episodes, step metrics, evaluation rows and tournament
    match ids are keyed by its id, so a second entry of one id (other kwargs, role or act)
    would be merged into the first's rows, or replayed under its match ids, without a word."""
    first: dict[str, int] = {}
    for index, game in enumerate(games):
        if game.id in first:
            raise ConfigError(
                f"games[{index}]: {game.id} is listed twice (games[{first[game.id]}] too); a "
                "game's episodes, metrics and results are keyed by its id: list it once"
            )
        first[game.id] = index


def check_seat_policies(
    policies: dict[str, PolicySpec],
    seat_policies: dict[str, str],
    games: Sequence[GameConfig] = (),
) -> None:
    """Every seat mapping names a declared policy (a typo names the nearest), and every policy
    plays a seat (a simulator's ``policy`` is served apart: ``games`` says which are)."""
    if seat_policies and not policies:
        raise ConfigError(
            "seat_policies maps seats to policies, but no policies are declared: add "
            f"policies: {{{', '.join(f'{p}: {{}}' for p in dict.fromkeys(seat_policies.values()))}}}"
        )
    for seat, name in seat_policies.items():
        if name not in policies:
            raise ConfigError(
                f"seat_policies.{seat} = {name!r} is not a declared policy "
                f"({', '.join(policies)}){did_you_mean(name, list(policies))}"
            )
    idle = [name for name in policies if name not in seat_policies.values()]
    simulated = {
        spec.policy: f"games[{game.id}].simulators.{seat}"
        for game in games
        for seat, spec in game.simulators.items()
    }
    if idle and idle[0] in simulated:
        name = idle[0]
        raise ConfigError(
            f"policies: {name!r} plays no seat; {simulated[name]}.policy names it, but a "
            "simulator talks through a policy served apart (`arena inference --connect ADDR "
            f"--name {name} --model MODEL`), not one declared here: drop policies.{name}, or "
            f"drop the simulator and map the seat to it (seat_policies: {{SEAT: {name}}}), the "
            "seat's role then played by that model"
        )
    if idle:
        raise ConfigError(
            f"policies: {idle[0]!r} plays no seat; map seats to it in seat_policies "
            "(GAME:SEAT, SEAT or ROLE: NAME)"
        )
    for name, spec in policies.items():
        spec.check(name)
    reserved = [name for name in policies if not name.isidentifier() or name == "main"]
    if reserved:
        raise ConfigError(
            f"policies: {reserved[0]!r} cannot name a policy (a name is an identifier, and "
            "'main' is the shared base)"
        )
