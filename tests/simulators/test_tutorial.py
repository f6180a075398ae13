"""The "your own user simulator" tutorial of ``docs/plugins.md``, run as written.

Its module and its entry point are installed as a real distribution (a package plus a
``dist-info`` with ``entry_points.txt``, found by ``importlib.metadata`` through ``PYTHONPATH``,
as ``pip install`` leaves it); fresh processes then find the simulator by id, play the retail
game's user seat with it against the scripted agent, and show it in ``arena train --dry-run``.

Run with `.venv/bin/python -m pytest -q tests/simulators/test_tutorial.py`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.tutorials import install, python

MARKER = "<!-- simulator tutorial:"


def install_simulator(site: Path) -> str:
    """Install the tutorial into ``site``; its simulator's id."""
    (sim_id,) = install(site, MARKER, "arena.simulators")
    return sim_id


def run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return python(site, *args)


PLAY = """
import asyncio, simulators
from arena.play.episode import play_episode
from arena.play.seats import BotSeat, SimulatorSeat
from games.bots.retail import RetailAgentBot
from games.retail import RetailSupport

assert "{sim}" in simulators.ids()
env = RetailSupport(kinds=["cancel"])
seats = {{"user": SimulatorSeat(simulators.make("{sim}"), "{sim}"),
         "agent": BotSeat(RetailAgentBot(), "retail-agent-v0")}}
episode = asyncio.run(play_episode(env, "retail-v0", seats, seed=1, episode_id="t"))
users = [t.text for t in episode.turns if t.seat == "user"]
print(episode.termination, users[0] == env.task.request, users[-1].endswith("###STOP###"))
print(all(not t.trained for t in episode.turns if t.seat == "user"))
"""


def test_the_tutorials_simulator_is_found_and_plays_the_user_seat(tmp_path: Path) -> None:
    sim_id = install_simulator(tmp_path)
    assert sim_id == "patient-user-v0"
    done = run(tmp_path, "-c", PLAY.format(sim=sim_id))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["user_stop", "True", "True", "True"]


def test_a_run_config_names_it_for_the_user_seat(tmp_path: Path) -> None:
    sim_id = install_simulator(tmp_path / "site")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: t\nmodel: tiny\ngames:\n  - id: retail-v0\n    simulators:\n"
        f"      user: {{id: {sim_id}}}\n"
    )
    done = run(tmp_path / "site", "-m", "arena", "train", str(config), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert f"user=simulator:{sim_id} agent=executor-v0" in done.stdout
    config.write_text(
        f"name: t\nmodel: tiny\ngames:\n  - id: retail-v0\n    simulators:\n"
        f"      agent: {{id: {sim_id}}}\n"
    )
    refused = run(tmp_path / "site", "-m", "arena", "train", str(config), "--dry-run")
    assert refused.returncode == 2
    assert "seat 'agent' cannot be simulated; the game's simulatable seats: ['user']" in (
        refused.stderr
    )
