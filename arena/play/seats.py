"""What fills a seat of a game, and the records and seeds of its turns.

A seat is filled by a :class:`PolicySeat` (a role agent on a policy: trained, or frozen), a
:class:`BotSeat` (a reference bot) or a :class:`SimulatorSeat` (a user simulator, not trained).
:mod:`arena.play.episode` plays an episode with its seats filled; :mod:`arena.play.choice` plays a
policy seat's turn by choice. Both record turns and seed requests with the helpers here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arena.play import config as play_config
from arena.play.acting import DEFAULT_ACT
from arena.policies.base import Policy
from arena.policies.chat import ChatFormat
from arena.policies.types import Generation, Prompt, SamplingParams
from arena.records import SeatAssignment, Turn
from games.bots.base import Bot
from games.text_env import TextGame
from roles.base import Role
from simulators.base import Simulator

_EMPTY_IDS = np.zeros(0, np.int32)
_EMPTY_LOGPROBS = np.zeros(0, np.float32)


@dataclass
class PolicySeat:
    """A role agent on a policy. ``trained`` seats' turns are trained on; frozen ones are not."""

    policy: Policy
    role: Role
    chat: ChatFormat
    params: SamplingParams
    policy_name: str = "main"
    trained: bool = True
    invalid_penalty: float = 0.0
    """Subtracted from the reward of a turn whose action the game rejected."""
    act: str = DEFAULT_ACT
    """``generate``: write a reply for the role to read; ``choice``: pick one of the legal
    replies by their scores (:mod:`arena.play.choice`); resolved by :mod:`arena.play.acting`."""
    _conversation: np.ndarray | None = field(default=None, repr=False)

    def prompt(self, env: TextGame, agent: str, observation: str) -> Prompt:
        first = self._conversation is None or self.role.memory == "none"
        messages = self.role.messages(env.rules(agent), agent, observation, first_turn=first)
        if first:
            ids = self.chat.prompt_ids(Prompt(messages=messages))
        else:
            ids = self.chat.extend(self._conversation, messages)
        prefix = self.role.assistant_prefix()
        if prefix:
            ids = np.concatenate([ids, self.chat.encode_text(prefix)])
        return Prompt(ids=ids)

    def remember(self, generation: Generation) -> None:
        if self.role.memory == "conversation":
            self._conversation = generation.conversation_ids


@dataclass
class BotSeat:
    """A reference bot; its turns are recorded for transcripts but never trained on."""

    bot: Bot
    name: str
    timeout: float | None = field(default_factory=lambda: play_config.BOT_MOVE_TIMEOUT)
    """Seconds one move may take before the episode ends with an error naming the bot (its
    ``act`` runs off the event loop: :mod:`arena.play.bot_moves`); None: unbounded. By default
    :data:`~arena.play.config.BOT_MOVE_TIMEOUT`, read when the seat is made."""


@dataclass
class SimulatorSeat:
    """A simulator (a user simulator, say); its turns are recorded but never trained on."""

    simulator: Simulator
    name: str
    """Recorded as the seat's policy (the simulator's registered id)."""
    timeout: float = 60.0
    """Seconds one reply may take before the episode ends with an error."""
    turns: int = 0


Seat = PolicySeat | BotSeat | SimulatorSeat


def request_seed(episode_id: str, turn: int) -> int:
    """The sampling seed of turn ``turn`` of episode ``episode_id``. Episode ids derive from the
    run's seed (each order's seed), so a run draws the same samples from the same seed however
    the service's batches form under load (the sampler gives each seeded row its own stream)."""
    digest = hashlib.blake2b(f"{episode_id}:{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def seat_seed(seed: int, index: int) -> int:
    """A bot's seed in seat ``index`` of the game seeded ``seed``: reproducible, and different
    per seat, so two identical bots (random against random) never draw the same stream."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


class EpisodeError(RuntimeError):
    """An episode that could not finish (a seat's policy or bot failed, or it ran past the run's
    bound on one episode); it is dropped, never half-sent. ``seat`` names the agent whose filler
    failed; ``termination`` is how it ended (``error``, or ``max_turns`` past the turn bound)."""

    def __init__(self, message: str, seat: str | None = None, termination: str = "error") -> None:
        super().__init__(message)
        self.seat = seat
        self.termination = termination


def seat_assignment(seat: Seat) -> SeatAssignment:
    """What an episode records of the filler of a seat."""
    if isinstance(seat, PolicySeat):
        return SeatAssignment(
            role=seat.role.name,
            policy=seat.policy_name,
            trained=seat.trained,
            adapter=seat.params.adapter,
        )
    if isinstance(seat, SimulatorSeat):
        return SeatAssignment(role=seat.simulator.role, policy=seat.name, trained=False)
    return SeatAssignment(role="bot", policy=seat.name, trained=False)


def turn_error(env: TextGame, agent: str) -> str:
    """What went wrong on ``agent``'s turn just played: the rejection, or a tool's error."""
    info = env.infos[agent]
    return str(info.get("invalid_reason") or info.get("tool_error") or "")


def record_turn(
    episode_id: str,
    index: int,
    game_id: str,
    agent: str,
    role: str,
    text: str,
    action: Any,
    env: TextGame,
    **played: Any,
) -> Turn:
    """The record of ``agent``'s turn just played on ``env``, the one constructor of every turn
    of an episode: ``valid`` is read from the game, ``action`` made msgpack-friendly. ``played``
    gives what a policy's turn adds (its token ids and logprobs, ``reward``, ``policy_version``,
    ``trained``, ``group``, ``error``, the choice fields); without it the turn is one no policy
    generated (a bot's, a simulator's, or a choice with no legal action): no token ids, reward
    0, version -1, never trained on."""
    fields = {
        "prompt_ids": _EMPTY_IDS,
        "response_ids": _EMPTY_IDS,
        "response_logprobs": _EMPTY_LOGPROBS,
        "reward": 0.0,
        "policy_version": -1,
        "trained": False,
        **played,
    }
    return Turn(
        episode_id=episode_id,
        index=index,
        game=game_id,
        seat=agent,
        role=role,
        text=text,
        action=plain_action(action),
        valid=not env.infos[agent]["invalid"],
        **fields,
    )


def plain_action(action: Any) -> Any:
    """Actions as msgpack-friendly values (numpy ints become ints)."""
    if isinstance(action, np.generic):
        return action.item()
    if action is None or isinstance(action, (int, float, str, bool)):
        return action
    return str(action)
