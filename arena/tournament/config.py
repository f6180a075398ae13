"""The config of ``arena tournament``: who plays, which games, how often, and where it is written.

``load_tournament_config("configs/tournament.yaml", ["pairs=20"])`` merges the schema's defaults,
the YAML file and ``a.b=c`` overrides (:mod:`arena.core.config`); an unknown key or a wrong type
is a :class:`~arena.core.errors.ConfigError` naming the key, before anything starts. A minimal
config::

    participants:
      - {name: minimax, bot: minimax-v0}
      - {name: random, bot: random-v0}
      - {name: smollm, model: smollm2-135m}
      - {name: run, model: "runs/selfplay/*/checkpoints/step-*"}   # one participant per match
      - {model: smollm2-135m, adapter: runs/roles/<time>/checkpoints/step-8/adapters/solver}
      - {name: first-legal, model: any, backend: first-legal}    # a plugin policy backend
    games: [{id: tictactoe-v0}]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from arena.core.config import load_config
from arena.core.errors import ConfigError, check_choice
from arena.play.acting import ACTS
from arena.play.config import GameConfig, SamplingConfig, check_distinct_games

SCHEDULES = ("round-robin", "gauntlet")
MODEL_BACKENDS = ("hf", "vllm", "openai")
"""The built-in backends a model participant plays on; any plugin backend plays too."""


def _greedy() -> SamplingConfig:
    return SamplingConfig(temperature=0.0)


@dataclass
class ParticipantConfig:
    """One participant: a reference bot, a model (checkpoint, HF directory, the embedded model),
    an OpenAI-compatible endpoint, or a plugin policy backend's. Exactly one of ``bot`` and
    ``model`` is set."""

    name: str | None = None
    """Shown in tables and written in ``matches.jsonl``; defaults to the bot id or the model.
    A checkpoint glob names each match ``<name>@step-N``; one over several runs names the run
    as well where the steps repeat (``<name>@learning-s0/step-12``: as few parts of the run's
    directory as tell the runs apart)."""
    bot: str | None = None
    """A registered reference bot id (see ``games.bots``), e.g. ``minimax-v0``, or a bot class
    of your own as ``module:Factory`` (a :class:`games.bots.base.Bot`)."""
    bot_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the bot (e.g. ``depth: 4``)."""
    model: str | None = None
    """``smollm2-135m`` (embedded), ``tiny`` (tests), a Hugging Face directory, a checkpoint
    directory (``.../step-00000012``: its ``model/`` is played), or a glob over checkpoints
    (``runs/selfplay/*/checkpoints/step-*``: one participant each). For ``openai``: the model
    name sent to the endpoint. For a plugin backend: passed to it as is, unchecked (it decides
    what it means: an API model name, a path, a rule set...)."""
    adapter: str | None = None
    """A LoRA adapter played on ``model``: a peft adapter directory made for that base (what
    training writes as ``.../step-N/adapters/<policy>``), or a glob over such directories (one
    participant each, named as a checkpoint glob is). Adapters of different steps or roles then
    play each other on one base: every participant on one base and backend is served by one
    inference actor holding all their adapters, each request naming its own. One made for
    another base is refused before any match, naming both. ``hf`` models only (``vllm``, ``openai``
    and plugin backends are refused, naming the participant). Unnamed, the
    participant is ``<model>+<adapter>`` (``smollm2-135m+solver@step-8``)."""
    backend: str = "hf"
    """How a model is served: ``hf`` or ``vllm`` (an inference actor on the bus, batching every
    match's requests), ``openai`` (an HTTP endpoint at ``base_url``), or a plugin backend's name
    (entry-point group ``arena.policies``; ``arena plugins backends`` lists them), served by an
    inference actor on the bus as ``hf`` is. An unknown name is refused with the nearest ones.
    Only ``hf`` models play adapters and have their exact strategy read (Kuhn, Leduc)."""
    dtype: str = "auto"
    """Weights dtype of ``hf``/``vllm`` models: float32, bfloat16, float16, or ``auto``
    (bfloat16 where this machine computes it measurably faster, else float32); passed to a
    plugin backend as its ``dtype``."""
    base_url: str | None = None
    """``openai``: the endpoint root, e.g. ``http://127.0.0.1:8000/v1``."""
    api_key_env: str = "OPENAI_API_KEY"
    """``openai``: the environment variable holding the key."""
    tokenizer: str = "smollm2-135m"
    """``openai`` and plugin backends: the model spec whose tokenizer and chat template build
    the prompts (a plugin backend gets it as its config's ``tokenizer``, to read them)."""
    act: str | None = None
    """How a model plays the games that list their legal actions: ``generate`` (free text its
    role reads) or ``choice`` (the likeliest-scored legal reply, sampled at ``sampling``'s
    temperature; ``arena/play/choice.py``); None plays each game as its config says (a
    checkpoint's run config included)."""
    sampling: SamplingConfig = field(default_factory=_greedy)
    """How this participant samples (greedy by default: a tournament measures the policy's
    best play; set ``temperature`` to rate the sampled policy)."""


