"""``arena train`` against a broker that is already running (``bus.address`` set), and the
multi-host recipe of ``docs/deploy.md``, run as written: every process its own ``arena``
command, over ``tcp://127.0.0.1``, the tiny model.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_external_broker.py`` (the recipe
is marked ``slow``: about a minute).
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from arena.bus.peers import IPC_PATH_LIMIT
from arena.core.errors import ConfigError
from arena.run.addresses import bus_address, local_address, own_broker
from arena.run.config import load_run_config
from arena.run.join_commands import broker_hint
from arena.run.plan import plan
from arena.run.processes import actor_commands, write_configs
from arena.run.resources import cpu_threads
from arena.run.roster import missing, start_command
from arena.run.run_dir import make_run_dir, resolve_for_run
from tests.served import served_by

ROOT = Path(__file__).resolve().parents[3]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
RECIPE_MARKER = "<!-- multi-host recipe:"
POPULATION_MARKER = "<!-- population recipe:"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def smoke(*overrides: str):
    return load_run_config(SMOKE, ["cpu_threads=1", *overrides])


# -- what a run starts ----------------------------------------------------------------------
def test_an_external_broker_is_not_started_and_only_the_asked_for_actors_are(
    tmp_path: Path,
) -> None:
    config = resolve_for_run(
        smoke(
            "bus.address=tcp://127.0.0.1:5555",
            "rollout.actors=0",
            "inference.actors=0",
            "start_learner=false",
        ),
        tmp_path,
    )
    assert not own_broker(config, tmp_path)
    assert actor_commands(config, tmp_path) == []
    config = resolve_for_run(
        smoke("bus.address=tcp://127.0.0.1:5555", "rollout.actors=1"), tmp_path
    )
    commands = {c.name: c for c in actor_commands(config, tmp_path)}
    assert list(commands) == ["inference-0", "learner", "rollout-0"]
    assert commands["rollout-0"].argv[2:4] == ["--address", "tcp://127.0.0.1:5555"]


def test_the_runs_own_broker_is_restartable_and_stays_unset_in_the_config(tmp_path: Path) -> None:
    config = resolve_for_run(smoke("bus.max_restarts=5"), tmp_path)
    assert config.bus.address is None  # a resumed run starts its own broker again
    assert own_broker(config, tmp_path)
    assert bus_address(config, tmp_path) == f"ipc://{tmp_path.resolve()}/bus.sock"
    broker = actor_commands(config, tmp_path)[0]
    assert broker.name == "broker" and broker.restartable and broker.max_restarts == 5
    # a run directory written when the address was filled in is still its own broker's
    old = smoke(f"bus.address=ipc://{tmp_path.resolve()}/bus.sock")
    assert own_broker(old, tmp_path) and actor_commands(old, tmp_path)[0].name == "broker"


def test_counts_of_zero_are_allowed_and_the_run_waits_for_at_least_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    config = smoke("rollout.actors=0", "inference.actors=0", "mode=async", "start_learner=false")
    assert config.awaited() == (1, 1)
    auto = replace(config, cpu_threads=0)
    assert cpu_threads(auto, 4) == {"inference": 4, "learner": 4}  # no division by zero
    assert smoke("rollout.actors=3", "wait.inference_actors=2").awaited() == (3, 2)
    with pytest.raises(ConfigError, match="wait.rollout_actors must be >= 1"):
        smoke("wait.rollout_actors=0")
    with pytest.raises(ConfigError, match="rollout.actors must be >= 0"):
        smoke("rollout.actors=-1")
    text = plan(smoke("bus.address=tcp://10.0.0.1:5555", "rollout.actors=0", "start_learner=false"))
    assert "already running, not started here: arena broker --bind 'tcp://*:5555'" in text
    assert "rollout x0" in text and "waits for 1 on the bus" in text
    assert "joins: arena learner --connect tcp://10.0.0.1:5555" in text
    # a loopback broker binds its own address: a wildcard one is refused without keys
    text = plan(smoke("bus.address=tcp://127.0.0.1:5555", "rollout.actors=0"))
    assert (
        "not started here: arena broker --bind tcp://127.0.0.1:5555 --heartbeat-interval 0.5 "
        "--heartbeat-timeout 5.0)" in text  # and the run's heartbeats (smoke.yaml's)
    )


def test_missing_actors_are_named_with_the_command_that_starts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARENA_KEYS", raising=False)
    monkeypatch.delenv("ARENA_INSECURE", raising=False)
    config = smoke(
        "rollout.actors=0", "inference.actors=0", "wait.rollout_actors=2", "start_learner=false"
    )
    address = "tcp://127.0.0.1:5555"
    actors = [
        {"name": "learner", "kind": "learner", "services": ["learner"]},
        {"name": "x", "kind": "inference", "services": ["policy:main", "policy:main:status"]},
        {"name": "rollout-4", "kind": "rollout", "services": ["rollout"]},
    ]
    rollout = f"arena rollout --connect {address} --config {tmp_path}/config.yaml --index"
    assert missing(config, actors, tmp_path, address) == [
        f"rollout-0 (of 1 more rollout actor(s), of 2): {rollout} 0"
    ]
    # a line for each, an index of its own (the same line for all once started three actors
    # named rollout-0, which fought over the name), none that is on the bus already
    three = replace(config, wait=replace(config.wait, rollout_actors=4))
    present = actors[:2] + [{**actors[2], "name": "rollout-1"}]
    assert missing(three, present, tmp_path, address) == [
        f"rollout-{i} (of 3 more rollout actor(s), of 4): {rollout} {i}" for i in (0, 2, 3)
    ]
    assert missing(config, actors + [{**actors[2], "name": "rollout-9"}], tmp_path, address) == []
    # the run's own settings, read from its config rather than spelled out (issue 30, item 12)
    inference = start_command(config, tmp_path, address, "inference")
    assert inference == f"arena inference --connect {address} --config {tmp_path}/config.yaml"
    monkeypatch.setenv("ARENA_KEYS", "/secure/keys")  # what --keys sets: the hints pass it on
    assert start_command(config, tmp_path, address, "learner").endswith(" --keys /secure/keys")
    # the broker's too: one started without them refuses the run's keyed actors
    assert broker_hint("tcp://10.0.0.1:5555", config.bus) == (
        "arena broker --bind 'tcp://*:5555' --heartbeat-interval 0.5 --heartbeat-timeout 5.0 "
        "--keys /secure/keys"
    )


POPULATION = [
    "games=[{id: kuhn-poker-v0, act: choice, role_kwargs: {prefill: true}}]",
    "policies={first: {}, second: {model: tiny, lora: {r: 4}}}",
    "seat_policies={player_0: first, player_1: second}",
    "learner.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}",
    "opponents.mode=population",
]
"""A population run with every kind of inference actor: the shared base's, its pool (with the
adapter ``first`` on the base), a policy on a model of its own (``second``, a LoRA adapter on it)
and that policy's pool."""


