"""``arena deploy`` refuses bad input with exit code 2 and a message that names it.

Run with ``.venv/bin/python -m pytest -q tests/arena/deploy/test_command.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from arena.run.config import load_run_config
from arena.run.processes import actor_commands
from tests.served import served_by

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
Result = Any  # conftest.Result: (code, out, err)


@pytest.mark.parametrize("target", ["slurm", "k8s"])
def test_an_unknown_config_key_is_named(
    deploy: Callable[..., Result], keys: Path, tmp_path: Path, target: str
) -> None:
    out = tmp_path / "out"
    result = deploy(target, SMOKE, "rollout.actorz=3", "--out", str(out), "--keys", str(keys))
    assert result.code == 2
    assert "rollout.actorz" in result.err and "rollout.actors" in result.err  # did you mean
    assert not out.exists()


@pytest.mark.parametrize("target", ["slurm", "k8s"])
def test_no_keys_and_no_insecure_is_refused(
    deploy: Callable[..., Result], tmp_path: Path, target: str
) -> None:
    out = tmp_path / "out"
    result = deploy(target, SMOKE, "--out", str(out))
    assert result.code == 2
    assert "not loopback" in result.err
    assert "--keys DIR" in result.err and "--insecure" in result.err
    assert "arena keys generate" in result.err
    assert not out.exists()


def test_a_secret_key_others_may_read_is_refused(
    deploy: Callable[..., Result], keys: Path, tmp_path: Path
) -> None:
    (keys / "client.key_secret").chmod(0o644)
    result = deploy("k8s", SMOKE, "--out", str(tmp_path / "out"), "--keys", str(keys))
    assert result.code == 2 and "chmod 600" in result.err


def test_a_public_key_of_garbage_is_refused_before_it_is_shipped(
    deploy: Callable[..., Result], keys: Path, tmp_path: Path
) -> None:
    # It was written into the job (the Secret, the script's key path): the broker then refused
    # to start on the cluster, after the queue.
    (keys / "authorized" / "client.key").write_bytes(b"garbage")
    out = tmp_path / "out"
    result = deploy("k8s", SMOKE, "--out", str(out), "--keys", str(keys))
    assert result.code == 2 and not out.exists()
    assert (
        f"cannot load the public keys in {keys / 'authorized'}: client.key is not a public key"
        in result.err
    )


def test_a_missing_key_directory_is_refused(deploy: Callable[..., Result], tmp_path: Path) -> None:
    result = deploy("slurm", SMOKE, "--out", str(tmp_path / "x.sh"), "--keys", str(tmp_path / "no"))
    assert result.code == 2 and "does not exist" in result.err


def test_flags_of_the_other_target_are_refused(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    result = deploy("slurm", SMOKE, "--out", str(tmp_path / "x.sh"), "--insecure", "--image", "i")
    assert result.code == 2 and "--image" in result.err
    result = deploy("k8s", SMOKE, "--out", str(tmp_path / "d"), "--insecure", "--partition", "p")
    assert result.code == 2 and "--partition" in result.err


def test_a_relative_run_dir_and_a_bad_name_are_refused(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    result = deploy("slurm", SMOKE, "--out", str(tmp_path / "x.sh"), "--insecure", "--run-dir", "r")
    assert result.code == 2 and "absolute" in result.err
    result = deploy("k8s", SMOKE, "--out", str(tmp_path / "d"), "--insecure", "--name", "Bad name!")
    assert result.code == 2 and "--name" in result.err


def test_a_k8s_run_dir_off_the_shared_volume_is_refused(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    # /tmp/x in each pod is a directory of its own: the train pod never saw the learner's
    # checkpoints, and a pool actor none of them
    out = tmp_path / "d"
    flags = ["--out", str(out), "--insecure", "--image", "i:1", "--volume-claim", "v"]
    result = deploy("k8s", SMOKE, *flags, "--run-dir", "/tmp/x")
    assert result.code == 2 and "--run-dir /tmp/x: not under /arena/runs" in result.err
    result = deploy("k8s", SMOKE, "run_dir=/arena/runs-old/x", *flags)
    assert result.code == 2 and "run_dir /arena/runs-old/x: not under /arena/runs" in result.err
    assert not out.exists()
    assert deploy("k8s", SMOKE, *flags, "--run-dir", "/arena/runs/x").code == 0


@pytest.mark.parametrize("target", ["slurm", "k8s"])
def test_settings_the_deployment_overrules_are_refused(
    deploy: Callable[..., Result], tmp_path: Path, target: str
) -> None:
    # both were once taken and overruled on the cluster: its arena train started a Ray instance
    # of its own with nothing to place, and its broker replaced the one named
    out = tmp_path / "out"
    result = deploy(target, SMOKE, "launcher=ray", "--out", str(out), "--insecure")
    assert result.code == 2 and "launcher=ray: arena deploy starts every process" in result.err
    result = deploy(target, SMOKE, "bus.address=tcp://b:5555", "--out", str(out), "--insecure")
    assert result.code == 2 and "bus.address=tcp://b:5555: arena deploy starts" in result.err
    assert not out.exists()


def test_resume_is_refused(deploy: Callable[..., Result], tmp_path: Path) -> None:
    result = deploy("slurm", SMOKE, "resume=runs/x", "--out", str(tmp_path / "x.sh"), "--insecure")
    assert result.code == 2 and "resume" in result.err


def test_an_unknown_game_is_refused_before_anything_is_written(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "x.sh"
    result = deploy("slurm", SMOKE, "games.0.id=tictactoe-v9", "--out", str(out), "--insecure")
    assert result.code == 2 and "tictactoe-v9" in result.err
    assert not out.exists()


def test_a_device_left_auto_asks_for_a_gpu_and_says_so(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    script = tmp_path / "job.sh"
    result = deploy("slurm", SMOKE, "--out", str(script), "--insecure")
    assert result.code == 0, result.err
    assert (
        "note: inference.device and learner.device are auto: asking 1 GPU per inference and "
        "learner process" in result.err
    )
    assert "--gpus-per-inference 0 --gpus-per-learner 0" in result.err
    assert "--gpus-per-task=1" in script.read_text()  # what the note says is what it asks
    # a device the config names, or GPUs a flag gives, need no note
    named = deploy(
        "slurm",
        SMOKE,
        "inference.device=cpu",
        "--gpus-per-learner",
        "0",
        "--out",
        str(script),
        "--insecure",
    )
    assert named.code == 0, named.err
    assert "note:" not in named.err and "--gpus-per-task=1" not in script.read_text()


def test_k8s_warns_of_the_default_image_and_of_checkpoints_without_a_volume(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    bare = deploy("k8s", SMOKE, "--out", str(tmp_path / "a"), "--insecure")
    assert bare.code == 0, bare.err
    assert "warning: no --image: the pods run arena:latest" in bare.err
    assert "warning: no --volume-claim" in bare.err
    assert "checkpoints die with the learner's pod" in bare.err
    given = deploy(
        "k8s",
        SMOKE,
        "--out",
        str(tmp_path / "b"),
        "--insecure",
        "--image",
        "reg/arena:1",
        "--volume-claim",
        "runs",
    )
    assert given.code == 0, given.err
    assert "warning" not in given.err


def test_each_model_of_a_run_gets_its_inference_and_learner_processes(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    two = str(ROOT / "configs" / "two_models.yaml")
    population = "opponents.mode=population"  # and the pool actors (the shared base's, its own)
    result = deploy(
        "k8s", two, "model=tiny", population, "--out", str(tmp_path / "k8s"), "--insecure"
    )
    assert result.code == 0, result.err
    assert "5 inference, 2 learner" in result.out
    # arena train, the coordinator, starts none of them beside the cluster's (same names)
    coordinator = yaml.safe_load((tmp_path / "k8s" / "01-config.yaml").read_text())
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text(coordinator["data"]["config.yaml"])
    config = load_run_config(tmp_path / "run" / "config.yaml")
    assert actor_commands(config, tmp_path / "run") == []
    config_map = (tmp_path / "k8s" / "01-config.yaml").read_text()
    # the responder's learner reads the file arena train would write for it
    assert "  learner-responder.yaml: |" in config_map
    learners = (tmp_path / "k8s" / "30-learner.yaml").read_text()
    assert "/etc/arena/config/learner-responder.yaml" in learners
    inference = (tmp_path / "k8s" / "20-inference.yaml").read_text()
    names = ["inference-0", "inference-pool", "inference-responder", "inference-judge"]
    names.append("inference-pool-responder")
    assert re.findall(r"--actor-name\n\s+- (\S+)", inference) == names
    script = tmp_path / "job.sh"
    result = deploy("slurm", two, "model=tiny", population, "--out", str(script), "--insecure")
    assert result.code == 0, result.err
    text = script.read_text()
    assert "--name learner-responder --config" in text and "learner-responder.yaml" in text
    assert re.findall(r"--actor-name (\S+)", text) == names


def test_k8s_paths_in_the_run_directory_are_the_run_directorys_not_the_mounted_configs(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    """The config files are mounted at /etc/arena/config; the adapter a policy's inference
    actor serves and its learner's checkpoints are in the run directory."""
    two = str(ROOT / "configs" / "two_models.yaml")
    run_dir = Path("/arena/runs") / tmp_path.name  # on the pods' shared volume
    result = deploy(
        "k8s",
        two,
        "model=tiny",
        "policies.responder.lora={r: 4}",
        "--run-dir",
        str(run_dir),
        "--out",
        str(tmp_path / "k8s"),
        "--insecure",
        "--volume-claim",
        "runs",
    )
    assert result.code == 0, result.err
    adapter = f"{run_dir}/adapters/policies/responder/shared-lora"
    files = yaml.safe_load((tmp_path / "k8s" / "01-config.yaml").read_text())["data"]
    mounted = tmp_path / "etc"  # what inference-responder serves, read from the ConfigMap
    mounted.mkdir()
    (mounted / "config.yaml").write_text(files["config.yaml"])
    argv = ["--connect", "tcp://b:1", "--config", str(mounted / "config.yaml")]
    assert served_by([*argv, "--actor-name", "inference-responder"]).adapters == {
        "shared-lora": adapter
    }
    responder = yaml.safe_load(files["learner-responder.yaml"])
    assert responder["checkpoint"]["dir"] == f"{run_dir}/checkpoints/policies/responder"
    run = yaml.safe_load(files["config.yaml"])
    assert run["run_dir"] == str(run_dir)
    # the adapters are named, not written on this host: the cluster's arena train writes them
    assert not run_dir.exists()
    shared = deploy("k8s", SMOKE, "learner.lora.enabled=true", "--run-dir", str(run_dir),
                    "--out", str(tmp_path / "k8s"), "--insecure", "--volume-claim", "r")  # fmt: skip
    assert shared.code == 0, shared.err
    files = yaml.safe_load((tmp_path / "k8s" / "01-config.yaml").read_text())["data"]
    section = yaml.safe_load(files["config.yaml"])["inference"]
    assert section["adapters"] == {"shared-lora": f"{run_dir}/adapters/shared-lora"}
    assert not run_dir.exists()


