"""Run setup: how CPU threads are split among the processes that compute at once, that a
launched child gets them, and that the learner's temperature and the dtype it rounds its weights
for are the sampling side's.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_plan.py``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from arena.run.config import load_run_config
from arena.run.launcher import Launcher
from arena.run.plan import plan
from arena.run.resources import core_share, cpu_threads, threads_env
from arena.run.run_dir import resolve_for_run


@pytest.fixture(autouse=True)
def no_omp_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


@pytest.mark.parametrize(
    ("overrides", "cores", "expected"),
    [
        # sync: generation and training take turns, each gets every core
        (["mode=sync"], 2, {"inference": 2, "learner": 2}),
        # async: one inference actor and the learner run at once on 2 cores
        (["mode=async"], 2, {"inference": 1, "learner": 1}),
        (["mode=async"], 8, {"inference": 4, "learner": 4}),
        # 2 inference actors + the population pool generate together: 8 // 3 = 2 each
        (
            ["mode=sync", "inference.actors=2", "opponents.mode=population"],
            8,
            {"inference": 2, "learner": 8},
        ),
        (
            ["mode=async", "inference.actors=2", "opponents.mode=population"],
            8,
            {"inference": 2, "learner": 2},
        ),
        (["mode=async", "inference.actors=3"], 2, {"inference": 1, "learner": 1}),  # never 0
        (["mode=async", "cpu_threads=3"], 2, {"inference": 3, "learner": 3}),  # as configured
    ],
)
def test_cores_are_split_among_processes_that_compute_at_once(
    overrides: list[str], cores: int, expected: dict[str, int]
) -> None:
    assert cpu_threads(load_run_config("configs/smoke.yaml", overrides), cores) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # sync: 3 inference actors generate together (the run's, the responder's and the
        # judge's): 8 // 3 = 2 each; 2 learners step together (the run's, the responder's; the
        # judge is frozen): 8 // 2 = 4 each
        (["mode=sync"], {"inference": 2, "learner": 4}),
        # async: all 5 at once, 8 // 5 = 1 each
        (["mode=async"], {"inference": 1, "learner": 1}),
        # population: the two pool actors too (the shared base's, the responder's; the frozen
        # judge has none), 5 generating: 8 // 5 = 1 each
        (["mode=sync", "opponents.mode=population"], {"inference": 1, "learner": 4}),
    ],
)
def test_policies_on_models_of_their_own_count_among_those_that_compute(
    overrides: list[str], expected: dict[str, int]
) -> None:
    config = load_run_config("configs/two_models.yaml", overrides)
    assert cpu_threads(config, 8) == expected


def test_omp_num_threads_in_the_environment_wins_over_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    config = load_run_config("configs/smoke.yaml", ["mode=async"])
    assert cpu_threads(config, 2) == {}
    assert "from OMP_NUM_THREADS" in plan(config)
    assert cpu_threads(load_run_config("configs/smoke.yaml", ["cpu_threads=2"]), 8) == {
        "inference": 2,
        "learner": 2,
    }


def test_under_ray_each_process_has_the_cpus_ray_reserves_for_its_kind() -> None:
    """launcher=ray sets each process's OMP_NUM_THREADS from ray.resources.<kind>.num_cpus
    (arena/run/ray_launcher.py), not from this host's cores: the plan said 2 learner threads on
    a 2-core host where the learner ran with 1."""
    config = load_run_config("configs/smoke.yaml", ["launcher=ray"])
    assert cpu_threads(config, 8) == {"inference": 1, "learner": 1}
    assert "cpu threads  {'inference': 1, 'learner': 1}" in plan(config)
    more = [
        "launcher=ray",
        "ray.resources.learner.num_cpus=4",
        "ray.resources.inference.num_cpus=0.5",
    ]
    assert cpu_threads(load_run_config("configs/smoke.yaml", more), 2) == {
        "inference": 1,
        "learner": 4,
    }
    pinned = load_run_config("configs/smoke.yaml", ["launcher=ray", "cpu_threads=3"])
    assert cpu_threads(pinned, 8) == {"inference": 3, "learner": 3}


def test_processes_computing_at_once_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """``core_share``: cores // processes, never 0; ``threads_env``: that share as a CPU
    child's OMP_NUM_THREADS (what a tournament gives each inference actor), and nothing on a
    GPU or where the environment already sets OMP_NUM_THREADS."""
    assert [core_share(n, 8) for n in (0, 1, 2, 3, 8, 9)] == [8, 8, 4, 2, 1, 1]
    cores = len(os.sched_getaffinity(0))
    assert threads_env(1, "cpu") == {"OMP_NUM_THREADS": str(cores)}
    assert threads_env(2 * cores, "cpu") == {"OMP_NUM_THREADS": "1"}
    assert threads_env(1, "cuda") == threads_env(1, "cuda:1") == {}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads_env(2, "cpu") == {}


def test_a_child_gets_its_own_environment(tmp_path: Path) -> None:
    """Children are arena subcommands (here brokers); each sees the launcher's environment, its
    own additions, and the launcher's pid (so it dies with it)."""
    launcher = Launcher(tmp_path, env={"SHARED": "a"})
    try:
        own = launcher.start(
            "own", ["broker", "--bind", f"ipc://{tmp_path}/own.sock"], env={"OMP_NUM_THREADS": "1"}
        )
        other = launcher.start("other", ["broker", "--bind", f"ipc://{tmp_path}/other.sock"])
        # /proc/<pid>/environ shows the parent's environment until the child has exec'd: read
        # it only once each broker says it is listening
        deadline = time.monotonic() + 60
        for name in ("own", "other"):
            log = tmp_path / f"{name}.log"
            while "listening on" not in log.read_text() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert "arena broker listening on" in log.read_text()
        for child, threads in ((own, "1"), (other, None)):
            environ = _environ(child.pid)
            assert environ["SHARED"] == "a" and environ.get("OMP_NUM_THREADS") == threads
            assert environ["ARENA_PARENT_PID"] == str(os.getpid())
        launcher.check()  # both alive: no ChildDied
    finally:
        launcher.stop_all()


