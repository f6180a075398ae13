"""Run a tournament: play every scheduled match not yet in the log, then rate and report.

Matches run concurrently (``concurrency`` at once) as asyncio tasks in this process; a model
participant's turns are requests to its inference actor, which batches them across matches.
Each finished match is appended to ``matches.jsonl`` at once (:mod:`arena.tournament.records`),
so an interrupted tournament resumes where it stopped: finished matches are never replayed, and
none is recorded twice.

A participant that fails mid-match (its model errors or times out, its actor dies, its bot
raises) forfeits that match only: the record says who and why, and the tournament goes on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import games
from arena.core.config import to_yaml
from arena.eval.exploitability import openspiel_missing
from arena.eval.progress import Progress
from arena.play.episode import play_episode
from arena.play.seats import EpisodeError
from arena.tournament.config import TournamentConfig
from arena.tournament.participants import Participant, resolve_participants
from arena.tournament.records import (
    MatchLog,
    finished_ids,
    forfeit_record,
    match_record,
)
from arena.tournament.schedule import ScheduledMatch, schedule
from arena.tournament.serving import Seating
from arena.tournament.strategy import exploitabilities, readable_game

log = logging.getLogger("arena.tournament")


@dataclass
class TournamentResult:
    out_dir: Path
    played: int
    """Matches played by this call (not counting those resumed from the log)."""
    skipped: int
    """Matches already in the log."""
    forfeits: int
    seconds: float
    """Seconds spent playing this call's matches (after every participant was loaded)."""
    report: dict[str, Any]
    failed: list[str] = field(default_factory=list)
    """Matches not played to the end through no participant's doing (the game's own code
    raised, or it never ended), each with its reason: not recorded, so a rerun plays them."""


def output_dir(config: TournamentConfig) -> Path:
    return Path(config.out) if config.out else Path("runs") / "tournaments" / config.name


async def play_matches(
    seating: Seating,
    matches: list[ScheduledMatch],
    concurrency: int,
    record: Callable[[dict[str, Any]], None],
    failed: list[str] | None = None,
) -> int:
    """Play ``matches`` with at most ``concurrency`` at once; ``record`` gets each line.
    Returns the number of forfeits. A match whose episode failed with no seat to blame (the
    game's own code raised, the turn bound) is no result: it is not recorded (a rerun plays
    it again) and its reason goes to ``failed``; charging it to seat 0 as a forfeit skewed the
    ratings with a loss for a plugin game's bug."""
    limit = asyncio.Semaphore(concurrency)
    forfeits = 0

    async def one(match: ScheduledMatch) -> None:
        nonlocal forfeits
        async with limit:
            game = seating.game(match.game)
            env = games.make(game.id, **game.kwargs)
            agents = list(env.possible_agents)
            started = time.monotonic()
            try:
                seats = {  # each in the role the game gives its seat (a role game's)
                    agent: seating.seat(name, game, match.seed, env, agent)
                    for agent, name in zip(agents, match.seats, strict=True)
                }
                episode = await play_episode(
                    env, game.id, seats, seed=match.seed, episode_id=match.id
                )
            except EpisodeError as err:
                if err.seat not in agents:
                    log.warning("%s: not recorded: %s", match.id, err)
                    if failed is not None:
                        failed.append(str(err))
                    return
                seat = agents.index(err.seat)
                forfeits += 1
                log.warning("%s: %s forfeits: %s", match.id, match.seats[seat], err)
                record(forfeit_record(match, seat, str(err), time.monotonic() - started))
                return
            record(match_record(match, episode, agents))

    await asyncio.gather(*(one(m) for m in matches))
    return forfeits


