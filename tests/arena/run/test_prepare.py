"""arena/run/prepare.py: what ``arena train`` checks before anything starts, without torch.

A dry run or a bad config answers in about a second because neither the config, the checks,
nor the plan import torch or transformers (about 5 s of start-up on this CPU): the package
``__init__``s of ``arena.models`` and ``arena.policies`` import their modules on first use, and
the adapter's shape lives apart from its layers (``arena/models/adapter_shape.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CHECK = """
import sys
from arena.run.plan import plan
from arena.run.prepare import prepare
for name in sys.argv[1:]:
    plan(prepare(f"configs/{name}.yaml", []))
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print("heavy:", ",".join(heavy) or "none")
"""


@pytest.mark.parametrize("configs", [["smoke", "selfplay"], ["mae", "ssp", "user_tool_use"]])
def test_preparing_and_planning_a_run_imports_no_torch(configs: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, *configs],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "heavy: none"


def test_a_resume_of_a_directory_without_a_saved_config_is_a_config_error(tmp_path: Path) -> None:
    from arena.core.errors import ConfigError
    from arena.run.prepare import prepare

    with pytest.raises(ConfigError, match="config.yaml"):
        prepare("configs/smoke.yaml", [f"resume={tmp_path}"])  # no saved config there
