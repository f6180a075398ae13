"""``arena plugins``: every registry group listed, each entry with where it comes from, and the
entries that do not load named, from a real installed distribution's entry points.

The distribution (``arena-plugin-listing``) lives under pytest's ``tmp_path`` as ``pip install``
would leave it (a package and its ``.dist-info``), found through ``PYTHONPATH``. It registers
one good entry in each of bots, roles and simulators, and one of each way to fail: a game whose
module is missing, a simulator whose module raises on import, a policy backend that is not
callable, a malformed id and an id already taken; a bot and a command that cannot run must fail
in one line where they are used.

Run with ``.venv/bin/python -m pytest -q tests/arena/commands/test_plugin_listing.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DIST = "arena-plugin-listing"

ENTRY_POINTS = """
[arena.games]
gone-v0 = plugin_listing.missing:Game
Bad = plugin_listing:Game

[arena.bots]
listed-bot-v0 = plugin_listing:Bot
raising-bot-v0 = plugin_listing.raises:Bot

[arena.roles]
listed-role-v0 = plugin_listing:Role

[arena.simulators]
listed-sim-v0 = plugin_listing:Simulator
raising-sim-v0 = plugin_listing.raises:Simulator
llm-user-v0 = plugin_listing:Simulator

[arena.policies]
listed-backend = plugin_listing:NOT_A_BACKEND

[arena.commands]
listed-cmd = plugin_listing.cmd
no-run-cmd = plugin_listing
"""

COMMAND = """
\"\"\"``arena listed-cmd``: says hello.\"\"\"


def add_arguments(parser):
    parser.add_argument("--who", default="world")


def run(args):
    print(f"hello {args.who}")
    return 0
"""


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a process that sees the distribution as installed."""
    site = tmp_path_factory.mktemp("site")
    package = site / "plugin_listing"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from games.bots.base import Bot as _Bot\nfrom roles.base import Role as _Role\n"
        "from simulators.base import Simulator as _Simulator\n"
        "class Bot(_Bot): ...\nclass Role(_Role): ...\nclass Simulator(_Simulator): ...\n"
        "NOT_A_BACKEND = 42\n"
    )
    (package / "raises.py").write_text("raise RuntimeError('broken on purpose')\n")
    (package / "cmd.py").write_text(COMMAND)
    info = site / "plugin_listing-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    path = [str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def plugins(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "arena", "plugins", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def tables(stdout: str) -> dict[str, dict[str, list[str]]]:
    """Group title -> id -> [factory, from]."""
    out: dict[str, dict[str, list[str]]] = {}
    for block in stdout.strip().split("\n\n"):
        title, _header, *rows = block.splitlines()
        out[title.split(" (")[0]] = {r.split()[0]: r.split()[1:] for r in rows}
    return out


def test_every_group_is_listed_with_its_plugins_and_the_entries_that_do_not_load(
    plugin_env: dict[str, str],
) -> None:
    result = plugins(plugin_env)
    assert result.returncode == 1, result.stderr  # some entries do not load
    listed = tables(result.stdout)
    assert list(listed) == ["games", "bots", "roles", "simulators", "policy backends", "commands"]
    assert listed["games"]["tictactoe-v0"] == ["games.tictactoe:TicTacToe", "arena"]
    assert listed["bots"]["listed-bot-v0"] == ["plugin_listing:Bot", DIST]
    assert listed["roles"]["listed-role-v0"] == ["plugin_listing:Role", DIST]
    assert listed["simulators"] == {
        "listed-sim-v0": ["plugin_listing:Simulator", DIST],
        "llm-user-v0": ["simulators.llm_user:LLMUser", "arena"],  # not replaced by the plugin
        "scripted-user-v0": ["simulators.scripted_user:ScriptedUser", "arena"],
    }
    assert listed["policy backends"]["hf"] == ["arena.policies.hf:HFPolicy", "arena"]
    assert "listed-backend" not in listed["policy backends"]
    assert listed["commands"]["listed-cmd"] == ["plugin_listing.cmd", DIST]
    assert listed["commands"]["train"] == ["arena.commands.train", "arena"]
    assert "no-run-cmd" not in listed["commands"]
    assert "Traceback" not in result.stderr
    err = result.stderr.splitlines()
    assert err[1] == "arena plugins: 7 entries cannot be loaded:", result.stderr
    assert err[2] == (
        f"  games Bad (plugin_listing:Game, plugin {DIST}): id 'Bad' must look like 'name-vN', "
        "e.g. 'tictactoe-v0'"
    )
    assert err[3].startswith(
        f"  games gone-v0 (plugin_listing.missing:Game, plugin {DIST}): cannot import it: "
        "ModuleNotFoundError"
    )
    assert err[4] == (
        f"  bots raising-bot-v0 (plugin_listing.raises:Bot, plugin {DIST}): "
        "cannot import it: RuntimeError: broken on purpose"
    )
    err.pop(4)
    assert err[4] == (
        f"  simulators llm-user-v0 (plugin_listing:Simulator, plugin {DIST}): simulator "
        "'llm-user-v0' is already registered by Arena"
    )
    assert err[5] == (
        f"  simulators raising-sim-v0 (plugin_listing.raises:Simulator, plugin {DIST}): "
        "cannot import it: RuntimeError: broken on purpose"
    )
    assert err[6] == (
        f"  backends listed-backend (plugin_listing:NOT_A_BACKEND, plugin {DIST}): "
        "plugin_listing:NOT_A_BACKEND is not callable (42)"
    )
    assert err[7] == (
        f"  commands no-run-cmd (plugin_listing, plugin {DIST}): module plugin_listing has no "
        "add_arguments and no run"
    )


