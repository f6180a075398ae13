"""`arena train` end to end on configs/smoke.yaml: real processes, the tiny model.

These runs take tens of seconds each (process start-up and model loading dominate).

Run with ``.venv/bin/python -m pytest -q tests/arena/commands/test_train.py``.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaForCausalLM

from arena.models import tiny_model
from arena.run.addresses import local_address
from tests.cli import arena

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
NO_EVAL = ("eval.games=0", "eval.exploitability=false")
"""Overrides for a run whose test reads no evaluation: none before, during or after training."""


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "arena", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )


def run_dir_of(output_dir: Path) -> Path:
    dirs = sorted((output_dir / "smoke").iterdir())
    assert len(dirs) == 1, dirs
    return dirs[0]


def metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    """Until ``predicate()``, at most ``timeout`` seconds; with ``proc`` (the run), fail at once
    with its output when it has ended instead (a run that died at start is not waited out)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"{what}: the run ended (exit {proc.returncode})\n{out[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.5)


def rollout_pids(run_dir: Path, index: int) -> list[int]:
    """The processes of rollout actor ``index`` of the run in ``run_dir``."""
    return [
        p
        for p in pids_of(f"--index {index}")
        if str(run_dir) in Path(f"/proc/{p}/cmdline").read_text()
    ]


def pids_of(pattern: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if pattern in cmdline:
                found.append(int(pid))
    return found


@pytest.mark.e2e
def test_smoke_run_end_to_end(tmp_path: Path) -> None:
    # smoke.yaml reads no strategy; this run does, for the plot of its exploitability below
    result = arena("train", SMOKE, f"output_dir={tmp_path}", "eval.exploitability=true")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = run_dir_of(tmp_path)
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["episodes"] >= 8 for r in rows)
    assert all("learner/loss" in r and "invalid_rate/tictactoe-v0/player" in r for r in rows)
    checkpoint = sorted((run_dir / "checkpoints").glob("step-*"))[-1]
    model = AutoModelForCausalLM.from_pretrained(checkpoint / "model")  # HF format, no conversion
    assert model.config.num_hidden_layers == 2
    # The tiny model never writes a legal move, before training or after two steps at lr 1e-4:
    # each of the 4 games per evaluation is a forfeit after one bad reply and one retry. So the
    # invalid rate is 8/8 replies, whose Wilson 95% interval is [0.6756, 1] (by hand: centre
    # (1 + z^2/16) / (1 + z^2/8) = 0.8378, half-width z sqrt(z^2/256) / (1 + z^2/8) = 0.1622),
    # and the score against random is 0 in every game.
    summary = json.loads((run_dir / "eval_summary.json").read_text())
    for game in ("tictactoe-v0", "kuhn-poker-v0"):
        row = summary[game]
        assert row["games_per_eval"] == 4
        for when in ("before", "after"):
            assert row[f"invalid_rate_{when}"] == 1.0, row
            assert row[f"invalid_rate_{when}_ci"] == pytest.approx([0.6756, 1.0], abs=1e-4)
            assert row[f"score_vs_random_{when}"] == 0.0, row
    table = (run_dir / "eval_summary.md").read_text()
    # under 10 games an interval is printed as "n too small" (the JSON keeps it)
    assert "| tictactoe-v0 | invalid rate | 1.000 (n too small) | 1.000 (n too small) | no |" in (
        table
    )
    transcript = json.loads((run_dir / "transcripts.jsonl").read_text().splitlines()[0])
    assert transcript["turns"] and "text" in transcript["turns"][0]
    assert "episodes/s" in result.stdout
    assert not pids_of(str(run_dir)), "children outlived the run"
    # arena plot reads every kind of evals.jsonl line of the run (its strategy lines have no
    # step of their own: it crashed on them before)
    plotted = arena("plot", str(run_dir))
    assert plotted.returncode == 0, plotted.stderr[-3000:]
    assert "left out" not in plotted.stderr, plotted.stderr
    pngs = {p.name for p in (run_dir / "plots").glob("*.png")}
    assert {"reward.png", "win_rate.png", "invalid_rate.png", "exploitability.png"} <= pngs