def _environ(pid: int | None) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


@pytest.mark.parametrize(
    ("overrides", "temperature"), [([], 0.7), (["sampling.temperature=1.3"], 1.3)]
)
def test_the_learner_divides_by_the_sampling_temperature(
    overrides: list[str], temperature: float, tmp_path: Path
) -> None:
    """Samplers report logprobs of softmax(logits / T) at the run's sampling temperature; the
    learner's loss.temperature is that T, so both sides mean the distribution that sampled."""
    config = load_run_config("configs/selfplay_text.yaml", overrides)
    assert config.sampling.temperature == temperature
    resolved = resolve_for_run(config, tmp_path)
    assert resolved.learner.loss.temperature == temperature


@pytest.mark.parametrize(
    ("overrides", "sampled_in"),
    [
        (["inference.dtype=float32"], "float32"),
        (["inference.dtype=bfloat16"], "bfloat16"),
    ],
)
def test_the_learner_knows_the_dtype_its_samples_come_from(
    overrides: list[str], sampled_in: str, tmp_path: Path
) -> None:
    """A float32 learner beside a bf16 service must round its weights to bf16 first
    (trainers/precision.py); the plan tells it what the service holds."""
    config = load_run_config("configs/selfplay.yaml", ["learner.autocast=null", *overrides])
    assert resolve_for_run(config, tmp_path).learner.sampled_in == sampled_in


def test_dtype_auto_is_resolved_for_the_learner(tmp_path: Path) -> None:
    from arena.models import fast_dtype

    config = load_run_config("configs/selfplay.yaml", ["inference.dtype=auto"])
    assert resolve_for_run(config, tmp_path).learner.sampled_in == fast_dtype("cpu")


