"""Checkpoints: HF-loadable, pickle-free, atomic under kill -9, and an exact resume.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_learner_checkpoint.py``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError
from synthetic import two_seat_episodes
from transformers import AutoModelForCausalLM

from arena.models import tiny_model
from trainers.checkpoint import (
    CheckpointSpaceError,
    check_space,
    checkpoint_bytes,
    latest_checkpoint,
    list_checkpoints,
    load_optimizer,
    save_optimizer,
    write_atomically,
)
from trainers.config import LearnerConfig
from trainers.learner import Learner
from trainers.learner_checkpoint import CheckpointUnreadable

ROOT = Path(__file__).resolve().parents[2]


def config(directory: Path, every: int = 2, keep: int = 3) -> LearnerConfig:
    return LearnerConfig.from_dict(
        {
            "model": "tiny",
            "optim": {"lr": 1e-3, "warmup_steps": 2, "schedule": "cosine", "total_steps": 10},
            "batch": {"micro_batch_tokens": 128, "max_seq_len": 64},
            "advantage": {"mode": "ema", "ema_alpha": 0.8},
            "checkpoint": {"dir": str(directory), "every": every, "keep": keep},
        }
    )


def batch(i: int):
    return two_seat_episodes(3, start=10 * i)


def test_resume_continues_exactly_where_the_last_checkpoint_left_off(tmp_path: Path) -> None:
    # Run A: four steps straight through.
    a = Learner(config(tmp_path / "a"))
    for i in range(4):
        a.add_episodes(batch(i))
        a.step()
    # Run B: three steps, but only step 2 was checkpointed before the "crash".
    b = Learner(config(tmp_path / "b"))
    for i in range(3):
        b.add_episodes(batch(i))
        b.step()
    assert [s for s, _ in list_checkpoints(tmp_path / "b")] == [2]
    resumed = Learner(config(tmp_path / "b"))
    assert resumed.state.step == 2  # step 3 was lost with the process; nothing is repeated
    assert resumed.add_episodes(batch(1)) == 0  # episodes seen before the checkpoint stay seen
    for i in (2, 3):  # batch 2 again: the crashed step 3 is redone once, from the same state
        assert resumed.add_episodes(batch(i)) == 3
        resumed.step()
    assert resumed.state.step == 4
    for (name, pa), pb in zip(a.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(pa, pb), name
    assert resumed.ema.baselines == a.ema.baselines


def test_a_step_asked_as_the_runs_step_keeps_a_resumed_learners_numbering(
    tmp_path: Path,
) -> None:
    # A named policy's learner that restarted alone resumes from its step-2 checkpoint while
    # the run is at step 4: its next update is the run's step 5, so its version, step and
    # checkpoint names follow the run's (checkpoints every 2: step 5 passed 4, so it saves).
    b = Learner(config(tmp_path))
    for i in range(3):
        b.add_episodes(batch(i))
        b.step()
    resumed = Learner(config(tmp_path))
    assert resumed.state.step == 2
    resumed.add_episodes(batch(3))
    turns = resumed.pending_samples
    metrics = resumed.step(at=5)
    assert metrics["step"] == metrics["version"] == 5 and resumed.version == 5
    # staleness is measured against the version it held (2), not the step's number (5)
    assert metrics["staleness_max"] == 2 and metrics["samples"] == turns
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 5]
    # Ahead of the run (the run went back to its own learner's older checkpoint): no step at
    # a number it already took; the turns wait for the step after.
    resumed.add_episodes(batch(4))
    assert resumed.step(at=4) is None and resumed.step(at=5) is None
    assert resumed.pending_samples == turns and resumed.version == 5
    assert resumed.step(at=6)["step"] == 6 and resumed.pending_samples == 0
    assert resumed.step() is None  # nothing pending


def test_a_resume_takes_the_optimizers_moments_from_the_checkpoint_and_its_settings_from_the_config(
    tmp_path: Path,
) -> None:
    # resume=RUN learner.optim.weight_decay=0.1 prints the change: the resumed optimizer must
    # use it, not the settings saved with the moments (torch's load_state_dict restores those).
    first = Learner(config(tmp_path, every=1))
    first.add_episodes(batch(0))
    first.step()
    saved = {
        n: first.optimizer.state[p]["exp_avg"].clone() for n, p in first.model.named_parameters()
    }
    changed = config(tmp_path, every=1)
    changed.optim.weight_decay, changed.optim.betas, changed.optim.eps = 0.1, [0.8, 0.95], 1e-6
    resumed = Learner(changed)
    groups = resumed.optimizer.param_groups
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]  # matrices, then vectors
    assert all(g["betas"] == (0.8, 0.95) and g["eps"] == 1e-6 for g in groups)
    for name, param in resumed.model.named_parameters():  # the moments are the saved ones
        assert torch.equal(resumed.optimizer.state[param]["exp_avg"], saved[name]), name


def test_checkpoint_is_hf_loadable_and_pickle_free(tmp_path: Path) -> None:
    learner = Learner(config(tmp_path, every=1, keep=2))
    for i in range(3):
        learner.add_episodes(batch(i))
        learner.step()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 3]  # keep = 2 pruned step 1
    path = latest_checkpoint(tmp_path)
    files = {p.name for p in path.rglob("*") if p.is_file()}
    assert {
        "optimizer.safetensors",
        "optimizer.json",
        "rng.safetensors",
        "state.json",
        "model.safetensors",
        "config.json",
    } <= files
    assert not any(f.endswith((".bin", ".pt", ".pth", ".pkl", ".pickle")) for f in files)
    hf = AutoModelForCausalLM.from_pretrained(path / "model")
    exported = learner.export_weights()
    for name, tensor in hf.state_dict().items():
        assert torch.equal(tensor, exported[name]), name


def test_optimizer_state_round_trip(tmp_path: Path) -> None:
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1, betas=(0.8, 0.9))
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    state = {
        "state": {"w": opt.state_dict()["state"][0], "b": opt.state_dict()["state"][1]},
        "param_groups": [dict(opt.state_dict()["param_groups"][0], params=["w", "b"])],
    }
    save_optimizer(tmp_path, state)
    loaded = load_optimizer(tmp_path)
    assert loaded["param_groups"][0]["betas"] == (0.8, 0.9)  # tuples survive JSON
    for param in ("w", "b"):
        for key, value in state["state"][param].items():
            assert torch.equal(loaded["state"][param][key], value)


KILLER = """
import sys, time
sys.path[:0] = [{root!r}, {tests!r}]
from synthetic import two_seat_episodes
from trainers import checkpoint
from trainers.config import LearnerConfig
from trainers.learner import Learner
from trainers.learner_checkpoint import CheckpointUnreadable

