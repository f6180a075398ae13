"""Run: .venv/bin/python -m pytest -q tests/arena/tournament/test_runner.py

Tournaments of reference bots, played for real (no model needed): the records, forfeits, and
an exact resume after SIGKILL.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from arena.core.errors import ConfigError
from arena.play.config import GameConfig, SamplingConfig
from arena.tournament.config import ParticipantConfig, TournamentConfig
from arena.tournament.records import finished_ids
from arena.tournament.runner import run_tournament

ROOT = Path(__file__).resolve().parents[3]
TTT = GameConfig("tictactoe-v0")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_records_have_every_field_and_scores_match_returns(tmp_path: Path) -> None:
    config = TournamentConfig(
        participants=[ParticipantConfig(bot="random-v0"), ParticipantConfig(bot="minimax-v0")],
        games=[TTT],
        pairs=3,
        out=str(tmp_path),
    )
    result = run_tournament(config, on_line=lambda _: None)
    records = lines(tmp_path / "matches.jsonl")
    assert result.played == len(records) == 6
    for record in records:
        for key in ("game", "seed", "seats", "scores", "returns", "moves", "termination"):
            assert key in record
        assert len(record["tokens"]) == len(record["invalid"]) == 2
        assert sorted(record["seats"]) == ["minimax-v0", "random-v0"]
        minimax = record["seats"].index("minimax-v0")
        assert record["scores"][minimax] in (0.5, 1.0)  # minimax is never beaten
        assert sum(record["scores"]) == 1.0
        assert record["moves"] == sum(record["turns"])
    ratings = json.loads((tmp_path / "ratings.json").read_text())["ratings"]
    assert ratings["minimax-v0"]["rating"] > ratings["random-v0"]["rating"]


def test_without_openspiel_a_poker_tournament_is_rated_and_says_why_it_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyspiel", None)  # `import pyspiel` raises ImportError
    config = TournamentConfig(
        participants=[
            ParticipantConfig(name="a", bot="random-v0"),
            ParticipantConfig(name="b", bot="random-v0"),
        ],
        games=[GameConfig("kuhn-poker-v0")],
        pairs=2,
        out=str(tmp_path),
    )
    said: list[str] = []
    result = run_tournament(config, on_line=said.append)
    assert result.played == 4
    (line,) = [s for s in said if "exploitability" in s]
    assert "not read in kuhn-poker-v0" in line and "arena-selfplay[openspiel]" in line
    report = json.loads((tmp_path / "ratings.json").read_text())
    assert set(report["ratings"]) == {"a", "b"}
    assert "exploitability" not in report and (tmp_path / "report.html").is_file()


def test_a_crashing_participant_forfeits_only_its_matches(tmp_path: Path) -> None:
    crash = ParticipantConfig(name="crash", bot="tests.arena.tournament.crashing_bot:CrashingBot")
    config = TournamentConfig(
        participants=[crash, ParticipantConfig(bot="random-v0")],
        games=[TTT],
        pairs=4,
        out=str(tmp_path),
    )
    result = run_tournament(config, on_line=lambda _: None)
    records = lines(tmp_path / "matches.jsonl")
    assert len(records) == 8
    forfeits = [r for r in records if r["forfeit"] is not None]
    # the bot crashes on its second move whenever it sits in seat 1: one match of every pair
    assert result.forfeits == len(forfeits) == 4
    assert sorted(r["seed"] for r in forfeits) == [0, 1, 2, 3]
    for record in forfeits:
        assert record["seats"][1] == "crash" and record["forfeit"]["seat"] == 1
        assert record["forfeit"]["participant"] == "crash"
        assert "fell over" in record["forfeit"]["reason"]
        assert record["scores"] == [1.0, 0.0]
        assert record["termination"] == "forfeit"
    assert all(r["forfeit"] is None for r in records if r["seats"][0] == "crash")


def test_unloadable_participants_are_named_before_any_match(tmp_path: Path) -> None:
    config = TournamentConfig(
        participants=[
            ParticipantConfig(bot="minimax-v9"),
            ParticipantConfig(name="ghost", model=str(tmp_path / "nothing-here")),
            ParticipantConfig(name="empty", model=str(tmp_path / "ckpt" / "step-*")),
            ParticipantConfig(bot="random-v0"),
        ],
        games=[TTT],
        out=str(tmp_path / "out"),
    )
    with pytest.raises(ConfigError) as err:
        run_tournament(config, on_line=lambda _: None)
    text = str(err.value)
    assert "'minimax-v9'" in text and "minimax-v0" in text  # the nearest bot
    assert "'ghost'" in text and "no such file or directory" in text
    assert "'empty'" in text and "matches nothing" in text
    assert not (tmp_path / "out" / "matches.jsonl").exists()


def test_a_bot_that_cannot_play_a_game_is_refused_up_front(tmp_path: Path) -> None:
    config = TournamentConfig(
        participants=[ParticipantConfig(bot="minimax-v0"), ParticipantConfig(bot="random-v0")],
        games=[GameConfig("kuhn-poker-v0")],
        out=str(tmp_path),
    )
    with pytest.raises(ConfigError, match="minimax-v0.*cannot play kuhn-poker-v0"):
        run_tournament(config, on_line=lambda _: None)


def test_a_role_bot_is_checked_in_a_seat_no_simulator_fills() -> None:
    """`arena eval retail-agent-v0 --games retail-v0 --simulator user=scripted-user-v0`: the
    check sat the agent bot in the user's seat (the first), and refused it for a seat it would
    never play."""
    from arena.play.config import SimulatorConfig
    from arena.tournament.participants import resolve_participants

    agent = ParticipantConfig(bot="retail-agent-v0")
    simulated = GameConfig("retail-v0", simulators={"user": SimulatorConfig(id="scripted-user-v0")})
    (resolved,) = resolve_participants([agent], [simulated], minimum=1)
    assert resolved.name == "retail-agent-v0"
    with pytest.raises(ConfigError, match="cannot play retail-v0: .* needs the agent seat"):
        resolve_participants([agent], [GameConfig("retail-v0")], minimum=1)


def test_finished_ids_cuts_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "matches.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "ga')
    assert finished_ids(path) == {"a", "b"}
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n'


@pytest.mark.e2e
def test_resume_after_sigkill_replays_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    """Kill ``arena tournament`` mid-run (SIGKILL, so no cleanup), tear its last line, run it
    again: the log then holds exactly the matches of an uninterrupted run, each once."""
    config = tmp_path / "t.yaml"
    config.write_text(
        "participants:\n"
        "  - {bot: mcts-v0}\n"
        "  - {bot: random-v0}\n"
        "  - {bot: minimax-depth4-v0}\n"
        "games: [{id: tictactoe-v0}]\n"
        "pairs: 6\n"
        "concurrency: 2\n"
    )
    arena = [sys.executable, "-m", "arena", "tournament", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    reference = tmp_path / "reference"
    subprocess.run([*arena, f"out={reference}"], cwd=ROOT, env=env, check=True, capture_output=True)
    expected = lines(reference / "matches.jsonl")
    assert len(expected) == 36

    out = tmp_path / "resumed"
    log = out / "matches.jsonl"
    child = subprocess.Popen(
        [*arena, f"out={out}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while not (log.exists() and len(log.read_text().splitlines()) >= 8):
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    before = log.read_text()
    with open(log, "a") as torn:
        torn.write('{"id": "tictactoe-v0/99/x|y", "game": "tic')  # a write cut short
    done_before = len(before.splitlines())
    assert done_before < 36

    rerun = subprocess.run(
        [*arena, f"out={out}"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert rerun.returncode == 0, rerun.stderr
    assert f"{done_before} already in the log" in rerun.stdout
    after = log.read_text()
    assert after.startswith(before)  # nothing finished was replayed or rewritten
    records = lines(log)
    assert len(records) == 36 == len({r["id"] for r in records})

    def comparable(record: dict) -> tuple:
        return tuple((k, json.dumps(v)) for k, v in sorted(record.items()) if k != "seconds")

    assert sorted(map(comparable, records)) == sorted(map(comparable, expected))


class AlwaysFive(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that always answers ``5``."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        choice = {
            "text": "5",
            "finish_reason": "stop",
            "logprobs": {"tokens": ["5"], "token_logprobs": [-0.1]},
        }
        data = json.dumps({"choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def five_against_random(tmp_path: Path, **settings: Any) -> Iterator[TournamentConfig]:
    """A tournament of an OpenAI-compatible endpoint on this host that always replies 5 (its
    server up while the block runs) against ``random-v0``, at Tic-Tac-Toe."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), AlwaysFive)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    endpoint = ParticipantConfig(
        name="five",
        model="stub",
        backend="openai",
        base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1",
    )
    try:
        yield TournamentConfig(
            participants=[endpoint, ParticipantConfig(bot="random-v0")],
            games=[
                GameConfig("tictactoe-v0", kwargs={"max_retries": 0}, role_kwargs={"prefill": True})
            ],
            out=str(tmp_path),
            **settings,
        )
    finally:
        httpd.shutdown()


