"""A run as one heterogeneous Slurm job: ``arena deploy slurm`` writes its ``sbatch`` script.

Why a heterogeneous job: each kind of process needs different hardware (the learner and the
inference actors GPUs, the rollout actors a few CPUs, the broker and ``arena train`` little),
and a heterogeneous job asks for each separately in one allocation that starts as a whole.
Component 0 holds the broker and ``arena train`` (the coordinator; the job's first node is the
broker's host), 1 the inference actors, 2 the learner, 3 the rollout actors. Every process is
one ``srun`` step of its own (``--exact``: only the CPUs and GPUs it asks for), so each gets its
own log (``RUN_DIR/logs/<name>.log``) and a step that dies is seen alone. The inference
actors, the learner and the rollout actors start once ``arena train`` has written the files
each reads as it starts (:attr:`Process.reads`: its ``--config``, an inference actor's initial
adapters).

The script starts the same command lines ``arena train`` starts locally (the caller gives them,
from :func:`arena.run.processes.actor_commands`); only two things are known on the cluster
alone, the broker's host and the run directory, and they stand in the command lines as the
markers :data:`BROKER_HOST_MARK` and :data:`RUN_DIR_MARK`, written out as ``${BROKER_HOST}`` and
``${RUN_DIR}``. Each step exports ``ARENA_ADVERTISE_HOST`` as its node's host name, the address
other nodes reach its actor at. The keys travel as a path (``ARENA_KEYS``): no secret is ever
written into the script.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from arena.deploy.spec import Deployment, Process, Resources

RUN_DIR_MARK = "/@ARENA_RUN_DIR@"
"""Stands for the run directory in command lines (absolute, so that nothing resolves it)."""
BROKER_HOST_MARK = "@ARENA_BROKER_HOST@"
"""Stands for the broker's host (the job's first node) in command lines."""
_MARKS = {RUN_DIR_MARK: "RUN_DIR", BROKER_HOST_MARK: "BROKER_HOST"}
_SPLIT = re.compile("(" + "|".join(re.escape(m) for m in _MARKS) + ")")

GROUPS = {"broker": 0, "train": 0, "inference": 1, "learner": 2, "rollout": 3}
"""Kind -> heterogeneous job component."""


@dataclass(frozen=True)
class SlurmOptions:
    """What only Slurm asks: where the job runs and where the run directory is."""

    run_dir: str | None = None
    """An absolute run directory, or None: ``runs_under/slurm-<job id>``."""
    runs_under: str = "runs"
    """Parent of the default run directory; relative to the directory ``sbatch`` ran in."""
    partition: str | None = None
    gpu_partition: str | None = None
    """Partition of the components that ask for GPUs (default: ``partition``)."""
    account: str | None = None
    time: str | None = None
    setup: list[str] = field(default_factory=list)
    """Shell lines run first (``module load ...``, ``source .venv/bin/activate``): every step
    inherits their environment."""


def word(token: str) -> str:
    """``token`` as one shell word, its markers expanded by the shell and nothing else."""
    parts = [p for p in _SPLIT.split(token) if p]
    if not parts:
        return "''"
    return "".join(f'"${{{_MARKS[p]}}}"' if p in _MARKS else shlex.quote(p) for p in parts)


def words(tokens: list[str]) -> str:
    return " ".join(word(t) for t in tokens)


def _component(kind: str, count: int, res: Resources, options: SlurmOptions) -> list[str]:
    """The ``#SBATCH`` lines of one component: ``count`` tasks of ``res`` each."""
    partition = options.gpu_partition if res.gpus and options.gpu_partition else options.partition
    flags = [f"--ntasks={count}", f"--cpus-per-task={res.cpus}"]
    if kind == "train":  # the broker's host is the first node: the coordinator's too
        flags.insert(0, "--nodes=1")
    if res.gpus:
        flags.append(f"--gpus-per-task={res.gpus}")
    if res.memory_gb:
        flags.append(f"--mem-per-cpu={_mem_per_cpu(res)}")
    if partition:
        flags.append(f"--partition={partition}")
    return [f"#SBATCH {flag}" for flag in flags]


def _mem_per_cpu(res: Resources) -> str:
    return f"{-(-(res.memory_gb or 0) * 1024 // res.cpus)}M"


def _step(process: Process, deployment: Deployment) -> str:
    """The line that starts ``process`` as a step in the background."""
    kind = process.kind
    res = deployment.resources[kind if kind != "broker" else "train"]
    cpus = 1 if kind == "broker" else res.cpus
    gpus = 0 if kind == "broker" else res.gpus
    mem = _mem_per_cpu(res) if res.memory_gb else "-"
    env = [f"{key}={value}" for key, value in sorted(process.env.items())]
    head = f"step {GROUPS[kind]} {cpus} {gpus} {mem} {process.name} {process.max_restarts}"
    argv = [*env, *deployment.launcher_for(process), *process.argv]
    if env:
        argv.insert(0, "env")
    return f"{head} {words(argv)} &"