@dataclass
class TournamentConfig:
    """A tournament: participants, games, schedule and output."""

    name: str = "tournament"
    """Names the output directory ``runs/tournaments/<name>`` (unless ``out`` is set)."""
    participants: list[ParticipantConfig] = field(default_factory=list)
    """Who plays (at least two)."""
    games: list[GameConfig] = field(default_factory=lambda: [GameConfig()])
    """The games every pairing plays (``kwargs``, ``role`` and ``role_kwargs`` as in training)."""
    schedule: str = "round-robin"
    """``round-robin``: every pairing; ``gauntlet``: every participant against ``reference``."""
    reference: str | None = None
    """``gauntlet``: the participant everyone else plays."""
    pairs: int = 10
    """Two-player games: seat-swapped pairs per pairing and game (each pair shares a seed, and
    each participant moves first once). N-player games: seat rotations per table."""
    seed: int = 0
    """Seeds every match (match ``k`` of a pairing uses ``seed + k``): reruns are identical."""
    concurrency: int = 32
    """Matches played at once; model participants' requests batch across them."""
    out: str | None = None
    """Output directory (``matches.jsonl``, ``ratings.json``, ``report.md``, ``report.html``).
    An existing one is resumed: finished matches are not replayed."""
    anchor: str | None = None
    """The participant rated 1000 (default: the first name in sorted order)."""
    exploitability: bool = True
    """Read each Kuhn/Leduc participant's policy at every information state and report its
    exact exploitability (bots with a table, and ``hf`` models: seconds per model). Needs
    OpenSpiel (the ``openspiel`` extra); without it one line says so and the rest is written."""
    resamples: int = 500
    """Bootstrap resamples of the rating intervals."""
    max_batch: int = 32
    """Inference actors: most requests generated together."""
    max_wait_ms: float = 10.0
    """Inference actors: how long a batch waits for more requests."""
    device: str = "auto"
    """Inference actors' torch device (``auto``: CUDA when there is one)."""
    request_timeout: float = 600.0
    """Seconds one model reply may take before that match is forfeited."""

    def __post_init__(self) -> None:
        check_choice("schedule", self.schedule, SCHEDULES)
        if self.pairs < 1:
            raise ConfigError(f"pairs must be at least 1, got {self.pairs}")
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}")
        if not self.games:
            raise ConfigError("games: a tournament needs at least one game")
        check_distinct_games(self.games)
        for index, participant in enumerate(self.participants):
            where = f"participants[{index}]"
            if (participant.bot is None) == (participant.model is None):
                raise ConfigError(f"{where}: set exactly one of bot and model")
            check_backend(f"{where}.backend", participant.backend)
            if participant.adapter is not None:
                check_adapter_participant(where, participant)
            if participant.backend == "openai" and not participant.base_url:
                raise ConfigError(f"{where}: backend openai needs base_url")
            if participant.act is not None:
                check_choice(f"{where}.act", participant.act, ACTS)


def check_backend(where: str, backend: str) -> None:
    """A model participant's backend: a built-in one of :data:`MODEL_BACKENDS`, or any
    registered plugin backend, imported now so that one that cannot be is named in one line
    before anything starts (an unknown name gets the registry's nearest names; ``remote`` and
    ``scripted`` are refused, saying what to use instead)."""
    if backend in MODEL_BACKENDS:
        return
    from arena.core.registry import RegistryError
    from arena.policies.factory import backends

    try:
        entry = backends.entry(backend)
        if entry.plugin is not None:
            backends.load(backend)
    except RegistryError as err:
        raise ConfigError(f"{where}: {err}") from None
    if entry.plugin is None:
        raise ConfigError(
            f"{where} = {backend!r}: a tournament serves models on hf, vllm, openai or a plugin "
            "backend (a bot plays as `bot:`, not as a scripted backend)"
        )


def check_adapter_participant(where: str, participant: ParticipantConfig) -> None:
    """An adapter needs a base that holds it: a model served by ``hf`` (the backend whose
    policies serve adapters; a bot or an endpoint has no weights to adapt)."""
    shown = participant.name or participant.bot or participant.model
    label = f"{where} ({shown!r})" if shown else where
    if participant.bot is not None:
        raise ConfigError(
            f"{label}: adapter {participant.adapter!r} needs a model; bot "
            f"{participant.bot!r} has no weights to adapt"
        )
    if participant.backend != "hf":
        raise ConfigError(
            f"{label}: adapter {participant.adapter!r} needs backend hf (the backend that serves "
            f"adapters), not {participant.backend}"
        )
    if not participant.adapter:
        raise ConfigError(f"{label}: adapter is empty; give a peft adapter directory")


def load_tournament_config(path: str | None, overrides: Sequence[str] = ()) -> TournamentConfig:
    """The tournament config at ``path`` (``None``: defaults) with ``a.b=c`` overrides. A
    game's ``simulators`` are refused: a match seats a participant in every seat, so they
    would be ignored (``arena eval --simulator`` evaluates a role game's seat beside one)."""
    config = load_config(TournamentConfig, path, overrides)
    for index, game in enumerate(config.games):
        if game.simulators:
            raise ConfigError(
                f"games.{index}.simulators: a tournament seats a participant in every seat of "
                f"{game.id}, so no seat is simulated: drop simulators (to evaluate a seat beside "
                f"a simulator: arena eval PARTICIPANT --games {game.id} --simulator "
                f"{next(iter(game.simulators))}={next(iter(game.simulators.values())).id})"
            )
    return config
