"""``arena deploy slurm|k8s CONFIG [key=value ...] --out PATH``: a run's processes for a cluster.

``slurm`` writes an ``sbatch`` script (``--out FILE``; beside it the config as read here, which
the job's ``arena train`` reads: ``job.sh``, ``job.config.yaml``): one heterogeneous job whose
components hold the broker and ``arena train`` (the job's first node), the inference actors, the
learner and the rollout actors, each process an ``srun`` step. ``k8s`` writes manifests (``--out DIR``,
then ``kubectl apply -f DIR``): a Secret with the keys, a ConfigMap with the resolved run config,
the broker (StatefulSet and headless Service), inference Deployments, learner and ``arena
train`` Jobs and a rollout StatefulSet.

Both start the command lines ``arena train`` starts locally, with a ``tcp://`` broker address,
but for the inference actors, which start as ones started by hand do (``arena inference --config
CONFIG_DIR/config.yaml --actor-name NAME``: what each serves decided by the one function that
decides it for ``arena train``);
``arena train`` itself runs as the coordinator with ``rollout.actors=0 inference.actors=0
start_learner=false`` and waits for the ``rollout.actors`` and ``inference.actors`` (at least 1
each) that the cluster starts. Pod-to-pod and node-to-node traffic is not loopback, so
``--keys DIR`` (from ``arena keys generate DIR``) is required, or ``--insecure``. Resources
per kind come from ``--cpus-per-*``, ``--gpus-per-*`` and ``--mem-per-*``; a device ``auto``
without ``--gpus-per-*`` asks for one GPU, with a note that says so. ``k8s`` warns without
``--image`` (``arena:latest``) and without ``--volume-claim`` (checkpoints die with the learner's
pod), and refuses a run whose inference actors serve adapters without one (they read them from
the run directory). See docs/deploy.md.

A bad config, key directory or flag exits with code 2 and a message naming it.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from arena.commands.deploy_checks import (
    DEFAULT_IMAGE,
    check_deployable,
    check_flags,
    check_keys,
    check_shared_volume,
    warn_k8s_defaults,
    warn_unstarted,
)
from arena.core.errors import ConfigError
from arena.deploy import Deployment, Process, Resources

CPUS = {"train": 4, "inference": 4, "learner": 8, "rollout": 2}
"""Default CPUs per process of each kind (``train``: ``arena train``; in Slurm the broker runs
beside it on one more CPU)."""
GPU_KINDS = ("inference", "learner")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", choices=["slurm", "k8s"], help="what to write")
    parser.add_argument("config", help="YAML run config, e.g. configs/selfplay.yaml")
    parser.add_argument("overrides", nargs="*", help="key=value overrides of the run config")
    parser.add_argument("--out", required=True, help="slurm: the script to write; k8s: a directory")
    parser.add_argument("--keys", metavar="DIR", help="CURVE keys from `arena keys generate DIR`")
    parser.add_argument("--insecure", action="store_true", help="no keys: plain tcp (warns)")
    parser.add_argument(
        "--port", type=int, default=5555, help="the broker's tcp port (default 5555)"
    )
    parser.add_argument("--name", help="job name / object prefix (default arena-<config name>)")
    parser.add_argument("--run-dir", help="the run directory (absolute; default: see docs)")
    parser.add_argument(
        "--arena", default="arena", help="how a node runs arena, e.g. '.venv/bin/python -m arena'"
    )
    sizes = parser.add_argument_group("resources per process of each kind")
    for kind, cpus in CPUS.items():
        what = "arena train (in Slurm, the broker gets 1 more)" if kind == "train" else kind
        sizes.add_argument(
            f"--cpus-per-{kind}", type=int, default=cpus, metavar="N", help=f"{what}: {cpus} CPUs"
        )
        if kind in GPU_KINDS:
            more = ", more: torchrun" if kind == "learner" else ""
            sizes.add_argument(
                f"--gpus-per-{kind}",
                type=int,
                metavar="N",
                help=f"{kind}: 1 GPU, 0 if its device is cpu{more}",
            )
        sizes.add_argument(
            f"--mem-per-{kind}", type=int, metavar="GIB", help=f"{kind}: the scheduler's default"
        )
    slurm = parser.add_argument_group("slurm")
    slurm.add_argument(
        "--partition", help="partition of the CPU components (default: the cluster's default)"
    )
    slurm.add_argument("--gpu-partition", help="partition of the GPU components")
    slurm.add_argument("--account", help="account the job is charged to (default: yours)")
    slurm.add_argument("--time", help="time limit, e.g. 1-00:00:00")
    slurm.add_argument("--setup", action="append", metavar="LINE", help="shell line run first")
    k8s = parser.add_argument_group("k8s")
    k8s.add_argument("--image", help=f"the container image with arena (default {DEFAULT_IMAGE})")
    k8s.add_argument(
        "--namespace", help="namespace of every object (default: kubectl's current one)"
    )
    k8s.add_argument("--volume-claim", metavar="PVC", help="PVC for run directories (RWX)")


def run(args: argparse.Namespace) -> int:
    from arena.run.config import load_run_config
    from arena.run.validation import validate

    check_flags(args)
    config = load_run_config(args.config, args.overrides)
    if config.resume:
        raise ConfigError("resume: arena deploy starts a new run; resume one by hand")
    validate(config)
    check_deployable(args, config)
    keys = check_keys(args)
    name = args.name or f"arena-{config.name}"
    if args.target == "k8s":
        name = name.lower().replace("_", "-").replace(".", "-")
        if not _DNS_LABEL.fullmatch(name):
            raise ConfigError(f"--name {name!r}: Kubernetes wants [a-z0-9-], at most 40 long")
        return _k8s(args, config, name, keys)
    return _slurm(args, config, name, keys)


def _resources(args: argparse.Namespace, config: Any) -> dict[str, Resources]:
    """What each kind of process asks the scheduler for. A kind without ``--gpus-per-*`` gets
    no GPU where its device is ``cpu`` and one otherwise; for ``auto`` (resolved on each node,
    so the config alone cannot say whether a GPU is meant) a note on stderr says so, since
    asking for a GPU the run never uses keeps the job queued for hardware it does not need."""
    devices = {"inference": config.inference.device, "learner": config.learner.device}
    out = {"broker": Resources(cpus=1)}
    guessed = []
    for kind in CPUS:
        gpus = getattr(args, f"gpus_per_{kind}", 0)
        if gpus is None:
            gpus = 0 if devices[kind] == "cpu" else 1
            if devices[kind] == "auto":
                guessed.append(kind)
        cpus, mem = getattr(args, f"cpus_per_{kind}"), getattr(args, f"mem_per_{kind}")
        out[kind] = Resources(cpus=cpus, gpus=gpus, memory_gb=mem)
    if guessed:
        print(auto_gpu_note(guessed), file=sys.stderr)
    return out


def threads(kind: str, res: Resources) -> int:
    """Torch threads per process of ``kind``: its CPUs, shared among the ranks of a learner
    under ``torchrun`` (one per GPU), each of which would otherwise take them all."""
    ranks = res.gpus if kind == "learner" and res.gpus > 1 else 1
    return max(1, res.cpus // ranks)


def auto_gpu_note(kinds: list[str]) -> str:
    """The note for kinds whose device is ``auto`` and whose GPUs no flag gave."""
    devices = " and ".join(f"{k}.device" for k in kinds)
    flags = " ".join(f"--gpus-per-{k} 0" for k in kinds)
    verb = "is" if len(kinds) == 1 else "are"
    return (
        f"arena deploy: note: {devices} {verb} auto: asking 1 GPU per {' and '.join(kinds)} "
        f"process (auto uses one where the node has one); for CPU nodes pass {flags}, or set "
        f"{' '.join(f'{k}.device=cpu' for k in kinds)}"
    )


def deployment(
    args: argparse.Namespace,
    config: Any,
    name: str,
    keys: Path | None,
    where: tuple[str, str, Path],
) -> tuple[Deployment, Any]:
    """The processes of the run and the coordinator's config, resolved for its run directory
    as the cluster's ``arena train`` resolves it (the adapters named, not written).
    ``where``: the broker address and the run directory as the cluster spells them, and the
    directory that holds config.yaml and learner.yaml there."""
    from arena.models.lora_files import CONFIG_FILE as ADAPTER_CONFIG
    from arena.run.config import load_run_config
    from arena.run.inference_actors import POOL_ACTOR, served_inference
    from arena.run.processes import actor_commands, broker_argv
    from arena.run.run_dir import resolve_for_run

    address, run_dir, config_dir = where
    rollouts, inferences = max(1, config.rollout.actors), max(1, config.inference.actors)
    coordinating = [
        f"bus.address={address}",
        f"bus.connect_timeout={max(config.bus.connect_timeout, 120.0)}",
        "rollout.actors=0",
        "inference.actors=0",
        "start_learner=false",
        f"run_dir={run_dir}",
        f"wait.rollout_actors={config.wait.rollout_actors or rollouts}",
        f"wait.inference_actors={config.wait.inference_actors or inferences}",
    ]
    coordinator = load_run_config(args.config, [*args.overrides, *coordinating])
    # what the cluster's arena train writes into config.yaml: the settings that follow from the
    # run directory filled in (the adapters served and trained), which the actors read there
    resolved = resolve_for_run(coordinator, Path(run_dir), write=False)
    actors = replace(
        coordinator,
        start_learner=True,
        rollout=replace(coordinator.rollout, actors=rollouts),
        inference=replace(coordinator.inference, actors=inferences),
    )
    resources = _resources(args, config)
    bus = config.bus
    processes = [
        Process(
            "broker",
            broker_argv(f"tcp://*:{args.port}", bus.heartbeat_interval, bus.heartbeat_timeout),
            max_restarts=bus.max_restarts,
        ),
    ]
    if args.target == "slurm":  # the config as read here, overrides and all (see _slurm)
        path = str(frozen_config(Path(args.out)).resolve())
        processes.append(Process("train", ["train", path, *coordinating]))
    else:
        processes.append(Process("train", ["train", str(config_dir / "config.yaml")]))
    # paths in the run directory (a policy's adapter) are run_dir's; the files are config_dir's
    for command in actor_commands(actors, Path(run_dir), config_dir):
        argv, env, kind = list(command.argv), dict(command.env), command.name.split("-")[0]
        adapters: list[str] = []
        if kind == "inference":
            served = served_inference(resolved, Path(run_dir), command.name)
            adapters = [str(Path(p) / ADAPTER_CONFIG) for p in served.adapters.values()]
        if kind in GPU_KINDS:
            env["OMP_NUM_THREADS"] = str(config.cpu_threads or threads(kind, resources[kind]))
        restarts = command.max_restarts if command.restartable else 0
        reads = [argv[argv.index("--config") + 1], *adapters]
        # a pool actor loads the learners' checkpoints from the run directory as it serves
        pool = kind == "inference" and command.name.startswith(POOL_ACTOR)
        processes.append(
            Process(command.name, argv, env, max_restarts=restarts, reads=reads, loads_run_dir=pool)
        )
    spec = Deployment(
        name=name,
        processes=processes,
        resources=resources,
        port=args.port,
        keys=str(keys) if keys else None,
        insecure=args.insecure,
        routing=config.bus.routing,
        launcher=shlex.split(args.arena),
    )
    return spec, resolved


def _slurm(args: argparse.Namespace, config: Any, name: str, keys: Path | None) -> int:
    from arena.core.config import to_yaml
    from arena.deploy.slurm import BROKER_HOST_MARK, RUN_DIR_MARK, SlurmOptions, render

    address = f"tcp://{BROKER_HOST_MARK}:{args.port}"
    warn_unstarted(config, f"tcp://BROKER_HOST:{args.port}")  # the job's first node
    spec, _ = deployment(args, config, name, keys, (address, RUN_DIR_MARK, Path(RUN_DIR_MARK)))
    run_dir = args.run_dir or config.run_dir
    options = SlurmOptions(
        run_dir=str(Path(run_dir).resolve()) if run_dir else None,
        runs_under=f"{config.output_dir}/{config.name}",
        partition=args.partition,
        gpu_partition=args.gpu_partition,
        account=args.account,
        time=args.time,
        setup=list(args.setup or []),
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # what the job's arena train reads: the config as read now, not the file when the job
    # starts (hours later, maybe edited), which the processes written here would not match
    frozen = frozen_config(out)
    frozen.write_text(to_yaml(replace(config, resume=None)))
    out.write_text(render(spec, options))
    out.chmod(0o755)
    print(f"arena deploy: wrote {out} and {frozen}: {_summary(spec)}")
    print(f"  submit from a directory every node shares: sbatch {out}")
    return 0


def frozen_config(script: Path) -> Path:
    """The run config beside a Slurm script (``job.sh``: ``job.config.yaml``)."""
    return script.with_name(f"{script.stem}.config.yaml")


def _k8s(args: argparse.Namespace, config: Any, name: str, keys: Path | None) -> int:
    from arena.deploy.files import write
    from arena.deploy.k8s import (
        CONFIG_DIR,
        FILES,
        RUNS_DIR,
        SECRET_FILE,
        K8sOptions,
        name_clashes,
        render,
    )
    from arena.run.processes import write_configs

    address = f"tcp://{name}-broker:{args.port}"
    warn_unstarted(config, address)
    # on the runs volume unless given absolute: a relative one would land in the image
    run_dir = args.run_dir or config.run_dir or config.name
    if not run_dir.startswith("/"):
        run_dir = f"{RUNS_DIR}/{run_dir}"
    spec, resolved = deployment(args, config, name, keys, (address, run_dir, Path(CONFIG_DIR)))
    clash = name_clashes(spec)
    if clash:
        raise ConfigError(f"policies: {clash}; rename a policy, or pass a shorter --name")
    check_shared_volume(args, spec)
    with tempfile.TemporaryDirectory() as tmp:  # the files arena train itself would write
        write_configs(resolved, Path(run_dir), Path(tmp))
        # config.yaml, learner.yaml, and learner-<policy>.yaml per policy with its own model
        config_files = {f.name: f.read_text() for f in sorted(Path(tmp).glob("*.yaml"))}
    warn_k8s_defaults(args)
    options = K8sOptions(
        image=args.image or DEFAULT_IMAGE,
        namespace=args.namespace,
        volume_claim=args.volume_claim,
    )
    files = render(spec, options, config_files, _key_files(keys) if keys else None)
    written = write(files, Path(args.out), known=FILES, secret=SECRET_FILE)
    print(f"arena deploy: wrote {len(written)} files to {args.out}: {_summary(spec)}")
    if keys:
        print(f"  {Path(args.out) / SECRET_FILE} holds secret keys: keep it out of git")
    print(f"  start: kubectl apply -f {args.out}; the run ends when job {name}-train completes")
    return 0


def _key_files(keys: Path) -> dict[str, bytes]:
    """The key files a cluster needs: the broker's and the client's keypairs, the allow-list
    (other clients' secret keys stay where they are)."""
    names = ["broker.key", "broker.key_secret", "client.key", "client.key_secret"]
    files = {n: (keys / n).read_bytes() for n in names}
    for path in sorted((keys / "authorized").glob("*.key")):
        files[f"authorized/{path.name}"] = path.read_bytes()
    return files


def _summary(spec: Deployment) -> str:
    counts = {k: len(spec.of_kind(k)) for k in ("inference", "learner", "rollout")}
    return "broker, arena train, " + ", ".join(f"{n} {k}" for k, n in counts.items())
