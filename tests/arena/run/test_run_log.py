"""The run log's console line for a learner step.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_run_log.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.run.config import load_run_config
from arena.run.run_log import RunLog, update_text

ROOT = Path(__file__).resolve().parents[3]


def test_a_step_shows_its_loss_and_entropy() -> None:
    assert update_text({"loss": -0.15649, "entropy": 0.4491, "samples": 24.0}) == (
        "loss -0.1565  entropy 0.449"
    )
    assert update_text({"loss": 0.5}) == "loss 0.5000"


def test_a_step_that_trained_nothing_says_why_instead_of_a_nan_loss() -> None:
    # A GRPO batch whose groups had no spread: every turn's advantage was 0.
    metrics = {"samples": 0.0, "filtered/zero_advantage": 64.0, "filtered/overlong": 0.0}
    assert update_text(metrics) == "no update (64 turns filtered: zero_advantage 64)"
    both = {"filtered/zero_advantage": 60.0, "filtered/stale": 4.0}
    assert update_text(both) == "no update (64 turns filtered: stale 4, zero_advantage 60)"
    assert update_text({}) == "no update"


def test_a_per_state_step_shows_its_states_move_and_entropy() -> None:
    metrics = {"per_state/states": 12.0, "per_state/target_move": 0.0523, "entropy": 0.4419}
    assert update_text(metrics) == "per-state step: 12 states, target move 0.052  entropy 0.442"
    # a step whose states were all seen once moved nothing: it says so like any other
    assert update_text({"per_state/states": 0.0}) == "no update"


def test_a_command_line_to_copy_is_printed_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The waiting message's command lines (arena/run/roster.py) once came out of a log cut at
    # 200 columns, "--keys" on one line and its directory on the next: pasted, the actor ran
    # without keys. A "[...]" in a path is no markup either.
    log = RunLog(tmp_path, load_run_config(ROOT / "configs" / "smoke.yaml"))
    line = (
        "  inference-pool serving policy:pool: arena inference --connect tcp://10.0.0.7:5555 "
        f"--config {'/shared/runs' * 12}/config.yaml --actor-name inference-pool "
        "--keys /shared/[team]/keys"
    )
    assert len(line) > 250
    capsys.readouterr()
    log.verbatim(f"waiting up to 600s for actors to join at tcp://10.0.0.7:5555:\n{line}")
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "waiting up to 600s for actors to join at tcp://10.0.0.7:5555:",
        line,
    ]


def test_the_summary_is_printed_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # printed as markup, "infos[seat]['metrics']" came out as "infos['metrics']"
    log = RunLog(tmp_path, load_run_config(ROOT / "configs" / "smoke.yaml"))
    capsys.readouterr()
    log.finish(
        "a role game puts numbers in infos[seat]['metrics']", episodes_per_s=1.0, mode="sync"
    )
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "a role game puts numbers in infos[seat]['metrics']"


def test_a_resume_drops_a_last_row_cut_short_and_keeps_the_others(tmp_path) -> None:
    """A run whose disk filled wrote part of its last row (tmpfs: up to a page boundary) and
    ended; its resume then failed with a JSONDecodeError reading metrics.jsonl (the overlap
    chaos run on kuhn_lora.yaml). The cut row is dropped and named; a step the checkpoint holds
    gets a ``recovered`` row, as when the launcher died before logging it."""
    import json

    from arena.run.config import RunConfig

    metrics = tmp_path / "metrics.jsonl"
    whole = [{"step": 1, "learner/loss": 0.5}, {"step": 2, "learner/loss": 0.25}]
    cut = '{"step": 3, "learner/loss": 0.1, "learner/adv/kuhn-poker-v0/player_1/min"'
    metrics.write_text("".join(json.dumps(r) + "\n" for r in whole) + cut)
    RunLog(tmp_path, RunConfig()).resume_at(3)  # the checkpoint holds step 3
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [
        *whole,
        {"step": 3, "recovered": True},
    ]
    assert (
        "metrics.jsonl: its last row was cut short (73 characters"
        in (tmp_path / "events.log").read_text()
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == [
        "events.log",
        "metrics.jsonl",
    ]
    # a whole last row whose newline alone is missing is kept
    metrics.write_text(json.dumps(whole[0]) + "\n" + json.dumps(whole[1]))
    RunLog(tmp_path, RunConfig()).resume_at(2)
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == whole


def test_a_file_a_resume_reads_is_replaced_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # eval_before.json, which a resumed run reuses, was written in place: a disk that filled
    # mid-write left half a JSON list, and the resume failed reading it.
    from arena.run.run_log import replace_text

    target = tmp_path / "eval_before.json"
    target.write_text('[{"game": "kuhn-poker-v0"}]')
    write_text = Path.write_text

    def full_disk(self: Path, text: str, *args: object, **kwargs: object) -> int:
        write_text(self, text[: len(text) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError, match="No space left"):
        replace_text(target, '[{"game": "leduc-holdem-v0"}, {"game": "nim-v0"}]')
    monkeypatch.undo()
    assert target.read_text() == '[{"game": "kuhn-poker-v0"}]'  # the old one, whole
    assert [p.name for p in tmp_path.iterdir()] == ["eval_before.json"]  # nothing beside it
    replace_text(target, "[]")
    assert target.read_text() == "[]"


def test_a_resume_drops_every_row_that_is_not_one_and_names_it(tmp_path: Path) -> None:
    """A row cut short that later appends followed (a full disk that freed up), a line that is
    no JSON object or has no integer step: each is dropped and named by its line number, the
    rows around it kept, and its step marked recovered; the resume stopped on a JSONDecodeError
    or a KeyError. The run's end reads the log again for its staleness line: no error there."""
    import json

    from arena.run.config import RunConfig

    metrics = tmp_path / "metrics.jsonl"
    one = {"step": 1, "learner/staleness_max": 1.0, "learner/staleness_p50": 0.0}
    three = {"step": 3, "learner/staleness_max": 2.0, "learner/staleness_p50": 1.0}
    metrics.write_text(
        json.dumps(one) + "\n" + '{"step": 2, "learner/lo{"step": 2}\n'
        "[1, 2]\n"
        '{"step": "4"}\n' + json.dumps(three) + "\n\xff\n"
    )
    log = RunLog(tmp_path, RunConfig())
    assert log.staleness() == {
        "staleness_p50": 0.5,
        "staleness_max": 2.0,
        "stale_rejected": 0.0,
        "stale_downweighted": 0.0,
    }
    log.resume_at(3)
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [
        one,
        {"step": 2, "recovered": True},
        three,
    ]
    events = (tmp_path / "events.log").read_text()
    for number, shown in ((2, '\'{"step": 2, "learner/lo{"step": 2}\''), (3, "'[1, 2]'")):
        assert f"metrics.jsonl: line {number} is not a row of metrics" in events
        assert f"integer step): {shown}; dropped" in events
    assert "line 4 is not a row" in events and "line 6 is not a row" in events


@pytest.mark.parametrize("saved", ['[{"game": "kuhn', '{"game": "kuhn-poker-v0"}', "\xff"])
def test_a_saved_evaluation_that_cannot_be_read_is_kept_aside_and_read_as_none(
    tmp_path: Path, saved: str
) -> None:
    # `arena train resume=` failed with a JSONDecodeError traceback on a damaged
    # eval_before.json; now the run goes on as one with no saved evaluation (step 0 evaluates
    # again, a trained policy says the summary has no before column) and the file is kept.
    from arena.run.config import RunConfig

    (tmp_path / "eval_before.json").write_text(saved, errors="surrogateescape")
    assert RunLog(tmp_path, RunConfig()).load_eval("before") is None
    assert not (tmp_path / "eval_before.json").exists()
    assert (tmp_path / "eval_before.json.damaged").read_text(errors="surrogateescape") == saved
    event = (tmp_path / "events.log").read_text()
    assert "eval_before.json cannot be read (" in event
    assert "moved to eval_before.json.damaged and read as no saved evaluation" in event