@pytest.mark.e2e
def test_an_async_run_steps_without_skipping_and_checkpoints(tmp_path: Path) -> None:
    # Only the stepping differs from the sync run above, so this run evaluates nothing. A learner
    # that also stepped on its own (as a standalone one does past batch_samples) would take
    # batches the trainer then finds missing, and skip step numbers. (A hung inference actor of
    # an async run: tests/bench/test_chaos.py.) Its opponents are a population of past
    # checkpoints: the stream's first orders, sent while the first opponent was still being
    # loaded, once went without one and played the fixed bot (random-v0).
    result = arena(
        "train", SMOKE, f"output_dir={tmp_path}", "mode=async", "learner.batch.batch_samples=1",
        "opponents.mode=population", "opponents.latest_prob=0.0", "rollout.transcripts_every=1",
        *NO_EVAL,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = run_dir_of(tmp_path)
    transcripts = [
        json.loads(line) for line in (run_dir / "transcripts.jsonl").read_text().splitlines()
    ]
    untrained = {p for t in transcripts for p in t["seats"].values() if p != "main"}
    assert untrained and all(p.startswith("pool@") for p in untrained), untrained
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["episodes"] > 0 and "learner/loss" in r for r in rows)
    assert [p.name for p in sorted((run_dir / "checkpoints").glob("step-*"))][-1] == "step-00000002"
    assert "episodes/s" in result.stdout
    assert not pids_of(str(run_dir)), "children outlived the run"


def test_dry_run_prints_plan_and_bad_config_fails_first(tmp_path: Path) -> None:
    ok = arena("train", SMOKE, "--dry-run")
    assert ok.returncode == 0 and "rollout x2" in ok.stdout and "tictactoe-v0" in ok.stdout
    # overrides may come after a flag (argparse's nargs="*" used to swallow or refuse them)
    for argv in (
        ("--dry-run", "steps=3", "rollout.actors=1"),
        ("steps=3", "--dry-run", "rollout.actors=1"),
    ):
        mixed = arena("train", SMOKE, *argv)
        assert mixed.returncode == 0, mixed.stderr
        assert "3 steps" in mixed.stdout and "rollout x1" in mixed.stdout
    bad = arena("train", SMOKE, "rollout.concurency=3", f"output_dir={tmp_path}")
    assert bad.returncode == 2 and "rollout.concurrency" in bad.stderr
    assert not (tmp_path / "smoke").exists()  # nothing started


def test_dry_run_builds_each_simulator_with_its_kwargs() -> None:
    tools = str(ROOT / "configs" / "smoke_tools.yaml")  # user: scripted-user-v0, latency 0.5
    # a new simulator id drops the old one's kwargs (llm-user-v0 takes no latency)
    ok = arena("train", tools, "--dry-run", "games.0.simulators.user.id=llm-user-v0")
    assert ok.returncode == 0, ok.stderr
    bad = arena("train", tools, "--dry-run", "games.0.simulators.user.kwargs.bogus=1")
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("arena train: bad config: games[retail-v0].simulators.user: ")
    assert "unexpected keyword argument 'bogus'" in lines[0]


@pytest.mark.e2e
def test_resume_after_kill_continues_without_lost_or_repeated_steps(tmp_path: Path) -> None:
    proc = start("train", SMOKE, f"output_dir={tmp_path}", "steps=4", *NO_EVAL)
    try:
        wait_for(lambda: (tmp_path / "smoke").exists(), 60, "no run directory", proc=proc)
        run_dir = run_dir_of(tmp_path)
        wait_for(lambda: len(metrics(run_dir)) >= 2, 300, "two steps never finished", proc=proc)
        proc.send_signal(signal.SIGKILL)  # the launcher dies; its children follow it
        proc.wait()
    finally:
        proc.kill()
    wait_for(lambda: not pids_of(str(run_dir)), 30, "children outlived a killed launcher")
    saved = sorted(int(p.name.split("-")[1]) for p in (run_dir / "checkpoints").glob("step-*"))
    assert saved and saved[-1] >= 1
    logged = [r["step"] for r in metrics(run_dir)]
    resumed = arena("train", f"resume={run_dir}")  # no CONFIG: the run's own config.yaml
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    rows = metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    # steps the checkpoint held but the killed launcher never logged are marked, not invented
    recovered = [r["step"] for r in rows if r.get("recovered")]
    assert all(logged[-1] < s <= saved[-1] for s in recovered), (logged, saved, recovered)
    assert "learner/loss" in rows[-1]
    assert (run_dir / "eval_summary.json").exists()


