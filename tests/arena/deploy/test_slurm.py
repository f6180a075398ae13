"""``arena deploy slurm``: the sbatch script (arena/deploy/slurm.py, arena/commands/deploy.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/deploy/test_slurm.py``. The script must be
valid bash, start every process of the run with the command line ``arena train`` would give it
locally, hold no secret, and, run under a stand-in ``srun`` on this machine, train the smoke
config end to end.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from arena.deploy.slurm import word
from arena.run.config import load_run_config
from arena.run.processes import actor_commands, write_configs
from arena.run.run_dir import resolve_for_run
from tests.arena.deploy.conftest import (
    ADAPTERS,
    CASES,
    adapters_of,
    comparable,
    local_inference,
)
from tests.served import served_by

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
Result = Any  # conftest.Result: (code, out, err)


def job_env(bin_dir: Path, submit_dir: Path, run_dir: Path) -> dict[str, str]:
    """The environment of a one-node Slurm job on this host, ``bin_dir`` (the stand-in
    ``srun``) first on the PATH."""
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_ID": "7",
        "SLURM_JOB_NODELIST": socket.gethostname(),
        "SLURM_SUBMIT_DIR": str(submit_dir),
        "ARENA_RUN_DIR": str(run_dir),
    }


NAMES = ["inference-0", "inference-1", "learner", "rollout-0", "rollout-1", "rollout-2"]


def steps(script: str) -> dict[str, dict[str, Any]]:
    """Process name -> its step line: group, cpus, gpus, mem, restarts, env and command."""
    found = {}
    for line in script.splitlines():
        if line.startswith("step ") and line.endswith(" &"):
            _, group, cpus, gpus, mem, name, restarts, *command = shlex.split(line[:-2])
            env = {}
            if command[0] == "env":
                command.pop(0)
                while "=" in command[0] and not command[0].startswith("-"):
                    key, _, value = command.pop(0).partition("=")
                    env[key] = value
            found[name] = {"group": group, "cpus": cpus, "gpus": gpus, "mem": mem}
            found[name] |= {"restarts": restarts, "env": env, "command": command}
    return found


@pytest.fixture
def script(deploy: Callable[..., Result], keys: Path, tmp_path: Path) -> str:
    out = tmp_path / "job.sh"
    result = deploy(
        *shlex.split(
            f"slurm {SMOKE} inference.actors=2 rollout.actors=3 --out {out} --keys {keys} "
            "--partition cpu --gpu-partition gpu --gpus-per-learner 2 --mem-per-learner 64"
        )
    )
    assert result.code == 0, result.err
    assert os.access(out, os.X_OK)
    return out.read_text()


def test_the_script_is_valid_bash_and_starts_every_process(script: str) -> None:
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    found = steps(script)
    assert list(found) == ["broker", "train", *NAMES]
    groups = {name: found[name]["group"] for name in found}
    assert groups == {
        "broker": "0",
        "train": "0",
        "inference-0": "1",
        "inference-1": "1",
        "learner": "2",
        "rollout-0": "3",
        "rollout-1": "3",
        "rollout-2": "3",
    }
    # the broker, the learner and rollout actors are started again when they die, as arena train does
    assert found["broker"]["restarts"] == "3" and found["rollout-2"]["restarts"] == "3"
    assert found["learner"]["restarts"] == "3" and found["train"]["restarts"] == "0"
    # torch threads follow the CPUs each step asks for, not the cores of the writing host
    assert found["inference-1"]["env"] == {"OMP_NUM_THREADS": "4"}
    # the learner's two torchrun ranks share its 8 CPUs (each once took all 8: 16 threads)
    assert found["learner"]["env"] == {"OMP_NUM_THREADS": "4"}


def test_a_step_that_dies_is_started_again_up_to_its_restarts(script: str, tmp_path: Path) -> None:
    """The script's own restart loop, run for real with a stand-in ``srun``: a killed learner
    (status 137) is started again up to its restarts and its last status is the step's; one
    that dies once and then ends well ends the step well."""
    step = script[script.index("step() {") : script.index("\n}\n", script.index("step() {")) + 3]

    def run(deaths: int) -> tuple[int, int, str]:
        count = tmp_path / f"srun-{deaths}"
        fake = f"srun() {{ echo x >> {count}; [ $(wc -l < {count}) -gt {deaths} ] || return 137; }}"
        done = subprocess.run(
            ["bash", "-c", f"RUN_DIR={tmp_path}\n{step}\n{fake}\nstep 2 8 0 - learner 3 arena"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return done.returncode, len(count.read_text().splitlines()), done.stderr

    code, started, said = run(deaths=9)
    assert (code, started) == (137, 4)
    assert said.splitlines() == [
        *(f"arena deploy: learner exited with status 137; restart {n} of 3" for n in (1, 2, 3)),
        "arena deploy: learner exited with status 137",
    ]
    assert run(deaths=1)[:2] == (0, 2)


def test_components_ask_for_what_each_kind_needs(script: str) -> None:
    components = script.split("#SBATCH hetjob")
    assert len(components) == 4
    train, inference, learner, rollout = components
    assert "--ntasks=2" in train and "--partition=cpu" in train and "gpus" not in train
    assert "--ntasks=2" in inference and "--gpus-per-task=1" in inference
    assert "--partition=gpu" in inference
    assert (
        "--nodes=1" in train and "--gpus-per-task=2" in learner and "--cpus-per-task=8" in learner
    )
    # each learner is a step on one node of its own choosing: a policy's learner need not find
    # room on the run's learner's node
    assert "--nodes" not in learner.split("set -euo")[0]
    assert "--mem-per-cpu=8192M" in learner  # 64 GiB over 8 CPUs
    assert "--ntasks=3" in rollout and "--cpus-per-task=2" in rollout
    assert "gpus" not in rollout.split("set -euo")[0]
    # a learner on two GPUs runs under torchrun, every rank the same arena learner
    learner_step = steps(script)["learner"]
    assert learner_step["gpus"] == "2" and learner_step["mem"] == "8192M"
    assert learner_step["command"][:6] == [
        "torchrun",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "arena",
        "-v",
    ]


def test_command_lines_are_those_arena_train_starts_locally(script: str, tmp_path: Path) -> None:
    """The learner's and the rollout actors' argv are a local run's, with the broker's host and
    the run directory filled in on the cluster; an inference actor's is the line a run prints
    for one started by hand, what it serves read from config.yaml (compared with a local run's
    in test_inference_actors_serve_what_a_local_run_would)."""
    local_dir = tmp_path / "local"
    config = load_run_config(SMOKE, ["inference.actors=2", "rollout.actors=3"])
    local = {c.name: c for c in actor_commands(config, local_dir)}
    address = f"ipc://{local_dir.resolve()}/bus.sock"
    found = steps(script)
    for name in ("inference-0", "inference-1"):
        assert found[name]["command"] == [
            "arena",
            "-v",
            "inference",
            "--address",
            "tcp://${BROKER_HOST}:5555",
            "--config",
            "${RUN_DIR}/config.yaml",
            "--actor-name",
            name,
        ]
    for name in NAMES[2:]:
        argv = list(local[name].argv)
        expected = [
            word(a)
            .replace(address, 'tcp://"${BROKER_HOST}":5555')
            .replace(str(local_dir), '"${RUN_DIR}"')
            for a in argv
        ]
        command = found[name]["command"]
        launcher_at = command.index("-v")
        assert shlex.join(command[launcher_at:]) == shlex.join(shlex.split(" ".join(expected)))
    train = found["train"]["command"]
    # the config as arena deploy read it, written beside the script: an edit of the file while
    # the job waits in the queue does not reach it (the steps written here would not match it)
    frozen = tmp_path / "job.config.yaml"
    assert train[:3] == ["arena", "train", str(frozen)]
    written = load_run_config(frozen)
    assert written == replace(config, resume=None)
    assert (written.inference.actors, written.rollout.actors) == (2, 3)  # the overrides in it
    assert "rollout.actors=0" in train and "inference.actors=0" in train
    assert "start_learner=false" in train and "run_dir=${RUN_DIR}" in train
    assert "wait.rollout_actors=3" in train and "wait.inference_actors=2" in train
    assert "bus.address=tcp://${BROKER_HOST}:5555" in train


@pytest.mark.parametrize("case", list(CASES))
def test_inference_actors_serve_what_a_local_run_would(
    deploy: Callable[..., Result], tmp_path: Path, case: str
) -> None:
    """Each inference step's command line, resolved by the code ``arena inference`` runs
    against the config.yaml the job's ``arena train`` writes (from the script's own train
    line), serves what the same actor of a local ``arena train`` serves: policy name, model,
    adapters, default adapter, seed and every setting."""
    config, *overrides = CASES[case]
    script = tmp_path / "job.sh"
    result = deploy("slurm", str(ROOT / config), *overrides, "--out", str(script), "--insecure")
    assert result.code == 0, result.err
    found = steps(script.read_text())
    run_dir = (tmp_path / "run").resolve()
    run_dir.mkdir()

    def on_node(arg: str) -> str:
        return arg.replace("${RUN_DIR}", str(run_dir)).replace("${BROKER_HOST}", "node-0")

    train = [on_node(a) for a in found["train"]["command"]]
    assert train[:2] == ["arena", "train"]
    # what the job's arena train does before it waits for the actors (arena/run/train.py)
    resolved = resolve_for_run(load_run_config(train[2], train[3:]), run_dir, write=False)
    write_configs(resolved, run_dir)
    cluster = {
        name: served_by([on_node(a) for a in step["command"][3:]])
        for name, step in found.items()
        if name.startswith("inference-")
    }
    for name in cluster:
        assert found[name]["command"][:3] == ["arena", "-v", "inference"]
    local = local_inference(CASES[case], run_dir)
    assert list(cluster) == list(local) == list(ADAPTERS[case])
    for name, config in cluster.items():
        assert comparable(config) == comparable(local[name]), name
    assert adapters_of(cluster, run_dir) == ADAPTERS[case]


FAKE_ARENA = """#!/bin/bash
# arena, for the start order: `train` writes the files arena train writes before it waits for
# the actors (after a pause); every other command notes which of them it found when it started
if [ "$1" = train ]; then
  sleep 1
  mkdir -p "$ARENA_RUN_DIR/adapters/shared-lora"
  touch "$ARENA_RUN_DIR/adapters/shared-lora/adapter_config.json"
  touch "$ARENA_RUN_DIR/config.yaml" "$ARENA_RUN_DIR/learner.yaml"
  sleep 1
  exit 0