STEP_FUNCTION = r"""# step GROUP CPUS GPUS MEM NAME RESTARTS COMMAND...: COMMAND as an srun step on a node of
# component GROUP, logged to $RUN_DIR/logs/NAME.log, advertising the node's host name to its
# peers; started again up to RESTARTS times when it fails.
step() {
  local group=$1 cpus=$2 gpus=$3 mem=$4 name=$5 restarts=$6 attempt=0 status=0
  shift 6
  local flags=(--het-group="$group" --nodes=1 --ntasks=1 --exact --cpus-per-task="$cpus"
    --job-name="$name" --output="$RUN_DIR/logs/$name.log" --open-mode=append)
  if [ "$gpus" -gt 0 ]; then flags+=(--gpus-per-task="$gpus"); fi
  if [ "$mem" != "-" ]; then flags+=(--mem-per-cpu="$mem"); fi
  while :; do
    if srun "${flags[@]}" bash -c 'export ARENA_ADVERTISE_HOST="$(hostname)"; exec "$@"' \
      "$name" "$@"; then
      return 0
    else
      status=$?
    fi
    if [ "$attempt" -ge "$restarts" ]; then
      echo "arena deploy: $name exited with status $status" >&2
      return "$status"
    fi
    attempt=$((attempt + 1))
    echo "arena deploy: $name exited with status $status; restart $attempt of $restarts" >&2
  done
}
"""


WAIT_FUNCTION = r"""# wait_for FILE...: until arena train has written every FILE (config.yaml, learner.yaml, the
# initial adapters: all written before it waits for the actors); the job ends if it ended first.
wait_for() {
  local file
  for file in "$@"; do
    until [ -e "$file" ]; do
      if ! kill -0 "$TRAIN" 2>/dev/null; then
        echo "arena deploy: arena train ended early: see $RUN_DIR/logs/train.log" >&2
        exit 1
      fi
      sleep 2
    done
  done
}
"""


def render(deployment: Deployment, options: SlurmOptions) -> str:
    """The ``sbatch`` script that runs ``deployment`` (see the module docstring)."""
    d = deployment
    head = [
        "#!/bin/bash",
        f"# Written by `arena deploy slurm`: run {d.name!r} as one heterogeneous job.",
        "# Submit with `sbatch` from a directory on the filesystem every node shares; see",
        "# docs/deploy.md. Components: 0 broker + arena train, 1 inference, 2 learner, 3 rollout.",
        f"#SBATCH --job-name={d.name}",
        f"#SBATCH --output={d.name}-%j.out",
    ]
    if options.account:
        head.append(f"#SBATCH --account={options.account}")
    if options.time:
        head.append(f"#SBATCH --time={options.time}")
    for index, kind in enumerate(("train", "inference", "learner", "rollout")):
        if index:
            head.append("#SBATCH hetjob")
        count = 2 if kind == "train" else len(d.of_kind(kind))  # train: the broker beside it
        head += _component(kind, count, d.resources[kind], options)
    lines = [*head, "", "set -euo pipefail", *options.setup, ""]
    lines += _variables(d, options)
    lines += ["", STEP_FUNCTION.rstrip(), "", WAIT_FUNCTION.rstrip(), ""]
    lines += _body(d)
    return "\n".join(lines) + "\n"


def _variables(d: Deployment, options: SlurmOptions) -> list[str]:
    if options.run_dir:
        default = shlex.quote(options.run_dir)
    else:
        under = options.runs_under.rstrip("/")
        base = shlex.quote(under) if under.startswith("/") else f"$SLURM_SUBMIT_DIR/{under}"
        default = f"{base}/slurm-$SLURM_JOB_ID"
    nodes = "${SLURM_JOB_NODELIST_HET_GROUP_0:-$SLURM_JOB_NODELIST}"
    lines = [
        "# The run directory must be on a filesystem every node shares: arena train writes",
        "# config.yaml and learner.yaml there for the others, and the learner its checkpoints.",
        f'RUN_DIR="${{ARENA_RUN_DIR:-{default}}}"',
        f"PORT={d.port}",
        "# the broker runs on the job's first node",
        f'BROKER_HOST="$(scontrol show hostnames "{nodes}" | head -n 1)"',
        "export PYTHONUNBUFFERED=1",
    ]
    if d.keys:
        lines.append(
            f"export ARENA_KEYS={shlex.quote(d.keys)}  # a path: no secret is written here"
        )
    else:
        lines.append("export ARENA_INSECURE=1  # --insecure: plain tcp between nodes")
    if d.routing:
        lines.append(f"export ARENA_ROUTING={shlex.quote(d.routing)}")
    return lines


def _body(d: Deployment) -> list[str]:
    lines = [
        'if [ -e "$RUN_DIR/config.yaml" ]; then',
        '  echo "arena deploy: $RUN_DIR already holds a run (set ARENA_RUN_DIR)" >&2',
        "  exit 2",
        "fi",
        'mkdir -p "$RUN_DIR/logs"',
        'echo "arena deploy: run directory $RUN_DIR, broker tcp://$BROKER_HOST:$PORT"',
        "",
    ]
    for process in d.of_kind("broker"):
        lines.append(_step(process, d))
    for process in d.of_kind("train"):
        lines += [_step(process, d), "TRAIN=$!"]
    lines += ["", "# each kind starts once arena train has written the files it reads"]
    for kind in ("inference", "learner", "rollout"):
        processes = d.of_kind(kind)
        reads = list(dict.fromkeys(path for p in processes for path in p.reads))
        if reads:
            lines.append(f"wait_for {words(reads)}")
        lines += [_step(p, d) for p in processes]
    lines += [
        "",
        "# the run ends with arena train; the job's end stops every other step",
        "status=0",
        'wait "$TRAIN" || status=$?',
        'echo "arena deploy: arena train exited with status $status"',
        'exit "$status"',
    ]
    return lines
