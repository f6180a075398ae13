"""The checks a run config passes before anything starts: every game, role, bot and simulator
it names exists, every game takes its ``kwargs``, every seat's role its role kwargs, every
simulated seat is one the game lets a simulator play and every simulator takes its ``kwargs``;
every game resets and shows its first seat a text observation. Games, roles and simulators are
built once here for that (``arena train --dry-run`` included); every bot a player game is
evaluated against or plays as its fixed opponent plays one game of it against ``random-v0``
(a fraction of a second each; ``leduc-cfr-v0`` solves its game first, under a second)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from arena.core.errors import ConfigError
from arena.play.config import GameConfig
from arena.run.config import RunConfig

if TYPE_CHECKING:
    from games.text_env import TextGame


def validate(config: RunConfig) -> None:
    """Every game, role, bot and simulator the config names must exist, every game must take
    its ``kwargs`` and every seat's role its role kwargs: fail before anything starts."""
    import games
    import games.bots
    import roles
    import simulators
    from arena.core.registry import RegistryError
    from arena.eval.roles import is_role_game
    from arena.play.acting import check_act
    from arena.play.seating import resolve_opponent

    names: set[str] = set()  # every GAME:SEAT, seat and role a seat_policies key may name
    try:
        for game in config.games:
            games.registry.entry(game.id)
            roles.registry.entry(game.role)
            for role_id in game.roles.values():
                roles.registry.entry(role_id)
            bots = [*config.eval.opponents, *(config.eval.opponents_before or [])] + (
                [config.opponents.fixed] if config.opponents.mode == "fixed" else []
            )
            env = make_game(game)
            check_first_observation(game, env)
            for bot in dict.fromkeys(bots):
                check_bot(game, resolve_opponent(bot, game.id), plays=not is_role_game(env))
            check_roles(game, env)
            names |= seat_names(game, env)
            check_act(game.act, game.id, env, game.simulators)
            for seat, simulator in game.simulators.items():
                simulators.registry.entry(simulator.id)
                if seat not in env.possible_agents or not env.simulatable(seat):
                    allowed = [a for a in env.possible_agents if env.simulatable(a)] or "none"
                    raise ConfigError(
                        f"games[{game.id}].simulators: seat {seat!r} cannot be simulated; "
                        f"the game's simulatable seats: {allowed}"
                    )
                check_simulator(game, seat)
    except RegistryError as err:
        raise ConfigError(str(err)) from None
    check_seat_policy_keys(config, names)
    check_models(config)


def seat_names(game: GameConfig, env: TextGame) -> set[str]:
    """What a ``seat_policies`` key may name in ``game``: ``GAME:SEAT``, a seat, a seat's role
    id and its role's name (:meth:`~arena.play.config.PlayConfig.seat_policy`)."""
    from arena.play.seating import seat_role, seat_role_id

    names: set[str] = set()
    for agent in env.possible_agents:
        if agent in game.simulators:
            continue
        role_id = seat_role_id(game, env, agent)
        names |= {f"{game.id}:{agent}", agent, role_id, seat_role(game, env, agent).name}
    return names


def check_seat_policy_keys(config: RunConfig, names: set[str]) -> None:
    """A ``seat_policies`` key that names no seat of the run's games would be ignored, and the
    seat it meant would play another policy (``judg: judge`` leaves the judge's adapter
    untrained): refuse it, naming the nearest."""
    from arena.core.errors import did_you_mean

    for key in config.seat_policies:
        if key not in names:
            seats = sorted(n for n in names if ":" in n)
            raise ConfigError(
                f"seat_policies.{key}: no seat of the run's games is called {key!r} (by "
                f"GAME:SEAT, seat, role id or role){did_you_mean(key, sorted(names))}; the "
                f"seats: {', '.join(seats)}"
            )


def check_models(config: RunConfig) -> None:
    """Every model the run names can be loaded, as far as can be told without loading it: an
    embedded id, ``tiny``, a directory with a ``config.json``, or a hub id. A policy whose model
    names nothing loadable fails the run here, naming the policy, rather than its inference
    actor at start."""
    from pathlib import Path

    from arena.models.specs import EMBEDDED_ALIASES, HUB_ID, TINY_NAME, not_found

    named = [("model", config.model)] + [
        (f"policies.{name}.model", str(spec.model))
        for name, spec in config.policies.items()
        if spec.own_base
    ]
    for key, spec in named:
        if spec in EMBEDDED_ALIASES or spec == TINY_NAME:
            continue
        path = Path(spec).expanduser()
        if (path / "config.json").is_file():
            continue
        if not path.exists() and HUB_ID.match(spec):
            continue
        raise ConfigError(f"{key}: {not_found(spec)}")


