"""trainers/ learns from records only: no games, roles or simulators, and no pickle anywhere."""

from __future__ import annotations

import ast
from pathlib import Path

TRAINERS = Path(__file__).resolve().parents[2] / "trainers"
FORBIDDEN_IMPORTS = ("games", "roles", "simulators", "pickle", "dill", "cloudpickle")
FORBIDDEN_CALLS = ("torch.save", "torch.load", "broadcast_object_list", "all_gather_object")


def imported_modules(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def test_trainers_import_no_games_roles_simulators_or_pickle() -> None:
    for path in sorted(TRAINERS.glob("*.py")):
        tree = ast.parse(path.read_text())
        for module in imported_modules(tree):
            assert module.split(".")[0] not in FORBIDDEN_IMPORTS, f"{path.name} imports {module}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = dotted(node.func)
                assert not any(name.endswith(bad) for bad in FORBIDDEN_CALLS), f"{path.name} calls {name}"