def by_hand(tmp_path: Path, *overrides: str):
    """A population run that starts no actor itself (its config.yaml written, as arena train
    writes it), and the same run as one that starts its inference actors."""
    hand = smoke(
        "bus.address=tcp://127.0.0.1:5555",
        "rollout.actors=0",
        "inference.actors=0",
        "start_learner=false",
        *POPULATION,
        *overrides,
    )
    hand = resolve_for_run(hand, tmp_path)
    write_configs(hand, tmp_path)
    return hand, replace(hand, inference=replace(hand.inference, actors=1))


def test_a_hand_started_actor_serves_what_the_runs_own_of_that_name_serves(
    tmp_path: Path,
) -> None:
    hand, own = by_hand(tmp_path)
    assert actor_commands(hand, tmp_path) == []  # inference.actors=0: no pool actor either
    commands = {c.name: c.argv for c in actor_commands(own, tmp_path)}
    inference = [n for n in commands if n.startswith("inference-")]
    assert inference == [
        "inference-0",
        "inference-pool",
        "inference-second",
        "inference-pool-second",
    ]
    config = str(tmp_path / "config.yaml")
    address = "tcp://127.0.0.1:5555"
    for name in inference:  # the run's own are started as one is started by hand
        assert commands[name] == ["-v", "inference", "--address", address] + [
            "--config",
            config,
            "--actor-name",
            name,
        ], name
    pool = served_by(["--connect", address, "--config", config, "--actor-name", "inference-pool"])
    assert (pool.name, pool.model, pool.seed, pool.default_adapter) == ("pool", "tiny", 99, "")
    assert pool.adapters == {"first": str(tmp_path.resolve() / "adapters" / "first")}
    second = served_by(
        ["--connect", address, "--config", config, "--actor-name", "inference-pool-second"]
    )
    assert (second.name, second.seed, second.adapters, second.default_adapter) == (
        "pool-second",
        200,
        {},
        "",
    )
    own = served_by(["--connect", address, "--config", config, "--actor-name", "inference-second"])
    assert (own.name, own.seed, list(own.adapters)) == ("second", 100, [own.default_adapter])
    # --policy NAME is inference-NAME; without --actor-name, inference-0 (the seed is the run's)
    assert served_by(["--connect", address, "--config", config, "--policy", "second"]) == served_by(
        ["--connect", address, "--config", config, "--actor-name", "inference-second"]
    )
    assert served_by(["--connect", address, "--config", config]).seed == 0
    assert (
        served_by(["--connect", address, "--config", config, "--actor-name", "inference-3"]).seed
        == 3
    )
    with pytest.raises(ConfigError) as err:
        served_by(["--connect", address, "--config", config, "--actor-name", "inference-poll"])
    assert str(err.value) == (
        "--actor-name inference-poll: the run has no inference actor by that name; its "
        "inference actors are inference-<N>, inference-pool, inference-second, "
        "inference-pool-second; did you mean 'inference-pool'?"
    )
    # a name of its own (a host's, a pod's) joins as one more actor of the shared base
    extra = served_by(["--connect", address, "--config", config, "--actor-name", "gpu-node-7"])
    assert extra == served_by(["--connect", address, "--config", config])
    with pytest.raises(ConfigError, match="--policy second serves as the run's inference-second"):
        served_by(
            [
                "--connect",
                address,
                "--config",
                config,
                "--policy",
                "second",
                "--actor-name",
                "inference-pool",
            ]
        )


