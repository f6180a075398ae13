"""Run setup: how CPU threads are split among the processes that compute at once, and that a
launched child gets them."""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.config import load_run_config
from arena.launch import Launcher
from arena.run_plan import cpu_threads, plan


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
        (["mode=sync", "inference.actors=2", "opponents.mode=population"], 8, {"inference": 2, "learner": 8}),
        (["mode=async", "inference.actors=2", "opponents.mode=population"], 8, {"inference": 2, "learner": 2}),
        (["mode=async", "inference.actors=3"], 2, {"inference": 1, "learner": 1}),  # never 0
        (["mode=async", "cpu_threads=3"], 2, {"inference": 3, "learner": 3}),  # as configured
    ],
)
def test_cores_are_split_among_processes_that_compute_at_once(
    overrides: list[str], cores: int, expected: dict[str, int]
) -> None:
    assert cpu_threads(load_run_config("configs/smoke.yaml", overrides), cores) == expected


def test_omp_num_threads_in_the_environment_wins_over_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    config = load_run_config("configs/smoke.yaml", ["mode=async"])
    assert cpu_threads(config, 2) == {}
    assert "from OMP_NUM_THREADS" in plan(config)
    assert cpu_threads(load_run_config("configs/smoke.yaml", ["cpu_threads=2"]), 8) == {"inference": 2, "learner": 2}


def test_a_child_gets_its_own_environment(tmp_path: Path) -> None:
    launcher = Launcher(tmp_path, env={"SHARED": "a"})
    code = "import os; print(os.environ['SHARED'], os.environ.get('OMP_NUM_THREADS'))"
    own = launcher.start("own", ["-c", code], env={"OMP_NUM_THREADS": "1"})
    other = launcher.start("other", ["-c", code])
    for child in (own, other):
        assert child.process is not None and child.process.wait(timeout=30) == 0
    assert (tmp_path / "own.log").read_text().split() == ["a", "1"]
    assert (tmp_path / "other.log").read_text().split() == ["a", "None"]
