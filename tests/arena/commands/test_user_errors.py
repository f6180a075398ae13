"""A user's mistakes on the command line end in one line and exit status 2, never a traceback:
malformed YAML names its file, line and column; an unknown id names the nearest registered
ones. Nothing starts, so these are cheap.

Run with `.venv/bin/python -m pytest -q tests/arena/commands/test_user_errors.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import arena

MALFORMED = "name: x\nsteps: [1, 2\nmodel: tiny\n"
"""An unclosed list: PyYAML reports it at line 3, column 6."""


def refused(*args: str | Path) -> str:
    """The one line a refused command writes on stderr (exit 2)."""
    done = arena(*args)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def malformed(tmp_path: Path) -> Path:
    path = tmp_path / "malformed.yaml"
    path.write_text(MALFORMED)
    return path


def test_arena_train_names_the_line_of_malformed_yaml_and_the_nearest_id(malformed: Path) -> None:
    line = refused("train", malformed)
    assert line.startswith(f"arena train: bad config: {malformed}:3:6: malformed YAML: ")
    assert "while parsing a flow sequence at line 2, column 8" in line
    line = refused("train", "configs/smoke.yaml", "--dry-run", "games.0.id=tictacto-v0")
    assert "unknown game 'tictacto-v0'; did you mean 'tictactoe-v0'" in line


def test_arena_tournament_names_the_line_of_malformed_yaml_and_the_nearest_id(
    malformed: Path, tmp_path: Path
) -> None:
    line = refused("tournament", malformed)
    assert line.startswith(f"arena tournament: bad config: {malformed}:3:6: malformed YAML: ")
    config = tmp_path / "tournament.yaml"
    config.write_text(
        "participants:\n  - {name: r, bot: random-v0}\n  - {name: m, bot: minimax-v0}\n"
        "games: [{id: tictacto-v0}]\npairs: 1\n"
    )
    line = refused("tournament", config, f"out={tmp_path / 'out'}")
    assert line.startswith("arena tournament: unknown game 'tictacto-v0'; did you mean ")
    line = refused("tournament", config, "games.0.id=tictactoe-v0", "participants.1.bot=minimx-v0")
    assert (
        line
        == "arena tournament: bad config: participant 'm': no bot 'minimx-v0'; did you mean 'minimax-v0'?"
    )
    assert not (tmp_path / "out").exists()


def test_arena_eval_names_the_line_of_malformed_yaml_and_the_nearest_id(tmp_path: Path) -> None:
    # eval reads the config.yaml of the run a checkpoint comes from
    checkpoint = tmp_path / "run" / "checkpoints" / "step-00000001"
    checkpoint.mkdir(parents=True)
    (tmp_path / "run" / "config.yaml").write_text(MALFORMED)
    line = refused("eval", checkpoint)
    assert line.startswith(
        f"arena eval: bad config: {tmp_path / 'run' / 'config.yaml'}:3:6: malformed YAML: "
    )
    line = refused("eval", "random-v0", "--opponents", "randm-v0")
    assert line.startswith("arena eval: unknown bot 'randm-v0'; did you mean 'random-v0'")
    line = refused("eval", "random-v0", "--games", "tictacto-v0")
    assert line.startswith("arena eval: unknown game 'tictacto-v0'; did you mean 'tictactoe-v0'")
    # --act choice on a free-text game: refused before the model loads (it loaded first)
    done = arena("eval", "tiny", "--games", "retail-v0", "--act", "choice")
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.strip() == (
        "arena eval: bad config: games.retail-v0: act: choice needs a game that lists its legal "
        "actions, but retail-v0 takes free text (seats user, agent); use act: generate"
    )
    # --act with a bot, --tries on player games alone: refused, not ignored
    assert refused("eval", "random-v0", "--act", "choice") == (
        "arena eval: bad config: --act choice says how a model acts; bot 'random-v0' plays its own"
    )
    assert refused("eval", "random-v0", "--games", "nim-v0", "--tries", "3") == (
        "arena eval: bad config: --tries 3: pass^k is measured on a role game's tasks; nim-v0 "
        "play games against --opponents (raise --n)"
    )
    # a glob over checkpoints names several models: one line, not a traceback (ValueError)
    for step in (1, 2):
        model = tmp_path / "glob" / "checkpoints" / f"step-{step:08d}" / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
    pattern = str(tmp_path / "glob" / "checkpoints" / "step-*")
    assert refused("eval", pattern) == (
        f"arena eval: bad config: {pattern!r} names 2 models (checkpoint@step-1, "
        "checkpoint@step-2): arena eval evaluates one; pick one, or play them all in "
        "arena tournament"
    )


def test_an_actor_started_before_its_broker_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """No broker at the address: one line naming it, exit 1 (not 2: started again once the
    broker is up, the same command works), not a traceback. In process, with the actor's
    registration bound cut from 10 s to 1 s; the socket and the wait are real."""
    import socket

    from arena.bus.actor import Actor
    from arena.cli import main

    start = Actor.start

    async def quick(self: Actor, timeout: float = 10.0) -> None:
        await start(self, timeout=1.0)

    monkeypatch.setattr(Actor, "start", quick)
    monkeypatch.delenv("ARENA_KEYS", raising=False)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    capsys.readouterr()
    assert main(["echo", f"tcp://127.0.0.1:{port}"]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    # a broker with keys drops a handshake without them, silently: the line says so too (it once
    # sent a hand-started actor with the wrong keys to start a broker already running)
    assert lines[-1] == (
        f"arena echo: no broker answered at tcp://127.0.0.1:{port} within 1s: "
        "start the broker first (arena broker); if the broker is up, it may require CURVE "
        "keys: pass --keys DIR (the directory of `arena keys generate`)"
    )
    assert not any("Traceback" in line for line in lines)
    from arena.bus.keys import generate_keys

    generate_keys(tmp_path / "keys")
    monkeypatch.setenv("ARENA_KEYS", str(tmp_path / "keys"))  # what --keys sets
    assert main(["echo", f"tcp://127.0.0.1:{port}"]) == 1
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("if the broker is up, it may not allow these keys (its authorized/ directory)")
    )


def test_arena_train_without_its_config_and_a_misspelt_argument(tmp_path: Path) -> None:
    # an override where CONFIG goes says CONFIG comes first, not "no file named steps=3"
    assert refused("train", "steps=3") == (
        "arena train: bad config: 'steps=3' is an override, but the first argument is the run's "
        "CONFIG file: arena train CONFIG [key=value ...], e.g. arena train configs/smoke.yaml "
        "steps=3"
    )
    # resume=RUN needs no CONFIG (the run's saved config.yaml is used): RUN itself is checked
    assert refused("train", f"resume={tmp_path / 'nope'}", "--dry-run") == (
        f"arena train: bad config: resume={tmp_path / 'nope'}: no such directory"
    )
    # a game's or role's argument it does not take names the nearest one it does
    line = refused("train", "configs/smoke.yaml", "--dry-run", "games.1.role_kwargs.prefil=true")
    assert line.endswith("unexpected keyword argument 'prefil'; did you mean 'prefill'?"), line


def test_a_mistyped_flag_is_one_line_naming_the_nearest(capsys: pytest.CaptureFixture[str]) -> None:
    from arena.cli import main

    for argv, line in (
        (
            ["train", "configs/smoke.yaml", "--dryrun"],
            "arena train: unrecognized arguments: --dryrun; did you mean '--dry-run'? "
            "(see arena train --help)",
        ),
        (
            ["play", "tictactoe-v0"],
            "arena play: the following arguments are required: --against (see arena play --help)",
        ),
    ):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 2
        assert capsys.readouterr().err == line + "\n"


def test_arena_inference_names_weights_it_cannot_load_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A checkpoint whose model.safetensors was cut short (a copy or a disk that failed): the
    # actor died with safetensors' traceback (exit 1, so a launcher started it again to fail the
    # same way). In process: the model fails to load before any bus is touched.
    from arena.cli import main
    from arena.models import tiny_model

    model, tokenizer = tiny_model(seed=0)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    capsys.readouterr()  # the save's progress bar
    argv = ["inference", "--address", f"ipc://{tmp_path}/bus.sock", "--model", str(tmp_path)]
    assert main([*argv, "--device", "cpu", "--dtype", "float32"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"arena inference: cannot start: cannot load {tmp_path} on backend hf (SafetensorError: "
        "Error while deserializing header: incomplete metadata, file not fully covered): it is "
        "damaged, or no model this backend reads"
    )
