"""``arena eval RUN_DIR`` and ``arena play GAME --against RUN_DIR`` take the run's newest
checkpoint and say which; ``RUN/checkpoints/step-1`` is ``step-00000001``. The run is a fake
one: two checkpoints of the tiny model and a config.

Run with `.venv/bin/python -m pytest -q tests/arena/commands/test_run_dir_paths.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import arena


@pytest.fixture
def run_dir(tmp_path: Path, tiny_model) -> Path:
    model, tokenizer = tiny_model
    run = tmp_path / "run"
    for step in (1, 2):
        checkpoint = run / "checkpoints" / f"step-{step:08d}" / "model"
        model.save_pretrained(checkpoint)
        tokenizer.save_pretrained(checkpoint)
    (run / "config.yaml").write_text(
        "model: tiny\ngames:\n- id: tictactoe-v0\nsampling: {max_new_tokens: 4}\n"
    )
    return run


@pytest.mark.e2e
def test_arena_eval_and_play_take_a_run_directorys_newest_checkpoint(run_dir: Path) -> None:
    newest = run_dir / "checkpoints" / "step-00000002"
    taken = f"{run_dir}: its newest checkpoint, step-00000002 ({newest})"
    done = arena("eval", run_dir, "--n", "1", "--opponents", "random-v0", "--concurrency", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == taken
    assert any(line.startswith("tictactoe-v0 ") and "random-v0" in line for line in lines)
    # no input: the person resigns at the first prompt, once the game has started
    done = arena("play", "tictactoe-v0", "--against", run_dir, "--seat", "first", "--seed", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == taken
    assert "as trained: " in done.stdout  # the run's config.yaml was read
    assert "Traceback" not in done.stderr


@pytest.mark.e2e
def test_arena_eval_takes_step_n_for_the_zero_padded_checkpoint(run_dir: Path) -> None:
    done = arena(
        "eval",
        run_dir / "checkpoints" / "step-1",
        "--n",
        "1",
        "--opponents",
        "random-v0",
        "--concurrency",
        "2",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step-00000001" in done.stdout.splitlines()[0]  # `evaluating run@step-1 (...)`