def test_an_openai_endpoint_participant_plays_its_replies(tmp_path: Path) -> None:
    with five_against_random(tmp_path, pairs=2, exploitability=False) as config:
        run_tournament(config, on_line=lambda _: None)
    records = lines(tmp_path / "matches.jsonl")
    assert len(records) == 4 and all(r["forfeit"] is None for r in records)
    for record in records:
        seat = record["seats"].index("five")
        assert record["tokens"][seat] >= 1
        if seat == 0:  # moving first, "5" is legal and taken; the next "5" is not
            assert record["invalid"][seat] == 1 and record["termination"] == "illegal"
            assert record["scores"][seat] == 0.0


def test_a_three_player_game_is_rated_with_openskill(tmp_path: Path) -> None:
    config = TournamentConfig(
        participants=[
            ParticipantConfig(name="heuristic", bot="liars-dice-heuristic-v0"),
            ParticipantConfig(name="random-a", bot="random-v0"),
            ParticipantConfig(name="random-b", bot="random-v0"),
        ],
        games=[GameConfig("liars-dice-v0", kwargs={"num_players": 3})],
        pairs=10,
        out=str(tmp_path),
    )
    run_tournament(config, on_line=lambda _: None)
    records = lines(tmp_path / "matches.jsonl")
    assert len(records) == 30 and all(len(r["seats"]) == 3 for r in records)
    report = json.loads((tmp_path / "ratings.json").read_text())
    multiplayer = report["multiplayer"]
    assert set(multiplayer) == {"heuristic", "random-a", "random-b"}
    assert multiplayer["heuristic"]["mu"] > max(
        multiplayer["random-a"]["mu"], multiplayer["random-b"]["mu"]
    )
    assert "Multi-player" in (tmp_path / "report.md").read_text()


