"""Filling the seats of an episode from a :class:`~arena.play.config.PlayConfig`.

Rollout actors and evaluation share one :class:`SeatFactory`: a trained seat is a role agent on
the served policy; the other seats follow the opponent mode (the trained policy again in
self-play, a reference bot in ``fixed`` mode, a past checkpoint in ``population`` mode). Each
seat plays the role its game declares (``TextGame.seat_role``; the run config may override it),
and the seats a game config names under ``simulators`` are filled by simulators.

With named policies (``seat_policies``), a population opponent's seat plays the snapshot of
*its own* policy: the adapter its seat maps to, from the checkpoint the collect drew (served by
the pool actor) or from the current weights; a seat on a trained model of its own plays that
policy's snapshot of the same draw, from a pool actor of its own (``policy:pool-<policy>``,
:class:`Opponent` ``own``; arena/run/population.py), and a seat on a frozen model of its own
plays that model, which never changes.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import games
import games.bots
import roles
import simulators
from arena.core.errors import ConfigError
from arena.core.registry import RegistryError
from arena.play.acting import check_act
from arena.play.config import GameConfig, PlayConfig
from arena.play.seats import BotSeat, EpisodeError, PolicySeat, Seat, SimulatorSeat
from arena.policies.chat import ChatFormat
from arena.policies.types import Prompt, SamplingParams
from games.text_env import TextGame
from roles.base import Role
from simulators.base import Generate, Message


def seat_role_id(game: GameConfig, env: TextGame | None = None, agent: str | None = None) -> str:
    """The role id of ``agent``'s seat (see :func:`seat_role`)."""
    declared = env.seat_role(agent) if env is not None and agent is not None else "player-v0"
    role_id = game.roles.get(agent or "") or game.roles.get(declared)
    if role_id is None:
        role_id = game.role if declared == "player-v0" else declared
    return role_id


def seat_role(game: GameConfig, env: TextGame | None = None, agent: str | None = None) -> Role:
    """The role of ``agent``'s seat: the run config's ``roles`` override (by seat, then by the
    game's role id), else the game's own role, with ``role`` standing in for ``player-v0``. The
    game's role kwargs come first, the config's ``role_kwargs`` override them."""
    role_id = seat_role_id(game, env, agent)
    kwargs = env.role_kwargs(agent) if env is not None and agent is not None else {}
    return roles.make(role_id, **{**kwargs, **game.role_kwargs})


def seat_policy_name(
    config: PlayConfig, game: GameConfig, env: TextGame | None = None, agent: str | None = None
) -> str | None:
    """The named policy ``agent``'s seat plays (``seat_policies``), or None for the run's
    shared policy."""
    if not config.policies:
        return None
    role = seat_role(game, env, agent)
    return config.seat_policy(game.id, agent, seat_role_id(game, env, agent), role.name)


SHARED_POLICY = "main"
"""What an evaluation row names the shared policy by, where the seats of a run with named
policies are told apart (``arena eval``'s ``RUN:main``)."""


def policy_label(config: PlayConfig, game: GameConfig, env: TextGame, agent: str) -> str:
    """The policy an evaluation row of ``agent``'s seat names: its named policy, else
    :data:`SHARED_POLICY`; ``""`` in a run without named policies (one policy, every seat)."""
    if not config.policies:
        return ""
    return seat_policy_name(config, game, env, agent) or SHARED_POLICY


def generator(policy: Any, chat: ChatFormat, params: SamplingParams) -> Generate:
    """An async ``generate(messages) -> text`` on ``policy``: how a simulator talks through a
    model without importing one."""

    async def generate(messages: list[Message]) -> str:
        ids = chat.prompt_ids(Prompt(messages=messages))
        return (await policy.agenerate([Prompt(ids=ids)], params))[0].text

    return generate


def resolve_opponent(opponent: str, game_id: str) -> str:
    """``strongest`` names each game's strongest reference bot; any other id is itself. A
    game whose ``metadata["strongest_bot"]`` is not a registered bot is named with it: the
    user typed ``strongest``, not the id that is unknown."""
    if opponent != "strongest":
        return opponent
    bot_id = games.spec(game_id).strongest_bot
    try:
        games.bots.registry.entry(bot_id)
    except RegistryError as err:
        raise RegistryError(
            f"{game_id}'s strongest bot (its metadata['strongest_bot']): {err}"
        ) from None
    return bot_id


