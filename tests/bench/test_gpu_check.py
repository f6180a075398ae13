"""bench/gpu_check.py, the one-command GPU check, run here as ``--device cpu --quick``: it ends
with one JSON line holding every part, each with numbers or an error (or skip) string.

Marked ``e2e``: its last part starts an ``arena train`` run (about 30 s on two idle cores).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("cuda_tests", "hf", "learner", "weight_sync", "train")


@pytest.mark.e2e
def test_the_gpu_check_reports_every_part_on_a_cpu() -> None:
    done = subprocess.run(
        [sys.executable, "bench/gpu_check.py", "--device", "cpu", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["check"] == "gpu" and out["device"] == "cpu" and out["quick"] is True
    assert set(PARTS) <= set(out) and isinstance(out["seconds"], float)
    for part in PARTS:
        report = out[part]
        numbers = [v for v in report.values() if isinstance(v, (int, float))]
        words = [report.get(k) for k in ("error", "skipped") if isinstance(report.get(k), str)]
        assert numbers or words, (part, report)
    assert out["cuda_tests"] == {"skipped": "no cuda", "seconds": 0.0}
    # on a CPU every other part must work: an error there is a bug in the script
    for part in PARTS[1:]:
        assert "error" not in out[part], (part, out[part])
    assert out["hf"]["gen_tok_s_4"] > 0 and out["hf"]["score_tok_s_8"] > 0
    assert out["hf"]["gen_tok_s_8_loop"] > 0  # static decode on and off
    assert out["hf"]["graphs_8"] == 0  # CUDA graphs on CUDA only
    assert out["learner"]["bare_tok_s"] > 0 and out["learner"]["learner_tok_s"] > 0
    assert 0 < out["weight_sync"]["adapter_mb"] < out["weight_sync"]["full_mb"]
    assert out["weight_sync"]["transport"] == "shm"  # CUDA IPC needs a GPU on both ends
    assert out["train"]["steps"] == 1 and out["train"]["episodes_per_s"] > 0
    assert 0 < out["train"]["learner_share"] < 1
    # Tic-Tac-Toe turns by choice were scored (Kuhn's too): prompt plus every legal reply
    assert out["train"]["scored_tokens"] > 0 and out["train"]["scored_tok_s"] > 0
