"""Run: .venv/bin/python -m pytest -q tests/arena/commands/test_play.py

``arena play`` as a person meets it: in a real terminal (a detached tmux session), typing an
illegal move and then legal ones until the result; and the exit status 2, with the nearest
names, for an unknown game or participant.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import arena

ROOT = Path(__file__).resolve().parents[3]
PROMPT = "your move>"


class Tmux:
    """One detached tmux session on a private server (its own socket), killed by ``close``."""

    def __init__(self, command: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="arena-tmux-")  # short: socket paths are limited
        self.name = f"arena-play-{uuid.uuid4().hex[:8]}"
        self.env = {**os.environ, "TMUX_TMPDIR": self.dir}
        self.env.pop("TMUX", None)  # a test run inside tmux still starts its own server
        self.tmux(
            "new-session", "-d", "-s", self.name, "-x", "200", "-y", "50", "-c", str(ROOT), command
        )

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.name, *args],
            capture_output=True,
            text=True,
            timeout=30,
            env=self.env,
            check=True,
        )
        return done.stdout

    def screen(self) -> str:
        """Everything the session printed (the scrollback too), lines joined where wrapped."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.name)

    def send(self, keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, keys, "Enter")

    def wait_for(self, done: Callable[[str], bool], what: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if done(screen):
                return screen
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} never appeared; the screen:\n{screen}")
            time.sleep(0.2)

    def close(self) -> None:
        subprocess.run(
            ["tmux", "-L", self.name, "kill-server"], capture_output=True, env=self.env, timeout=30
        )
        shutil.rmtree(self.dir, ignore_errors=True)


def test_a_person_plays_minimax_in_a_terminal() -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    command = (
        f"{sys.executable} -m arena play tictactoe-v0 --against minimax-v0 --seat first "
        "--seed 0; sleep 30"
    )
    session = Tmux(command)
    try:
        screen = session.wait_for(lambda s: PROMPT in s, "the first prompt")
        assert "legal moves: 1, 2, 3, 4, 5, 6, 7, 8, 9" in screen
        session.send("10")  # no such cell
        screen = session.wait_for(
            lambda s: "not a legal move" in s and s.count(PROMPT) == 2, "the explanation"
        )
        assert "not a legal move: cannot read '10' as a move; legal moves: 1, 2" in screen
        for cell in "123456789":  # the taken cells are refused and asked again
            prompts = screen.count(PROMPT)
            session.send(cell)
            screen = session.wait_for(
                lambda s, n=prompts: "result: " in s or s.count(PROMPT) > n, f"a reply to {cell}"
            )
            if "result: " in screen:
                break
        assert "result: " in screen
        assert "Game over" in screen
        assert "you win" not in screen
        assert "minimax-v0 (player_1) played: " in screen
        assert "Traceback" not in screen
    finally:
        session.close()


@pytest.mark.parametrize(
    ("game", "named"),
    [("tictactoe", "'tictactoe-v0'"), ("nosuchgame", "did you mean")],
)
def test_an_unknown_game_exits_2_naming_the_nearest(game: str, named: str) -> None:
    done = arena("play", game, "--against", "random-v0")
    assert done.returncode == 2, done.stderr
    assert f"unknown game {game!r}" in done.stderr
    assert named in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_participant_exits_2_naming_it() -> None:
    done = arena("play", "tictactoe-v0", "--against", "nosuchbot-v0")
    assert done.returncode == 2, done.stderr
    assert "participant 'nosuchbot-v0'" in done.stderr
    assert "no bot 'nosuchbot-v0'" in done.stderr
    assert "Traceback" not in done.stderr
    assert PROMPT not in done.stdout  # refused before the game starts


def test_act_choice_on_a_free_text_game_is_refused_before_the_model_loads() -> None:
    done = arena("play", "retail-v0", "--against", "tiny", "--act", "choice")
    assert done.returncode == 2, done.stderr
    assert "loading" not in done.stdout  # it loaded the model first
    assert done.stderr.strip() == (
        "arena play: bad config: games.retail-v0: act: choice needs a game that lists its legal "
        "actions, but retail-v0 takes free text (seats user, agent); use act: generate"
    )


def test_act_with_a_bot_is_refused() -> None:
    done = arena("play", "tictactoe-v0", "--against", "random-v0", "--act", "choice")
    assert done.returncode == 2 and PROMPT not in done.stdout  # it was ignored
    assert done.stderr.strip() == (
        "arena play: bad config: --act choice says how a model acts; bot 'random-v0' plays its own"
    )