def test_a_config_read_from_outside_the_run_directory_serves_the_runs_adapter(
    tmp_path: Path,
) -> None:
    """config.yaml records its run directory: a copy on another host, or Kubernetes' mounted
    /etc/arena/config, serves the adapter in the run directory, not beside the copy."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    by_hand(run_dir)
    saved = load_run_config(run_dir / "config.yaml")
    assert saved.run_dir == str(run_dir.resolve())
    mounted = tmp_path / "etc" / "arena" / "config"
    mounted.mkdir(parents=True)
    (mounted / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    argv = ["--connect", "tcp://127.0.0.1:5555", "--config", str(mounted / "config.yaml")]
    second = served_by([*argv, "--actor-name", "inference-second"])
    adapter = run_dir.resolve() / "adapters" / "policies" / "second" / "shared-lora"
    assert second.adapters == {"shared-lora": str(adapter)}
    assert (adapter / "adapter_config.json").is_file()
    assert served_by([*argv, "--actor-name", "inference-pool"]).adapters == {
        "first": str(run_dir.resolve() / "adapters" / "first")
    }
    # a config.yaml from before run directories were recorded: its own directory
    old = (run_dir / "config.yaml").read_text().replace(f"run_dir: {run_dir.resolve()}", "")
    assert "run_dir:" not in old
    (mounted / "config.yaml").write_text(old)
    own = served_by([*argv, "--actor-name", "inference-second"])
    assert own.adapters == {"shared-lora": str(mounted / "adapters/policies/second/shared-lora")}


def test_a_run_waits_for_each_pool_actor_by_name_and_prints_its_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARENA_KEYS", raising=False)
    monkeypatch.delenv("ARENA_INSECURE", raising=False)
    hand, _ = by_hand(tmp_path)
    address = "tcp://127.0.0.1:5555"
    start = f"arena inference --connect {address} --config {tmp_path}/config.yaml --actor-name"
    actors = [
        {"name": "learner", "services": ["learner"]},
        {"name": "learner-second", "services": ["learner:second"]},
        {"name": "rollout-0", "services": ["rollout"]},
        {"name": "inference-second-77", "services": ["policy:second"]},  # --policy second
        # a pool actor under another name: the coordinator could not tell it what to load
        {"name": "x", "services": ["policy:pool", "policy:pool:status"]},
    ]
    pools = [
        f"inference-pool serving policy:pool (the shared base's past snapshots): {start} "
        "inference-pool",
        "inference-pool-second serving policy:pool-second (past snapshots of second's own "
        f"model): {start} inference-pool-second",
    ]
    # a pool actor is no inference actor of policy:main, and one of policy:main no pool actor
    assert missing(hand, actors, tmp_path, address) == [
        f"1 more inference actor(s) serving policy:main (of 1): {start.removesuffix(' --actor-name')}",
        *pools,
    ]
    main = {"name": "inference-pool-second", "services": ["policy:main"]}
    assert missing(hand, [*actors, main], tmp_path, address) == pools
    pool = {"name": "inference-pool", "services": ["policy:pool"]}
    pool_second = {"name": "inference-pool-second", "services": ["policy:pool-second"]}
    assert missing(hand, [*actors, main, pool, pool_second], tmp_path, address) == []
    text = plan(hand, tmp_path)
    assert (
        f"inference-pool serves policy:pool (not started here, joins: {start} inference-pool)"
        in text
    )


def test_every_printed_command_carries_the_runs_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The waiting lines and --dry-run's: each kind's command gets --keys DIR (or --insecure)
    the same way, a named policy's own learner's too."""
    monkeypatch.delenv("ARENA_INSECURE", raising=False)
    monkeypatch.setenv("ARENA_KEYS", "/secure/keys")
    hand, _ = by_hand(tmp_path, "wait.rollout_actors=1")
    address = "tcp://127.0.0.1:5555"
    lines = missing(hand, [], tmp_path, address)
    assert len(lines) == 7  # learner, inference-0, learner-second, 3 named inference, rollout
    assert "the learner of policy second: arena learner --connect" in lines[2]
    assert lines[2].endswith(f"--config {tmp_path}/learner-second.yaml --keys /secure/keys")
    assert all(line.endswith(" --keys /secure/keys") for line in lines), lines
    text = plan(replace(hand, start_learner=False), tmp_path)
    joins = [part for part in text.split("joins: ")[1:]]
    assert len(joins) == 4  # the learner, inference-pool, inference-second, inference-pool-second
    assert all(" --keys /secure/keys" in j.split(")")[0].split("\n")[0] for j in joins), joins
    monkeypatch.delenv("ARENA_KEYS")
    monkeypatch.setenv("ARENA_INSECURE", "1")
    assert all(line.endswith(" --insecure") for line in missing(hand, [], tmp_path, address))


