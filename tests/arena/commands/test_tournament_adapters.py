"""Run: .venv/bin/python -m pytest -q tests/arena/commands/test_tournament_adapters.py

LoRA adapters as participants of ``arena tournament`` and ``arena eval``, as a user runs them
(real processes, the tiny model): a base and two adapters of a run's steps play each other
through one inference actor, each playing as itself; an adapter made for another base is
refused before any match, naming the participant and both bases, in one line and exit 2.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.arena.tournament.adapter_dirs import make_adapter
from tests.cli import arena

GAME = "games: [{id: tictactoe-v0, kwargs: {max_retries: 1}}]\n"
EVAL = ["--games", "tictactoe-v0", "--opponents", "random-v0", "--n", "4", "--act", "choice"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run's checkpoints with a solver adapter at steps 4 and 8 (unlike each other and the
    base), and one made for another base."""
    root = tmp_path_factory.mktemp("adapters")
    for seed, step in ((1, 4), (2, 8)):
        make_adapter(root / f"run/checkpoints/step-{step:08d}/adapters/solver", seed=seed)
    make_adapter(root / "foreign" / "solver", base="smollm2-135m")
    return root


def refused_in_one_line(done: subprocess.CompletedProcess, *parts: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "bad config" in line]
    for part in parts:
        assert part in line, line


@pytest.mark.e2e
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_base_and_two_adapters_play_each_other_on_one_actor(
    run_dir: Path, tmp_path: Path, dtype: str
) -> None:
    config = tmp_path / "adapters.yaml"
    early = run_dir / "run/checkpoints/step-00000004/adapters/solver"
    config.write_text(
        "participants:\n"
        f"  - {{model: tiny, act: choice, dtype: {dtype}}}\n"
        f"  - {{model: tiny, act: choice, dtype: {dtype}, adapter: {early}}}\n"
        f"  - {{name: late, model: tiny, act: choice, dtype: {dtype}, adapter: {early.parent.parent.parent}"
        "/step-00000008/adapters/solver}\n" + GAME + "pairs: 1\n"
    )
    out = tmp_path / "out"
    done = arena("tournament", str(config), f"out={out}")
    assert done.returncode == 0, done.stderr
    assert "tiny+solver@step-4 (hf model tiny + adapter" in done.stdout
    # one base in memory: a single inference actor serves the base and both adapters
    # (and the preload server it was forked from)
    assert sorted(p.name for p in (out / "logs").iterdir()) == [
        "broker.log",
        "inference-model-0.log",
        "preload.log",
    ]
    records = [json.loads(line) for line in (out / "matches.jsonl").read_text().splitlines()]
    names = {"tiny", "tiny+solver@step-4", "late"}
    assert {tuple(r["seats"]) for r in records} == {(a, b) for a in names for b in names if a != b}
    assert all(r["forfeit"] is None and r["invalid"] == [0, 0] for r in records)
    games = {
        tuple(r["seats"]): (r["moves"], tuple(r["scores"]), tuple(r["tokens"])) for r in records
    }
    # greedy choosers play one game per seating; were two participants the same policy (an
    # adapter not applied), their games against the third would be the same game. In bfloat16
    # too: the adapters' branch is computed and added in float32 (arena/models/lora.py)
    for x, y in (("tiny", "tiny+solver@step-4"), ("tiny", "late"), ("tiny+solver@step-4", "late")):
        (z,) = names - {x, y}
        assert games[(x, z)] != games[(y, z)] or games[(z, x)] != games[(z, y)], (x, y)
    assert set(json.loads((out / "ratings.json").read_text())["ratings"]) == names


def test_an_adapter_for_another_base_is_refused_before_any_match(
    run_dir: Path, tmp_path: Path
) -> None:
    config = tmp_path / "foreign.yaml"
    config.write_text(
        "participants:\n"
        "  - {name: random, bot: random-v0}\n"
        f"  - {{name: foreign, model: tiny, adapter: {run_dir / 'foreign' / 'solver'}}}\n" + GAME
    )
    out = tmp_path / "out"
    done = arena("tournament", str(config), f"out={out}")
    refused_in_one_line(
        done,
        "participant 'foreign'",
        "made for base model 'smollm2-135m', but the served base is 'tiny'",
    )
    assert not (out / "matches.jsonl").exists()
    bot = arena("tournament", str(config), "participants.0.adapter=x", f"out={out}")
    refused_in_one_line(bot, "participants[0] ('random')", "needs a model")


@pytest.mark.e2e
def test_eval_plays_an_adapter_on_its_base(run_dir: Path, tmp_path: Path) -> None:
    adapter = run_dir / "run/checkpoints/step-00000004/adapters/solver"
    done = arena("eval", "--model", "tiny", "--adapter", str(adapter), *EVAL, "--json", str(tmp_path / "a.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"evaluating tiny+solver@step-4 (hf model tiny + adapter {adapter})" in done.stdout
    base = arena("eval", "tiny", *EVAL, "--json", str(tmp_path / "base.json"))
    assert base.returncode == 0, base.stderr
    (by_adapter,) = json.loads((tmp_path / "a.json").read_text())
    (by_base,) = json.loads((tmp_path / "base.json").read_text())
    assert by_adapter["games"] == by_base["games"] == 4
    assert by_adapter != by_base  # the same seeds, another policy


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (
            ["--model", "tiny", "--adapter", "{foreign}"],
            ["participant 'tiny+solver'", "made for base model 'smollm2-135m', but the served base is 'tiny'"],
        ),
        (["tiny", "--adapter", "{missing}"], ["no adapter directory"]),
        (["minimax-v0", "--adapter", "{foreign}"], ["('minimax-v0')", "needs a model"]),
        (["tiny", "--model", "tiny"], ["either as PARTICIPANT or as --model SPEC (got both)"]),
    ],
)  # fmt: skip
def test_eval_refuses_a_bad_adapter_in_one_line(
    run_dir: Path, args: list[str], parts: list[str]
) -> None:
    paths = {"foreign": run_dir / "foreign" / "solver", "missing": run_dir / "missing"}
    done = arena("eval", *(a.format(**paths) for a in args), "--games", "tictactoe-v0")
    refused_in_one_line(done, *parts)
