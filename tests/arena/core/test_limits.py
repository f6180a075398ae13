"""Every wait in ``arena/`` over a minute is set by configuration or named in arena/core/limits.py.

Run with ``.venv/bin/python -m pytest -q tests/arena/core/test_limits.py``.

The scan reads the source (AST): a number over :data:`~arena.core.limits.CONSTANT_WAIT_MAX`
passed as ``timeout=``, ``*_timeout=`` or ``*ttl=``, given as such a parameter's default, or as
``asyncio.wait_for``'s bound. Config dataclasses' field defaults are exempt (their docstrings
say what they bound), and so is the limits module itself. The last test plants a literal and
checks that the scan names it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from arena.core.limits import CONSTANT_WAIT_MAX

ROOT = Path(__file__).resolve().parents[3]
LIMITS = Path("arena/core/limits.py")


def _is_wait(name: str | None) -> bool:
    return bool(name) and (name == "timeout" or name.endswith("_timeout") or name.endswith("ttl"))


def _long(node: ast.AST | None) -> bool:
    """A literal number (or its negation) over the bound a plain literal may have."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
        and node.value > CONSTANT_WAIT_MAX
    )


def _defaults(args: ast.arguments) -> list[tuple[str, ast.expr | None]]:
    positional = [*args.posonlyargs, *args.args]
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    return [(a.arg, d) for a, d in pairs]


def _field_defaults(tree: ast.AST) -> list[ast.expr]:
    """The defaults of dataclass fields (``name: type = value``, ``field(...)`` included): a
    config field, whose docstring says what it bounds."""
    return [
        stmt.value
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        and any("dataclass" in ast.unparse(d) for d in cls.decorator_list)
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign) and stmt.value is not None
    ]


def literal_waits(source: str, path: str) -> list[str]:
    """``path:line what`` for each literal wait over the bound in ``source``."""
    tree = ast.parse(source)
    exempt = {id(n) for field in _field_defaults(tree) for n in ast.walk(field)}
    found = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if _is_wait(keyword.arg) and _long(keyword.value):
                    found.append(f"{path}:{node.lineno} {keyword.arg}=")
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "wait_for" and len(node.args) > 1 and _long(node.args[1]):
                found.append(f"{path}:{node.lineno} wait_for(..., N)")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg, default in _defaults(node.args):
                if _is_wait(arg) and _long(default):
                    found.append(f"{path}:{node.lineno} {node.name}({arg}=...)")
    return found


def scan(root: Path) -> list[str]:
    """Every literal wait over the bound in ``root/arena``, but in the limits module."""
    found = []
    for path in sorted((root / "arena").rglob("*.py")):
        relative = path.relative_to(root)
        if relative != LIMITS:
            found += literal_waits(path.read_text(), str(relative))
    return found


def test_no_literal_wait_over_a_minute_in_arena() -> None:
    assert scan(ROOT) == []


@pytest.mark.parametrize(
    "planted",
    [
        "await actor.request(body, service='learner', timeout=600)\n",
        "async def wait(version, timeout: float = 3600.0): ...\n",
        "def broker(*, pending_ttl=600.0): ...\n",
        "await asyncio.wait_for(event.wait(), 120)\n",
        "actor.request(body, lease_timeout=-7200)\n",
    ],
)
def test_a_planted_literal_wait_is_named(tmp_path: Path, planted: str) -> None:
    (tmp_path / "arena").mkdir()
    (tmp_path / "arena" / "waits.py").write_text(f"async def f():\n    {planted}")
    assert [line.split(":")[0] for line in scan(tmp_path)] == ["arena/waits.py"]


def test_config_defaults_and_short_waits_pass() -> None:
    source = (
        "@dataclass\nclass C:\n    timeout: float = 600.0\n"
        "    inner: D = field(default_factory=lambda: D(timeout=600.0))\n"
        "x = actor.request(body, timeout=30)\ny = wait_for(f(), 60)\nz = f(count=5000)\n"
    )
    assert literal_waits(source, "c.py") == []


def test_the_limits_module_is_stdlib_only() -> None:
    tree = ast.parse((ROOT / LIMITS).read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [getattr(n, "module", None) for n in imports] == ["__future__"]
