"""Who plays each seat when ``arena eval`` evaluates a run with named policies.

A run's ``policies`` and ``seat_policies`` give its roles or seats a LoRA adapter each on one
frozen base, or a model of their own, trained or frozen (a frozen judge). Evaluating such a run
with one model in every seat would put the shared policy where the run never played it, and
report its rows as the run's. So:

- a run directory or a checkpoint of it (``RUN/checkpoints/step-N``) is evaluated **as it was
  trained**: each seat by the policy that plays it in the run (:func:`run_participants`), at
  that step: the shared policy by the checkpoint's ``model/``, an adapter on the shared base by
  the checkpoint's ``adapters/<policy>/`` on the run's base, a trained model of its own by its
  newest checkpoint at or before the step (``checkpoints/policies/<policy>/step-M``; its
  ``model`` as it started where it has none yet), a frozen one (``train: false``) by its model;
- one policy named on its own (``--adapter RUN/checkpoints/step-N/adapters/<policy>``,
  ``RUN:POLICY``, ``RUN:main``, ``RUN/checkpoints/policies/<policy>/step-N``) is evaluated
  **in the seats it plays in its run** only (:func:`evaluated_policy`); a role game's other
  seats get the game's references as always, and a player game's the opponents.

Every row then names the policy that played it (``policy``). :class:`Routing` answers, seat by
seat, which participant (if any) is evaluated there; ``arena eval --every-seat`` keeps the one
participant in every seat, as for a model of no run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import games as registry
from arena.core.errors import ConfigError
from arena.play.config import GameConfig, PlayConfig
from arena.play.seating import SHARED_POLICY, seat_policy_name
from arena.tournament.checkpoint_paths import STEP_DIR, run_and_policy
from arena.tournament.config import ParticipantConfig
from arena.tournament.participants import policy_of
from games.text_env import TextGame

if TYPE_CHECKING:
    from arena.run.config import RunConfig

MAIN = SHARED_POLICY
"""The run's shared policy (the seats ``seat_policies`` maps to no named policy)."""


@dataclass
class Routing:
    """Which participant is evaluated in each seat. Without a run's ``play`` config (no named
    policies, or ``--every-seat``), ``default`` plays every seat and rows name no policy."""

    default: str
    play: PlayConfig | None = None
    players: dict[str, str] = field(default_factory=dict)
    """The run's policy name -> the participant that plays its seats here; a policy not named
    is not evaluated (its seats are references, or opponents' games)."""

    def policy(self, game: GameConfig, env: TextGame, agent: str) -> str:
        """The run's policy of ``agent``'s seat (:data:`MAIN` for the shared one)."""
        if self.play is None:
            return MAIN
        return seat_policy_name(self.play, game, env, agent) or MAIN

    def player(self, game: GameConfig, env: TextGame, agent: str) -> str | None:
        """The participant evaluated in ``agent``'s seat, or None where none is."""
        if self.play is None:
            return self.default
        return self.players.get(self.policy(game, env, agent))

    def label(self, game: GameConfig, env: TextGame, agent: str) -> str:
        """What a row says played the seat: the run's policy, where seats are told apart."""
        if self.play is None or self.player(game, env, agent) is None:
            return ""
        return self.policy(game, env, agent)

    def player_seats(self, game: GameConfig) -> dict[str, list[str]]:
        """The seats of a player game each evaluated policy plays, by its row's name
        (:meth:`label`; ``{"": every seat}`` without a run's policies)."""
        env = registry.make(game.id, **game.kwargs)
        if self.play is None:
            return {"": list(env.possible_agents)}
        out: dict[str, list[str]] = {}
        for agent in env.possible_agents:
            if self.player(game, env, agent) is not None:
                out.setdefault(self.label(game, env, agent), []).append(agent)
        return out

    def role_seats(self, game: GameConfig) -> list[str]:
        """The seats of a role game evaluated here: one per role, role arguments and policy
        (:func:`arena.eval.roles.role_seats`), those no evaluated participant plays left out."""
        from arena.eval.roles import role_seats

        env = registry.make(game.id, **game.kwargs)
        seats = role_seats(env, list(game.simulators), lambda a: self.policy(game, env, a))
        return [a for a in seats if self.player(game, env, a) is not None]

    def plays(self, game: GameConfig) -> list[str]:
        """Every seat of ``game`` an evaluated participant plays (a simulated one aside)."""
        env = registry.make(game.id, **game.kwargs)
        agents = [a for a in env.possible_agents if a not in game.simulators]
        return [a for a in agents if self.player(game, env, a) is not None]


def evaluated_policy(typed: str, checkpoint: str, adapter: str | None) -> str | None:
    """The one policy of a run a command line names (``--adapter .../adapters/<policy>``,
    ``RUN:POLICY``, ``RUN:main``, ``.../checkpoints/policies/<policy>/step-N``), or None where
    it names the run at a step (a run directory, ``RUN/checkpoints/step-N``): every policy."""
    named = policy_of(checkpoint, adapter)
    if named is not None:
        return named
    if adapter is not None or run_and_policy(typed)[1] is not None:
        return MAIN  # the shared policy's adapter (shared-lora), or RUN:main
    return None