fi
if [ "$1" = broker ]; then exit 0; fi
found=""
for file in config.yaml learner.yaml adapters/shared-lora/adapter_config.json; do
  if [ -e "$ARENA_RUN_DIR/$file" ]; then found="$found $file"; fi
done
echo "$2:$found" >>"$ARENA_RUN_DIR/started"
"""


def test_each_step_starts_once_the_files_it_reads_are_written(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    """The script run under stand-ins for srun and arena (a few seconds): an inference actor
    serving the shared policy's adapter starts only once arena train has written config.yaml
    and that adapter, the learner once learner.yaml, a rollout actor once config.yaml."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "scontrol").write_text("#!/bin/bash\nhostname\n")
    (bin_dir / "arena").write_text(FAKE_ARENA)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    out = tmp_path / "job.sh"
    selfplay = str(ROOT / "configs" / "selfplay.yaml")
    fake = str(bin_dir / "arena")
    result = deploy("slurm", selfplay, "--out", str(out), "--insecure", "--arena", fake)
    assert result.code == 0, result.err
    text = out.read_text()
    assert 'wait_for "${RUN_DIR}"/config.yaml "${RUN_DIR}"/adapters/shared-lora/' in text
    assert text.count("wait_for() {") == 1 and text.count("until [ -e") == 1  # one wait
    run_dir = tmp_path / "run"
    env = job_env(bin_dir, tmp_path, run_dir)
    job = subprocess.run(
        ["bash", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert job.returncode == 0, job.stderr
    notes = run_dir / "started"

    def lines() -> list[str]:
        return notes.read_text().splitlines() if notes.exists() else []

    deadline = time.monotonic() + 10  # the last steps run in the background
    while len(lines()) < 4:  # inference, learner, two rollout actors
        assert time.monotonic() < deadline, lines()
        time.sleep(0.05)
    started = dict(line.split(":") for line in lines())
    adapter = "adapters/shared-lora/adapter_config.json"
    assert "config.yaml" in started["inference"] and adapter in started["inference"]
    assert "learner.yaml" in started["learner"]
    assert "config.yaml" in started["rollout"]


def test_the_script_holds_the_keys_path_and_no_secret(
    script: str, keys: Path, secrets: list[str]
) -> None:
    assert f"export ARENA_KEYS={keys.resolve()}" in script
    assert len(secrets) == 2
    for secret in secrets:
        assert secret not in script
    assert "ARENA_INSECURE" not in script
    assert 'ARENA_ADVERTISE_HOST="$(hostname)"' in script


def test_insecure_and_routing_are_exported(deploy: Callable[..., Result], tmp_path: Path) -> None:
    out = tmp_path / "job.sh"
    result = deploy("slurm", SMOKE, "bus.routing=brokered", "--out", str(out), "--insecure")
    assert result.code == 0 and "INSECURE" in result.err
    text = out.read_text()
    assert "export ARENA_INSECURE=1" in text and "export ARENA_ROUTING=brokered" in text
    assert "ARENA_KEYS" not in text


FAKE_SRUN = """#!/bin/bash
# srun on this machine: drop the options, run the command here, its output to --output
out=/dev/stdout
while [ $# -gt 0 ]; do
  case "$1" in
    --output=*) out="${1#--output=}"; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
exec "$@" >>"$out" 2>&1
"""


def stop_group(pgid: int) -> None:
    """Stop the steps left of the job (its own process group): in Slurm, the job's end
    stops them."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:  # until the group is gone, 2 s at most
                os.killpg(pgid, 0)
                time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.e2e
def test_the_script_trains_the_smoke_config_under_a_stand_in_srun(
    deploy: Callable[..., Result], keys: Path, tmp_path: Path
) -> None:
    """The whole job on this machine: ``srun`` runs each step here and ``scontrol`` names this
    host, so the bus runs over tcp to this host's name with keys, as between nodes, with the
    default routing (peer to peer).
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "scontrol").write_text("#!/bin/bash\nhostname\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    out = tmp_path / "job.sh"
    result = deploy(
        *shlex.split(
            f"slurm {SMOKE} --out {out} --keys {keys} --port {free_port()} "
            "--gpus-per-inference 0 --gpus-per-learner 0 --cpus-per-inference 1 "
            "--cpus-per-learner 1"
        ),
        "--arena",
        f"{sys.executable} -m arena",
    )
    assert result.code == 0, result.err
    run_dir = tmp_path / "run"
    env = job_env(bin_dir, tmp_path, run_dir)
    env.pop("ARENA_KEYS", None)
    # output to a file: the steps still running when the job ends hold it open
    with open(tmp_path / "job.out", "w") as job_out:
        output_to = {"stdout": job_out, "stderr": subprocess.STDOUT}
        job = subprocess.Popen(
            ["bash", str(out)], cwd=tmp_path, env=env, start_new_session=True, **output_to
        )
        try:
            job.wait(timeout=400)
        finally:
            stop_group(job.pid)
    output = (tmp_path / "job.out").read_text()
    logs = {p.name: p.read_text()[-2000:] for p in (run_dir / "logs").glob("*.log")}
    assert job.returncode == 0, (output, logs)
    assert "arena train exited with status 0" in output
    assert (run_dir / "eval_summary.md").exists()
    assert (run_dir / "config.yaml").exists() and (run_dir / "checkpoints").is_dir()
    kinds = ("broker", "train", "inference-0", "learner", "rollout-0", "rollout-1")
    assert set(logs) == {f"{kind}.log" for kind in kinds}
