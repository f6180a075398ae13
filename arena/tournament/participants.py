"""Participants: configs resolved into named players, checked before any match starts.

A participant is a reference bot, a model served by an inference actor on the bus (``hf`` or
``vllm``: a checkpoint, a Hugging Face directory, the embedded SmolLM2; or a plugin policy
backend, whose ``model`` string is passed to it as is), or an OpenAI-compatible endpoint.
:func:`resolve_participants` expands checkpoint globs, names every participant, and raises one
:class:`~arena.core.errors.ConfigError` naming each participant that cannot be loaded: an unknown
bot id (with the nearest one), a model path that is not a model, a glob that matches nothing, a
duplicate name, or a bot that cannot play one of the tournament's games.
:func:`parse_participant` reads the one-word form the command line takes (``minimax-v0``,
``smollm2-135m``, ``runs/x/checkpoints/step-00000012``). The names participants get from
their paths come from :mod:`arena.tournament.participant_names`.
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
from arena.play.bot_check import cannot_play
from arena.play.config import GameConfig, SamplingConfig
from arena.policies.types import SamplingParams
from arena.tournament.checkpoint_paths import (
    POLICIES,
    looks_like_path,
    newest_checkpoint,
    on_disk,
    refuse_frozen_base,
    run_and_policy,
)
from arena.tournament.config import ParticipantConfig
from arena.tournament.participant_names import (
    adapter_label,
    adapter_match_names,
    adapter_order,
    default_name,
    in_checkpoint,
    match_names,
    step_order,
)
from games.bots.base import Bot

if TYPE_CHECKING:
    from arena.run.config import RunConfig

SERVED_BACKENDS = ("hf", "vllm")
"""Built-in backends whose models an inference actor serves (and batches) on the bus; a plugin
backend is served so too, its ``model`` unchecked."""
_BOT_ID = re.compile(r"-v\d+$")


@dataclass(frozen=True)
class Participant:
    """A resolved participant."""

    name: str
    config: ParticipantConfig
    model: str | None = None
    """The model spec to load (a checkpoint resolved to its ``model/`` directory); a plugin
    backend's ``model`` as written."""
    adapter: str | None = None
    """The LoRA adapter directory played on ``model`` (checked to be made for it), if any."""

    @property
    def kind(self) -> str:
        """``bot``, ``model`` (served on the bus: ``hf``, ``vllm`` or a plugin backend) or
        ``endpoint`` (an OpenAI-compatible server)."""
        if self.config.bot is not None:
            return "bot"
        return "endpoint" if self.config.backend == "openai" else "model"

    @property
    def plugin(self) -> bool:
        """Played on a plugin policy backend (its tokenizer is ``config.tokenizer``)."""
        return self.kind == "model" and self.config.backend not in SERVED_BACKENDS

    @property
    def tokenizer(self) -> str:
        """The model spec whose tokenizer and chat template render this participant's prompts:
        the model's own, or, for an endpoint or a plugin backend, ``config.tokenizer``."""
        return (
            str(self.model) if self.kind == "model" and not self.plugin else self.config.tokenizer
        )

    @property
    def server_key(self) -> tuple[str, str, str, str]:
        """Participants with one key share one inference actor (sampling is per request, and
        so is the adapter: the actor holds every adapter of its participants)."""
        return (str(self.model), self.config.backend, self.config.dtype, self.tokenizer)

    def sampling(self, adapter: str | None = None) -> SamplingParams:
        """The participant's sampling settings; ``adapter`` is the name its policy serves this
        participant's adapter under (the policy chooses it, not the participant)."""
        s = self.config.sampling
        return SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k,
            max_new_tokens=s.max_new_tokens,
            adapter=adapter,
        )

    def describe(self) -> str:
        if self.kind == "bot":
            return f"bot {self.config.bot}"
        adapter = f" + adapter {self.adapter}" if self.adapter is not None else ""
        return f"{self.config.backend} model {self.model}{adapter}"


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
    folder = path.parent
    if folder.parent.name == POLICIES and folder.parent.parent.name == "checkpoints":
        folder = folder.parent.parent  # <run>/checkpoints/policies/<policy>/step-N
    config_file = folder.parent / "config.yaml"
    if folder.name != "checkpoints" or not config_file.is_file():
        return None
    return load_run_config(str(config_file), [])