def seat_names(routing: Routing, games: Sequence[GameConfig], name: str) -> str:
    """``mae-v0 judge, kuhn-poker-v0 player_1``: the seats participant ``name`` plays."""
    seats = []
    for game in games:
        env = registry.make(game.id, **game.kwargs)
        seats += [
            f"{game.id} {a}" for a in routing.plays(game) if routing.player(game, env, a) == name
        ]
    return ", ".join(seats) or "none"


def run_participants(
    checkpoint: Path, run_config: RunConfig, games: Sequence[GameConfig], temperature: float
) -> tuple[list[ParticipantConfig], list[str]]:
    """A participant per policy of the run that plays a seat of ``games``, named as the policy,
    with the weights it played at ``checkpoint``'s step (see the module docstring), sampling at
    ``temperature`` with its policy's other settings; and a note per policy that has no
    checkpoint of its own by then. A seat no policy of the run plays (a game it never trained)
    is a :class:`ConfigError` naming it."""
    from arena.run.bases import policy_checkpoint

    play = run_config.play
    routing = Routing(MAIN, play)
    used: list[str] = []
    for game in games:
        env = registry.make(game.id, **game.kwargs)
        for agent in env.possible_agents:
            if agent in game.simulators:
                continue
            try:
                name = routing.policy(game, env, agent)
            except ConfigError as err:
                raise ConfigError(
                    f"{game.id}: its run trained no policy for seat {agent} ({err}); evaluate "
                    "one policy in every seat with --adapter ... --every-seat"
                ) from None
            if name not in used:
                used.append(name)
    run_dir, step = checkpoint.parent.parent, _step(checkpoint)
    out, notes = [], []
    for name in used:
        spec = play.spec_of(None if name == MAIN else name)
        sampling = replace(
            play.sampling_of(None if name == MAIN else name), temperature=temperature
        )
        if spec is None:  # the shared policy: the checkpoint's weights
            config = ParticipantConfig(name=name, model=str(checkpoint / "model"))
        elif not spec.own_base:  # an adapter on the run's frozen base
            adapter = checkpoint / "adapters" / name
            if not (adapter / "adapter_config.json").is_file():
                raise ConfigError(f"policy {name!r}: no adapter {adapter} in the checkpoint")
            config = ParticipantConfig(name=name, model=str(run_config.model), adapter=str(adapter))
        elif not spec.train:  # frozen: its model as it is
            config = ParticipantConfig(name=name, model=str(spec.model))
        else:
            found = policy_checkpoint(run_dir, name, step)
            if found is None:
                notes.append(
                    f"policy {name} has no checkpoint at or before step {step}: it plays its "
                    f"model {spec.model} as it started"
                )
            model = str(found[1] / "model") if found else str(spec.model)
            config = ParticipantConfig(name=name, model=model)
        out.append(replace(config, sampling=sampling))
    return out, notes


def _step(checkpoint: Path) -> int:
    match = STEP_DIR.match(checkpoint.name)
    if match is None:
        raise ConfigError(f"{checkpoint} is not a checkpoint directory (step-N)")
    return int(match.group(1))


def games_played(
    routing: Routing, games: Sequence[GameConfig], run_games: Sequence[GameConfig], explicit: bool
) -> tuple[list[GameConfig], list[str]]:
    """The games some evaluated participant plays a seat of, and a note for each left out (a
    run's game the named policy plays no seat of). One named by ``--games`` (``explicit``), or
    none left, is a :class:`ConfigError` naming the seats it plays in its run (of
    ``run_games``): the evaluation would show nothing of it."""
    kept = [g for g in games if routing.plays(g)]
    idle = [g.id for g in games if g not in kept]
    if idle and (explicit or not kept):
        name = ", ".join(routing.players.values())
        raise ConfigError(
            f"{name} plays no seat of {', '.join(idle)} in its run (its seats: "
            f"{seat_names(routing, run_games, name)}); evaluate a game it plays, or play it in "
            "every seat with --every-seat"
        )
    notes = [
        f"{game}: {', '.join(routing.players.values())} plays no seat of it in its run; not evaluated"
        for game in idle
    ]
    return kept, notes


def header(
    routing: Routing, games: Sequence[GameConfig], described: dict[str, str], whole_run: bool
) -> list[str]:
    """What the console says of who plays: per evaluated participant (``described``: name ->
    what it is), the policy it is and the seats it plays in its run."""
    if routing.play is None:
        return []
    if not whole_run:
        ((name, what),) = described.items()
        (policy,) = routing.players
        return [
            f"evaluating {name} ({what}): policy {policy} of its run, in the seats it plays "
            f"there, {seat_names(routing, games, name)} (every seat: --every-seat)"
        ]
    lines = []
    for name, what in described.items():
        policy = next(p for p, n in routing.players.items() if n == name)
        spec = routing.play.spec_of(None if policy == MAIN else policy)
        frozen = ", frozen (train: false)" if spec is not None and not spec.train else ""
        lines.append(f"  {name}: {what}{frozen}; plays {seat_names(routing, games, name)}")
    return lines
