"""Run: .venv/bin/python -m pytest -q tests/arena/commands/test_tournament.py

``arena tournament`` and ``arena eval`` as a user runs them: real processes, real reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import arena

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.e2e
def test_three_bots_on_two_games_rate_and_report(tmp_path: Path) -> None:
    config = tmp_path / "bots.yaml"
    config.write_text(
        "name: bots\n"
        "participants:\n"
        "  - {name: random, bot: random-v0}\n"
        "  - {name: minimax, bot: minimax-v0}\n"
        "  - {name: shallow, bot: minimax-depth4-v0}\n"
        "games: [{id: tictactoe-v0}, {id: nim-v0}]\n"
        "pairs: 5\n"
        "anchor: random\n"
    )
    done = arena("tournament", str(config), f"out={tmp_path / 'out'}")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    for name in ("matches.jsonl", "ratings.json", "report.md", "report.html", "winrate.png"):
        assert (out / name).is_file(), name
    records = [json.loads(line) for line in (out / "matches.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 3 * 5 * 2  # games x pairings x pairs x seatings
    for record in records:
        if record["game"] == "tictactoe-v0" and "minimax" in record["seats"]:
            assert record["scores"][record["seats"].index("minimax")] >= 0.5  # never beaten
    report = json.loads((out / "ratings.json").read_text())
    assert report["ratings"]["random"]["rating"] == 1000.0
    assert report["ratings"]["minimax"]["rating"] > 1000.0
    assert "first_mover" in report and len(report["pairs"]) >= 6
    assert "minimax" in done.stdout and "report.html" in done.stdout  # the console table

    # `arena ratings` reads the same log and gives the same ratings
    rated = arena("ratings", str(out / "matches.jsonl"), "--anchor", "random", "--json")
    assert rated.returncode == 0, rated.stderr
    again = json.loads(rated.stdout)
    assert set(again["ratings"]) == {"random", "minimax", "shallow"}
    assert again["ratings"]["random"]["rating"] == 1000.0


@pytest.mark.e2e
def test_model_participants_share_one_inference_actor(tmp_path: Path) -> None:
    config = tmp_path / "models.yaml"
    config.write_text(
        "participants:\n"
        "  - {name: random, bot: random-v0}\n"
        "  - {name: greedy, model: tiny, sampling: {max_new_tokens: 4}}\n"
        "  - {name: hot, model: tiny, sampling: {temperature: 1.0, max_new_tokens: 4}}\n"
        "  - {name: chooser, model: tiny, act: choice, sampling: {temperature: 1.0}}\n"
        "games: [{id: tictactoe-v0, kwargs: {max_retries: 1}, role_kwargs: {prefill: true}}]\n"
        "pairs: 2\n"
    )
    done = arena("tournament", str(config), f"out={tmp_path / 'out'}")
    assert done.returncode == 0, done.stderr
    logs = sorted(p.name for p in (tmp_path / "out" / "logs").iterdir())
    # one actor serves all three (forked by the preload server: arena/run/preload.py)
    assert logs == ["broker.log", "inference-model-0.log", "preload.log"]
    records = [
        json.loads(line) for line in (tmp_path / "out" / "matches.jsonl").read_text().splitlines()
    ]
    assert len(records) == 6 * 2 * 2
    # the untrained tiny model never writes a legal move; choosing, it never forfeits
    chooser = [(r, r["seats"].index("chooser")) for r in records if "chooser" in r["seats"]]
    assert len(chooser) == 3 * 2 * 2 and all(r["invalid"][seat] == 0 for r, seat in chooser)
    assert all(r["scores"][seat] > 0 for r, seat in chooser if "random" not in r["seats"])
    for record in records:
        for seat, name in enumerate(record["seats"]):
            if name in ("greedy", "hot") and record["turns"][seat]:
                assert record["tokens"][seat] > 0


def actor_pids(parent: int) -> list[int]:
    """The live processes of ``arena eval``'s inference actor: started as
    ``inference-model-0`` by ``parent`` (the eval), forked by its preload server."""
    processes = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        processes[int(pid)] = (line, fields[0], int(fields[1]))
    servers = {
        p for p, (line, _, ppid) in processes.items() if ppid == parent and " preload " in line
    }
    return [
        pid
        for pid, (line, state, ppid) in processes.items()
        if "--actor-name inference-model-0" in line and ppid in servers and state != "Z"
    ]


def eval_killing_its_actor(tmp: Path, kills: int) -> tuple[subprocess.Popen[str], list[int]]:
    """``arena eval tiny`` (8 tictactoe games against random-v0), whose inference actor is
    SIGKILLed ``kills`` times while it plays: the first as soon as it serves (it is stopped
    first, so that no game can end before the kill, and killed once the play has begun), each
    next one as soon as the launcher has started it again. The process, and the pids killed."""
    env = {**ENV, "TMPDIR": str(tmp)}
    env.pop("ARENA_PRELOAD", None)  # the eval's own preload server forks it, under the eval
    flags = "--games tictactoe-v0 --opponents random-v0 --n 8 --max-new-tokens 4"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "arena",
            "eval",
            "tiny",
            *flags.split(),
            "--json",
            str(tmp / "e.json"),
        ],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed: list[int] = []
    deadline = time.monotonic() + 120
    try:
        while not any(
            "serves policy:model-0" in log.read_text(errors="replace")
            for log in tmp.glob("arena-eval-*/inference-model-0.log")
        ):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        (pid,) = actor_pids(proc.pid)
        os.kill(pid, signal.SIGSTOP)  # its requests wait; the play cannot end without it
        time.sleep(3)  # `arena eval` sees it listed within 0.5 s and starts playing
        while True:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            if len(killed) == kills:
                return proc, killed
            while not (pids := [p for p in actor_pids(proc.pid) if p not in killed]):
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.05)
            pid = pids[0]
    except BaseException:
        proc.kill()
        raise


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Its stdout and stderr once it exits (killed after 120 s: an actor not restarted leaves
    its requests waiting out the 600 s of ``inference.timeout``)."""
    try:
        return proc.communicate(timeout=120)
    finally:
        proc.kill()