@pytest.mark.parametrize("target", ["slurm", "k8s"])
def test_a_simulators_policy_no_process_serves_is_named(
    deploy: Callable[..., Result], tmp_path: Path, target: str
) -> None:
    # the cluster's arena train waited wait.timeout for policy:frozen, which no step started,
    # and the job failed without a word at deploy time
    user_tool_use = str(ROOT / "configs" / "user_tool_use.yaml")
    frozen = "games.0.simulators.user:={id: llm-user-v0, policy: frozen}"
    flags = ["--out", str(tmp_path / "out"), "--insecure", "--image", "i:1"][
        : 5 if target == "k8s" else 3
    ]
    result = deploy(target, user_tool_use, frozen, *flags)
    assert result.code == 0, result.err
    broker = (
        "tcp://BROKER_HOST:5555" if target == "slurm" else "tcp://arena-user-tool-use-broker:5555"
    )
    assert (
        "warning: policy:frozen (the simulator of retail-v0.user) is served by no process this "
        f"writes: the run waits 600s (wait.timeout) for one, started on the cluster: arena "
        f"inference --connect {broker} --name frozen --model CHECKPOINT_OR_MODEL"
    ) in result.err
    assert "warning: policy:" not in deploy(target, user_tool_use, *flags).err  # scripted: none
