"""arena/play/bot_moves.py: a bot that blocks mid-episode fails that episode, named, wherever a
bot plays (an episode of a run, an evaluation, a tournament); the event loop never blocks.

Before, ``bot.act`` ran on the event loop: these episodes hung until the bot's safety release
(10 s, tests/arena/play/blocking_bot.py) and then finished as if nothing had happened."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

import games
import games.bots
from arena.eval.evaluate import evaluate
from arena.play import config as play_config
from arena.play.config import GameConfig
from arena.play.episode import play_episode
from arena.play.seats import BotSeat, EpisodeError
from arena.records import Episode
from arena.tournament.config import ParticipantConfig, TournamentConfig
from arena.tournament.runner import run_tournament
from tests.arena.play.blocking_bot import BlockingBot

BOT = "tests.arena.play.blocking_bot:BlockingBot"


def seats(timeout: float | None) -> dict[str, BotSeat]:
    return {
        "player_0": BotSeat(BlockingBot(seed=0), "blocking", timeout=timeout),
        "player_1": BotSeat(games.bots.make("random-v0", seed=1), "random-v0"),
    }


def test_a_bot_that_blocks_fails_its_episode_at_its_move_bound_naming_it() -> None:
    async def main() -> tuple[str, float, Episode]:
        started = time.monotonic()
        with pytest.raises(EpisodeError) as err:
            await play_episode(
                games.make("tictactoe-v0"), "tictactoe-v0", seats(0.5), seed=3, episode_id="e1"
            )
        waited = time.monotonic() - started
        # the loop was never blocked: the next episode plays at once, bots and all
        after = await play_episode(
            games.make("tictactoe-v0"),
            "tictactoe-v0",
            {
                a: BotSeat(games.bots.make("random-v0", seed=i), "random-v0")
                for i, a in enumerate(["player_0", "player_1"])
            },
            seed=4,
            episode_id="e2",
        )
        assert err.value.seat == "player_0"
        return str(err.value), waited, after

    reason, waited, after = asyncio.run(main())
    assert reason == (
        "tictactoe-v0 episode e1: bot blocking (seat player_0) gave no move in 0.5 s, the bound "
        "on one bot move (arena.play.config.BOT_MOVE_TIMEOUT); its thread is left behind"
    )
    assert 0.5 <= waited < 3.0
    assert after.termination in ("win", "draw") and len(after.turns) >= 5
    workers = [t for t in threading.enumerate() if t.name.startswith("bot-moves-")]
    assert len(workers) >= 2 and all(t.daemon for t in workers)  # the stuck one left behind


def test_the_episode_clock_covers_a_bot_move() -> None:
    """``rollout.episode_timeout`` is now read while a bot moves, and names the bot."""
    with pytest.raises(EpisodeError) as err:
        asyncio.run(
            play_episode(
                games.make("tictactoe-v0"),
                "tictactoe-v0",
                seats(None),
                seed=3,
                episode_id="e3",
                timeout=0.5,
            )
        )
    assert str(err.value) == (
        "tictactoe-v0 episode e3: not over after 0.5 s, the bound on one episode "
        "(rollout.episode_timeout) (bot blocking (seat player_0) was still moving)"
    )


def test_an_evaluation_counts_a_blocked_game_as_an_error_of_its_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(play_config, "BOT_MOVE_TIMEOUT", 0.5)
    started = time.monotonic()
    (row,) = asyncio.run(
        evaluate(
            lambda game_id, env, agent: BotSeat(BlockingBot(seed=0), "blocking"),
            ["tictactoe-v0"],
            ["random-v0"],
            games_per_match=2,
        )
    )
    assert time.monotonic() - started < 5.0
    assert (row.games, row.errors) == (0, 2)
    assert row.first_error.startswith("tictactoe-v0 episode eval-tictactoe-v0-random-v0-")
    assert "bot blocking (seat player_" in row.first_error
    assert "gave no move in 0.5 s" in row.first_error


def test_a_tournament_charges_a_blocked_match_to_the_bot_as_a_forfeit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(play_config, "BOT_MOVE_TIMEOUT", 0.5)
    config = TournamentConfig(
        participants=[
            ParticipantConfig(name="blocking", bot=BOT),
            ParticipantConfig(bot="random-v0"),
        ],
        games=[GameConfig("tictactoe-v0")],
        pairs=1,
        out=str(tmp_path),
    )
    started = time.monotonic()
    result = run_tournament(config, on_line=lambda _: None)
    assert time.monotonic() - started < 8.0
    assert (result.played, result.forfeits) == (2, 2)
    records = [json.loads(line) for line in (tmp_path / "matches.jsonl").read_text().splitlines()]
    assert [r["forfeit"]["participant"] for r in records] == ["blocking", "blocking"]
    assert all("gave no move in 0.5 s" in r["forfeit"]["reason"] for r in records)


def test_arena_play_stops_a_game_whose_bot_blocks_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from arena.tournament.human import play_human

    monkeypatch.setattr(play_config, "BOT_MOVE_TIMEOUT", 0.5)
    said: list[str] = []
    moves = iter(["0", "4", "8", "2", "6"])  # cells a person types; the bot moves in between
    result = play_human(
        games.make("tictactoe-v0"),
        "player_0",
        {"player_1": BotSeat(BlockingBot(seed=0), "blocking")},
        seed=0,
        read_line=lambda prompt: next(moves),
        write=said.append,
    )
    assert result.outcome == "stopped"
    assert (
        "bot blocking (player_1) gave no move in 0.5 s, the bound on one bot move "
        "(arena.play.config.BOT_MOVE_TIMEOUT); the game stops here"
    ) in said