def make_game(game: GameConfig) -> TextGame:
    """The game as its config builds it: a constructor argument it refuses is a config error."""
    import games
    from arena.core.errors import keyword_hint

    try:
        return games.make(game.id, **game.kwargs)
    except (TypeError, ValueError) as err:
        hint = keyword_hint(err, games.registry.load(game.id))
        raise ConfigError(f"games[{game.id}].kwargs {game.kwargs}: {err}{hint}") from None


def check_first_observation(game: GameConfig, env: TextGame) -> None:
    """Reset the game once (seed 0) and read its first seat's observation: a game whose reset
    raises or whose observation is not text (a plugin's ``_describe`` returning an array) fails
    here, in one line, not in every episode of the run once the models are loaded."""
    try:
        env.reset(seed=0)
        text = env.observe(env.agent_selection)["text"]
        if not isinstance(text, str):
            raise TypeError(f"observe() gave {type(text).__name__} as its text, not str")
    except Exception as err:  # the game's own code: whatever it raises
        raise ConfigError(
            f"games[{game.id}]: its first observation (after reset(seed=0)) fails: "
            f"{type(err).__name__}: {err}"
        ) from None


def check_bot(game: GameConfig, bot_id: str, *, plays: bool) -> None:
    """``bot_id`` must be registered and, where it ``plays`` the game (a player game's
    evaluation opponent or fixed opponent), play one game of it against ``random-v0``: a bot
    that cannot (``minimax-v0`` on poker) fails here, naming both, not in every evaluation
    game of the run. A role game's evaluation plays its reference seats, not these bots: they
    are only looked up (a plugin's imported)."""
    import games.bots
    from arena.play.bot_check import cannot_play

    entry = games.bots.registry.entry(bot_id)
    if plays:
        failed = cannot_play(lambda: games.bots.make(bot_id, seed=0), game)
        if failed:
            raise ConfigError(f"games[{game.id}]: bot {bot_id} cannot play it: {failed}")
    elif entry.plugin is not None:
        games.bots.registry.load(bot_id)  # a plugin's bot must at least import


def check_roles(game: GameConfig, env: TextGame) -> None:
    """Build the role of every seat the policy may play, with the game's role kwargs and the
    config's ``role_kwargs`` over them: an argument no role takes (``role_kwargs.bogus=1``)
    fails here, not in the first episode."""
    from arena.core.errors import did_you_mean, keyword_hint
    from arena.play.seating import seat_role, seat_role_id

    declared = {env.seat_role(agent) for agent in env.possible_agents}
    for key in game.roles:
        if key not in env.possible_agents and key not in declared:
            known = [*env.possible_agents, *sorted(declared)]
            raise ConfigError(
                f"games[{game.id}].roles.{key}: {game.id} has no seat or role {key!r}"
                f"{did_you_mean(key, known)} (seats: {', '.join(env.possible_agents)}; roles: "
                f"{', '.join(sorted(declared))})"
            )
    for agent in env.possible_agents:
        if agent in game.simulators:
            continue
        try:
            seat_role(game, env, agent)
        except (TypeError, ValueError) as err:
            import roles

            role_id = seat_role_id(game, env, agent)
            hint = keyword_hint(err, roles.registry.load(role_id))
            raise ConfigError(
                f"games[{game.id}]: seat {agent!r} plays {role_id}, which refuses role_kwargs "
                f"{game.role_kwargs}: {err}{hint}"
            ) from None


def check_simulator(game: GameConfig, seat: str) -> None:
    """Build the simulator of ``seat`` with its ``kwargs`` (unbound: no model is asked): an
    argument it does not take fails here, in one line naming the game, the seat and the
    argument, not in the first episode."""
    import simulators

    spec = game.simulators[seat]
    try:
        simulator = simulators.make(spec.id, **spec.kwargs)
    except (TypeError, ValueError) as err:
        from arena.core.errors import keyword_hint

        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        hint = keyword_hint(err, simulators.registry.load(spec.id))
        raise ConfigError(
            f"games[{game.id}].simulators.{seat}: {spec.id} refuses kwargs {spec.kwargs}: "
            f"{reason}{hint}"
        ) from None
    if spec.policy and not simulator.needs_model:
        raise ConfigError(
            f"games[{game.id}].simulators.{seat}.policy: {spec.id} talks through no model, so "
            f"policy {spec.policy!r} would not be used: drop it, or name a simulator that does "
            "(llm-user-v0)"
        )
