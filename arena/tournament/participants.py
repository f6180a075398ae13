"""Participants: configs resolved into named players, checked before any match starts.

A participant is a reference bot, a model served by an inference actor on the bus (``hf`` or
``vllm``: a checkpoint, a Hugging Face directory, the embedded SmolLM2), or an OpenAI-compatible
endpoint. :func:`resolve_participants` expands checkpoint globs, names every participant, and
raises one :class:`~arena.core.errors.ConfigError` naming each participant that cannot be loaded:
an unknown bot id (with the nearest one), a model path that is not a model, a glob that matches
nothing, a duplicate name, or a bot that cannot play one of the tournament's games.
:func:`parse_participant` reads the one-word form the command line takes (``minimax-v0``,
``smollm2-135m``, ``runs/x/checkpoints/step-00000012``).
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import games
import games.bots
from arena.core.errors import ConfigError, did_you_mean
from arena.core.registry import RegistryError, load_object
from arena.play.config import GameConfig
from arena.policies.types import SamplingParams
from arena.tournament.config import ParticipantConfig
from games.bots.base import Bot

if TYPE_CHECKING:
    from arena.run.config import RunConfig

SERVED_BACKENDS = ("hf", "vllm")
"""Backends whose models an inference actor serves (and batches) on the bus."""
_STEP = re.compile(r"^step-0*(\d+)$")
_BOT_ID = re.compile(r"-v\d+$")


@dataclass(frozen=True)
class Participant:
    """A resolved participant."""

    name: str
    config: ParticipantConfig
    model: str | None = None
    """The model spec to load (a checkpoint resolved to its ``model/`` directory)."""

    @property
    def kind(self) -> str:
        """``bot``, ``model`` (served on the bus) or ``endpoint`` (an OpenAI-compatible server)."""
        if self.config.bot is not None:
            return "bot"
        return "endpoint" if self.config.backend == "openai" else "model"

    @property
    def server_key(self) -> tuple[str, str, str]:
        """Participants with one key share one inference actor (sampling is per request)."""
        return (str(self.model), self.config.backend, self.config.dtype)

    def sampling(self) -> SamplingParams:
        s = self.config.sampling
        return SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_new_tokens=s.max_new_tokens,
        )

    def describe(self) -> str:
        if self.kind == "bot":
            return f"bot {self.config.bot}"
        return f"{self.config.backend} model {self.model}"


def parse_participant(text: str, name: str | None = None) -> ParticipantConfig:
    """The one-word form of the command line: a registered bot id (``minimax-v0``), or a model
    spec or path (``smollm2-135m``, a checkpoint or Hugging Face directory). A word shaped like
    a bot id (``name-vN``) that is no path is read as a bot, so a typo gets the nearest bot id
    rather than "no model"."""
    is_bot = text in games.bots.registry.ids() or (
        _BOT_ID.search(text) is not None and not Path(text).expanduser().exists()
    )
    if is_bot:
        return ParticipantConfig(name=name or text, bot=text)
    return ParticipantConfig(name=name, model=text)


def run_config_of(spec: str) -> RunConfig | None:
    """The config of the run a checkpoint belongs to (``<run>/checkpoints/step-N``), if any:
    a model trained with a prefilled answer tag and no rules in its prompt plays far worse when
    prompted any other way, so evaluating or playing it uses the run's game and role settings."""
    from arena.run.config import load_run_config

    path = Path(spec).expanduser()
    config_file = path.parent.parent / "config.yaml"
    if path.parent.name != "checkpoints" or not config_file.is_file():
        return None
    return load_run_config(str(config_file), [])


def resolve_participants(
    configs: Sequence[ParticipantConfig],
    game_configs: Sequence[GameConfig] = (),
    *,
    minimum: int = 2,
) -> list[Participant]:
    """Every participant, named and checked; one error lists every one that cannot be loaded."""
    problems: list[str] = []
    resolved: list[Participant] = []
    for index, config in enumerate(configs):
        label = config.name or config.bot or config.model or f"participants[{index}]"
        try:
            resolved.extend(_resolve(config))
        except ConfigError as err:
            problems.append(f"participant {label!r}: {err}")
    seen: dict[str, int] = {}
    for participant in resolved:
        seen[participant.name] = seen.get(participant.name, 0) + 1
    problems += [
        f"participant name {name!r} is used {count} times; give each a distinct `name`"
        for name, count in seen.items()
        if count > 1
    ]
    for participant in resolved:
        if participant.kind == "bot":
            problems += _check_bot(participant, game_configs)
    if problems:
        raise ConfigError("cannot load every participant:\n  " + "\n  ".join(problems))
    if len(resolved) < minimum:
        raise ConfigError(f"need at least {minimum} participants, got {len(resolved)}")
    return resolved