@pytest.mark.e2e
def test_a_choice_round_robin_plays_the_same_matches_at_any_concurrency(tmp_path: Path) -> None:
    """Two sampling choosers of the tiny model in bfloat16, where a score computed in another
    batch would differ by a rounding step: one match at a time and all matches at once (their
    turns scored in shared batches) record the same games."""
    choosers = [
        ParticipantConfig(
            name=f"chooser-{t}",
            model="tiny",
            act="choice",
            dtype="bfloat16",
            sampling=SamplingConfig(temperature=t),
        )
        for t in (1.0, 2.0)
    ]
    records = {}
    for concurrency in (1, 12):
        config = TournamentConfig(
            participants=[ParticipantConfig(name="random", bot="random-v0"), *choosers],
            games=[GameConfig("tictactoe-v0", role_kwargs={"prefill": True})],
            pairs=2,
            concurrency=concurrency,
            out=str(tmp_path / str(concurrency)),
            exploitability=False,
        )
        run_tournament(config, on_line=lambda _: None)
        records[concurrency] = {
            r["id"]: (r["scores"], r["moves"], r["turns"], r["tokens"])
            for r in lines(tmp_path / str(concurrency) / "matches.jsonl")
        }
    assert len(records[1]) == 3 * 2 * 2
    assert records[1] == records[12]


