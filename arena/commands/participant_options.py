"""The options ``arena eval`` and ``arena play`` share: how the model's seats are played
(``--act``), who fills the others (``--simulator``) and which policy backend serves a model
(``--backend``), read into the participant a command line names (:func:`participant_config`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from arena.tournament.config import ParticipantConfig


def add_seat_arguments(parser: argparse.ArgumentParser) -> None:
    """How the model's seats are played (``--act``) and who fills the others (``--simulator``):
    shared by ``arena eval`` and ``arena play``."""
    from arena.play.acting import ACTS

    parser.add_argument(
        "--simulator",
        action="append",
        default=[],
        metavar="[SEAT=]ID",
        help="role games: the simulator that fills SEAT (all seats a simulator may fill, "
        "without SEAT); default: the run's (repeatable)",
    )
    parser.add_argument(
        "--act",
        choices=ACTS,
        default=None,
        help="how the model plays games that list their legal actions: write a reply "
        "(generate) or pick among the legal replies by their scores (choice); default: as its "
        "run config says (see arena/play/acting.py)",
    )


UNSERVED_BACKENDS = {
    "openai": "an endpoint plays as a tournament participant (backend: openai, base_url: ...)",
    "remote": "remote is the client of a policy an inference actor already serves",
    "scripted": "a bot plays as its id (arena plugins bots)",
}
"""Registered backends that ``--backend`` cannot serve a model on, and what to do instead."""


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    """``--backend NAME``, the policy backend that serves a model participant: shared by
    ``arena eval`` and ``arena play`` (read by :func:`participant_config`)."""
    parser.add_argument(
        "--backend",
        default=None,
        metavar="NAME",
        help="the policy backend that serves the model: hf (default), vllm, or a plugin "
        "backend (arena plugins backends), which gets the model string as it is",
    )


def participant_config(spec: str, backend: str | None, *, model: bool = False) -> ParticipantConfig:
    """The participant ``spec`` names (a bot id or a model spec; with ``model``, a model spec
    whatever it looks like), served by ``backend`` (``--backend``; None keeps ``hf``): shared by
    ``arena eval`` and ``arena play``. A bad ``--backend`` is a :class:`ConfigError` in one line
    before any model loads: given with a bot; an unknown name (the nearest registered ones) or
    a plugin that cannot be imported; a backend a command line cannot serve a model on
    (``remote``, ``scripted``; ``openai``, whose endpoint only a tournament config names)."""
    from arena.core.errors import ConfigError
    from arena.tournament.config import ParticipantConfig, check_backend
    from arena.tournament.participants import parse_participant

    participant = ParticipantConfig(model=spec) if model else parse_participant(spec)
    if backend is None:
        return participant
    if participant.model is None:
        raise ConfigError(f"--backend {backend} serves a model, not bot {spec!r}")
    if backend in UNSERVED_BACKENDS:
        raise ConfigError(
            f"--backend {backend}: a model is served here by hf, vllm or a plugin backend "
            f"(arena plugins backends); {UNSERVED_BACKENDS[backend]}"
        )
    check_backend("--backend", backend)  # an unknown name, or a plugin that cannot import
    participant.backend = backend
    return participant