def policy_of(spec: str, adapter: str | None = None) -> str | None:
    """The named policy whose weights these are: the adapter's (``<run>/checkpoints/step-N/
    adapters/<policy>``), else the checkpoint's (``<run>/checkpoints/policies/<policy>/
    step-N``, what ``RUN:POLICY`` resolves to; its ``adapters/shared-lora`` too); None for the
    run's shared policy or anything else (:func:`trained_sampling`)."""
    from arena.models.adapter_shape import SHARED_ADAPTER

    if adapter is not None and in_checkpoint(Path(adapter).expanduser()):
        if Path(adapter).name != SHARED_ADAPTER:
            return Path(adapter).expanduser().name
        spec = str(Path(adapter).expanduser().parent.parent)
    folder = Path(spec).expanduser().parent
    if folder.parent.name == POLICIES and folder.parent.parent.name == "checkpoints":
        return folder.name
    return None


def trained_sampling(
    run_config: RunConfig, spec: str, adapter: str | None = None
) -> SamplingConfig:
    """How the policy whose weights ``spec`` (and ``adapter``) are sampled in ``run_config``'s
    run: a named policy's own ``sampling`` over the run's (:func:`policy_of`), else the run's.
    ``arena eval`` and ``arena play`` take their reply length from it."""
    return run_config.play.sampling_of(policy_of(spec, adapter))


def adapter_run_config(adapter: str) -> RunConfig | None:
    """The config of the run an adapter was saved by (``<run>/checkpoints/step-N/adapters/
    <policy>``), if any: it was trained under that run's prompts, as a checkpoint was."""
    path = Path(adapter).expanduser()
    return run_config_of(str(path.parent.parent)) if in_checkpoint(path) else None


def resolve_participants(
    configs: Sequence[ParticipantConfig],
    game_configs: Sequence[GameConfig] = (),
    *,
    minimum: int = 2,
    taken: Sequence[str] = (),
) -> list[Participant]:
    """Every participant, named and checked; one error lists every one that cannot be loaded.
    ``taken``: seats no participant plays (a person's, in ``arena play``), skipped as simulated
    seats are when a bot is checked."""
    problems: list[str] = []
    resolved: list[Participant] = []
    for index, config in enumerate(configs):
        label = config.name or config.bot or config.model or f"participants[{index}]"
        if config.name is None and config.model is not None and config.adapter is not None:
            label = f"{default_name(config.model)}+{adapter_label(Path(config.adapter))}"
        if config.name in ("True", "False"):  # `name: off` in YAML is the boolean false
            problems.append(
                f"participant name {config.name!r}: YAML reads an unquoted yes, no, on, off, "
                'true or false as a boolean; quote the name (name: "off")'
            )
            continue
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
            problems += _check_bot(participant, game_configs, taken)
    if len(problems) == 1:  # one line, as `arena eval` shows its one participant's problem
        raise ConfigError(problems[0])
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
    if config.backend not in SERVED_BACKENDS:
        # an endpoint's model name, or a plugin backend's: what it means is the backend's
        return [Participant(config.name or config.model, config, config.model)]
    if config.adapter is not None:
        return _resolve_adapters(config)
    if glob.has_magic(config.model):
        matches = sorted(glob.glob(config.model), key=step_order)
        if not matches:
            raise ConfigError(f"the glob {config.model!r} matches nothing")
        base = config.name or "checkpoint"
        out = []
        for path, suffix in zip(matches, match_names(matches), strict=True):
            refuse_frozen_base(path, "model:")  # a LoRA run's checkpoint: its model/ is the base
            name = f"{base}@{suffix}"
            out.append(Participant(name, replace(config, name=name), _model_path(path)))
        return out
    refuse_frozen_base(config.model, "model:")
    return [
        Participant(config.name or default_name(config.model), config, _model_path(config.model))
    ]