real = checkpoint.save_optimizer

def slow_save(path, state):
    real(path, state)
    if "step-00000004" in str(path):  # the second save: stall in the middle of the write
        print("MIDWRITE", flush=True)
        time.sleep(120)

checkpoint.save_optimizer = slow_save
learner = Learner(LearnerConfig.from_dict({{
    "model": "tiny", "optim": {{"lr": 1e-3}}, "batch": {{"micro_batch_tokens": 128, "max_seq_len": 64}},
    "checkpoint": {{"dir": {directory!r}, "every": 2}}}}))
for i in range(4):
    learner.add_episodes(two_seat_episodes(3, start=10 * i))
    learner.step()
    print("STEP", learner.state.step, flush=True)
"""


def test_kill_9_mid_checkpoint_leaves_the_previous_one_loadable(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    script = KILLER.format(
        root=str(ROOT), tests=str(Path(__file__).parent), directory=str(directory)
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line.strip())
            if line.startswith("MIDWRITE"):
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, lines
    assert "STEP 2" in lines and "STEP 4" not in lines
    partial = [p for p in directory.iterdir() if p.name.startswith(".tmp-")]
    assert partial, "the kill should have left a partial temporary directory"
    assert (partial[0] / "optimizer.safetensors").exists() and not (
        partial[0] / "state.json"
    ).exists()
    assert latest_checkpoint(directory).name == "step-00000002"
    resumed = Learner(
        LearnerConfig.from_dict(
            {
                "model": "tiny",
                "optim": {"lr": 1e-3},
                "batch": {"micro_batch_tokens": 128, "max_seq_len": 64},
                "checkpoint": {"dir": str(directory), "every": 1},
            }
        )
    )
    assert resumed.state.step == 2
    resumed.add_episodes(two_seat_episodes(3, start=99))
    resumed.step()
    assert latest_checkpoint(directory).name == "step-00000003"
    assert not [p for p in directory.iterdir() if p.name.startswith(".tmp-")]  # cleaned up


def test_a_damaged_checkpoint_is_refused_in_one_line_naming_it_and_the_one_before(
    tmp_path: Path,
) -> None:
    # A damaged checkpoint fails the same way at every start: it must be a refusal (exit 2,
    # not restarted), naming the checkpoint and the one to fall back to, not a bare traceback.
    learner = Learner(config(tmp_path, every=1))
    for i in range(2):
        learner.add_episodes(batch(i))
        learner.step()
    one, two = (path for _, path in list_checkpoints(tmp_path))
    weights = two / "model" / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    with pytest.raises(CheckpointUnreadable) as truncated:
        Learner(config(tmp_path, every=1))
    message = str(truncated.value)
    assert "\n" not in message and message.startswith(f"checkpoint {two} cannot be resumed")
    assert "SafetensorError" in message
    assert message.endswith(
        f"move it out of {tmp_path} to resume from step-00000001, the one before it"
    )
    (two / "state.json").unlink()  # cut short by hand: passed by, and the run is told so
    resumed = Learner(config(tmp_path, every=1))
    assert resumed.state.step == 1
    assert resumed.warnings == [
        "resuming from step-00000001, past step-00000002: incomplete (no state.json), left as "
        "they are"
    ]
    shutil.rmtree(two)  # as the message said: the one before resumes, and nothing is passed by
    assert Learner(config(tmp_path, every=1)).warnings == []
    (one / "optimizer.safetensors").unlink()  # now the only one, and partial
    with pytest.raises(CheckpointUnreadable, match="optimizer.safetensors.*start a new run$"):
        Learner(config(tmp_path, every=1))


def test_lora_checkpoint_resumes_adapters_and_exports_merged_weights(tmp_path: Path) -> None:
    def lora_config() -> LearnerConfig:
        return LearnerConfig.from_dict(
            {
                "model": "tiny",
                "optim": {"lr": 1e-2},
                "lora": {"enabled": True, "r": 4},
                "batch": {"micro_batch_tokens": 128, "max_seq_len": 64},
                "checkpoint": {"dir": str(tmp_path), "every": 2},
            }
        )

    first = Learner(lora_config())
    for i in range(2):
        first.add_episodes(batch(i))
        first.step()
    path = latest_checkpoint(tmp_path)
    assert (path / "adapter.safetensors").is_file()
    merged = first.export_weights()
    hf = AutoModelForCausalLM.from_pretrained(path / "model")  # plain transformers, no peft
    for name, tensor in hf.state_dict().items():
        assert torch.allclose(tensor, merged[name], atol=1e-6), name
    resumed = Learner(lora_config())
    assert resumed.state.step == 2
    for (name, a), b in zip(
        first.model.named_parameters(), resumed.model.parameters(), strict=True
    ):
        assert torch.equal(a, b), name
    for i in (2, 3):
        first.add_episodes(batch(i))
        resumed.add_episodes(batch(i))
        first.step()
        resumed.step()
    for (name, a), b in zip(
        first.model.named_parameters(), resumed.model.parameters(), strict=True
    ):
        assert torch.equal(a, b), name


def _free(monkeypatch, free: float) -> None:
    usage = shutil.disk_usage("/")
    monkeypatch.setattr(
        "trainers.checkpoint.shutil.disk_usage",
        lambda path: usage._replace(free=int(free)),
    )


def test_disk_space_is_checked_before_training(tmp_path: Path, monkeypatch) -> None:
    # The default model: 134.5 M weights, all trained -> 12 bytes each, 1.614 GB a checkpoint
    one = checkpoint_bytes(134_515_008, 134_515_008)
    assert one == 1_614_180_096
    _free(monkeypatch, 7e9)  # keep 3 + the one being written: 4 x 1.61 = 6.46 GB fit
    assert check_space(tmp_path, one, keep=3) is None
    _free(monkeypatch, 5e9)
    warning = check_space(tmp_path, one, keep=3)
    assert warning and "5.0 GB free" in warning and "4 checkpoints of about 1.6 GB" in warning
    _free(monkeypatch, 1e9)
    with pytest.raises(CheckpointSpaceError, match="1.0 GB free and one checkpoint takes about"):
        check_space(tmp_path, one, keep=3)
    # The learner runs the check. The tiny model's checkpoint (12 bytes a weight) fits once
    # but not keep + 1 times: it starts, and its status will carry the warning to the run.
    weights = sum(p.numel() for p in tiny_model()[0].parameters())
    tiny_one = checkpoint_bytes(weights, weights)
    _free(monkeypatch, 2 * tiny_one)
    (warning,) = Learner(config(tmp_path / "low")).warnings
    assert "checkpoints of about" in warning and "lower checkpoint.keep" in warning
    # It does not fit in 1 kB: the learner refuses to start and saves nothing.
    _free(monkeypatch, 1e3)
    with pytest.raises(CheckpointSpaceError):
        Learner(config(tmp_path / "ckpt"))
    assert list_checkpoints(tmp_path / "ckpt") == []


def test_a_save_that_fills_the_disk_is_reported_and_cleaned_up(tmp_path: Path) -> None:
    # A full disk as the OS reports it (ENOSPC), and as safetensors reports it, with its own
    # error type (seen in a run: "Error while serializing: I/O error: No space left on device
    # (os error 28)"): both must read as a full disk.
    write_atomically(tmp_path, 1, lambda out: (out / "state.json").write_text("{}"))

    def into_a_full_disk(out: Path) -> None:
        (out / "half").write_bytes(b"x" * 4096)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def as_safetensors_reports_it(out: Path) -> None:
        raise SafetensorError(
            "Error while serializing: I/O error: No space left on device (os error 28)"
        )

    for step, write in ((2, into_a_full_disk), (3, as_safetensors_reports_it)):
        with pytest.raises(CheckpointSpaceError, match=f"while saving step-0000000{step}"):
            write_atomically(tmp_path, step, write)
        assert [s for s, _ in list_checkpoints(tmp_path)] == [1]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001"]  # no partial copy
    with pytest.raises(ValueError):  # any other error passes through unchanged
        write_atomically(tmp_path, 3, lambda out: int("x"))


def test_a_step_saved_again_is_never_missing_even_killed_midway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final checkpoint saves the last step again. Moving the complete copy aside, then the
    new one in, left no ``step-N`` to a kill between the two renames: a restarted learner then
    resumed from an older checkpoint, or (``checkpoint.keep: 1``) from none. Here every rename
    is where the learner dies, just after it; the step must still be there, old or new."""
    write_atomically(tmp_path, 3, lambda out: (out / "state.json").write_text('"old"'), keep=1)
    rename = os.rename

    def killed_after(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        rename(src, dst)
        raise KeyboardInterrupt  # stands for the SIGKILL that came right after it

    monkeypatch.setattr(os, "rename", killed_after)
    with contextlib.suppress(KeyboardInterrupt):
        write_atomically(tmp_path, 3, lambda out: (out / "state.json").write_text('"new"'), keep=1)
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000003"
    assert (tmp_path / "step-00000003" / "state.json").read_text() == '"new"'
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000003"]  # the old copy removed