def test_a_fixed_run_dir_is_used_once(tmp_path: Path) -> None:
    config = smoke(f"run_dir={tmp_path}/run")
    assert make_run_dir(config) == tmp_path / "run"
    (tmp_path / "run" / "config.yaml").write_text("name: smoke\n")
    with pytest.raises(ConfigError, match="resume="):
        make_run_dir(config)


# -- against real processes -----------------------------------------------------------------
def test_no_broker_at_the_address_fails_fast_and_says_how_to_start_one(tmp_path: Path) -> None:
    port = free_port()
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "arena",
            "train",
            SMOKE,
            f"bus.address=tcp://127.0.0.1:{port}",
            "bus.connect_timeout=2",
            f"run_dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert time.monotonic() - started < 60
    assert f"no broker answered at bus.address=tcp://127.0.0.1:{port}" in result.stderr
    assert f"arena broker --bind tcp://127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "run" / "logs").glob("*.log"))  # nothing was started


def deploy_recipe(marker: str = RECIPE_MARKER) -> list[str]:
    """The command lines of the multi-host recipe in ``docs/deploy.md`` (the fenced block after
    its ``marker``), without their comments."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    after = text[text.index(marker) :]
    block = re.search(r"```bash\n(.*?)```", after, re.S)
    assert block is not None, "no ```bash block after the recipe marker"
    lines = []
    for line in block.group(1).splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line:
            lines.append(line)
    return lines


def localize(line: str, port: int) -> list[str]:
    """A recipe line for this machine: host-a is 127.0.0.1, port 5555 a free one, configs/
    the repository's, and ``arena`` this interpreter's."""
    line = line.replace("host-a", "127.0.0.1").replace("5555", str(port))
    argv = shlex.split(line.replace("configs/", f"{ROOT}/configs/"))
    assert argv[0] == "arena", line
    return [sys.executable, "-m", "arena", *argv[1:]]


def wait_until(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


@pytest.mark.slow
def test_the_documented_multi_host_recipe_trains_through_an_external_broker(tmp_path: Path) -> None:
    """The recipe as a population run, as its docs say (``opponents.mode=population`` on the
    train line, and the pool actor's line): every opponent a past snapshot (``latest_prob=0``),
    served by the pool actor started by hand."""
    recipe = deploy_recipe()
    assert [shlex.split(line)[1] for line in recipe] == [
        "keys",
        "broker",
        "ping",
        "train",
        "inference",
        "learner",
        "rollout",
    ]
    (pool_line,) = deploy_recipe(POPULATION_MARKER)
    train = next(i for i, line in enumerate(recipe) if shlex.split(line)[1] == "train")
    recipe[train] += " opponents.mode=population opponents.latest_prob=0"
    recipe.insert(train + 1, pool_line)
    port = free_port()
    logs: dict[str, Path] = {}
    background: dict[str, subprocess.Popen] = {}
    run_dir = tmp_path / "runs" / "multihost"

    def start(name: str, argv: list[str]) -> subprocess.Popen:
        logs[name] = tmp_path / f"{name}.out"
        with open(logs[name], "w") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
        background[name] = proc
        return proc

    def tail(name: str) -> str:
        return logs[name].read_text()[-3000:] if name in logs else ""

    try:
        for line in recipe:
            argv = localize(line, port)
            command = argv[3]
            if command in ("keys", "ping"):  # run to completion
                done = subprocess.run(
                    argv, capture_output=True, text=True, cwd=tmp_path, timeout=120
                )
                assert done.returncode == 0, (line, done.stdout, done.stderr)
            elif command == "broker":
                start("broker", argv)
                wait_until(lambda: "listening" in tail("broker"), 60, "the broker never listened")
            elif command == "train":
                start("train", argv)
                # the actors below read the files the run writes before anything else
                wait_until(
                    lambda: (
                        (run_dir / "learner.yaml").exists()
                        or background["train"].poll() is not None
                    ),
                    120,
                    "no learner.yaml",
                )
                assert background["train"].poll() is None, tail("train")
            else:  # by its actor name where it has one: two inference actors start here
                named = argv.index("--actor-name") + 1 if "--actor-name" in argv else 0
                start(argv[named] if named else command, argv)
        assert len(background) == len(recipe) - 2, list(background)  # keys and ping ran
        train = background["train"]
        try:
            train.wait(timeout=480)
        except subprocess.TimeoutExpired:
            pytest.fail("arena train did not finish:\n" + tail("train"))
        out = logs["train"].read_text()
        assert train.returncode == 0, out + "".join(tail(n) for n in background if n != "train")
        for name, proc in background.items():  # the others serve on, as they would elsewhere
            assert name == "train" or proc.poll() is None, f"{name} died:\n{tail(name)}"
    finally:
        for proc in background.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in background.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    assert f"tcp://127.0.0.1:{port}" in out and "waiting up to" in out
    # the waiting message gives the --config form, and the actor started with it is not named
    assert f"arena inference --connect tcp://127.0.0.1:{port} --config" in out
    # the pool actor too, by its name: the run started none (inference.actors=0)
    assert re.search(r"inference-pool serving policy:pool \(.*--actor-name inference-pool", out)
    assert "settings unlike the run's" not in out
    assert not list((run_dir / "logs").glob("*.log")), "train started a process itself"
    rows = [json.loads(r) for r in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["episodes"] >= 8 and "learner/loss" in r for r in rows)
    transcripts = [json.loads(r) for r in (run_dir / "transcripts.jsonl").read_text().splitlines()]
    assert transcripts and all(t["id"].startswith("rollout-0-") for t in transcripts)
    opponents = {p for t in transcripts for p in t["seats"].values() if p != "main"}
    assert opponents and all(
        re.fullmatch(r"pool@(initial|step-0+1) \(not trained\)", p) for p in opponents
    )
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("step-*"))[-1].endswith("2")
    assert (run_dir / "eval_summary.json").exists()


def test_a_run_dir_too_deep_for_a_unix_socket_gets_a_short_one_named_after_it(
    tmp_path: Path,
) -> None:
    # A socket path over 107 bytes cannot be bound (zmq: "File name too long"): a deep
    # output_dir once failed every run with a traceback.
    deep = tmp_path / ("d" * 60) / "smoke" / "20261127-160015"
    address = local_address(deep)
    assert address.startswith("ipc://") and len(address) - len("ipc://") <= IPC_PATH_LIMIT
    assert address == local_address(deep)  # the same every time: resume and joiners find it
    assert address != local_address(deep.parent / "20261127-160016")
    shallow = tmp_path / "run"
    assert local_address(shallow) == f"ipc://{shallow.resolve()}/bus.sock"
