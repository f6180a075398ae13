"""What ``arena eval`` checks of its flags before any model loads: every opponent plays every
player game, ``--simulator`` fills a seat some game lets a simulator fill and never one of a
player game, ``--opponents`` meets at least one player game. A flag no evaluated game would use is
a :class:`~arena.core.errors.ConfigError` (exit 2, one line), never silently ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from arena.play.config import GameConfig


def check_opponents(opponents: Sequence[str], game_configs: Sequence[GameConfig]) -> None:
    """Every game and opponent id must be registered, and every opponent must play every player
    game (one game against ``random-v0``; a role game plays none), checked before any model
    loads: an unknown id is a RegistryError naming the nearest ids, a bot that cannot play a
    game (``minimax-v0`` on poker) a ConfigError naming both (exit 2, one line), where the
    evaluation would fail each of its games."""
    import games
    import games.bots
    from arena.core.errors import ConfigError
    from arena.eval.roles import is_role_game
    from arena.play.bot_check import cannot_play
    from arena.play.seating import resolve_opponent

    for game in game_configs:
        games.registry.entry(game.id)
        role_game = is_role_game(games.make(game.id, **game.kwargs))  # plays no opponents
        for opponent in opponents:
            bot_id = resolve_opponent(opponent, game.id)
            games.bots.registry.entry(bot_id)
            failed = not role_game and cannot_play(
                lambda b=bot_id: games.bots.make(b, seed=0), game
            )
            if failed:
                named = bot_id if bot_id == opponent else f"{opponent} ({bot_id})"
                raise ConfigError(f"opponent {named} cannot play {game.id}: {failed}")


def refuse_simulated_player_games(named: Sequence[str], player_games: Sequence[str]) -> None:
    """A player game (every seat plays ``player-v0``) is evaluated against ``--opponents`` in
    every seat, so a simulator ``--simulator`` names for one of its seats would play no
    episode: a :class:`ConfigError` naming the game, not a flag silently ignored."""
    from arena.core.errors import ConfigError

    ignored = [game for game in named if game in player_games]
    if ignored:
        raise ConfigError(
            f"--simulator: {', '.join(ignored)} is a player game, evaluated against --opponents "
            "in every seat; --simulator fills seats of role games (arena play --simulator "
            "plays against one)"
        )


def refuse_unused_flags(
    simulator_flags: Sequence[str],
    opponent_flags: Sequence[str] | None,
    role_games: Sequence[GameConfig],
    player_games: Sequence[GameConfig],
) -> None:
    """A flag that no evaluated game would use is a :class:`ConfigError`, not silently ignored:
    ``--simulator`` where no game has a seat a simulator may fill, ``--opponents`` where every
    game is a role game (its seats are evaluated against the game's reference seats)."""
    import games as registry
    from arena.core.errors import ConfigError

    every = [*role_games, *player_games]
    ids = ", ".join(g.id for g in every)
    envs = [registry.make(g.id, **g.kwargs) for g in every] if simulator_flags else []
    if simulator_flags and not any(env.simulatable(a) for env in envs for a in env.possible_agents):
        raise ConfigError(
            f"--simulator: no seat of {ids} may be simulated (retail-v0's user may, say); "
            "drop --simulator"
        )
    if opponent_flags and not player_games:
        raise ConfigError(
            f"--opponents: {ids} {'is a role game' if len(every) == 1 else 'are role games'}, "
            "each seat evaluated against the game's reference seats, not against opponents; "
            "drop --opponents, or add a player game with --games"
        )


def with_simulators(game: GameConfig, flags: Sequence[str]) -> GameConfig:
    """``game`` with the simulators of ``--simulator`` flags (``SEAT=ID``, or ``ID`` for every
    seat of the game a simulator may fill) over its own; a named seat that no simulator may fill
    is a :class:`ConfigError`. A game with no such seat ignores a bare ``ID``."""
    import games as registry
    import simulators
    from arena.core.errors import ConfigError
    from arena.core.registry import RegistryError
    from arena.play.config import SimulatorConfig

    if not flags:
        return game
    env = registry.make(game.id, **game.kwargs)
    allowed = [a for a in env.possible_agents if env.simulatable(a)]
    chosen = dict(game.simulators)
    for flag in flags:
        seat, sep, simulator_id = flag.rpartition("=")
        if not simulator_id or (sep and not seat):
            raise ConfigError(f"--simulator {flag!r}: expected SEAT=ID or ID")
        if sep and seat not in allowed:
            raise ConfigError(
                f"--simulator {flag!r}: seat {seat!r} of {game.id} cannot be simulated; its "
                f"simulatable seats: {allowed or 'none'}"
            )
        try:
            simulators.registry.entry(simulator_id)
        except RegistryError as err:  # an unknown id: the message names the nearest ones
            raise ConfigError(f"--simulator {flag!r}: {err}") from None
        for agent in [seat] if sep else allowed:
            chosen[agent] = SimulatorConfig(id=simulator_id)
    return replace(game, simulators=chosen)