@dataclass(frozen=True)
class Opponent:
    """Who fills the untrained seats of a collect in population mode."""

    policy: str
    """The served policy name (``main``: the current policy; ``pool``: a past checkpoint)."""
    label: str
    """Recorded as the seats' policy, e.g. ``main@7`` or ``pool@step-4``."""
    own: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per trained policy with a model of its own: the ``policy`` its seats play and their
    ``label`` (``pool-responder`` / ``pool-responder@step-4``, or ``responder`` /
    ``responder@3`` for its current weights). A policy of its own not named here plays its
    model as served (a frozen one)."""


class SeatFactory:
    """Builds the seat fillers of one episode (shared by rollout actors and evaluation)."""

    def __init__(
        self,
        config: PlayConfig,
        policy: Any,
        chat: ChatFormat,
        remote: Callable[[str], Any] | None = None,
        chat_of: Callable[[str], ChatFormat] | None = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.chat = chat
        self.remote = remote or (lambda name: policy)
        """Builds the policy served under another name (population opponents, named policies
        with models of their own)."""
        self.chat_of = chat_of or (lambda name: chat)
        """The chat format of a named policy with a model of its own (its tokenizer's)."""
        self.params = config.sampling.params()
        """The run's sampling: the shared policy's, and every named policy's without its own."""
        self._params_of = {name: config.sampling_of(name).params() for name in config.policies}
        self._games = {g.id: g for g in config.games}
        for game in config.games:
            check_act(
                game.act, game.id, lambda g=game: games.make(g.id, **g.kwargs), game.simulators
            )

    def params_of(self, policy: str | None) -> SamplingParams:
        """How ``policy``'s seats sample: a named policy's own ``sampling`` over the run's
        (:meth:`~arena.play.config.PlayConfig.sampling_of`); the run's for any other name."""
        return self._params_of.get(policy or "", self.params)

    def policy_seat(
        self,
        game_id: str,
        *,
        trained: bool = True,
        params: SamplingParams | None = None,
        temperature: float | None = None,
        policy: Any = None,
        env: TextGame | None = None,
        agent: str | None = None,
        adapter: str | None = None,
    ) -> PolicySeat:
        """A role agent on a policy; with ``env`` and ``agent``, in the role the game gives the
        seat (see :func:`seat_role`). On the run's own policy, a seat plays the adapter
        ``seat_policies`` gives it, when the run names its policies, and samples with that
        policy's sampling (:meth:`params_of`) unless ``params`` says otherwise; ``temperature``
        replaces the temperature alone (an evaluation's). With ``policy`` given, ``adapter``
        names the named policy (an adapter on the shared base) it plays and samples as: a
        population opponent's snapshot of it."""
        game = self._games[game_id]
        role = seat_role(game, env, agent)
        named = adapter
        if policy is None and self.config.policies:
            named = seat_policy_name(self.config, game, env, agent)
        params = params or self.params_of(named)
        if temperature is not None:
            params = dataclasses.replace(params, temperature=temperature)
        stop = tuple(dict.fromkeys((*params.stop, *role.stop_strings())))
        adapter = adapter or params.adapter
        policy_name, chat = self.config.policy_name, self.chat
        if policy is None and self.config.policies:
            spec = self.config.spec_of(named)
            if spec is not None and spec.own_base:  # its own model, served as policy:<name>
                policy, policy_name, trained = self.remote(named), named, trained and spec.train
                chat = self.chat_of(named)
            else:  # an adapter on the shared base, or (None) the shared policy itself
                adapter = named
        return PolicySeat(
            policy=policy or self.policy,
            role=role,
            chat=chat,
            params=SamplingParams(**{**params.to_dict(), "stop": stop, "adapter": adapter}),
            policy_name=policy_name,
            trained=trained,
            invalid_penalty=self.config.invalid_penalty,
            act=self._games[game_id].act,
        )

    def opponent_seat(
        self, game_id: str, env: TextGame, agent: str, opponent: Opponent
    ) -> PolicySeat:
        """An untrained seat of a population collect, recorded under the opponent's label: the
        policy ``opponent`` names (a past checkpoint, or the current weights), through the
        adapter of the named policy the seat maps to, if any. A seat on a model of its own
        plays the snapshot ``opponent.own`` names for its policy, with that policy's chat and
        sampling; one it does not name (a frozen one) plays its model as in any mode."""
        named = None
        if self.config.policies:
            named = seat_policy_name(self.config, self._games[game_id], env, agent)
        spec = self.config.spec_of(named)
        if named is not None and spec is not None and spec.own_base:
            seat = self.policy_seat(game_id, trained=False, env=env, agent=agent)
            own = opponent.own.get(named)
            if own is not None:
                seat.policy, seat.policy_name = self.remote(own["policy"]), own["label"]
            return seat
        seat = self.policy_seat(
            game_id,
            trained=False,
            policy=self.remote(opponent.policy),
            env=env,
            agent=agent,
            adapter=named,
        )
        seat.policy_name = opponent.label
        return seat

    def _frozen_model(self, game_id: str, env: TextGame, agent: str) -> bool:
        """Whether ``agent`` plays a frozen policy on a model of its own (``train: false``),
        which plays its model in every mode: the fixed bot replaces opponents, not it."""
        if not self.config.policies:
            return False
        spec = self.config.spec_of(seat_policy_name(self.config, self._games[game_id], env, agent))
        return spec is not None and spec.own_base and not spec.train

    def _trainable(self, game_id: str, env: TextGame, agents: list[str]) -> list[str]:
        """The seats the trained seat is drawn from: those whose policy trains (a seat on a
        frozen model of its own would train nothing), or every one where none does."""
        if not self.config.policies:
            return agents
        game = self._games[game_id]
        trains = [
            a
            for a in agents
            if (spec := self.config.spec_of(seat_policy_name(self.config, game, env, a))) is None
            or spec.train
        ]
        return trains or agents

    def config_of(self, game_id: str) -> GameConfig:
        """The game's section of the play config."""
        return self._games[game_id]

    def simulator_seat(self, game_id: str, env: TextGame, agent: str) -> SimulatorSeat:
        """The simulator the game config names for ``agent``'s seat."""
        spec = self._games[game_id].simulators[agent]
        if agent not in env.possible_agents or not env.simulatable(agent):
            allowed = [a for a in env.possible_agents if env.simulatable(a)] or "none"
            raise ConfigError(
                f"{game_id}: seat {agent!r} cannot be simulated; its simulatable seats: {allowed}"
            )
        try:
            simulator = simulators.make(spec.id, **spec.kwargs)
        except Exception as err:  # a plugin's constructor: fail the episode, not the actor
            raise EpisodeError(
                f"{game_id}: simulator {spec.id} could not be made with kwargs {spec.kwargs}: "
                f"{err!r}",
                agent,
            ) from err
        if simulator.needs_model:
            policy = self.remote(spec.policy or self.config.policy_name)
            simulator.bind(generator(policy, self.chat, self.params_of(spec.policy)))
        return SimulatorSeat(simulator, spec.id, timeout=spec.timeout)

    def seats(
        self,
        game_id: str,
        env: TextGame,
        rng: random.Random,
        seed: int,
        opponent: Opponent | None = None,
    ) -> dict[str, Seat]:
        """Seat fillers for one episode. Simulated seats get their simulators; of the others,
        the trained seat is drawn uniformly, so the policy plays first and second alike, and the
        rest follow the opponent mode."""
        simulated = self._games[game_id].simulators
        seats: dict[str, Seat] = {
            agent: self.simulator_seat(game_id, env, agent) for agent in simulated
        }
        agents = [a for a in env.possible_agents if a not in simulated]
        mode = self.config.opponents.mode
        if mode == "self-play":
            return seats | {a: self.policy_seat(game_id, env=env, agent=a) for a in agents}
        trained = rng.choice(self._trainable(game_id, env, agents))
        seats[trained] = self.policy_seat(game_id, env=env, agent=trained)
        for agent in agents:
            if agent == trained:
                continue
            if mode == "population" and opponent is not None:
                seats[agent] = self.opponent_seat(game_id, env, agent, opponent)
            elif self._frozen_model(game_id, env, agent):  # a judge, not an opponent: as it is
                seats[agent] = self.policy_seat(game_id, trained=False, env=env, agent=agent)
            else:
                bot_id = resolve_opponent(self.config.opponents.fixed, game_id)
                seats[agent] = BotSeat(games.bots.make(bot_id, seed=seed), bot_id)
        return seats
