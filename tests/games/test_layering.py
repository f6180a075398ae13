"""games/ is the bottom layer: it imports no torch, no zmq, and nothing of Arena's other packages."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("torch", "zmq", "arena", "roles", "trainers", "simulators")

SCRIPT = """
import importlib, pkgutil, sys
import games
for module in pkgutil.walk_packages(games.__path__, "games."):
    importlib.import_module(module.name)
import games.conformance, games.bots
games.make("tictactoe-v0").reset(seed=0)
loaded = {name.split(".")[0] for name in sys.modules}
print(" ".join(sorted(loaded)))
"""


def test_games_imports_nothing_from_the_layers_above() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         check=True).stdout.split()
    assert "games" in out
    assert not set(FORBIDDEN) & set(out), set(FORBIDDEN) & set(out)
