"""Serving the model participants, and filling a match's seats.

Every ``hf``/``vllm`` model participant, and every participant on a plugin policy backend, is
served by an ``arena inference`` actor on a private broker (both started as child processes, the
same programs ``arena train`` starts). A plugin backend is built there by ``make_policy`` from the
participant's ``model`` (as written), ``dtype`` and ``tokenizer`` (the spec whose chat template
renders its prompts here, so that it can read their ids back). Participants
that share a model, backend and dtype share one actor, since sampling settings travel with each
request; the actor batches the requests of every match in flight. Participants that play LoRA
adapters on that model share it too: the actor holds every one of their adapters (one base in
memory, however many steps or roles play), and each participant's requests name its own
(``params.adapter``), so a base and its adapters share batches. ``openai`` participants call
their endpoint from this process. Bots play in this process. On a CPU the actors serve at once,
so each gets its share of the cores as ``OMP_NUM_THREADS`` (unless the environment sets it):
with every core each, their threads oversubscribe them (``bench/tournament_threads.py``).

A model that fails to load (a plugin backend whose ``from_config`` raises included) stops the
tournament before the first match with :class:`ServerDied`, naming the participant and the end of
its actor's log, which the command prints without a traceback (exit 2). An actor that dies later
(killed, out of memory) is started again by :meth:`Seating.supervise`, up to twice: the requests
it held are sent again to the new one, so no match is lost or forfeited; a third death stops the
play with :class:`~arena.run.launcher.ChildDied`, which the commands print in one line (exit 1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import simulators
from arena.bus import Actor, BusError
from arena.bus.peers import socket_temp_dir
from arena.core.config import to_arguments
from arena.core.errors import CannotStart, ConfigError
from arena.eval.roles import reference_seat
from arena.play.acting import resolve_act
from arena.play.config import GameConfig, PlayConfig
from arena.play.seating import SeatFactory
from arena.play.seats import BotSeat, Seat, SimulatorSeat
from arena.policies.chat import ChatFormat
from arena.policies.config import NOT_FLAGS, InferenceConfig
from arena.policies.openai import OpenAIPolicy
from arena.policies.remote import RemotePolicy
from arena.run.launcher import ChildDied, Launcher
from arena.run.processes import broker_argv
from arena.run.resources import device_for, threads_env
from arena.tournament.config import TournamentConfig
from arena.tournament.participants import Participant, make_bot
from games.text_env import TextGame

HEARTBEAT_INTERVAL = 1.0
HEARTBEAT_TIMEOUT = 10.0
MAX_RESTARTS = 2
"""How many times a crashed inference actor is started again while matches are played."""

T = TypeVar("T")


class ServerDied(ChildDied, CannotStart):
    """An inference actor that died before the first match: the participants it serves cannot
    play (``arena tournament`` and ``arena eval`` print it in place of a traceback, exit 2)."""


class Seating:
    """Serves the participants of one tournament and builds the seats of its matches."""

    def __init__(
        self,
        config: TournamentConfig,
        participants: list[Participant],
        log_dir: Path,
        act: str | None = None,
    ) -> None:
        self.config = config
        self.act = act
        """A command's ``--act``: how every model participant plays, over its own ``act`` and
        the games' (:func:`~arena.play.acting.resolve_act`)."""
        self.participants = {p.name: p for p in participants}
        self.log_dir = log_dir
        self.launcher: Launcher | None = None
        self.actor: Actor | None = None
        self._bus_dir: str | None = None
        """The temporary directory of the broker's socket, removed on :meth:`close`."""
        self._servers: dict[tuple[str, ...], str] = {}
        """Server key -> the policy name its inference actor serves."""
        self._adapters: dict[tuple[str, ...], dict[str, str]] = {}
        """Server key -> the adapters its actor holds: served name -> adapter directory."""
        self._adapter_of: dict[str, str] = {}
        """Participant name -> the name its adapter is served under (absent: the base)."""
        self._factories: dict[str, SeatFactory] = {}
        self._games = {g.id: g for g in config.games}
        self._check_simulators()

    def _check_simulators(self) -> None:
        """A simulator that talks through a model talks through the participant's own: beside
        a bot there is none, and every episode would fail. Refused before anything starts."""
        bots = [p for p in self.participants.values() if p.kind == "bot"]
        for game in self.config.games:
            for seat, spec in game.simulators.items():
                if bots and simulators.make(spec.id, **spec.kwargs).needs_model:
                    raise ConfigError(
                        f"{game.id} seat {seat}: simulator {spec.id} talks through the "
                        f"evaluated participant's model, but {bots[0].name!r} is a bot "
                        f"({bots[0].describe()}): give that seat a simulator that needs no model "
                        "(scripted-user-v0)"
                    )

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        served = [p for p in self.participants.values() if p.kind == "model"]
        for participant in served:
            self._servers.setdefault(participant.server_key, f"model-{len(self._servers)}")
            if participant.adapter is not None:
                self._adapter_of[participant.name] = self._serve_adapter(participant)
        if self._servers:
            await self._start_servers(served)
        for participant in self.participants.values():
            if participant.kind == "model":
                policy = RemotePolicy(
                    self.actor,  # type: ignore[arg-type]
                    self._servers[participant.server_key],
                    timeout=self.config.request_timeout,
                )
                tokenizer = participant.tokenizer
            elif participant.kind == "endpoint":
                c = participant.config
                tokenizer = participant.tokenizer
                # token-id prompts (built here with the chat template) and replies re-tokenized
                # with the same tokenizer when the server sends no ids
                policy = OpenAIPolicy(
                    str(c.base_url),
                    str(participant.model),
                    api_key=os.environ.get(c.api_key_env),
                    name=participant.name,
                    timeout=self.config.request_timeout,
                    tokenizer=_chat(tokenizer).tokenizer,
                )
            else:
                continue
            games = [
                dataclasses.replace(g, act=resolve_act(self.act, participant.config.act, g.act))
                for g in self.config.games
            ]
            self._factories[participant.name] = SeatFactory(
                PlayConfig(games=games, policy_name=participant.name),
                policy,
                _chat(str(tokenizer)),
            )

    def _serve_adapter(self, participant: Participant) -> str:
        """The name ``participant``'s adapter is served under by its base's actor: one per
        adapter directory (participants playing one adapter at two temperatures share it),
        numbered, since directory names repeat across steps (``step-4/adapters/solver``)."""
        held = self._adapters.setdefault(participant.server_key, {})
        path = str(Path(str(participant.adapter)).expanduser().resolve())
        for name, source in held.items():
            if source == path:
                return name
        name = f"adapter-{len(held)}"
        held[name] = path
        return name

    async def _start_servers(self, served: list[Participant]) -> None:
        # room for the broker's bus.sock and its actors' own sockets beside it
        self._bus_dir = tempfile.mkdtemp(prefix="arena-tournament-", dir=socket_temp_dir(70))
        address = f"ipc://{self._bus_dir}/bus.sock"
        self.launcher = Launcher(self.log_dir)
        self.launcher.start("broker", broker_argv(address, HEARTBEAT_INTERVAL, HEARTBEAT_TIMEOUT))
        owners: dict[str, list[str]] = {}
        device = device_for(self.config.device)
        # the actors serve the matches in flight at once: each takes its share of the cores
        threads = threads_env(len(self._servers), device)
        for participant in served:
            policy_name = self._servers[participant.server_key]
            owners.setdefault(policy_name, []).append(participant.name)
            if len(owners[policy_name]) > 1:
                continue
            config = InferenceConfig(
                backend=participant.config.backend,
                model=str(participant.model),
                tokenizer=participant.tokenizer,
                name=policy_name,
                dtype=participant.config.dtype,
                device=device,
                max_batch=self.config.max_batch,
                max_wait_ms=self.config.max_wait_ms,
                seed=self.config.seed,
                adapters=dict(self._adapters.get(participant.server_key, {})),
            )
            argv = serving_argv(f"inference-{policy_name}", address, config)
            self.launcher.start(
                f"inference-{policy_name}",
                argv,
                restartable=True,
                max_restarts=MAX_RESTARTS,
                env=threads,
            )
        self.actor = Actor("tournament", address, kind="tournament")
        deadline = time.monotonic() + 60
        while True:
            try:
                await self.actor.start(timeout=5)
                break
            except BusError:
                await self.actor.close()
                self._check_children(owners)
                if time.monotonic() > deadline:
                    raise
                self.actor = Actor("tournament", address, kind="tournament")
        needed = {f"policy:{name}" for name in owners}
        deadline = time.monotonic() + 900
        while True:
            actors = (await self.actor.request(service="broker.actors")).body
            missing = needed - {s for a in actors for s in a["services"]}
            if not missing:
                return
            self._check_children(owners)
            if time.monotonic() > deadline:
                raise TimeoutError(f"inference actors never came up: {sorted(missing)}")
            await asyncio.sleep(0.5)

    def _check_children(self, owners: dict[str, list[str]]) -> None:
        """Before the first match, any dead actor is fatal and names its participants."""
        assert self.launcher is not None
        for child in self.launcher.children.values():
            code = child.process.poll() if child.process is not None else None
            if code is None:
                continue
            served = owners.get(child.name.removeprefix("inference-"), [])
            who = f" (participants {', '.join(map(repr, served))})" if served else ""
            raise ServerDied(
                f"{child.name}{who} exited with code {code} before the first match; "
                f"end of its log:\n{self.launcher.tail(child.name)}"
            )

    def check(self) -> list[str]:
        """Restart a crashed inference actor (the requests it held are sent again by each
        :class:`RemotePolicy`, so its matches in flight go on); raises ``ChildDied`` for one that
        died more than ``MAX_RESTARTS`` times."""
        return self.launcher.check() if self.launcher is not None else []

    async def supervise(self, work: Awaitable[T]) -> T:
        """Await ``work`` (the matches or evaluation episodes) while watching the inference
        actors twice a second: a crashed one is restarted; ``ChildDied`` (or Ctrl-C) cancels
        ``work`` first, so nothing is recorded after it."""
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                self.check()  # the launcher logs each restart
                await asyncio.wait({task}, timeout=0.5)
            return task.result()
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def close(self) -> None:
        if self.actor is not None:
            await self.actor.close()
        if self.launcher is not None:
            self.launcher.stop_all()
        if self._bus_dir is not None:  # the broker's socket: gone with it
            shutil.rmtree(self._bus_dir, ignore_errors=True)

    # -- seats -------------------------------------------------------------------------------
    def seat(
        self,
        name: str,
        game: GameConfig,
        seed: int,
        env: TextGame | None = None,
        agent: str | None = None,
    ) -> Seat:
        """A fresh seat filler for participant ``name`` in one match of ``game`` (with ``env``
        and ``agent``: in the role the game gives that seat)."""
        participant = self.participants[name]
        if participant.kind == "bot":
            return BotSeat(make_bot(participant.config, seed), name)
        factory = self._factories[name]
        # naming the policy keeps the participant's own adapter: a checkpoint's run config may
        # map seats to its run's named policies, which this actor does not serve
        return factory.policy_seat(
            game.id,
            trained=False,
            params=participant.sampling(self._adapter_of.get(name)),
            policy=factory.policy,
            env=env,
            agent=agent,
        )

    def reference(self, name: str, game: GameConfig, env: TextGame, agent: str, seed: int) -> Seat:
        """A reference filler of a role game's seat: the simulator the game config names for it
        (a model-backed one talks through participant ``name``'s policy), else the game's
        reference simulator or strongest bot (:func:`arena.eval.roles.reference_seat`)."""
        if agent in game.simulators and name in self._factories:
            seat = self._factories[name].simulator_seat(game.id, env, agent)
            if seat.simulator.needs_model:  # say whose model it talks through
                spec = game.simulators[agent]
                other = spec.policy not in ("", "main", name)
                seat.name = f"{spec.id} on {name}" + (
                    f" (its run's policy {spec.policy} is not served here)" if other else ""
                )
            return seat
        if agent in game.simulators:
            spec = game.simulators[agent]
            return SimulatorSeat(simulators.make(spec.id, **spec.kwargs), spec.id, spec.timeout)
        return reference_seat(game.id, env, agent, seed)

    def game(self, game_id: str) -> GameConfig:
        return self._games[game_id]


_CHATS: dict[str, ChatFormat] = {}


def serving_argv(actor_name: str, address: str, served: InferenceConfig) -> list[str]:
    """``arena inference`` serving ``served``, its flags derived from the config itself (a
    tournament has no run config for it to read, as a run's actors read theirs)."""
    return [
        "-v",
        "inference",
        "--address",
        address,
        "--actor-name",
        actor_name,
        "--heartbeat-interval",
        str(HEARTBEAT_INTERVAL),
        *to_arguments(served, exclude=NOT_FLAGS),
        *(f"--engine={key}={value!r}" for key, value in served.engine.items()),
        *(f"--adapter={name}={path}" for name, path in served.adapters.items()),
    ]


def _chat(model: str) -> ChatFormat:
    """One chat format per tokenizer (loading one takes a moment)."""
    if model not in _CHATS:
        from arena.models import chat_tokenizer

        _CHATS[model] = ChatFormat(chat_tokenizer(model))
    return _CHATS[model]


def describe(participants: list[Participant]) -> list[dict[str, Any]]:
    return [{"name": p.name, "kind": p.kind, "what": p.describe()} for p in participants]