def _resolve_adapters(config: ParticipantConfig) -> list[Participant]:
    """A participant per adapter (one, or each match of a glob), on one base model, each
    checked now to be an adapter made for that base: a mismatch found by the inference actor
    would only show as a dead actor, after the others have loaded."""
    assert config.model is not None and config.adapter is not None
    if glob.has_magic(config.model):
        raise ConfigError(
            f"adapter {config.adapter!r} needs one base model, but model {config.model!r} is a "
            "glob; name the checkpoint the adapter was made for"
        )
    model = _model_path(config.model)
    if not glob.has_magic(config.adapter):
        config = replace(config, adapter=on_disk(config.adapter))
        check_adapter(config.adapter, model)
        name = config.name or f"{default_name(config.model)}+{adapter_label(Path(config.adapter))}"
        return [Participant(name, config, model, config.adapter)]
    matches = sorted(glob.glob(config.adapter), key=adapter_order)
    if not matches:
        raise ConfigError(f"the adapter glob {config.adapter!r} matches nothing")
    for path in matches:
        check_adapter(path, model)
    pattern = Path(config.adapter).name
    role = "adapter" if glob.has_magic(pattern) else pattern
    base = config.name or f"{default_name(config.model)}+{role}"
    out = []
    for path, suffix in zip(matches, adapter_match_names(matches), strict=True):
        name = f"{base}@{suffix}"
        out.append(Participant(name, replace(config, name=name, adapter=path), model, path))
    return out


def check_adapter(path: str, model: str) -> None:
    """Refuse a path that is not a peft adapter directory, or one made for another base than
    ``model`` (the spec its inference actor serves, which is what the actor checks too)."""
    from arena.models.lora_files import read_adapter

    if not Path(path).expanduser().exists():
        raise ConfigError(f"no adapter directory {path!r}")
    read_adapter(Path(path).expanduser(), model)  # an AdapterError is a ConfigError


def _model_path(spec: str) -> str:
    """The loadable spec: a checkpoint directory plays its ``model/``; paths must be models."""
    from arena.models import EMBEDDED_ALIASES, TINY_NAME

    if spec in EMBEDDED_ALIASES or spec == TINY_NAME:
        return spec
    if run_and_policy(spec)[1] is not None:  # RUN:POLICY, a policy's newest checkpoint
        return str(newest_checkpoint(spec) / "model")
    path = Path(on_disk(spec)).expanduser()  # RUN/checkpoints/step-12 is step-00000012
    if (path / "model" / "config.json").is_file():
        return str(path / "model")
    if (path / "config.json").is_file():
        return str(path)
    if path.exists():
        newest = newest_checkpoint(spec)
        hint = f"; a run directory: name its checkpoint, e.g. {newest}" if newest else ""
        raise ConfigError(
            f"{spec!r} is neither a Hugging Face model directory (no config.json) "
            f"nor a checkpoint (no model/config.json){hint}"
        )
    if looks_like_path(spec):
        raise ConfigError(f"no such file or directory: {spec}")
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


def _check_bot(
    participant: Participant, game_configs: Sequence[GameConfig], taken: Sequence[str] = ()
) -> list[str]:
    """Play one game of each tournament game against the random bot: a bot that cannot play
    a game (minimax on poker) is found now, not as forfeits halfway through. ``taken``: seats
    the bot will not play (a person's, in ``arena play``)."""
    problems = []
    for game in game_configs:
        failed = cannot_play(lambda: make_bot(participant.config, 0), game, taken)
        if failed:
            problems.append(
                f"participant {participant.name!r} ({participant.describe()}) cannot play "
                f"{game.id}: {failed}"
            )
    return problems