def test_a_listed_plugin_command_runs(plugin_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "arena", "listed-cmd", "--who", "arena"],
        env=plugin_env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello arena\n"


def test_named_groups_only_and_a_listing_that_imports_nothing(plugin_env: dict[str, str]) -> None:
    result = plugins(plugin_env, "simulators", "roles", "--no-import")
    listed = tables(result.stdout)
    assert list(listed) == ["roles", "simulators"]
    # nothing imported, so the raising module is listed; the refused entry points are not
    assert listed["simulators"]["raising-sim-v0"] == ["plugin_listing.raises:Simulator", DIST]
    assert result.returncode == 1
    assert "1 entry cannot be loaded" in result.stderr and "llm-user-v0" in result.stderr
    good = plugins(plugin_env, "roles")
    assert good.returncode == 0, good.stderr
    unknown = plugins(plugin_env, "simulator")
    assert unknown.returncode == 2
    assert "unknown group 'simulator'; did you mean 'simulators'?" in unknown.stderr


def test_a_command_or_bot_that_cannot_run_is_one_line_and_help_shows_plugin_summaries(
    plugin_env: dict[str, str],
) -> None:
    def arena(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "arena", *args],
            env=plugin_env, cwd=ROOT, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    no_run = arena("no-run-cmd")
    assert (no_run.returncode, no_run.stdout) == (2, "")
    assert no_run.stderr == (
        f"arena no-run-cmd: command 'no-run-cmd' (plugin_listing, plugin {DIST}): module "
        "plugin_listing has no add_arguments and no run\n"
    )
    typo = arena("-v", "listed-cmdd", "--who", "x")
    assert typo.returncode == 2
    assert typo.stderr.startswith("arena: unknown command 'listed-cmdd'; did you mean 'listed-cmd'")
    listing = arena("--help")
    assert listing.returncode == 0, listing.stderr
    help_lines = " ".join(listing.stdout.split())  # argparse wraps the summaries
    assert "listed-cmd arena listed-cmd: says hello." in help_lines
    assert "no-run-cmd (cannot run: module plugin_listing has no add_arguments and no run)" in (
        help_lines
    )
    bot = arena("eval", "random-v0", "--games", "nim-v0", "--opponents", "raising-bot-v0")
    assert bot.returncode == 2 and "Traceback" not in bot.stderr, bot.stderr
    assert bot.stderr.splitlines()[-1] == (
        f"arena eval: bot 'raising-bot-v0' (plugin_listing.raises:Bot, plugin {DIST}): "
        "cannot import it: RuntimeError: broken on purpose"
    )
    train = arena("train", "configs/smoke.yaml", "eval.opponents=[raising-bot-v0]", "--dry-run")
    assert train.returncode == 2 and train.stderr.startswith(
        "arena train: bad config: bot 'raising-bot-v0' (plugin_listing.raises:Bot, plugin "
    ), train.stderr
