"""``bench/startup.py`` in short: one fresh process a side, no smoke run; it ends with its JSON
line, both tokenizers gave the same ids, and Arena's side imported neither torch nor
transformers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import bench_line

ROOT = Path(__file__).resolve().parents[2]


def test_the_startup_bench_compares_both_tokenizers_on_the_same_ids() -> None:
    line = bench_line("startup.py", "--repeats", "1", "--no-run")
    assert line["bench"] == "startup" and line["same_ids"] is True
    assert not line["arena_imports_transformers"] and not line["arena_imports_torch"]
    assert line["arena_cpu_s"] > 0 and line["transformers_cpu_s"] > 0
    ratio = line["transformers_cpu_s"] / line["arena_cpu_s"]  # of the rounded figures
    assert line["transformers_over_arena"] == pytest.approx(ratio, rel=0.02)
    assert not any(key.startswith("smoke_") for key in line)
