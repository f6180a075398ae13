"""``arena deploy k8s``: the manifests (arena/deploy/k8s.py, arena/commands/deploy.py).

Run with ``.venv/bin/python -m pytest -q tests/arena/deploy/test_k8s.py``. Every document must
parse as YAML and pass two schema checks: a structural one written here (the fields the
renderer emits and the rules Kubernetes enforces on them), and, where the ``kubernetes`` Python
client is installed, a round trip through its typed models, which drop any field they do not
know and coerce any value of the wrong type, so a document that comes back different from what
went in holds a misspelled field or a mistyped value.
"""

from __future__ import annotations

import base64
import re
import shlex
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from arena.core.config import load_config
from arena.deploy.k8s import CONFIG_DIR, KEYS_DIR, RUNS_DIR, SECRET_MODE
from arena.run.config import load_run_config
from arena.run.processes import actor_commands
from tests.arena.deploy.conftest import (
    ADAPTERS,
    CASES,
    adapters_of,
    comparable,
    local_inference,
)
from tests.served import served_by
from trainers.config import LearnerConfig

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
Result = Any  # conftest.Result: (code, out, err)
API = {
    "Secret": "v1",
    "ConfigMap": "v1",
    "Service": "v1",
    "StatefulSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def manifests(out: Path) -> dict[str, list[dict[str, Any]]]:
    return {p.name: list(yaml.safe_load_all(p.read_text())) for p in sorted(out.glob("*.yaml"))}


def documents(out: Path) -> list[dict[str, Any]]:
    return [doc for docs in manifests(out).values() for doc in docs]


def by_name(out: Path) -> dict[str, dict[str, Any]]:
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents(out)}