def test_ctrl_c_stops_the_matches_before_the_log_closes(tmp_path: Path) -> None:
    """Ctrl-C cancels the play: the matches in flight (awaiting a model's reply) stop with it,
    so none writes to the closed log (they went on, and asyncio's shutdown printed `ValueError:
    I/O operation on closed file` tracebacks under the interrupt)."""
    import asyncio

    from arena.tournament import runner
    from arena.tournament.participants import resolve_participants
    from arena.tournament.schedule import schedule

    log = tmp_path / "matches.jsonl"

    async def interrupt(config: TournamentConfig) -> set:
        participants = resolve_participants(config.participants, config.games)
        todo = schedule([p.name for p in participants], config.games, pairs=200)
        play = asyncio.create_task(
            runner._play(config, participants, todo, tmp_path, log, 0, len(todo))
        )
        while not (log.exists() and log.read_text().count("\n") >= 2):
            await asyncio.sleep(0.01)
        play.cancel()
        await asyncio.gather(play, return_exceptions=True)
        return asyncio.all_tasks() - {asyncio.current_task()}

    with five_against_random(tmp_path, concurrency=4) as config:
        assert asyncio.run(interrupt(config)) == set()  # nothing left playing
    records = lines(log)
    assert 2 <= len(records) < 400 and all(r["game"] == "tictactoe-v0" for r in records)


def test_each_seat_of_a_role_game_is_filled_in_its_own_role() -> None:
    """A match asked for each participant's seat without the game and the seat, so a model
    played every seat of mae-v0 as player-v0 (not proposer, solver, judge): the seating is now
    handed both, as arena eval's role evaluation hands them."""
    import asyncio

    from arena.play.seats import BotSeat
    from arena.tournament.runner import play_matches
    from arena.tournament.schedule import ScheduledMatch
    from games.bots import make as make_bot

    game = GameConfig("mae-v0", kwargs={"num_solvers": 1})
    asked: list[tuple[str, str | None]] = []

    class Recording:  # the two calls play_matches makes of a tournament's Seating
        def game(self, game_id: str) -> GameConfig:
            return game

        def seat(self, name, game, seed, env=None, agent=None) -> BotSeat:
            asked.append((name, agent))
            return BotSeat(make_bot("mae-oracle-v0", seed=seed), name)

    lines: list[dict] = []
    match = ScheduledMatch("mae-v0", 0, ("a", "b", "c"), "p")
    assert asyncio.run(play_matches(Recording(), [match], 1, lines.append)) == 0  # type: ignore[arg-type]
    assert asked == [("a", "proposer"), ("b", "solver_0"), ("c", "judge")]
    assert lines[0]["seats"] == ["a", "b", "c"] and lines[0]["forfeit"] is None


