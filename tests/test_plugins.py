"""Plugins, end to end: a real installed distribution registers a game, a role and a bot through
entry points, and Arena's commands find them in fresh processes.

The distribution lives under pytest's ``tmp_path``: a package ``arena_plugin_demo`` and its
``arena_plugin_demo-0.1.dist-info`` (``METADATA`` and ``entry_points.txt``), found by
``importlib.metadata`` through ``PYTHONPATH``, exactly as ``pip install`` would leave it. It also
registers a broken game (a plain ``pettingzoo.AECEnv``), which must not hide the good ones.

Run with ``.venv/bin/python -m pytest -q tests/test_plugins.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIST = "arena-plugin-demo"

PLUGIN = '''
"""Race to five.

Seats: 2. player_0 moves first.

Rules: a counter starts at 0. The players take turns; on a turn you add 1 or 2 to the counter.
Whoever brings the counter to 5 or more wins.

Actions: "add 1" or "add 2".

Rewards: +1 for the winner, -1 for the loser.
"""

from dataclasses import dataclass

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from games.bots.base import Bot
from games.text_env import TextGame
from roles.base import Role

TARGET = 5


class DemoGame(TextGame):
    """Race to five, on the TextGame hooks."""

    metadata = {**TextGame.metadata, "name": "demo_v0", "max_turns": TARGET,
                "strongest_bot": "demo-bot-v0"}
    action_names = ("add 1", "add 2")

    def __init__(self, **kwargs):
        super().__init__(2, spaces.Discrete(2), spaces.Box(0, TARGET + 1, (1,), np.float32),
                         **kwargs)

    def _new_game(self, rng):
        self.counter = 0
        self.mover = 0

    def _current_agent(self):
        return self.possible_agents[self.mover]

    def _legal_actions(self, agent):
        return [0, 1]

    def _apply(self, agent, action):
        self.counter += int(action) + 1
        if self.counter >= TARGET:
            other = self.possible_agents[1 - self.mover]
            return {agent: 1.0, other: -1.0}
        self.mover = 1 - self.mover
        return {}

    def _outcome(self):
        return "win" if self.counter >= TARGET else None

    def _observation_array(self, agent):
        return np.array([self.counter], dtype=np.float32)

    def _describe(self, agent):
        return f"Race to {TARGET}. The counter is at {self.counter}."


@dataclass
class DemoRole(Role):
    name: str = "demo"
    what: str = "how much to add, as add 1 or add 2"


class GreedyBot(Bot):
    """Always adds as much as it may."""

    def act(self, env, agent):
        return max(env.legal_actions(agent))


class RaisingGame(DemoGame):
    """A game whose factory raises (a licence check, a missing data file...)."""

    def __init__(self, **kwargs):
        raise RuntimeError("demo data file missing")


class RaisingBackend:
    """A policy backend whose ``from_config`` raises."""

    @classmethod
    def from_config(cls, config):
        raise RuntimeError("no GPU driver")


class NotATextGame(AECEnv):
    """A PettingZoo env with text methods, but not a games.TextGame."""

    metadata = {"name": "not_a_text_game_v0", "render_modes": []}

    def rules(self, agent=None):
        return "No rules."

    def action_to_text(self, agent, action):
        return str(action)

    def parse_action(self, agent, text):
        return None
'''

ENTRY_POINTS = """
[arena.games]
demo-v0 = arena_plugin_demo:DemoGame
broken-v0 = arena_plugin_demo:NotATextGame
raising-v0 = arena_plugin_demo:RaisingGame

[arena.roles]
demo-role-v0 = arena_plugin_demo:DemoRole

[arena.bots]
demo-bot-v0 = arena_plugin_demo:GreedyBot

[arena.policies]
raising = arena_plugin_demo:RaisingBackend
"""

PLAY = """
import json

import games
import games.bots
import roles
from games.play import play_game

role = roles.make("demo-role-v0", prefill=True)
bot = games.bots.make("demo-bot-v0", seed=0)
spec = games.spec("demo-v0")
env = games.make("demo-v0")
outcome = play_game(env, {agent: bot for agent in env.possible_agents}, seed=0)

# a role-driven turn: the role's prompt carries the game's rules, its reading drives step_text
env.reset(seed=1)
system, user = role.messages(env.rules("player_0"), "player_0", env.observe("player_0")["text"],
                             first_turn=True)