def test_a_model_that_cannot_load_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from arena.cli import main

    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{}")  # looks like a model, loads as none
    assert main(["play", "tictactoe-v0", "--against", str(broken)]) == 2
    captured = capsys.readouterr()
    assert "participant 'broken-model': cannot load" in captured.err
    assert PROMPT not in captured.out


def test_a_checkpoint_is_prompted_as_its_run_trained_it(tmp_path: Path) -> None:
    from arena.commands.play import trained_defaults

    run_dir = tmp_path / "run"
    checkpoint = run_dir / "checkpoints" / "step-00000003"
    checkpoint.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(
        "games:\n"
        "- id: tictactoe-v0\n"
        "  kwargs: {max_retries: 1}\n"
        "  role_kwargs: {prefill: true, show_rules: false}\n"
        "sampling: {max_new_tokens: 6}\n"
    )
    game, max_new_tokens = trained_defaults(str(checkpoint), "tictactoe-v0")
    assert (game.kwargs, game.role_kwargs, max_new_tokens) == (
        {"max_retries": 1},
        {"prefill": True, "show_rules": False},
        6,
    )
    game, max_new_tokens = trained_defaults(str(checkpoint), "nim-v0")  # not trained on it
    assert (game.id, game.role_kwargs, max_new_tokens) == ("nim-v0", {}, 6)
    game, max_new_tokens = trained_defaults("minimax-v0", "nim-v0")
    assert (game.kwargs, game.role_kwargs, max_new_tokens) == ({}, {}, None)


def test_a_role_game_checkpoint_names_each_seats_role(tmp_path: Path, capsys) -> None:
    """A role game's seats play the game's roles, not ``game.role``: the first line said
    ``role player-v0`` for a mae-v0 checkpoint, whose seats play proposer, solver and judge."""
    from arena.commands.play import trained_defaults

    checkpoint = tmp_path / "run" / "checkpoints" / "step-00000001"
    checkpoint.mkdir(parents=True)
    (tmp_path / "run" / "config.yaml").write_text(
        "games:\n- id: mae-v0\n  kwargs: {num_solvers: 1}\n  roles: {judge: verifier-v0}\n"
        "- id: retail-v0\n  simulators: {user: {id: scripted-user-v0}}\n"
        "- id: nim-v0\nsampling: {max_new_tokens: 6}\n"
    )
    for game_id in ("mae-v0", "retail-v0", "nim-v0"):
        trained_defaults(str(checkpoint), game_id)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "as trained: game {'num_solvers': 1}, roles proposer=proposer-v0 solver_0=solver-v0 "
        "judge=verifier-v0 {}, replies of at most 6 tokens",
        "as trained: game {}, roles user=simulator:scripted-user-v0 agent=executor-v0 {}, "
        "replies of at most 6 tokens",
        "as trained: game {}, role player-v0 {}, replies of at most 6 tokens",
    ]


def test_a_named_policys_checkpoint_replies_as_long_as_that_policy_did(tmp_path: Path) -> None:
    """``arena play --against RUN:POLICY`` and ``arena eval`` of a named policy's checkpoint or
    adapter take that policy's own ``max_new_tokens`` (``policies.NAME.sampling``), the
    shared policy's checkpoint the run's."""
    from arena.commands.play import trained_defaults
    from arena.tournament.checkpoint_paths import checkpoint_of
    from arena.tournament.participants import policy_of, run_config_of, trained_sampling

    run_dir = tmp_path / "run"
    own = run_dir / "checkpoints" / "policies" / "responder" / "step-00000003"
    shared = run_dir / "checkpoints" / "step-00000003"
    for step in (own, shared):
        (step / "model").mkdir(parents=True)
        (step / "model" / "config.json").write_text("{}")
    (run_dir / "config.yaml").write_text(
        "model: tiny\n"
        "games: [{id: kuhn-poker-v0}]\n"
        "sampling: {temperature: 1.0, max_new_tokens: 6}\n"
        "policies:\n"
        "  responder: {model: tiny, sampling: {max_new_tokens: 12, temperature: 0.5}}\n"
        "  solver: {sampling: {max_new_tokens: 9}}\n"
        "seat_policies: {'kuhn-poker-v0:player_1': responder, player_0: solver}\n"
    )
    spec, _ = checkpoint_of(f"{run_dir}:responder")  # what `arena play` does first
    assert (spec, policy_of(spec)) == (str(own), "responder")
    assert trained_defaults(spec, "kuhn-poker-v0")[1] == 12
    assert trained_defaults(str(shared), "kuhn-poker-v0")[1] == 6
    config = run_config_of(spec)
    assert config is not None
    sampled = trained_sampling(config, spec)
    assert (sampled.max_new_tokens, sampled.temperature) == (12, 0.5)
    # an adapter on the shared base plays its policy's; the shared checkpoint the run's
    solver = shared / "adapters" / "solver"
    assert trained_sampling(config, "tiny", str(solver)).max_new_tokens == 9
    assert trained_sampling(config, str(shared)).max_new_tokens == 6
    # a policy of its own that trains an adapter: its checkpoint's adapters/shared-lora
    assert policy_of("tiny", str(own / "adapters" / "shared-lora")) == "responder"
    assert policy_of("tiny", str(tmp_path / "elsewhere" / "solver")) is None


