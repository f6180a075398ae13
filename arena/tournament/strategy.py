"""The exact exploitability of each poker participant, shown beside its rating.

Where a participant's policy can be read at every information state of Kuhn or Leduc poker, its
exploitability is exact (:mod:`arena.eval.exploitability`): a tabular bot gives its table, the
random bot the uniform policy, and an ``hf`` model is read by scoring every legal reply by its
sequence log-probability (:mod:`arena.eval.policy_reader`) under the participant's own sampling
temperature; a greedy participant (temperature 0) is read as the most likely legal reply at every
state (:func:`arena.eval.policy_reader.read_seat_at`), through its LoRA adapter where it plays one,
and acting as it plays (a participant's ``act: choice`` is read as its legal replies' softmax).
Other bots, endpoints, and ``vllm`` and plugin backends' models are not read (the tournament
names those models in one line).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from arena.eval.exploitability import bot_table, exploitability, openspiel_name
from arena.play.config import GameConfig, PlayConfig
from arena.tournament.participants import Participant, make_bot

log = logging.getLogger("arena.tournament")
POKER = ("kuhn_poker", "leduc_poker")
"""OpenSpiel games small enough to read a policy at every information state."""


def readable_game(game_id: str) -> bool:
    """Kuhn and Leduc poker (ours or OpenSpiel's): games whose every state can be read."""
    try:
        return openspiel_name(game_id) in POKER
    except (KeyError, ValueError, TypeError):
        return False


def participant_exploitability(participant: Participant, game: GameConfig) -> dict[str, Any] | None:
    """``{"game", "exploitability", "invalid_mass"}`` for one participant, or None where its
    policy cannot be read."""
    if participant.kind == "bot":
        try:
            table = bot_table(game.id, make_bot(participant.config, 0))
        except TypeError:
            return None
        return {"game": game.id, "exploitability": exploitability(game.id, table)}
    if participant.kind != "model" or participant.config.backend != "hf":
        return None
    from arena.eval.policy_reader import read_seat_at
    from arena.play.acting import resolve_act
    from arena.play.seating import SeatFactory
    from arena.policies.config import PolicyConfig
    from arena.policies.factory import make_policy

    adapter = "participant" if participant.adapter is not None else None
    policy = make_policy(
        PolicyConfig(
            backend="hf",
            model=str(participant.model),
            dtype=participant.config.dtype,
            adapters={adapter: str(participant.adapter)} if adapter is not None else {},
        )
    )
    chat = policy.chat  # type: ignore[attr-defined]
    # read as it plays (its `act: choice`: its legal replies' softmax, no invalid mass), as the
    # tournament's seats resolve it
    game = dataclasses.replace(game, act=resolve_act(None, participant.config.act, game.act))
    factory = SeatFactory(PlayConfig(games=[game], policy_name=participant.name), policy, chat)
    params = dataclasses.replace(participant.sampling(), adapter=adapter)
    seat = factory.policy_seat(game.id, trained=False, params=params)
    reading = read_seat_at(game.id, seat, temperature=participant.config.sampling.temperature)
    return {
        "game": game.id,
        "exploitability": reading.exploitability,
        "invalid_mass": reading.invalid_mass,
    }


def exploitabilities(
    participants: list[Participant], games: list[GameConfig]
) -> dict[str, dict[str, Any]]:
    """Participant name -> its reading in the first readable game it plays."""
    out: dict[str, dict[str, Any]] = {}
    for game in games:
        if not readable_game(game.id):
            continue
        for participant in participants:
            if participant.name in out:
                continue
            reading = participant_exploitability(participant, game)
            if reading is not None:
                out[participant.name] = reading
                log.info("%s: exploitability %.4f", participant.name, reading["exploitability"])
    return out