@pytest.fixture
def out(deploy: Callable[..., Result], keys: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "k8s"
    result = deploy(
        *shlex.split(
            f"k8s {SMOKE} inference.actors=2 rollout.actors=3 --out {directory} --keys {keys} "
            "--namespace ml --image registry.example/arena:1 --gpus-per-learner 1 "
            "--mem-per-learner 16 --volume-claim arena-runs"
        )
    )
    assert result.code == 0, result.err
    return directory


def test_the_manifests_hold_every_part_of_the_run(out: Path) -> None:
    kinds = {name: [d["kind"] for d in docs] for name, docs in manifests(out).items()}
    assert kinds == {
        "00-keys.yaml": ["Secret"],
        "01-config.yaml": ["ConfigMap"],
        "10-broker.yaml": ["Service", "StatefulSet"],
        "20-inference.yaml": ["Deployment", "Deployment"],
        "30-learner.yaml": ["Job"],
        "40-rollout.yaml": ["Service", "StatefulSet"],
        "50-train.yaml": ["Job"],
    }
    objects = by_name(out)
    assert objects["StatefulSet/arena-smoke-rollout"]["spec"]["replicas"] == 3
    assert "Deployment/arena-smoke-inference-1" in objects
    broker = objects["Service/arena-smoke-broker"]["spec"]
    assert broker["clusterIP"] == "None" and broker["ports"][0]["port"] == 5555


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return (
        [doc["spec"]["template"]["spec"]]
        if doc["kind"] in ("StatefulSet", "Deployment", "Job")
        else []
    )


def check_structure(doc: dict[str, Any]) -> None:
    """The rules Kubernetes applies to what the renderer writes."""
    kind = doc["kind"]
    assert doc["apiVersion"] == API[kind], kind
    meta = doc["metadata"]
    assert DNS_LABEL.fullmatch(meta["name"]) and len(meta["name"]) <= 52, meta["name"]
    assert meta["namespace"] == "ml"
    if kind in ("StatefulSet", "Deployment"):
        selector = doc["spec"]["selector"]["matchLabels"]
        labels = doc["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), meta["name"]
        assert isinstance(doc["spec"]["replicas"], int) and doc["spec"]["replicas"] >= 1
    if kind == "StatefulSet":
        assert doc["spec"]["serviceName"]
    if kind == "Service":
        assert all(isinstance(p["port"], int) for p in doc["spec"].get("ports", []))
    for pod in pod_specs(doc):
        allowed = ("Never", "OnFailure") if kind == "Job" else ("Always",)  # as the API server
        assert pod["restartPolicy"] in allowed
        assert "securityContext" not in pod  # an fsGroup would make the secret group-readable
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in pod["containers"]:
            assert container["image"] == "registry.example/arena:1"
            assert container["command"] and all(isinstance(a, str) for a in container["command"])
            assert all(isinstance(a, str) for a in container["args"])
            for port in container.get("ports", []):
                assert isinstance(port["containerPort"], int)
            for value in container["resources"]["requests"].values():
                assert isinstance(value, str)
            env = {e["name"]: e for e in container["env"]}
            assert env["ARENA_KEYS"]["value"] == KEYS_DIR
            assert (
                env["ARENA_ADVERTISE_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
            )
            for mount in container["volumeMounts"]:
                assert mount["name"] in volumes
        secret = volumes["keys"]["secret"]
        assert secret["defaultMode"] == SECRET_MODE == 0o400
        assert all("mode" not in item or item["mode"] & 0o077 == 0 for item in secret["items"])


def test_every_document_passes_the_structural_check(out: Path) -> None:
    for doc in documents(out):
        check_structure(doc)


def test_every_document_round_trips_through_the_kubernetes_models(out: Path) -> None:
    client = kubernetes.client.ApiClient()
    for doc in documents(out):
        model = client._ApiClient__deserialize(doc, f"V1{doc['kind']}")
        assert type(model).__name__ == f"V1{doc['kind']}"
        assert client.sanitize_for_serialization(model) == doc, doc["metadata"]["name"]


def test_the_model_check_catches_a_misspelled_field(out: Path) -> None:
    client = kubernetes.client.ApiClient()
    doc = by_name(out)["StatefulSet/arena-smoke-broker"]
    doc["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    model = client._ApiClient__deserialize(doc, "V1StatefulSet")
    assert client.sanitize_for_serialization(model) != doc


def test_keys_are_a_secret_each_pod_mounts_only_what_it_needs(
    out: Path, keys: Path, secrets: list[str]
) -> None:
    secret_file = out / "00-keys.yaml"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    objects = by_name(out)
    data = objects["Secret/arena-smoke-keys"]["data"]
    for path in ("broker.key_secret", "client.key_secret", "authorized/client.key"):
        assert base64.b64decode(data[path.replace("/", ".")]) == (keys / path).read_bytes()
    for name, text in ((p.name, p.read_text()) for p in out.glob("*.yaml")):
        for secret in secrets:
            assert secret not in text, name  # base64 only, in the Secret alone

    def mounted(doc: dict[str, Any]) -> set[str]:
        volumes = {v["name"]: v for v in pod_specs(doc)[0]["volumes"]}
        return {item["path"] for item in volumes["keys"]["secret"]["items"]}

    broker = mounted(objects["StatefulSet/arena-smoke-broker"])
    assert "broker.key_secret" in broker and "client.key_secret" not in broker
    assert "authorized/client.key" in broker
    for name in ("StatefulSet/arena-smoke-rollout", "Job/arena-smoke-learner"):
        client = mounted(objects[name])
        assert "client.key_secret" in client and "broker.key_secret" not in client
        assert {"broker.key", "authorized/broker.key"} <= client


def test_the_config_map_holds_what_arena_train_would_write(out: Path, tmp_path: Path) -> None:
    data = by_name(out)["ConfigMap/arena-smoke-config"]["data"]
    (tmp_path / "config.yaml").write_text(data["config.yaml"])
    (tmp_path / "learner.yaml").write_text(data["learner.yaml"])
    config = load_run_config(tmp_path / "config.yaml")
    assert config.bus.address == "tcp://arena-smoke-broker:5555"
    assert (config.rollout.actors, config.inference.actors, config.start_learner) == (0, 0, False)
    assert (config.wait.rollout_actors, config.wait.inference_actors) == (3, 2)
    assert config.run_dir == "/arena/runs/smoke"
    learner = load_config(LearnerConfig, tmp_path / "learner.yaml")
    assert learner.checkpoint.dir == "/arena/runs/smoke/checkpoints"


def container(doc: dict[str, Any]) -> dict[str, Any]:
    return pod_specs(doc)[0]["containers"][0]


def test_command_lines_are_those_arena_train_starts_locally(out: Path) -> None:
    objects = by_name(out)
    config = load_run_config(SMOKE, ["inference.actors=2", "rollout.actors=3"])
    config_dir = Path(CONFIG_DIR)
    local = {c.name: c.argv for c in actor_commands(config, config_dir)}
    address = f"ipc://{config_dir}/bus.sock"

    def cluster(argv: list[str]) -> list[str]:
        return [a.replace(address, "tcp://arena-smoke-broker:5555") for a in argv]

    for name in ("inference-0", "inference-1"):  # what it serves read from the ConfigMap
        args = container(objects[f"Deployment/arena-smoke-{name}"])["args"]
        assert args == cluster(local[name])
        assert args[-4:] == ["--config", f"{CONFIG_DIR}/config.yaml", "--actor-name", name]
        # it serves no adapter: no run directory to read
        assert "runs" not in {
            v["name"] for v in pod_specs(objects[f"Deployment/arena-smoke-{name}"])[0]["volumes"]
        }
    assert container(objects["Job/arena-smoke-learner"])["args"] == cluster(local["learner"])
    rollout = container(objects["StatefulSet/arena-smoke-rollout"])
    expected = cluster(local["rollout-0"])
    expected[-1] = "$(ARENA_INDEX)"
    assert rollout["args"] == expected
    index = {e["name"]: e for e in rollout["env"]}["ARENA_INDEX"]
    assert index["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['apps.kubernetes.io/pod-index']"
    )
    train = container(objects["Job/arena-smoke-train"])
    assert train["command"] == ["arena"] and train["args"] == ["train", f"{CONFIG_DIR}/config.yaml"]
    learner = pod_specs(objects["Job/arena-smoke-learner"])[0]
    assert container(objects["Job/arena-smoke-learner"])["resources"] == {
        "requests": {"cpu": "8", "memory": "16Gi"},
        "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"},
    }
    runs = {v["name"]: v for v in learner["volumes"]}["runs"]
    assert runs == {"name": "runs", "persistentVolumeClaim": {"claimName": "arena-runs"}}
    # a failed learner is restarted in place (it resumes from its checkpoint); the coordinator
    # is not: its end is the run's
    assert learner["restartPolicy"] == "OnFailure"
    assert objects["Job/arena-smoke-learner"]["spec"]["backoffLimit"] == 3
    assert pod_specs(objects["Job/arena-smoke-train"])[0]["restartPolicy"] == "Never"
    assert objects["Job/arena-smoke-train"]["spec"]["backoffLimit"] == 0


@pytest.mark.parametrize("case", list(CASES))
def test_inference_actors_serve_what_a_local_run_would(
    deploy: Callable[..., Result], tmp_path: Path, case: str
) -> None:
    """Each inference pod's command line, resolved by the code ``arena inference`` runs against
    the ConfigMap's config.yaml, serves what the same actor of a local ``arena train`` in the
    run directory serves; a pod that serves adapters reads them from the runs volume, mounted
    read-only as the learner's and the train pod's volume is, and so does a pool actor, which
    loads the learners' checkpoints from it (without an init container: none exist yet)."""
    config, *overrides = CASES[case]
    out = tmp_path / "k8s"
    flags = ["--out", str(out), "--insecure", "--volume-claim", "arena-runs", "--name", "run"]
    result = deploy("k8s", str(ROOT / config), *overrides, *flags)
    assert result.code == 0, result.err
    mounted = tmp_path / "etc-arena-config"  # the ConfigMap, as the pods see it
    mounted.mkdir()
    for name, text in by_name(out)["ConfigMap/run-config"]["data"].items():
        (mounted / name).write_text(text)
    run = load_run_config(mounted / "config.yaml")
    run_dir = Path(str(run.run_dir))
    assert run_dir.parent == Path(RUNS_DIR)
    # dtype auto is the learner's to resolve, on a node of the inference actors' kind: the host
    # that wrote the manifests says nothing of theirs
    learner = load_config(LearnerConfig, mounted / "learner.yaml")
    assert learner.sampled_in == ("auto" if run.inference.dtype == "auto" else "float32")
    pods = {
        doc["metadata"]["name"].removeprefix("run-"): pod_specs(doc)[0]
        for doc in manifests(out)["20-inference.yaml"]
    }
    cluster = {
        name: served_by(
            [a.replace(CONFIG_DIR, str(mounted)) for a in pod["containers"][0]["args"][2:]]
        )
        for name, pod in pods.items()
    }
    local = local_inference(CASES[case], run_dir)
    assert list(cluster) == list(local) == list(ADAPTERS[case])
    for name, config in cluster.items():
        assert comparable(config) == comparable(local[name]), name
    assert adapters_of(cluster, run_dir) == ADAPTERS[case]
    learner = pod_specs(by_name(out)["Job/run-learner"])[0]
    runs = {v["name"]: v for v in learner["volumes"]}["runs"]
    for name, pod in pods.items():
        mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        if ADAPTERS[case][name][1] or name.startswith("inference-pool"):
            assert mounts["runs"] == {"name": "runs", "mountPath": RUNS_DIR, "readOnly": True}
            assert volumes["runs"] == runs
            waits = pod.get("initContainers", [])
            assert bool(waits) == bool(ADAPTERS[case][name][1]), name
        else:
            assert "runs" not in mounts and "runs" not in volumes, name


def test_an_inference_pod_that_serves_adapters_waits_for_them(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    """Its init container waits until the train pod has written the adapter (run here with
    ``sh``, the adapter's path moved under tmp_path); the pod passes the models' check."""
    out = tmp_path / "k8s"
    selfplay = str(ROOT / "configs" / "selfplay.yaml")
    flags = ["--out", str(out), "--insecure", "--volume-claim", "arena-runs"]
    assert deploy("k8s", selfplay, *flags).code == 0
    doc = by_name(out)["Deployment/arena-selfplay-inference-0"]
    client = kubernetes.client.ApiClient()
    model = client._ApiClient__deserialize(doc, "V1Deployment")
    assert client.sanitize_for_serialization(model) == doc
    (wait,) = pod_specs(doc)[0]["initContainers"]
    adapter = f"{RUNS_DIR}/selfplay/adapters/shared-lora/adapter_config.json"
    assert wait["command"][:2] == ["sh", "-c"] and wait["command"][3:] == ["wait-for-run", adapter]
    assert wait["volumeMounts"] == [{"name": "runs", "mountPath": RUNS_DIR, "readOnly": True}]
    assert wait["image"] == "arena:latest"
    written = tmp_path / adapter.lstrip("/")
    command = [*wait["command"][:3], "wait-for-run", str(written)]
    with subprocess.Popen(command, stdout=subprocess.DEVNULL) as waiting:
        time.sleep(0.5)
        assert waiting.poll() is None  # not there yet
        written.parent.mkdir(parents=True)
        written.touch()
        assert waiting.wait(timeout=5) == 0


def test_adapters_without_a_volume_claim_are_refused(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    """Without one, each pod's run directory is its own emptyDir: the inference pods would
    never see the adapters the train pod writes."""
    out = tmp_path / "k8s"
    result = deploy("k8s", str(ROOT / "configs" / "selfplay.yaml"), "--out", str(out), "--insecure")
    assert result.code == 2
    assert "--volume-claim: inference-0 serves adapters" in result.err
    assert not out.exists()


def test_insecure_writes_no_secret_and_says_so(deploy: Callable[..., Result], out: Path) -> None:
    """Into the directory of a run with keys: its Secret must not stay behind to be applied."""
    assert (out / "00-keys.yaml").exists()
    result = deploy("k8s", SMOKE, "--out", str(out), "--insecure", "--namespace", "ml")
    assert result.code == 0 and "INSECURE" in result.err
    assert not (out / "00-keys.yaml").exists()
    for doc in documents(out):
        for pod in pod_specs(doc):
            env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
            assert env["ARENA_INSECURE"] == "1" and "ARENA_KEYS" not in env
            assert "keys" not in {v["name"] for v in pod["volumes"]}


def test_objects_of_policies_named_outside_dns_labels_get_names_kubernetes_takes(
    deploy: Callable[..., Result], tmp_path: Path
) -> None:
    # a policy named My_judge once made Deployment arena-x-inference-My_judge, which the API
    # server refuses (names are lower case [a-z0-9-])
    config = tmp_path / "x.yaml"
    policies = "policies:\n  My_judge: {model: tiny, train: false}\n  big_one: {model: tiny}\n"
    seats = 'seat_policies:\n  "kuhn-poker-v0:player_1": big_one\n  judge: My_judge\n'
    games = (
        "games:\n  - {id: kuhn-poker-v0, act: choice}\n  - {id: mae-v0, kwargs: {num_solvers: 1}}\n"
    )
    config.write_text(f"extends: {SMOKE}\nname: x\n{games}{policies}{seats}eval: {{games: 0}}\n")
    out = tmp_path / "k8s"
    flags = ["--out", str(out), "--insecure", "--image", "i:1", "--volume-claim", "v"]
    result = deploy("k8s", str(config), "opponents.mode=population", *flags)
    assert result.code == 0, result.err
    objects = by_name(out)
    for name in ("inference-my-judge", "inference-big-one", "inference-pool-big-one"):
        assert f"Deployment/arena-x-{name}" in objects, sorted(objects)
    assert "Job/arena-x-learner-big-one" in objects
    for key in objects:
        assert DNS_LABEL.fullmatch(key.split("/")[1]), key
    # the bus name stays the policy's own: the label says which actor a pod runs
    judge = objects["Deployment/arena-x-inference-my-judge"]
    assert judge["spec"]["selector"]["matchLabels"]["arena.dev/actor"] == "inference-My_judge"
    assert container(judge)["args"][-2:] == ["--actor-name", "inference-My_judge"]
    # two policies whose objects would share a name are refused, naming both
    config.write_text(config.read_text().replace("big_one", "my_judge"))
    result = deploy("k8s", str(config), *flags)
    assert result.code == 2
    assert "inference-My_judge and inference-my_judge would both be named" in result.err