def test_a_tournament_game_with_simulators_is_refused(tmp_path: Path) -> None:
    """A match seats a participant in every seat: a game's simulators were ignored (an unknown
    simulator id too), and the retail agent bot forfeited as the user."""
    from arena.tournament.config import load_tournament_config

    path = tmp_path / "t.yaml"
    path.write_text(
        "participants: [{bot: retail-agent-v0}, {bot: random-v0}]\n"
        "games: [{id: retail-v0, simulators: {user: {id: scripted-usr-v0}}}]\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_tournament_config(path)
    assert str(caught.value) == (
        "games.0.simulators: a tournament seats a participant in every seat of retail-v0, so no "
        "seat is simulated: drop simulators (to evaluate a seat beside a simulator: arena eval "
        "PARTICIPANT --games retail-v0 --simulator user=scripted-usr-v0)"
    )


def test_malformed_lines_in_the_log_are_named_and_their_matches_played_again(
    tmp_path: Path,
) -> None:
    # A line cut short in the middle of matches.jsonl (later appends after it) or an edit was
    # left out of the ratings without a word; the match it recorded was played again.
    config = TournamentConfig(
        participants=[ParticipantConfig(bot="random-v0"), ParticipantConfig(bot="minimax-v0")],
        games=[TTT],
        pairs=2,
        out=str(tmp_path),
    )
    run_tournament(config, on_line=lambda _: None)
    log = tmp_path / "matches.jsonl"
    whole = log.read_text().splitlines(keepends=True)
    cut = json.loads(whole[1])["id"]
    log.write_text(whole[0] + whole[1][:25] + "\n" + "garbage\n" + "".join(whole[2:]))
    said: list[str] = []
    result = run_tournament(config, on_line=said.append)
    assert result.played == 1 and result.skipped == 3
    assert (
        "matches.jsonl: 2 malformed lines left out of the ratings (line 2: bad JSON: "
        in "\n".join(said)
    )
    assert "line 3: bad JSON: Expecting value (column 1)); a finished match is found" in (
        "\n".join(said)
    )
    readable = [json.loads(line) for line in log.read_text().splitlines()[3:]]
    assert sorted(r["id"] for r in [json.loads(whole[0]), *readable]) == sorted(
        json.loads(line)["id"] for line in whole
    )
    assert readable[-1]["id"] == cut


def test_a_match_the_game_itself_fails_is_no_forfeit_and_is_played_again(tmp_path: Path) -> None:
    """A broken plugin game (its own code raises mid-match) was charged to the participant in
    seat 0 as a forfeit, a loss kept in the log and rated. Now no participant is blamed: the
    match is not recorded, a line names it, and a rerun plays it again."""
    import games
    from games.tictactoe import TicTacToe

    class Buggy(TicTacToe):
        """Tic-Tac-Toe whose moves raise from the process's fourth game on (the participants'
        checks play the first two)."""

        resets = 0

        def reset(self, *args: Any, **kwargs: Any) -> Any:
            Buggy.resets += 1
            return super().reset(*args, **kwargs)

        def _apply(self, agent: str, action: int) -> Any:
            if Buggy.resets > 3:
                raise KeyError("the board has no such cell")
            return super()._apply(agent, action)

    games.registry.register("buggy-ttt-v0", Buggy)
    try:
        config = TournamentConfig(
            participants=[ParticipantConfig(bot="random-v0"), ParticipantConfig(bot="mcts-v0")],
            games=[GameConfig("buggy-ttt-v0")],
            pairs=2,
            concurrency=1,
            out=str(tmp_path),
        )
        said: list[str] = []
        result = run_tournament(config, on_line=said.append)
        assert (result.played, result.forfeits, len(result.failed)) == (4, 0, 3)
        assert len(lines(tmp_path / "matches.jsonl")) == 1
        assert said[1].startswith(
            "3 matches failed through no participant's doing and are not in matches.jsonl (the "
            "first: buggy-ttt-v0 episode buggy-ttt-v0/"
        )
        assert said[1].endswith(
            ": the game failed: KeyError('the board has no such cell')); run the same command "
            "again to play them"
        )
        Buggy.resets = 0  # the rerun's first match is played whole, the others fail again
        again = run_tournament(config, on_line=lambda _: None)
        assert (again.played, again.skipped, len(again.failed)) == (3, 1, 2)
        assert len(lines(tmp_path / "matches.jsonl")) == 2
    finally:
        del games.registry._entries["buggy-ttt-v0"]