def _resolve(config: ParticipantConfig) -> list[Participant]:
    if config.bot is not None:
        if ":" in config.bot:
            try:
                load_object(config.bot)
            except RegistryError as err:
                raise ConfigError(str(err)) from None
            return [Participant(config.name or config.bot, config)]
        if config.bot not in games.bots.registry.ids():
            hint = did_you_mean(config.bot, games.bots.registry.ids())
            raise ConfigError(f"no bot {config.bot!r}{hint}")
        return [Participant(config.name or config.bot, config)]
    assert config.model is not None
    if config.backend == "openai":
        return [Participant(config.name or config.model, config, config.model)]
    if glob.has_magic(config.model):
        matches = sorted(glob.glob(config.model), key=_step_order)
        if not matches:
            raise ConfigError(f"the glob {config.model!r} matches nothing")
        base = config.name or "checkpoint"
        out = []
        for path, suffix in zip(matches, match_names(matches), strict=True):
            name = f"{base}@{suffix}"
            out.append(Participant(name, replace(config, name=name), _model_path(path)))
        return out
    return [
        Participant(config.name or _default_name(config.model), config, _model_path(config.model))
    ]


def match_names(paths: Sequence[str]) -> list[str]:
    """What tells each match of a glob apart: ``step-N`` (a checkpoint) or the directory's name,
    and, only where those repeat (a glob over several runs), the run's directory first, as
    few of its parts as make every name unique, counted from where the runs' paths part:
    ``learning-s0/step-12`` for ``runs/learning-s0/<time>/checkpoints/step-00000012``, or
    ``<time>/step-12`` for two runs of one config."""
    items = [Path(p) for p in paths]
    short = [_short(p) for p in items]
    if len(set(short)) == len(short):
        return short
    owners = [_owner(p).parts for p in items]
    common = 0
    while all(len(o) > common and o[common] == owners[0][common] for o in owners):
        common += 1
    longest = max(len(o) for o in owners) - common
    for depth in range(1, longest + 1):
        named = [
            "/".join(o[common : common + depth] + (s,)) for o, s in zip(owners, short, strict=True)
        ]
        if len(set(named)) == len(named):
            return named
    # one run, two directories of the same step (step-12 and step-00000012): their own names
    return ["/".join(o[common:] + (p.name,)) for o, p in zip(owners, items, strict=True)]


def _short(path: Path) -> str:
    step = _STEP.match(path.name)
    return f"step-{int(step.group(1))}" if step else path.name


def _owner(path: Path) -> Path:
    """The run directory of a checkpoint (``<run>/checkpoints/step-N``), else the parent."""
    return path.parent.parent if path.parent.name == "checkpoints" else path.parent


def _step_order(path: str) -> tuple[str, int]:
    match = _STEP.match(Path(path).name)
    return (str(Path(path).parent), int(match.group(1)) if match else -1)


def _default_name(spec: str) -> str:
    path = Path(spec)
    step = _STEP.match(path.name)
    if step:
        return f"{path.parent.parent.name}@step-{int(step.group(1))}"
    return path.name or spec


def _model_path(spec: str) -> str:
    """The loadable spec: a checkpoint directory plays its ``model/``; paths must be models."""
    from arena.models import EMBEDDED_ALIASES, TINY_NAME

    if spec in EMBEDDED_ALIASES or spec == TINY_NAME:
        return spec
    path = Path(spec).expanduser()
    if (path / "model" / "config.json").is_file():
        return str(path / "model")
    if (path / "config.json").is_file():
        return str(path)
    if path.exists():
        raise ConfigError(
            f"{spec!r} is neither a Hugging Face model directory (no config.json) "
            "nor a checkpoint (no model/config.json)"
        )
    raise ConfigError(
        f"no model {spec!r}: expected {TINY_NAME!r}, one of {sorted(EMBEDDED_ALIASES)}, a "
        "checkpoint directory, a Hugging Face directory, or a glob over checkpoints"
    )


def make_bot(config: ParticipantConfig, seed: int) -> Bot:
    """The bot of a bot participant: a registered id, or a plugin's ``module:Factory``."""
    assert config.bot is not None
    if ":" in config.bot:
        return load_object(config.bot)(seed=seed, **config.bot_kwargs)
    return games.bots.make(config.bot, seed=seed, **config.bot_kwargs)


def _check_bot(participant: Participant, game_configs: Sequence[GameConfig]) -> list[str]:
    """Play one game of each tournament game against the random bot: a bot that cannot play
    a game (minimax on poker) is found now, not as forfeits halfway through."""
    problems = []
    for game in game_configs:
        env = games.make(game.id, **game.kwargs)
        bots = {
            agent: make_bot(participant.config, 0) if i == 0 else games.bots.make("random-v0")
            for i, agent in enumerate(env.possible_agents)
        }
        env.reset(seed=0)
        try:
            while env.agents:
                agent = env.agent_selection
                if env.terminations[agent] or env.truncations[agent]:
                    env.step(None)
                else:
                    env.step(bots[agent].act(env, agent))
        except Exception as err:
            problems.append(
                f"participant {participant.name!r} ({participant.describe()}) cannot play "
                f"{game.id}: {err}"
            )
    return problems
