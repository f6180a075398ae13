"""A run as Kubernetes objects: ``arena deploy k8s`` writes them, one YAML file per part.

- ``00-keys.yaml``: a Secret with the CURVE key files (absent with ``--insecure``). Each pod
  mounts only what it needs (the broker its own secret key, the others the client's) at
  ``/etc/arena/keys``, mode 0400: the bus refuses a secret key file that group or others may
  read (so no ``fsGroup``, which would add group read).
- ``01-config.yaml``: a ConfigMap with the resolved run config (``config.yaml``, what ``arena
  rollout --config`` reads, and what ``arena train`` runs) and ``learner.yaml`` (what ``arena
  learner --config`` reads), mounted at ``/etc/arena/config``.
- ``10-broker.yaml``: a headless Service and a one-pod StatefulSet: the broker keeps one DNS
  name (``<name>-broker``) across restarts, so the actors find it again and re-register.
- ``20-inference.yaml``: one Deployment per inference actor. Each actor's command line is its
  own (``arena inference --config`` with its name on the bus, which decides what it serves and
  its sampler's seed), so each gets a Deployment of one replica, ``Recreate``d: two pods of one
  actor would fight over its name. One that serves adapters mounts the runs volume read-only
  (``arena train`` writes their initial weights into the run directory), and an init container
  (``sh``, from the same image) waits until they are there; so does a pool actor (population
  mode), which loads the learners' checkpoints from it, with nothing to wait for.
- ``30-learner.yaml`` and ``50-train.yaml``: Jobs for the learner and ``arena train`` (the
  coordinator). The learner's is restarted in place when it fails (``OnFailure``, up to
  ``learner_max_restarts``), and resumes from its last checkpoint; the run ends when the
  ``train`` Job completes.
- ``40-rollout.yaml``: a StatefulSet of ``rollout.actors`` replicas. A rollout actor's name
  must be ``rollout-<integer>``, unique on the bus; a StatefulSet pod's ordinal (the
  ``apps.kubernetes.io/pod-index`` label, Kubernetes 1.28+) gives ``--index``. Scaling it up
  adds actors that take part from the next collect.

Every pod advertises its pod IP (``ARENA_ADVERTISE_HOST`` from ``status.podIP``): each serving
actor binds an ephemeral tcp port and registers ``podIP:port``, so the pods must reach each
other on any port (or set ``bus.routing=brokered``).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from arena.deploy.files import dump_all
from arena.deploy.spec import Deployment, Process, Resources

CONFIG_DIR = "/etc/arena/config"
"""Where the ConfigMap's files are: the ``run_dir`` handed to ``actor_commands``, so the command
lines read ``config.yaml`` and ``learner.yaml`` from there."""
KEYS_DIR = "/etc/arena/keys"
RUNS_DIR = "/arena/runs"
"""Where the run directories live, in the pods that write them (train, learner) and, read-only,
in the inference pods that serve adapters from them."""
SECRET_MODE = 0o400
SECRET_FILE = "00-keys.yaml"
FILES = (
    SECRET_FILE,
    "01-config.yaml",
    "10-broker.yaml",
    "20-inference.yaml",
    "30-learner.yaml",
    "40-rollout.yaml",
    "50-train.yaml",
)
"""Every file :func:`render` may write, in the order ``kubectl apply -f DIR`` reads them."""
WAIT_SCRIPT = 'for f in "$@"; do until [ -e "$f" ]; do echo "waiting for $f"; sleep 2; done; done'
"""The init container's ``sh -c`` script: until every file named after it exists."""
INDEX_ENV = "ARENA_INDEX"
MAX_NAME = 63
"""The longest object name: a DNS label (a Service's name, a Job's ``job-name`` label)."""
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