@pytest.mark.parametrize("elsewhere", ["inference.actors=0", "launcher=ray"])
def test_dtype_auto_of_inference_actors_elsewhere_is_the_learners_to_resolve(
    elsewhere: str, tmp_path: Path
) -> None:
    """This host knows nothing of the hosts a deployment's or a Ray cluster's inference actors
    run on (a CPU coordinator would say float32 for GPU nodes in bf16); an explicit dtype is
    still passed on as it is."""
    config = load_run_config("configs/selfplay.yaml", ["inference.dtype=auto", elsewhere])
    assert resolve_for_run(config, tmp_path).learner.sampled_in == "auto"
    config = load_run_config("configs/selfplay.yaml", ["inference.dtype=bfloat16", elsewhere])
    assert resolve_for_run(config, tmp_path).learner.sampled_in == "bfloat16"


def test_a_simulator_on_its_own_policy_is_awaited_and_shown_with_its_command(
    tmp_path: Path,
) -> None:
    from arena.run.roster import expects_others, missing

    config = load_run_config(
        "configs/user_tool_use.yaml",
        ["games.0.simulators.user.id=llm-user-v0", "games.0.simulators.user.policy=frozen"],
    )
    text = plan(config)
    assert "user=simulator:llm-user-v0@frozen" in text
    assert "policy:frozen for retail-v0.user: waits for it, not started here" in text
    assert expects_others(config)
    address = "ipc:///x/bus.sock"
    actors = [
        {"name": "learner", "kind": "learner", "services": ["learner"]},
        {"name": "i", "kind": "inference", "services": ["policy:main", "policy:main:status"]},
        {"name": "rollout-0", "kind": "rollout", "services": ["rollout"]},
        {"name": "rollout-1", "kind": "rollout", "services": ["rollout"]},
    ]
    assert missing(config, actors, tmp_path, address) == [
        "an inference actor serving policy:frozen (the simulator of retail-v0.user): "
        f"arena inference --connect {address} --name frozen --model CHECKPOINT_OR_MODEL"
    ]
    served = {"name": "f", "kind": "inference", "services": ["policy:frozen"]}
    assert missing(config, [*actors, served], tmp_path, address) == []
    # the trained policy itself is no extra actor to wait for
    main = load_run_config(
        "configs/user_tool_use.yaml",
        ["games.0.simulators.user.id=llm-user-v0", "games.0.simulators.user.policy=main"],
    )
    assert missing(main, actors, tmp_path, address) == [] and not expects_others(main)


def test_choice_is_shown_in_the_plan_and_refused_on_a_free_text_game() -> None:
    from arena.core.errors import ConfigError
    from arena.run.validation import validate

    config = load_run_config("configs/smoke.yaml", ["games.1.act=choice"])
    validate(config)
    lines = [line for line in plan(config).splitlines() if "game  " in line]
    assert "act=choice" not in lines[0] and "act=choice" in lines[1]
    free = load_run_config(
        "configs/smoke.yaml", ["games.0.id=negotiation-v0", "games.0.act=choice"]
    )
    with pytest.raises(ConfigError, match="negotiation-v0 takes free text.*act: generate"):
        validate(free)


def test_the_learner_line_says_it_trains_the_named_policies_adapters() -> None:
    """Named policies on the shared base train an adapter each with learner.lora.enabled off:
    the learner line said ``lora=False`` above the line listing the adapters it trains."""
    named = plan(load_run_config("configs/kuhn_lora_seats.yaml", ["model=tiny"]))
    assert " lora=adapters (started here)" in named and "policies     poker, responder" in named
    shared = ["learner.lora.enabled=true"]
    assert " lora=True (started here)" in plan(load_run_config("configs/smoke.yaml", shared))
    assert " lora=False (started here)" in plan(load_run_config("configs/smoke.yaml"))