@pytest.mark.e2e
def test_a_role_game_checkpoint_plays_against_its_runs_simulator(
    tmp_path: Path, tiny_model
) -> None:
    """The issue's case: `--seat agent` against a checkpoint of a run whose user was simulated
    seated the model as the user; the run's simulator fills that seat now, and says so."""
    model, tokenizer = tiny_model
    checkpoint = tmp_path / "run" / "checkpoints" / "step-00000001"
    model.save_pretrained(checkpoint / "model")
    tokenizer.save_pretrained(checkpoint / "model")
    (tmp_path / "run" / "config.yaml").write_text(
        "games:\n- id: retail-v0\n  simulators:\n    user: {id: scripted-user-v0}\n"
    )

    def play(*args: str) -> str:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "arena",
                "play",
                "retail-v0",
                "--against",
                str(checkpoint),
                "--seed",
                "1",
                *args,
            ],
            input="quit\n",
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    out = play("--seat", "agent")
    assert "You play agent, against simulator scripted-user-v0 (user)." in out
    # (the checkpoint's participant name is the tournament's business: matched loosely)
    assert re.search(r"note: every other seat is simulated; \S+ plays none of them", out)
    assert "simulator scripted-user-v0 (user) wrote: " in out
    # the person as the user: the model plays the agent
    out = play("--seat", "user")
    assert re.search(r"You play user, against [^ ]*step-1[^ ]* \(agent\)\.", out), out[:500]
    # --simulator names another for the seat; one the seat cannot take is refused
    out = play("--seat", "agent", "--simulator", "user=llm-user-v0")
    assert "You play agent, against simulator llm-user-v0 (user)." in out


def test_a_bot_is_checked_in_a_seat_it_plays_not_the_persons() -> None:
    """`--seat user` against the retail agent bot: the check sat the bot in the first seat, the
    person's (the user), and refused it, though it would play the agent."""
    done = arena("play", "retail-v0", "--against", "retail-agent-v0", "--seat", "user")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "You play user, against retail-agent-v0 (agent)." in done.stdout, done.stdout[:1500]
    refused = arena("play", "retail-v0", "--against", "retail-agent-v0", "--seat", "agent")
    assert refused.returncode == 2 and "needs the agent seat" in refused.stderr


def test_a_simulator_that_fails_mid_game_exits_1(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    # the game stopped with one line, but exit status 0 said it had ended
    import argparse

    import simulators
    from arena.commands import play
    from simulators.base import Simulator, SimulatorView

    class Failing(Simulator):
        async def respond(self, view: SimulatorView) -> str:
            raise RuntimeError("persona service down")

    parser = argparse.ArgumentParser()
    play.add_arguments(parser)
    args = parser.parse_args(
        ["retail-v0", "--against", "random-v0", "--seat", "agent", "--seed", "0"]
        + ["--simulator", "user=failing-test-v0"]
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("quit\n"))
    simulators.registry.register("failing-test-v0", Failing)
    try:
        status = play.run(args)
    finally:
        del simulators.registry._entries["failing-test-v0"]
    out = capsys.readouterr().out
    stopped = "simulator failing-test-v0 failed: RuntimeError('persona service down'); the game"
    assert f"{stopped} stops here" in out, out[-2000:]
    assert status == 1
