"""``matches.jsonl``: one line per finished match, appended as it finishes, and resumed from.

A line holds ``id``, ``pair``, ``game``, ``seed``, ``seats`` (the participant in seat 0, 1, ...),
``scores`` (per seat: 1 win, 0.5 draw, 0 loss), ``returns``, ``moves``, ``termination``,
``tokens``, ``seconds``, ``invalid`` and ``turns`` (per seat), and ``forfeit`` (``null``, or the
seat that forfeited, its participant and the reason). ``arena ratings`` reads these fields.

Each line is written whole and flushed to disk before the next match is recorded, so a killed
tournament leaves at most one partial last line; :func:`finished_ids` drops it, and the match
it described is played again on resume. Nothing is recorded twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from arena.eval.evaluate import game_score
from arena.records import Episode
from arena.tournament.schedule import ScheduledMatch


def match_record(match: ScheduledMatch, episode: Episode, agents: list[str]) -> dict[str, Any]:
    """The log line of a finished match; ``agents`` are the game's seats in order."""
    per_seat: dict[str, dict[str, int]] = {
        a: {"tokens": 0, "invalid": 0, "turns": 0} for a in agents
    }
    for turn in episode.turns:
        seat = per_seat[turn.seat]
        seat["turns"] += 1
        seat["invalid"] += int(not turn.valid)
        seat["tokens"] += len(turn.response_ids)
    return _record(
        match,
        scores=[game_score(episode, agent) for agent in agents],
        returns=[episode.final_rewards[agent] for agent in agents],
        moves=len(episode.turns),
        termination=episode.termination,
        seconds=float(episode.stats.get("seconds", 0.0)),
        **{key: [per_seat[a][key] for a in agents] for key in ("tokens", "invalid", "turns")},
    )


def forfeit_record(match: ScheduledMatch, seat: int, reason: str, seconds: float) -> dict[str, Any]:
    """A match the participant in ``seat`` forfeited (it crashed): it loses, the others win."""
    n = len(match.seats)
    return _record(
        match,
        scores=[0.0 if i == seat else 1.0 for i in range(n)],
        returns=[0.0] * n,
        moves=0,
        termination="forfeit",
        seconds=seconds,
        tokens=[0] * n,
        invalid=[0] * n,
        turns=[0] * n,
        forfeit={"seat": seat, "participant": match.seats[seat], "reason": reason},
    )


def _record(match: ScheduledMatch, *, seconds: float, **fields: Any) -> dict[str, Any]:
    """One log line: the match's identity, then ``fields`` (per-seat lists in seat order)."""
    return {
        "id": match.id,
        "pair": match.pair,
        "game": match.game,
        "seed": match.seed,
        "seats": list(match.seats),
        "forfeit": None,
        **fields,
        "seconds": round(seconds, 3),
    }


def finished_ids(path: Path) -> set[str]:
    """Ids of the matches already in the log; a partial last line (a killed writer) is cut off
    so the next append starts on a fresh line."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with open(path, "r+b") as out:
            out.truncate(cut)
        data = data[:cut]
    ids = set()
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            ids.add(json.loads(line)["id"])
        except (ValueError, KeyError, TypeError):
            continue  # not ours to judge: `arena ratings` reports malformed lines
    return ids


class MatchLog:
    """Appends records to ``matches.jsonl``, each flushed to disk before the call returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._out = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def append(self, record: dict[str, Any]) -> None:
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()
        os.fsync(self._out.fileno())

    def close(self) -> None:
        self._out.close()