@pytest.mark.e2e
def test_eval_plays_on_through_a_killed_inference_actor(tmp_path: Path) -> None:
    """`arena eval` restarts an inference actor killed while it plays (Seating.supervise): its
    requests are sent again to the new one and every game is played; it said so on stderr."""
    proc, (killed,) = eval_killing_its_actor(tmp_path, kills=1)
    stdout, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    assert f"inference-model-0 (pid {killed}) exited with code -9; restarting (1/2)" in stderr
    (result,) = json.loads((tmp_path / "e.json").read_text())
    assert result["game"] == "tictactoe-v0" and result["opponent"] == "random-v0"
    assert result["games"] == 8
    assert "tictactoe-v0 vs random-v0: score" in stdout
    # its temporary directories (the actor's logs, the broker's socket) are gone: every eval
    # left two behind in /tmp (the killed actor's own socket file is left: this path is too
    # long for one beside the broker's)
    assert not [p for p in tmp_path.glob("arena-*") if p.is_dir()]


@pytest.mark.e2e
def test_eval_stops_in_one_line_when_its_actor_dies_past_its_restarts(tmp_path: Path) -> None:
    """Killed three times while it plays (twice restarted), the actor stops `arena eval`:
    exit 1 and one line naming it (with the end of its log), no traceback and no result."""
    proc, killed = eval_killing_its_actor(tmp_path, kills=3)
    stdout, stderr = finish(proc)
    assert proc.returncode == 1, stderr
    assert len(set(killed)) == 3
    for n, pid in enumerate(killed[:2], 1):
        assert f"inference-model-0 (pid {pid}) exited with code -9; restarting ({n}/2)" in stderr
    stopped = [line for line in stderr.splitlines() if line.startswith("arena eval:")]
    assert stopped == [
        f"arena eval: stopped: inference-model-0 (pid {killed[2]}) exited with code -9; end of "
        f"{next(tmp_path.glob('arena-eval-*')) / 'inference-model-0.log'}:"
    ]
    assert "Traceback" not in stderr
    assert not (tmp_path / "e.json").exists() and "score" not in stdout
    # the logs it names are kept; the broker's socket directory is not
    assert [p.name.split("-")[1] for p in tmp_path.glob("arena-*") if p.is_dir()] == ["eval"]


@pytest.mark.e2e
def test_eval_by_choice_never_replies_invalid(tmp_path: Path) -> None:
    """The untrained tiny model writes no valid move (every game forfeited); choosing among
    the legal replies, it cannot reply outside them."""
    out = tmp_path / "eval.json"
    flags = "--games tictactoe-v0 --opponents random-v0 --n 4 --act choice --temperature 1"
    done = arena("eval", "tiny", *flags.split(), "--json", str(out))
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(out.read_text())
    assert result["games"] == 4 and result["invalid_rate"] == 0.0
    refused = arena("eval", "tiny", "--games", "negotiation-v0", "--n", "1", "--act", "choice")
    assert refused.returncode == 2 and "takes free text" in refused.stderr


@pytest.mark.parametrize(
    ("participant", "message"),
    [
        ("minimax-v9", "no bot 'minimax-v9'"),
        ("/nonexistent/model", "no such file or directory: /nonexistent/model"),
    ],
)
def test_eval_names_a_participant_that_cannot_load(participant: str, message: str) -> None:
    done = arena("eval", participant, "--games", "tictactoe-v0", "--n", "2")
    assert done.returncode == 2
    assert message in done.stderr


def test_an_actor_dead_for_good_stops_the_tournament_in_one_line_keeping_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An inference actor past its restarts (`Seating.supervise` raises `ChildDied`, as
    test_serving shows with real processes) ends the command with one line and exit 1, saying
    what the log keeps and how to play the rest; it was a traceback."""
    import arena.tournament.runner as runner
    from arena.cli import main
    from arena.run.launcher import ChildDied

    out = tmp_path / "t"

    def dies(config: object) -> None:
        out.mkdir()
        (out / "matches.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "ga')
        raise ChildDied("inference-model-0 (pid 42) exited with code -9; end of LOG:\n...")

    monkeypatch.setattr(runner, "run_tournament", dies)
    config = tmp_path / "t.yaml"
    config.write_text(
        "participants: [{bot: random-v0}, {bot: mcts-v0}]\n"
        f"games: [{{id: tictactoe-v0}}]\nout: {out}\n"
    )
    assert main(["tournament", str(config)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "arena tournament: stopped: inference-model-0 (pid 42) exited with code -9; end of LOG:"
    )
    assert err.endswith(
        f"2 finished matches are in {out / 'matches.jsonl'}; run the same command again to "
        "play the rest\n"
    )