def run_tournament(
    config: TournamentConfig, *, on_line: Callable[[str], None] = print
) -> TournamentResult:
    """Everything ``arena tournament`` does; returns what it played and the ratings report."""
    from arena.eval.ratings import ratings_report, read_match_log
    from arena.eval.report import ratings_table, write_report

    participants = resolve_participants(config.participants, config.games)
    matches = schedule(
        [p.name for p in participants],
        config.games,
        kind=config.schedule,
        reference=config.reference,
        pairs=config.pairs,
        seed=config.seed,
    )
    out = output_dir(config)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tournament.yaml").write_text(to_yaml(config))
    log_path = out / "matches.jsonl"
    done = finished_ids(log_path)
    todo = [m for m in matches if m.id not in done]
    on_line(_plan_line(participants, matches, len(matches) - len(todo)))
    failed: list[str] = []
    forfeits, seconds = asyncio.run(
        _play(
            config,
            participants,
            todo,
            out,
            log_path,
            len(matches) - len(todo),
            len(matches),
            failed,
        )
    )
    if failed:
        on_line(
            f"{len(failed)} matches failed through no participant's doing and are not in "
            f"{log_path.name} (the first: {failed[0]}); run the same command again to play them"
        )
    match_log = read_match_log(log_path)
    if match_log.skipped:  # an edit, or a torn line later appends followed: named, not rated
        shown = "; ".join(f"line {s.line}: {s.reason}" for s in match_log.skipped[:3])
        more = "; ..." if len(match_log.skipped) > 3 else ""
        on_line(
            f"{log_path.name}: {len(match_log.skipped)} malformed lines left out of the ratings "
            f"({shown}{more}); a finished match is found by its id, so one whose line is among "
            "them was played again"
        )
    report = ratings_report(match_log, anchor=config.anchor, resamples=config.resamples)
    if config.exploitability:
        readable = [g.id for g in config.games if readable_game(g.id)]
        missing = openspiel_missing() if readable else None
        if missing is None:
            report["exploitability"] = exploitabilities(participants, list(config.games))
            unread = [f"{p.name} ({p.config.backend})" for p in participants if _unreadable(p)]
            if readable and unread:
                on_line(
                    f"exploitability: not read for {', '.join(unread)}: only bots with a table "
                    "and hf models can be read"
                )
        else:  # one line; the ratings and the report are still written
            on_line(f"exploitability: not read in {', '.join(readable)}: {missing}")
    (out / "ratings.json").write_text(json.dumps(report, indent=2) + "\n")
    write_report(
        out, report, title=f"Arena tournament: {config.name}", games=[g.id for g in config.games]
    )
    on_line(ratings_table(report))
    for name, reading in report.get("exploitability", {}).items():
        invalid = reading.get("invalid_mass")
        extra = f" (invalid-reply mass {invalid:.3f})" if invalid is not None else ""
        on_line(f"{name}: {reading['game']} exploitability {reading['exploitability']:.4f}{extra}")
    on_line(f"matches: {log_path}\nreport:  {out / 'report.html'}")
    return TournamentResult(
        out, len(todo), len(matches) - len(todo), forfeits, seconds, report, failed
    )


async def _play(
    config: TournamentConfig,
    participants: list[Participant],
    todo: list[ScheduledMatch],
    out: Path,
    log_path: Path,
    done: int,
    total: int,
    failed: list[str] | None = None,
) -> tuple[int, float]:
    """Play ``todo``; returns the forfeits and the seconds of play (model loading excluded);
    ``failed`` gets the reason of each match that failed through no participant's doing."""
    if not todo:
        return 0, 0.0
    seating = Seating(config, participants, out / "logs")
    writer = MatchLog(log_path)
    try:
        await seating.start()
        started = time.monotonic()
        with Progress("matches", total, completed=done) as progress:

            def record(line: dict[str, Any]) -> None:
                writer.append(line)
                progress.advance()

            # a crashed inference actor is restarted meanwhile; Ctrl-C or one that keeps dying
            # cancels the matches in flight: no match records after the close
            forfeits = await seating.supervise(
                play_matches(seating, todo, config.concurrency, record, failed)
            )
            return forfeits, time.monotonic() - started
    finally:
        writer.close()
        await seating.close()


def _unreadable(participant: Participant) -> bool:
    """A model whose strategy cannot be read exactly: any backend but ``hf`` (an endpoint, a
    ``vllm`` or plugin backend cannot score every information state here)."""
    return participant.kind != "bot" and participant.config.backend != "hf"


def _plan_line(participants: list[Participant], matches: list[ScheduledMatch], done: int) -> str:
    who = ", ".join(f"{p.name} ({p.describe()})" for p in participants)
    resumed = f"; {done} already in the log" if done else ""
    return f"{len(participants)} participants: {who}\n{len(matches)} matches{resumed}"