@dataclass(frozen=True)
class K8sOptions:
    image: str = "arena:latest"
    namespace: str | None = None
    volume_claim: str | None = None
    """A PersistentVolumeClaim (ReadWriteMany) mounted at :data:`RUNS_DIR` in the train and
    learner pods, and read-only in the inference pods that serve adapters from the run
    directory; None: an ``emptyDir`` each (checkpoints are lost with the learner's pod, and no
    pod sees another's files: ``arena deploy`` refuses a run whose inference actors read
    adapters without one)."""


def secret_items(key_files: dict[str, bytes], identity: str) -> list[dict[str, Any]]:
    """The Secret's items a pod of ``identity`` (``broker`` or ``client``) mounts: its own
    keypair, the broker's public key and the allow-list."""
    wanted = {"broker.key", f"{identity}.key", f"{identity}.key_secret"}
    return [
        {"key": _secret_key(path), "path": path}
        for path in sorted(key_files)
        if path in wanted or path.startswith("authorized/")
    ]


def _secret_key(path: str) -> str:
    """A Secret's keys may not hold ``/``: ``authorized/x.key`` -> ``authorized.x.key``."""
    return path.replace("/", ".")


def render(
    deployment: Deployment,
    options: K8sOptions,
    config_files: dict[str, str],
    key_files: dict[str, bytes] | None,
) -> dict[str, str]:
    """File name -> YAML text (documents separated by ``---``) for ``deployment``.

    ``config_files``: ``config.yaml`` and ``learner.yaml`` as ``arena train`` writes them;
    ``key_files``: path in the key directory -> bytes (None with ``--insecure``)."""
    b = _Builder(deployment, options, key_files)
    d = deployment
    files: dict[str, list[dict[str, Any]]] = {}
    if key_files is not None:
        data = {_secret_key(p): base64.b64encode(v).decode() for p, v in sorted(key_files.items())}
        files[SECRET_FILE] = [b.object("v1", "Secret", "keys", type="Opaque", data=data)]
    files["01-config.yaml"] = [b.object("v1", "ConfigMap", "config", data=dict(config_files))]
    files["10-broker.yaml"] = b.broker(d.of_kind("broker")[0])
    files["20-inference.yaml"] = [b.inference(p) for p in d.of_kind("inference")]
    files["30-learner.yaml"] = [b.job(p) for p in d.of_kind("learner")]
    files["40-rollout.yaml"] = b.rollout(d.of_kind("rollout"))
    files["50-train.yaml"] = [b.job(p) for p in d.of_kind("train")]
    return {name: dump_all(docs) for name, docs in files.items()}