@pytest.mark.e2e
def test_population_mode_plays_the_shared_policy_against_its_past_checkpoints(
    tmp_path: Path,
) -> None:
    """Without named policies the pool actor loads a drawn checkpoint's whole model; the
    opponent's turns carry the version it serves, which is the drawn step's number. Kuhn played
    by choice reaches both seats in every hand."""
    result = arena(
        "train",
        SMOKE,
        f"output_dir={tmp_path}",
        "steps=3",
        "seed=16",  # draws the initial model, then step 1's, then the initial one again
        "games=[{id: kuhn-poker-v0, act: choice, role_kwargs: {prefill: true}}]",
        "opponents.mode=population",
        "opponents.latest_prob=0.0",
        "rollout.transcripts_every=1",
        *NO_EVAL,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = run_dir_of(tmp_path)
    transcripts = [
        json.loads(line) for line in (run_dir / "transcripts.jsonl").read_text().splitlines()
    ]
    assert len(transcripts) == 3
    opponent_turns, labels = 0, []
    for transcript in transcripts:
        seats = transcript["seats"]
        (trained,) = [a for a, p in seats.items() if p == "main"]  # one trained seat
        for seat, policy in seats.items():
            if seat == trained:
                continue
            label = policy.removesuffix(" (not trained)")
            labels.append(label)
            step = 0 if label == "pool@initial" else int(label[-1])
            turns = [t for t in transcript["turns"] if t["seat"] == seat]
            assert all(t["version"] == step and not t["trained"] for t in turns), turns
            opponent_turns += len(turns)
    assert labels == ["pool@initial", "pool@step-00000001", "pool@initial"]
    assert opponent_turns > 0


@pytest.mark.e2e
def test_population_mode_draws_opponents_from_past_checkpoints(tmp_path: Path) -> None:
    """Population play with Kuhn's first seat on a LoRA adapter on the shared base and its
    second on a trained model of its own (played by choice, so every episode reaches both
    seats): the trained seat plays its own policy's current weights, and the other seat its
    own policy's snapshot of the drawn step, the adapter from the shared pool actor, the model
    of its own from its pool actor (inference-pool-second), checkpointed by its own learner.
    Seed 16 draws the initial snapshots, then step 1's, then the initial ones again, which the
    pool actors serve as version 0 while the trained seat plays version 2
    (arena/run/population.py)."""
    result = arena(
        "train",
        SMOKE,
        f"output_dir={tmp_path}",
        "steps=3",
        "seed=16",
        "games=[{id: kuhn-poker-v0, act: choice, role_kwargs: {prefill: true}}]",
        "policies={first: {}, second: {model: tiny}}",
        "seat_policies={player_0: first, player_1: second}",
        "learner.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}",
        "opponents.mode=population",
        "opponents.latest_prob=0.0",
        "rollout.transcripts_every=1",
        *NO_EVAL,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "inference-pool-second serves policy:pool-second" in result.stdout
    run_dir = run_dir_of(tmp_path)
    transcripts = [
        json.loads(line) for line in (run_dir / "transcripts.jsonl").read_text().splitlines()
    ]
    assert len(transcripts) == 3
    drawn = ["initial", "step-00000001", "initial"]
    # the current seat's record, and the drawn snapshot's, per policy
    current = {"first": "main@first", "second": "second"}
    snapshot = {"first": "pool@{}@first", "second": "pool-second@{}"}
    for step, (transcript, label) in enumerate(zip(transcripts, drawn, strict=True)):
        seats = transcript["seats"]
        own = {"player_0": "first", "player_1": "second"}
        (trained,) = [a for a, p in seats.items() if not p.endswith("(not trained)")]
        (other,) = set(seats) - {trained}
        # each seat plays its own policy: the trained one current, the other the drawn snapshot
        assert seats[trained] == current[own[trained]]
        assert seats[other] == snapshot[own[other]].format(label) + " (not trained)"
        turns = transcript["turns"]
        assert {t["seat"] for t in turns} == {trained, other}
        for turn in turns:  # only the trained seat's turns are trained, on this step's weights
            mine = turn["seat"] == trained
            assert turn["trained"] is mine
            assert turn["version"] == (step if mine else 0 if label == "initial" else 1), turn
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert (run_dir / "checkpoints" / "policies" / "second" / "step-00000001" / "model").is_dir()
    # both seats are drawn to train over the run: the adapter by the run's learner, the model
    # of its own by its own (learner-second)
    assert sum(m.get("learner/policy/first/turns", 0) for m in steps) > 0
    assert sum(m.get("learner/second/adv/kuhn-poker-v0/player_1/count", 0) for m in steps) > 0


def sometimes_legal_model(path: Path) -> Path:
    """A tiny model (saved as an HF directory) whose replies name a Tic-Tac-Toe cell now and
    then, whatever the board, and which training can teach to do so more often. The random tiny
    model never writes a legal move, so every attempt from one start plays out alike and no
    advantage mode could find a spread; this one wins, loses and forfeits by chance, as a real
    policy does.

    It is a bigram model: the blocks write nothing and each token embeds as one of three unit
    rows (the prompt's last token ``>``, a digit, anything else), so the next token depends on
    the current one only. After the prefilled ``<answer>`` it writes a digit 1-9 with
    probability 0.5 (else mostly the end of turn); after a digit, the end of turn with 0.5 (else
    mostly another digit). About a quarter of its replies are one digit and the end, a move.
    """
    base, tokenizer = tiny_model(0)
    config = base.config
    config.tie_word_embeddings = False
    model = LlamaForCausalLM(config)
    digits = [tokenizer.encode(d, add_special_tokens=False)[0] for d in "123456789"]
    (prompt_end,) = tokenizer.encode(">", add_special_tokens=False)
    end = tokenizer.eos_token_id
    unit = math.sqrt(config.hidden_size)  # RMSNorm(one-hot row) = sqrt(hidden) on that row
    others = len(tokenizer) - 10

    def logit(p: float) -> float:  # for probability p against the other tokens' 5% together
        return math.log(p * others / 0.05) / unit

    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
        embed, head = model.model.embed_tokens.weight, model.lm_head.weight
        embed[:, 2] = 1.0
        embed[prompt_end] = torch.eye(config.hidden_size)[0]
        for digit in digits:
            embed[digit] = torch.eye(config.hidden_size)[1]
            head[digit, 0] = logit(0.5 / 9)
            head[digit, 1] = logit(0.45 / 9)
        head[end, 0] = logit(0.45)
        head[end, 1] = logit(0.5)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


TICTACTOE_ONLY = (
    "games=[{id: tictactoe-v0, kwargs: {max_retries: 1}, role_kwargs: {prefill: true}}]"
)


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["group", "broadcast"])
def test_group_advantages_carry_signal(tmp_path: Path, mode: str) -> None:
    # GRPO groups of 4 attempts per (seed, seat), no shaping, gamma 1: the only spread is that
    # between attempts from one start, so non-zero advantages (and turns that survive the
    # zero-advantage filter) prove the groups span episodes. With a group per episode (the old
    # ``episode:seat`` id) every advantage was 0 and every turn was filtered.
    model = sometimes_legal_model(tmp_path / "model")
    result = arena(
        "train",
        SMOKE,
        f"output_dir={tmp_path}",
        f"model={model}",
        TICTACTOE_ONLY,
        f"learner.advantage.mode={mode}",
        "rollout.group_size=4",
        "rollout.episodes_per_step=16",
        "learner.batch.filter_zero_advantage=true",
        "learner.batch.batch_samples=1",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = metrics(run_dir_of(tmp_path))
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["episodes"] == 16 for r in rows)
    assert all(r["invalid_rate/tictactoe-v0/player"] < 1 for r in rows)  # some moves are legal
    # Per advantage key: the default key separates the two seats of a self-play game.
    seats = {k.split("/")[3] for r in rows for k in r if k.startswith("learner/adv/tictactoe-v0/")}
    assert seats and seats <= {"player_0", "player_1"}, seats
    assert any(
        r[f"{adv}/std"] > 0 and r[f"{adv}/max"] > 0 > r[f"{adv}/min"]
        for r in rows
        for adv in (f"learner/adv/tictactoe-v0/{seat}" for seat in seats)
        if f"{adv}/std" in r
    ), rows
    trained = [r["learner/samples"] for r in rows]
    assert sum(trained) > 0 and all(r["learner/tokens"] > 0 for r in rows if r["learner/samples"])
    assert all(r.get("learner/filtered/zero_advantage", 0) < r["learner/turns"] for r in rows)


@pytest.mark.e2e
def test_training_lowers_the_invalid_rate(tmp_path: Path) -> None:
    # An honest problem a few steps can move: each invalid reply is penalised on its own turn
    # (gamma 0: a turn's return is its own reward), and the model above can learn to write a
    # digit after <answer> and to stop after it. Sampling is seeded per run, so the run repeats;
    # the margin leaves room for the last bits of float32 on another CPU.
    model = sometimes_legal_model(tmp_path / "model")
    result = arena(
        "train",
        SMOKE,
        f"output_dir={tmp_path}",
        f"model={model}",
        "games=[{id: tictactoe-v0, kwargs: {max_retries: 0}, role_kwargs: {prefill: true}}]",
        "steps=4",
        "checkpoint_every=100",
        "rollout.actors=1",
        "rollout.episodes_per_step=16",
        "rollout.invalid_penalty=1.0",
        "learner.advantage.gamma=0",
        "learner.optim.lr=5e-2",
        *NO_EVAL,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    invalid = [r["invalid_rate/tictactoe-v0/player"] for r in metrics(run_dir_of(tmp_path))]
    assert len(invalid) == 4 and invalid[0] > 0.6, invalid
    assert invalid[-1] < invalid[0] - 0.2, invalid


@pytest.mark.e2e
def test_a_rollout_actor_started_by_hand_is_the_async_runs_only_one(tmp_path: Path) -> None:
    # rollout.actors=0 (once a division by zero in async mode): the run starts none and waits
    # for one, here started by hand with the run's own config.yaml, under an index of its own,
    # through the run's own broker.
    run_dir = tmp_path / "run"
    proc = start(
        "train", SMOKE, f"run_dir={run_dir}", "mode=async", "rollout.actors=0", "steps=3", *NO_EVAL
    )  # fmt: skip
    lines: list[str] = []
    announced = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "waiting up to" in line:
                announced.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    joiner = None
    try:
        # joined only once the run has said how to join: a joiner already on the bus when the
        # run first looks leaves it nothing to wait for, and nothing to say
        assert announced.wait(120), "".join(lines)[-3000:]
        joiner = start(
            "rollout",
            "--connect",
            local_address(run_dir),
            "--config",
            str(run_dir / "config.yaml"),
            "--index",
            "5",
        )
        proc.wait(timeout=600)
        reader.join(timeout=30)
    finally:
        proc.kill()
        if joiner is not None:
            joiner.terminate()
            joiner.wait(timeout=30)
    out = "".join(lines)
    assert proc.returncode == 0, out[-3000:]
    assert "arena rollout --connect" in out  # it said how to join
    assert [r["step"] for r in metrics(run_dir)] == [1, 2, 3]
    transcripts = (run_dir / "transcripts.jsonl").read_text().splitlines()
    assert transcripts and all(json.loads(t)["id"].startswith("rollout-5-") for t in transcripts)
    assert not list((run_dir / "logs").glob("rollout-*.log"))  # the run started none


def run_logs(run_dir: Path, out: str) -> str:
    """The end of the run's output, its event log and every child's log: what a failure shows."""
    parts = [f"--- arena train output\n{out[-3000:]}"]
    for path in [run_dir / "events.log", *sorted((run_dir / "logs").glob("*.log"))]:
        if path.exists():
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")
    return "\n".join(parts)
