"""A run's strategy reads (:class:`arena.run.strategy_reads.StrategyReads`): none without
OpenSpiel, and which weights a policy on a model of its own is read with.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_strategy_reads.py``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from arena.eval.exploitability import openspiel_missing
from arena.policies.chat import ChatFormat
from arena.run.config import load_run_config
from arena.run.run_dir import resolve_for_run
from arena.run.run_log import RunLog
from arena.run.strategy_reads import StrategyReads

ROOT = Path(__file__).resolve().parents[3]


def test_without_openspiel_the_strategy_is_not_read_and_one_event_says_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tiny_tokenizer,
) -> None:
    monkeypatch.setitem(sys.modules, "pyspiel", None)  # `import pyspiel` raises ImportError
    assert "arena-selfplay[openspiel]" in (openspiel_missing() or "")
    config = resolve_for_run(
        load_run_config(ROOT / "configs/smoke.yaml", ["cpu_threads=1", "eval.exploitability=true"]),
        tmp_path,
    )
    assert [g.id for g in config.games] == ["tictactoe-v0", "kuhn-poker-v0"]
    reads = StrategyReads(config, tmp_path, RunLog(tmp_path, config), ChatFormat(tiny_tokenizer))

    readings = asyncio.run(reads.at_end(None))

    assert readings == []
    (event,) = (tmp_path / "events.log").read_text().splitlines()
    assert "strategy: not read" in event and "kuhn-poker-v0" in event
    assert "pip install 'arena-selfplay[openspiel]'" in event
    assert not (tmp_path / "evals.jsonl").exists()  # no reading logged
    assert "pip install 'arena-selfplay[openspiel]'" in capsys.readouterr().out  # not markup


def test_a_policy_without_a_checkpoint_is_read_on_its_model_said_once(
    tmp_path: Path, tiny_tokenizer
) -> None:
    config = resolve_for_run(
        load_run_config(
            ROOT / "configs/two_models.yaml",
            ["cpu_threads=1", "model=tiny", "eval.exploitability=true"],
        ),
        tmp_path,
    )
    reads = StrategyReads(config, tmp_path, RunLog(tmp_path, config), ChatFormat(tiny_tokenizer))
    # the responder plays Kuhn's second seat; the judge (mae-v0 only) is read by no read
    assert reads.base_weights(None) == {"responder": "tiny"}
    assert reads.base_weights(1) == reads.base_weights(2) == {"responder": "tiny"}
    (event,) = (tmp_path / "events.log").read_text().splitlines()
    assert "policy responder has no checkpoint at or before step 1" in event
    step = tmp_path / "checkpoints" / "policies" / "responder" / "step-00000002"
    (step / "model").mkdir(parents=True)
    (step / "state.json").write_text("{}")
    assert reads.base_weights(2) == {"responder": str(step / "model")}