reply = role.read("add 2</answer>")
env.step_text(reply.action_text)
print(json.dumps({
    "role": f"{type(role).__module__}:{type(role).__name__}", "role_name": role.name,
    "bot": f"{type(bot).__module__}:{type(bot).__name__}",
    "spec": [spec.plugin, list(spec.seats), spec.kind, spec.strongest_bot],
    "returns": outcome.returns, "turns": outcome.turns, "reason": outcome.termination_reason,
    "rules_in_prompt": "Race to five." in system["content"], "user": user["content"],
    "after_role_turn": env.observe("player_1")["text"].splitlines()[0],
}))
"""


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process that sees the demo distribution as installed."""
    site = tmp_path_factory.mktemp("site")
    package = site / "arena_plugin_demo"
    package.mkdir()
    (package / "__init__.py").write_text(PLUGIN)
    info = site / "arena_plugin_demo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    path = [str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_arena_games_lists_the_plugin_and_names_the_broken_one(plugin_env: dict[str, str]) -> None:
    result = run(plugin_env, "-m", "arena", "games")
    assert result.returncode == 1, result.stderr  # a broken game is reported, see its docstring
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[1:]}
    assert rows["demo-v0"] == ["2", "competitive", "perfect", "demo-bot-v0"]
    assert {"tictactoe-v0", "nim-v0", "kuhn-poker-v0", "openspiel-kuhn_poker-v0"} <= set(rows)
    assert "broken-v0" not in rows
    assert "Traceback" not in result.stderr
    assert "1 game cannot be listed" in result.stderr
    assert (
        f"  broken-v0 (arena_plugin_demo:NotATextGame, plugin {DIST}): NotATextGame is not "
        "a games.TextGame (its bases: pettingzoo.utils.env.AECEnv"
    ) in result.stderr
    ids = run(plugin_env, "-m", "arena", "games", "--ids")
    assert ids.returncode == 0 and {"demo-v0", "broken-v0", "nim-v0"} <= set(ids.stdout.split())


def test_check_game_passes_the_plugin_game_and_explains_the_broken_one(
    plugin_env: dict[str, str],
) -> None:
    good = run(plugin_env, "-m", "arena", "check-game", "demo-v0")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "demo-v0: PASSED (8/8 checks)" in good.stdout and "FAIL" not in good.stdout
    bad = run(plugin_env, "-m", "arena", "check-game", "broken-v0")
    assert bad.returncode == 1
    assert "NotATextGame is not a games.TextGame" in bad.stdout
    assert "broken-v0: FAILED" in bad.stdout
    # naming it in a run config is one line before anything starts, not an error from deep inside
    train = run(plugin_env, "-m", "arena", "train", "configs/smoke.yaml", "games.0.id=broken-v0",
                "--dry-run")  # fmt: skip
    assert train.returncode == 2, train.stderr
    assert train.stderr.startswith(
        f"arena train: bad config: game 'broken-v0' (arena_plugin_demo:NotATextGame, plugin {DIST})"
        ": NotATextGame is not a games.TextGame"
    ), train.stderr


def test_a_run_naming_a_plugin_game_that_raises_is_refused_in_one_line(
    plugin_env: dict[str, str],
) -> None:
    config = str(ROOT / "configs" / "smoke.yaml")
    result = run(plugin_env, "-m", "arena", "train", config, "games.0.id=raising-v0", "--dry-run")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        "arena train: bad config: game 'raising-v0' (arena_plugin_demo:RaisingGame, plugin "
        f"{DIST}): failed to build: RuntimeError: demo data file missing"
    )


def test_an_inference_actor_on_a_plugin_backend_that_raises_says_so_in_one_line(
    plugin_env: dict[str, str], tmp_path: Path
) -> None:
    address = f"ipc://{tmp_path}/none.sock"  # refused before it looks for a broker
    args = ["-m", "arena", "inference", "--address", address, "--model", "tiny", "--backend"]
    result = run(plugin_env, *args, "raising")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        "arena inference: policy backend 'raising' (arena_plugin_demo:RaisingBackend, "
        f"plugin {DIST}): failed to build: RuntimeError: no GPU driver"
    )
    typo = run(plugin_env, *args, "raisin")
    assert typo.returncode == 2 and "Traceback" not in typo.stderr, typo.stderr
    assert "unknown policy backend 'raisin'; did you mean 'raising'?" in typo.stderr


def test_the_plugin_role_and_bot_play_the_plugin_game(plugin_env: dict[str, str]) -> None:
    result = run(plugin_env, "-c", PLAY)
    assert result.returncode == 0, result.stderr
    played = json.loads(result.stdout.splitlines()[-1])
    assert played["role"] == "arena_plugin_demo:DemoRole" and played["role_name"] == "demo"
    assert played["bot"] == "arena_plugin_demo:GreedyBot"
    assert played["spec"] == [DIST, [2, 2], "competitive", "demo-bot-v0"]
    # greedy in both seats: 2, 4, 6 -> player_0 brings the counter past 5 on the third turn
    assert played["returns"] == {"player_0": 1.0, "player_1": -1.0}
    assert (played["turns"], played["reason"]) == (3, "win")
    assert played["rules_in_prompt"] and played["user"].startswith(
        "Race to 5. The counter is at 0."
    )
    assert played["after_role_turn"] == "Race to 5. The counter is at 2."
