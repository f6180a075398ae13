"""bench/gpu_check.py, the one-command GPU check, run here as ``--device cpu --quick``: it ends
with one JSON line holding every part, each with numbers or an error (or skip) string, also when
a part fails, hangs past its share of the budget or is stuck, or a SIGTERM cuts the check off.

The whole check is marked ``e2e``: its last part starts an ``arena train`` run (about 30 s on two
idle cores). The cut-off tests take about 5 s each (their parts are injected with ``--fail``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import bench_line

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("cuda_tests", "hf", "learner", "weight_sync", "train")


def gpu_check(*args: str, out: Path) -> subprocess.Popen:
    argv = [sys.executable, "bench/gpu_check.py", "--device", "cpu", "--quick", "--out", str(out)]
    return subprocess.Popen(
        [*argv, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_part_stuck_past_the_budget_still_gets_the_line_out(tmp_path: Path) -> None:
    """A part that never returns and never sees a signal (a hung CUDA call): the watchdog
    prints the line at the budget, saves it to --out and ends the check, status 0."""
    check = gpu_check("--budget", "2", "--fail", "cuda_tests:stuck", out=tmp_path / "out.json")
    stdout, stderr = check.communicate(timeout=60)
    assert check.returncode == 0, stderr[-2000:]
    line = json.loads(stdout.strip().splitlines()[-1])
    assert line["cut_off"] == "cuda_tests still running past the budget (2 s)"
    # at the budget (2 s) and its grace, not whenever the stuck part would return; a loaded
    # machine wakes the watchdog a little late
    assert 2.0 <= line["seconds"] < 10 and "cuda_tests" not in line
    assert json.loads((tmp_path / "out.json").read_text()) == line


def test_sigterm_prints_the_parts_done_and_a_cut_off_part_reports(tmp_path: Path) -> None:
    """An outer ``timeout`` sends SIGTERM: the line holds every part done so far, saved after
    each one to --out; a part past its share of the budget (hf: 1/6 of 12 s) is cut off by
    SIGALRM and reports so, and the next one starts."""
    out = tmp_path / "out.json"
    check = gpu_check("--budget", "12", "--fail", "hf:hang", out=out)
    deadline = time.monotonic() + 60
    while '"hf"' not in (out.read_text() if out.exists() else ""):
        assert check.poll() is None and time.monotonic() < deadline, check.communicate()
        time.sleep(0.1)
    check.send_signal(signal.SIGTERM)
    stdout, stderr = check.communicate(timeout=30)
    assert check.returncode == 0, stderr[-2000:]
    line = json.loads(stdout.strip().splitlines()[-1])
    # each part's seconds are wall-clock (a loaded machine adds some): the cut-off one at least
    # its cap, the others read only as numbers
    hf = {"before": "the failure", "error": "CutOff: cut off after its 2 s"}  # and why it stopped
    assert line["hf"] == hf | {"seconds": line["hf"]["seconds"]} and line["hf"]["seconds"] >= 2
    assert line["cut_off"].endswith(" cut off by SIGTERM")  # learner, or weight_sync
    files = ["tests/arena/models/test_row_attention.py", "tests/arena/weights/test_cuda_ipc.py"]
    files += ["tests/trainers/test_learner.py", "tests/bench/test_shapes.py"]  # benches last
    skipped = {"skipped": "no cuda", "files": files, "seconds": line["cuda_tests"]["seconds"]}
    assert line["cuda_tests"] == skipped
    assert json.loads(out.read_text()) == line


@pytest.mark.e2e
def test_the_gpu_check_reports_every_part_on_a_cpu() -> None:
    out = bench_line("gpu_check.py", "--device", "cpu", "--quick", "--fail", "cuda_tests")
    assert out["check"] == "gpu" and out["device"] == "cpu" and out["quick"] is True
    assert set(PARTS) <= set(out) and isinstance(out["seconds"], float)
    for part in PARTS:
        report = out[part]
        numbers = [v for v in report.values() if isinstance(v, (int, float))]
        words = [report.get(k) for k in ("error", "skipped") if isinstance(report.get(k), str)]
        assert numbers or words, (part, report)
    # a part that fails (here on purpose) reports its error, and the others still run
    assert out["cuda_tests"]["error"] == "RuntimeError: cuda_tests: injected failure"
    assert out["cuda_tests"]["before"] == "the failure"
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


def test_the_cuda_tests_are_counted_from_pytests_own_lines(tmp_path: Path) -> None:
    """What ``cuda_tests`` reports, read from a real ``pytest -v`` run as the check starts it:
    a pass, a failure, a skip and a module that cannot be imported (a package the host lacks)."""
    (tmp_path / "test_a.py").write_text(
        "import pytest\n"
        "@pytest.fixture(params=['cpu', 'cuda'])\n"
        "def device(request): return request.param\n"
        "def test_ok(device): pass\n"
        "def test_bad(device): assert device == 'cpu'\n"
        "def test_skip(device): pytest.skip('no')\n"
    )
    (tmp_path / "test_b.py").write_text("import a_package_this_host_lacks\n")
    argv = [sys.executable, "-m", "pytest", "-v", "-ra", "-p", "no:cacheprovider"]
    argv += ["--continue-on-collection-errors", "-k", "cuda", "test_a.py", "test_b.py"]
    log = tmp_path / "pytest.log"
    log.write_text(subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True).stdout)
    read = (
        f"import gpu_check, json; print(json.dumps(gpu_check.outcomes(open({str(log)!r}).read())))"
    )
    done = subprocess.run(
        [sys.executable, "-c", read],
        cwd=ROOT / "bench",
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == {
        "passed": 1,
        "failed": 1,
        "errors": 1,
        "skipped": 1,
        "failures": ["test_a.py::test_bad[cuda]", "test_b.py"],
    }
