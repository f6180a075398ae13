"""What ``arena deploy`` checks before it writes anything: flags of the other target, settings the
generated files would overrule or leave broken (``launcher``, ``bus.address``, a k8s run
directory off the shared volume, adapters without a shared volume), the key directory, and the
warnings a cluster run needs (a simulator's policy no process serves, k8s defaults that lose a
run). A refusal is a :class:`~arena.core.errors.ConfigError` naming the flag or key (exit 2).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from arena.core.errors import ConfigError
from arena.deploy import Deployment

SLURM_ONLY = ("partition", "gpu_partition", "account", "time", "setup")
K8S_ONLY = ("image", "namespace", "volume_claim")
DEFAULT_IMAGE = "arena:latest"
"""The image of every pod without ``--image`` (with a warning)."""


def check_flags(args: argparse.Namespace) -> None:
    other = K8S_ONLY if args.target == "slurm" else SLURM_ONLY
    for flag in other:
        if getattr(args, flag) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')} is not a flag of `{args.target}`")
    if args.run_dir and not args.run_dir.startswith("/"):
        raise ConfigError(f"--run-dir {args.run_dir}: must be absolute (on a shared filesystem)")


def check_deployable(args: argparse.Namespace, config: Any) -> None:
    """Settings the generated files would overrule or leave broken, refused before anything is
    written rather than found on the cluster."""
    if config.launcher != "local":
        raise ConfigError(
            f"launcher={config.launcher}: arena deploy starts every process through "
            f"{args.target} itself; drop it (launcher=ray is arena train on a Ray cluster)"
        )
    if config.bus.address:
        raise ConfigError(
            f"bus.address={config.bus.address}: arena deploy starts the run's broker itself "
            "(--port); leave bus.address unset"
        )
    if args.target == "k8s":
        from arena.deploy.k8s import RUNS_DIR

        key, run_dir = ("--run-dir", args.run_dir) if args.run_dir else ("run_dir", config.run_dir)
        if run_dir and run_dir.startswith("/") and not f"{run_dir}/".startswith(f"{RUNS_DIR}/"):
            raise ConfigError(
                f"{key} {run_dir}: not under {RUNS_DIR}, the volume (--volume-claim) the train, "
                "learner and inference pods share: each pod would keep its own, the learner's "
                f"checkpoints in its pod; give a directory under {RUNS_DIR} or a relative one"
            )


def warn_unstarted(config: Any, address: str) -> None:
    """Warn of the policies the run's simulators talk through that no process of the
    deployment serves (a frozen checkpoint, an endpoint: the run never starts those): its
    ``arena train`` waits ``wait.timeout`` for each, then fails, unless one is started beside."""
    from arena.run.join_commands import simulator_command
    from arena.run.plan import simulator_policies

    for policy, seats in simulator_policies(config).items():
        print(
            f"arena deploy: warning: policy:{policy} (the simulator of {', '.join(seats)}) is "
            f"served by no process this writes: the run waits {config.wait.timeout:g}s "
            f"(wait.timeout) for one, started on the cluster: {simulator_command(address, policy)}",
            file=sys.stderr,
        )


def check_keys(args: argparse.Namespace) -> Path | None:
    """The key directory, checked as the bus will check it; or None with ``--insecure``."""
    from arena.bus.keys import (
        AUTHORIZED,
        BROKER,
        DEFAULT_CLIENT,
        SecurityError,
        load_security,
        unreadable_public_key,
    )

    if args.keys:
        keys = Path(args.keys).expanduser().resolve()
        for identity in (BROKER, DEFAULT_CLIENT):
            load_security(keys, identity)
        bad = unreadable_public_key(keys / AUTHORIZED)  # the broker would refuse to start
        if bad:
            raise SecurityError(f"cannot load the public keys in {keys / AUTHORIZED}: {bad}")
        return keys
    if not args.insecure:
        raise ConfigError(
            f"{args.target}: processes on different hosts talk over tcp, which is not loopback: "
            "make keys with `arena keys generate DIR` and pass --keys DIR, or pass --insecure "
            "for unauthenticated, unencrypted traffic"
        )
    print("arena deploy: INSECURE: ARENA_INSECURE=1, bus traffic unencrypted", file=sys.stderr)
    return None


def check_shared_volume(args: argparse.Namespace, spec: Deployment) -> None:
    """Inference actors that serve adapters read them from the run directory, where the train
    pod writes them: without ``--volume-claim`` each pod has a run directory of its own, and
    they would never find them."""
    from arena.deploy.k8s import reads_run_dir

    readers = [p.name for p in spec.of_kind("inference") if reads_run_dir(p)]
    if readers and not args.volume_claim:
        raise ConfigError(
            f"--volume-claim: {', '.join(readers)} {'serve' if len(readers) > 1 else 'serves'} "
            "adapters that arena train writes into the run directory, which pods share only on "
            "a volume: pass --volume-claim PVC (a ReadWriteMany claim)"
        )


def warn_k8s_defaults(args: argparse.Namespace) -> None:
    """Warn of the defaults that work on a test cluster and lose a real run: an image tag that
    is whatever was pushed last, and run directories that die with their pods."""
    if not args.image:
        print(
            f"arena deploy: warning: no --image: the pods run {DEFAULT_IMAGE}, which must hold "
            "Arena and the config's model; name a pinned image with --image",
            file=sys.stderr,
        )
    if not args.volume_claim:
        print(
            "arena deploy: warning: no --volume-claim: the run directory is an emptyDir of each "
            "pod, so the checkpoints die with the learner's pod; pass --volume-claim PVC "
            "(a ReadWriteMany claim) to keep them",
            file=sys.stderr,
        )