class _Builder:
    """The objects of one deployment; names are ``<deployment name>-<part>``."""

    def __init__(
        self, deployment: Deployment, options: K8sOptions, key_files: dict[str, bytes] | None
    ) -> None:
        self.d = deployment
        self.options = options
        self.key_files = key_files

    def name(self, part: str) -> str:
        return object_name(self.d.name, part)

    def labels(self, component: str, **more: str) -> dict[str, str]:
        return {
            "app.kubernetes.io/name": "arena",
            "app.kubernetes.io/instance": self.d.name,
            "app.kubernetes.io/component": component,
            **more,
        }

    def object(self, api: str, kind: str, part: str, **body: Any) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name(part)}
        if self.options.namespace:
            metadata["namespace"] = self.options.namespace
        metadata["labels"] = self.labels(part.split("-")[0])
        return {"apiVersion": api, "kind": kind, "metadata": metadata, **body}

    # -- pods ------------------------------------------------------------------------------
    def container(self, process: Process, args: list[str] | None = None) -> dict[str, Any]:
        d = self.d
        env: list[dict[str, Any]] = [
            {
                "name": "ARENA_ADVERTISE_HOST",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ]
        if self.key_files is not None:
            env.append({"name": "ARENA_KEYS", "value": KEYS_DIR})
        else:
            env.append({"name": "ARENA_INSECURE", "value": "1"})
        if d.routing:
            env.append({"name": "ARENA_ROUTING", "value": d.routing})
        env += [{"name": k, "value": v} for k, v in sorted(process.env.items())]
        container: dict[str, Any] = {
            "name": process.kind,
            "image": self.options.image,
            "command": d.launcher_for(process),
            "args": [_literal(a) for a in process.argv] if args is None else args,
            "env": env,
            "resources": _resources(d.resources[process.kind]),
            "volumeMounts": self.mounts(process),
        }
        if process.kind == "broker":
            container["ports"] = [{"name": "bus", "containerPort": d.port, "protocol": "TCP"}]
        return container

    def mounts(self, process: Process) -> list[dict[str, Any]]:
        kind = process.kind
        mounts = []
        if kind != "broker":  # the broker reads no config
            mounts.append({"name": "config", "mountPath": CONFIG_DIR, "readOnly": True})
        if self.key_files is not None:
            mounts.append({"name": "keys", "mountPath": KEYS_DIR, "readOnly": True})
        if kind in ("train", "learner"):
            mounts.append({"name": "runs", "mountPath": RUNS_DIR})
        elif mounts_run_dir(process):  # adapters arena train writes, a pool's checkpoints
            mounts.append({"name": "runs", "mountPath": RUNS_DIR, "readOnly": True})
        return mounts

    def volumes(self, process: Process) -> list[dict[str, Any]]:
        kind = process.kind
        volumes: list[dict[str, Any]] = []
        if kind != "broker":
            volumes.append({"name": "config", "configMap": {"name": self.name("config")}})
        if self.key_files is not None:
            identity = "broker" if kind == "broker" else "client"
            secret = {
                "secretName": self.name("keys"),
                "defaultMode": SECRET_MODE,
                "items": secret_items(self.key_files, identity),
            }
            volumes.append({"name": "keys", "secret": secret})
        if kind in ("train", "learner") or mounts_run_dir(process):
            claim = self.options.volume_claim
            source = {"persistentVolumeClaim": {"claimName": claim}} if claim else {"emptyDir": {}}
            volumes.append({"name": "runs", **source})
        return volumes

    def waits(self, process: Process) -> list[dict[str, Any]]:
        """An init container that waits until the files of the run directory ``process`` reads
        exist (``arena train`` writes them as it starts, in a pod that starts beside this one):
        the actor then starts once, rather than failing into a crash-loop back-off."""
        if not reads_run_dir(process):
            return []
        files = [path for path in process.reads if not path.startswith(f"{CONFIG_DIR}/")]
        mounts = [m for m in self.mounts(process) if m["name"] == "runs"]
        wait = {
            "name": "wait-for-run",
            "image": self.options.image,
            "command": ["sh", "-c", WAIT_SCRIPT, "wait-for-run", *files],
            "volumeMounts": mounts,
        }
        return [wait]

    def template(
        self, process: Process, labels: dict[str, str], restart: str, **container: Any
    ) -> dict[str, Any]:
        spec: dict[str, Any] = {"restartPolicy": restart}
        waits = self.waits(process)
        if waits:
            spec["initContainers"] = waits
        spec["containers"] = [self.container(process, **container)]
        spec["volumes"] = self.volumes(process)
        return {"metadata": {"labels": labels}, "spec": spec}

    # -- workloads -------------------------------------------------------------------------
    def broker(self, process: Process) -> list[dict[str, Any]]:
        labels = self.labels("broker")
        service = self.object(
            "v1",
            "Service",
            "broker",
            spec={
                "clusterIP": "None",
                # resolvable while the broker starts: actors connect and wait for it
                "publishNotReadyAddresses": True,
                "selector": labels,
                "ports": [{"name": "bus", "port": self.d.port, "targetPort": self.d.port}],
            },
        )
        spec = {
            "serviceName": self.name("broker"),
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": self.template(process, labels, "Always"),
        }
        return [service, self.object("apps/v1", "StatefulSet", "broker", spec=spec)]

    def inference(self, process: Process) -> dict[str, Any]:
        labels = self.labels("inference", **{"arena.dev/actor": process.name})
        spec = {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": self.template(process, labels, "Always"),
        }
        return self.object("apps/v1", "Deployment", process.name, spec=spec)

    def job(self, process: Process) -> dict[str, Any]:
        """A Job; one with a restart budget (the learner: ``learner_max_restarts``) restarts its
        container in place when it fails, so an ``emptyDir`` run volume, and the checkpoint the
        new learner resumes from, survive the restart."""
        labels = self.labels(process.kind)
        restart = "OnFailure" if process.max_restarts else "Never"
        spec = {
            "backoffLimit": process.max_restarts,
            "template": self.template(process, labels, restart),
        }
        return self.object("batch/v1", "Job", process.name, spec=spec)

    def rollout(self, processes: list[Process]) -> list[dict[str, Any]]:
        """A headless Service governing the StatefulSet (no ports: nobody connects to it) and
        the StatefulSet itself."""
        first = processes[0]
        args = rollout_args(processes)
        labels = self.labels("rollout")
        template = self.template(first, labels, "Always", args=args)
        template["spec"]["containers"][0]["env"].append(
            {
                "name": INDEX_ENV,
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
            }
        )
        service = self.object(
            "v1", "Service", "rollout", spec={"clusterIP": "None", "selector": labels}
        )
        spec = {
            "serviceName": self.name("rollout"),
            "replicas": len(processes),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": template,
        }
        return [service, self.object("apps/v1", "StatefulSet", "rollout", spec=spec)]


def object_name(prefix: str, part: str) -> str:
    """``<prefix>-<part>`` as Kubernetes takes an object's name (lower case, ``[a-z0-9-]``):
    a process's name holds its policy's (``inference-My_judge``), which may hold neither."""
    return re.sub(r"[^a-z0-9-]", "-", f"{prefix}-{part}".lower())


def name_clashes(deployment: Deployment) -> str | None:
    """Why the processes' objects cannot all be named (two policies whose names differ only in
    case or ``_``/``-``, or a name past the 63 characters of a DNS label), or None."""
    seen: dict[str, str] = {}
    for process in deployment.processes:
        name = object_name(deployment.name, process.name)
        if len(name) > MAX_NAME:
            return f"{process.name}: its objects' name {name} is longer than {MAX_NAME}"
        if name in seen and seen[name] != process.name:
            return f"{seen[name]} and {process.name} would both be named {name}"
        seen[name] = process.name
    return None


def reads_run_dir(process: Process) -> bool:
    """Whether ``process`` reads, as it starts, files of the run directory (an inference
    actor's adapters) beside the ConfigMap's."""
    return any(not path.startswith(f"{CONFIG_DIR}/") for path in process.reads)


def mounts_run_dir(process: Process) -> bool:
    """Whether an inference actor's pod mounts the runs volume (read-only): it reads the run
    directory as it starts (its adapters) or while it serves (a pool actor's checkpoints)."""
    return reads_run_dir(process) or process.loads_run_dir


def rollout_args(processes: list[Process]) -> list[str]:
    """The rollout actors' common command line, ``--index`` taken from the pod's ordinal.

    They differ in ``--index`` alone; anything else would make one template wrong for some
    replica, so that is refused."""
    templates = []
    for process in processes:
        argv = [_literal(a) for a in process.argv]
        at = argv.index("--index") + 1
        argv[at] = f"$({INDEX_ENV})"
        templates.append(argv)
    if any(t != templates[0] for t in templates):
        raise ValueError("rollout actors whose command lines differ in more than --index")
    return templates[0]


def _literal(arg: str) -> str:
    """Kubernetes expands ``$(VAR)`` in ``args``; ``$$`` keeps a literal ``$``."""
    return arg.replace("$(", "$$(")


def _resources(res: Resources) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": str(res.cpus)}
    limits: dict[str, str] = {}
    if res.memory_gb:
        requests["memory"] = limits["memory"] = f"{res.memory_gb}Gi"
    if res.gpus:
        limits["nvidia.com/gpu"] = str(res.gpus)
    return {"requests": requests, **({"limits": limits} if limits else {})}
