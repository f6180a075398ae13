"""``.ci/pip``, the Makefile's installer: uv gets pip's configuration on its command line."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "pip"


def load_script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("ci_pip", str(SCRIPT))
    spec = importlib.util.spec_from_loader("ci_pip", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture
def pip_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip configured by a file of this test's (over the machine's own) and one variable."""
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\n"
        "index-url = https://mirror.example/simple\n"
        "extra-index-url = file:///srv/a/simple file:///srv/b/simple\n"
        "find-links = /srv/global-wheels\n"
        "constraint = /srv/constraints.txt\n"
        "cert = /srv/ca.pem\n"
        "default-timeout = 60\n"
        "no-cache-dir = true\n"
        "[install]\n"
        "find-links = /srv/wheels\n"
    )
    for name in [n for n in os.environ if n.startswith(("PIP_", "UV_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///srv/env/simple")
    return config


def test_pip_settings_reach_uv_as_flags_with_pips_precedence(pip_config: Path) -> None:
    command, env = load_script().uv_command("uv", sys.executable, ["install", "-q", "torch"])
    assert command == [
        "uv", "pip", "install", "--python", sys.executable,
        "--default-index", "https://mirror.example/simple",
        "--index", "file:///srv/env/simple",  # PIP_EXTRA_INDEX_URL over the file's two
        "--find-links", "/srv/wheels",  # [install] over [global]
        "--constraint", "/srv/constraints.txt",
        "--cert", "/srv/ca.pem",
        "-q", "torch",
    ]  # fmt: skip
    assert env["UV_HTTP_TIMEOUT"] == "60"
    assert env["UV_INDEX_STRATEGY"] == "unsafe-best-match"  # pip takes the best of all indexes
    assert env["UV_COMPILE_BYTECODE"] == "1"  # pip compiles at install too


def test_a_variable_wins_over_the_sections_in_whichever_order_pip_lists_them() -> None:
    listed_by_older_pip = (
        ":env:.find-links='/env/wheels'\n"
        "install.find-links='/install/wheels'\n"
        "global.find-links='/global/wheels'\n"
        "global.extra-index-url='file:///a/simple file:///b/simple'\n"
        "global.no-cache-dir='true'\n"
    )
    assert load_script().parse_pip_config(listed_by_older_pip) == {
        "find-links": ["/env/wheels"],
        "extra-index-url": ["file:///a/simple", "file:///b/simple"],
    }
    install_over_global = "install.cert='/i.pem'\nglobal.cert='/g.pem'\n"
    assert load_script().parse_pip_config(install_over_global) == {"cert": ["/i.pem"]}


def test_uninstall_drops_pips_yes_and_reads_no_configuration(pip_config: Path) -> None:
    pip_config.write_text("[global]\nfind-links = /srv/wheels\n")
    command, _ = load_script().uv_command("uv", sys.executable, ["uninstall", "-q", "-y", "a"])
    assert command == ["uv", "pip", "uninstall", "--python", sys.executable, "-q", "a"]


def test_anything_but_install_or_uninstall_is_refused_with_the_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert load_script().main(["/some/venv", "freeze"]) == 2
    assert "Usage: .ci/pip VENV install|uninstall ARGS..." in capsys.readouterr().err
