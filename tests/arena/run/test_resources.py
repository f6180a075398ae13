"""Which device a run's children are told: the CPU named without importing torch where the
installed torch is a CPU-only build, and torch's own answer otherwise."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from arena.run import resources
from tests.cli import python_probe


@pytest.mark.parametrize(
    ("version", "cpu_only"),
    [
        ("cuda: Optional[str] = None\nhip: Optional[str] = None\n", True),
        ("cuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n", False),
        ("cuda = None\nhip = '6.2'\n", False),  # ROCm: torch.cuda serves AMD GPUs
        ("", False),  # unreadable: torch answers itself
    ],
)
def test_a_cpu_only_torch_build_is_read_from_its_version_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, cpu_only: bool
) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("")
    (tmp_path / "torch" / "version.py").write_text(version)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(
        resources.importlib.util,
        "find_spec",
        lambda name: SimpleNamespace(origin=str(tmp_path / "torch" / "__init__.py")),
    )
    assert resources.cpu_only_torch() is cpu_only


def test_auto_names_the_device_torch_would_without_importing_it_on_a_cpu_build() -> None:
    probe = (
        "import sys\nfrom arena.run.resources import cpu_only_torch, device_for\n"
        "cpu_only, auto = cpu_only_torch(), device_for('auto')\n"
        "imported = 'torch' in sys.modules\n"
        "from arena.models import resolve_device\n"
        "print(cpu_only, auto == str(resolve_device('auto')), imported)\n"
    )
    cpu_only, same, imported = python_probe(probe).split()
    assert same == "True" and imported == str(cpu_only == "False")
