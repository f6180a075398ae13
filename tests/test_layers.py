"""The import contract of the whole code base, in one place.

Run it with ``.venv/bin/python -m pytest -q tests/test_layers.py``.

Every module belongs to one *unit* (a package such as ``games`` or ``arena.weights``, or a
top-level module such as ``arena.records``). :data:`ALLOWED` says which other units a unit may
import. An arrow means "may import", as in ``docs/architecture.md``; the arrows form two stacks
that meet at the top::

    simulators -> roles -> games -> arena.core      (rules, text and seats: no torch, no zmq)
    trainers -> arena.weights -> arena.bus, arena.records, arena.models -> arena.core
    arena.eval, arena.actors -> arena.play -> arena.policies  (on top of both stacks)
    arena.commands -> arena.tournament -> arena.run -> arena.eval, arena.actors, trainers
    arena.commands -> arena.deploy -> arena.core    (stdlib and PyYAML only)

On top of that: no import cycle between any two modules (lazy and ``TYPE_CHECKING`` imports
count too), no pickle anywhere, ``arena.core`` imports only the stdlib and omegaconf and
``arena.deploy`` only the stdlib and PyYAML, games, roles and simulators import neither torch
nor zmq, the bus imports no torch, and trainers never call ``torch.save``/``torch.load``.

``docs/architecture.md``'s layer table states the same contract for readers: a test checks its
"may import" column against these rules, and ``.venv/bin/python tests/test_layers.py`` rewrites
that column from them. The last tests plant violations in a copy of the tree and check that
each is caught.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("arena", "games", "roles", "simulators", "trainers")

_STACK_A = {"games": set(), "roles": {"games"}, "simulators": {"games", "roles"}}
_BELOW_TRAINERS = {"arena.bus", "arena.records", "arena.models", "arena.weights"}
_BOTH_STACKS = {"games", "roles", "simulators", "arena.records"}

ALLOWED: dict[str, set[str]] = {
    "arena": set(),
    "arena.core": set(),
    **{unit: deps | {"arena.core"} for unit, deps in _STACK_A.items()},
    "arena.bus": {"arena.core"},
    "arena.records": {"arena.core"},
    "arena.models": {"arena.core"},
    "arena.weights": {"arena.core", "arena.bus"},
    "trainers": {"arena.core"} | _BELOW_TRAINERS,
    "arena.policies": {"arena.core", "arena.bus", "arena.models", "arena.records"},
    "arena.play": {"arena.core", "arena.policies"} | _BOTH_STACKS,
    "arena.eval": {"arena.core", "arena.policies", "arena.play"} | _BOTH_STACKS,
    "arena.actors": {"arena.core", "arena.policies", "arena.play"} | _BOTH_STACKS | _BELOW_TRAINERS,
    "arena.run": {
        "arena.core",
        "arena.policies",
        "arena.play",
        "arena.eval",
        "arena.actors",
        "trainers",
    }
    | _BOTH_STACKS
    | _BELOW_TRAINERS,
    "arena.tournament": {
        "arena.core",
        "arena.bus",
        "arena.models",
        "arena.policies",
        "arena.play",
        "arena.eval",
        "arena.run",
    }
    | _BOTH_STACKS,
    "arena.deploy": {"arena.core"},
    "arena.commands": set(),  # filled below: everything but the CLI
    "arena.cli": {"arena.core"},
    "arena.__main__": {"arena.cli"},
}
"""Unit -> the units it may import (besides itself)."""
ALLOWED["arena.commands"] = set(ALLOWED) - {"arena.commands", "arena.cli", "arena.__main__"}

ONLY_LIBRARIES: dict[str, set[str]] = {"arena.core": {"omegaconf"}, "arena.deploy": {"yaml"}}
"""Unit -> the only third-party libraries it may import (besides the standard library)."""
FORBIDDEN_LIBRARIES: dict[str, set[str]] = {
    "games": {"torch", "zmq", "transformers", "msgpack"},
    "roles": {"torch", "zmq", "transformers", "msgpack"},
    "simulators": {"torch", "zmq", "transformers", "msgpack"},
    "arena.bus": {"torch", "transformers"},
}
"""Unit -> third-party libraries it must not import."""
NEVER = {"pickle", "dill", "cloudpickle", "marshal", "shelve"}
"""Imported by no unit: nothing Arena writes or sends is pickled."""
FORBIDDEN_CALLS = {"trainers": ("torch.save", "torch.load")}
"""Pickle through the back door: checkpoints are safetensors and JSON."""


@dataclass(frozen=True)
class Import:
    source: str
    """The importing module."""
    target: str
    """The imported module (or package) name."""
    path: Path
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str | None:
    """The unit a module belongs to (the longest matching key of :data:`ALLOWED`)."""
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        candidate = ".".join(parts[:size])
        if candidate in ALLOWED:
            return candidate
    return None


def imports(root: Path) -> list[Import]:
    """Every import statement of the project's packages under ``root``, wherever it stands."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(root, path)
            here = module if path.name == "__init__.py" else module.rpartition(".")[0]
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = here.split(".")[: len(here.split(".")) - node.level + 1]
                        prefix = ".".join(base + ([node.module] if node.module else []))
                    else:
                        prefix = node.module or ""
                    # "from pkg import mod" imports the module pkg.mod when there is one
                    targets = [
                        f"{prefix}.{a.name}" if _is_module(root, f"{prefix}.{a.name}") else prefix
                        for a in node.names
                    ]
                else:
                    continue
                found += [Import(module, t, path, node.lineno) for t in targets]
    return found


def _is_module(root: Path, name: str) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def violations(root: Path) -> list[str]:
    """Every breach of the contract under ``root``, one line each (empty: the contract holds)."""
    found = []
    graph = nx.DiGraph()
    for imp in imports(root):
        where = f"{imp.path.relative_to(root)}:{imp.line}"
        source_unit, top = unit_of(imp.source), imp.target.split(".")[0]
        if top in NEVER:
            found.append(f"{where}: {imp.source} imports {imp.target} (no pickle anywhere)")
        if top in PACKAGES:
            target_unit = unit_of(imp.target)
            graph.add_edge(imp.source, imp.target, where=where)
            if source_unit is None or target_unit is None:
                found.append(f"{where}: {imp.source} or {imp.target} belongs to no unit of ALLOWED")
            elif target_unit != source_unit and target_unit not in ALLOWED[source_unit]:
                found.append(f"{where}: {source_unit} may not import {target_unit} ({imp.target})")
        elif source_unit and top in FORBIDDEN_LIBRARIES.get(source_unit, ()):
            found.append(f"{where}: {source_unit} may not import {top}")
        elif source_unit in ONLY_LIBRARIES and not _stdlib_or(top, ONLY_LIBRARIES[source_unit]):
            found.append(f"{where}: {source_unit} may not import {top} (stdlib and listed only)")
    found += [f"import cycle: {' -> '.join(cycle)}" for cycle in _cycles(graph)]
    found += _forbidden_calls(root)
    return found


def _stdlib_or(top: str, libraries: set[str]) -> bool:
    return top in sys.stdlib_module_names or top in libraries or top == "__future__"


def _cycles(graph: nx.DiGraph) -> list[list[str]]:
    return [[*cycle, cycle[0]] for cycle in nx.simple_cycles(graph)]


def _forbidden_calls(root: Path) -> list[str]:
    found = []
    for package, calls in FORBIDDEN_CALLS.items():
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    name = _dotted(node.func)
                    if any(name.endswith(bad) for bad in calls):
                        found.append(f"{path.relative_to(root)}:{node.lineno}: calls {name}")
    return found


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


# -- the contract as docs/architecture.md states it -------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"
TABLE_ROW = re.compile(r"^\| `(?P<unit>[\w.]+)` \| (?P<job>.*) \| (?P<may>[^|]*) \|$", re.M)
"""A row of the layer table: the unit, its job, what it may import."""


def may_import(unit: str) -> str:
    """The "may import" cell of ``unit``, written from :data:`ALLOWED` and the library rules.

    Units are listed in the order of :data:`ALLOWED`; where a unit may import all but a few of
    them, the cell names those few instead.
    """
    others = [u for u in ALLOWED if u != unit]
    allowed = [u for u in others if u in ALLOWED[unit]]
    barred = [u for u in others if u not in ALLOWED[unit]]
    if len(barred) <= 3:
        parts = ["every unit but " + ", ".join(f"`{u}`" for u in barred)]
    else:
        parts = [", ".join(f"`{u}`" for u in allowed) or "no other unit"]
    if unit in ONLY_LIBRARIES:
        only = ", ".join(f"`{name}`" for name in sorted(ONLY_LIBRARIES[unit]))
        parts.append(f"of libraries only the stdlib and {only}")
    if unit in FORBIDDEN_LIBRARIES:
        parts.append("no " + ", ".join(sorted(FORBIDDEN_LIBRARIES[unit])))
    return "; ".join(parts)


def documented_table(text: str) -> str:
    """``text`` with the "may import" cell of every layer-table row written by :func:`may_import`."""
    return TABLE_ROW.sub(
        lambda row: f"| `{row['unit']}` | {row['job']} | {may_import(row['unit'])} |", text
    )


# -- the contract holds ------------------------------------------------------------------------


def test_the_code_base_keeps_the_import_contract() -> None:
    assert violations(ROOT) == []


def test_every_module_belongs_to_a_unit() -> None:
    modules = {module_name(ROOT, p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    assert {m for m in modules if unit_of(m) is None} == set()


def test_the_allowed_graph_itself_has_no_cycle() -> None:
    graph = nx.DiGraph((unit, dep) for unit, deps in ALLOWED.items() for dep in deps)
    assert list(nx.simple_cycles(graph)) == []


def test_the_architecture_page_states_this_contract() -> None:
    text = ARCHITECTURE.read_text()
    assert sorted(row["unit"] for row in TABLE_ROW.finditer(text)) == sorted(ALLOWED)
    assert documented_table(text) == text, (
        "docs/architecture.md's layer table disagrees with ALLOWED: "
        "run .venv/bin/python tests/test_layers.py to rewrite its 'may import' column"
    )


IMPORT_ALL = """
import importlib, pkgutil, sys
import {package}
for info in pkgutil.walk_packages({package}.__path__, "{package}."):
    importlib.import_module(info.name)
print(" ".join(sorted(sys.modules)))
"""


def test_games_roles_and_core_load_without_torch_or_zmq_at_run_time() -> None:
    """The static check reads import statements; this one imports every module for real."""
    for package in ("games", "roles", "simulators", "arena.core"):
        script = IMPORT_ALL.format(package=package)
        loaded = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        top = {name.split(".")[0] for name in loaded}
        assert not {"torch", "zmq", "transformers"} & top, (package, {"torch", "zmq"} & top)
        arena = {name for name in loaded if name.split(".")[0] == "arena"}
        assert arena <= {"arena", "arena.core"} | {n for n in arena if n.startswith("arena.core.")}


# -- and it catches what breaks it -------------------------------------------------------------


def planted(tmp_path: Path, edits: dict[str, str]) -> list[str]:
    """The violations of a copy of the tree with ``edits`` (path -> appended source) applied."""
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    for path, source in edits.items():
        with open(tmp_path / path, "a") as out:
            out.write("\n" + source + "\n")
    return violations(tmp_path)


def test_a_planted_upward_import_is_caught(tmp_path: Path) -> None:
    found = planted(tmp_path, {"trainers/batch.py": "import games.tictactoe"})
    assert (
        len(found) == 1 and "trainers/batch.py" in found[0] and "may not import games" in found[0]
    )


def test_a_planted_library_import_is_caught(tmp_path: Path) -> None:
    found = planted(tmp_path, {"games/nim.py": "import torch", "roles/formats.py": "import pickle"})
    assert any("games/nim.py" in f and "may not import torch" in f for f in found), found
    assert any("roles/formats.py" in f and "no pickle" in f for f in found), found


def test_a_planted_cycle_is_caught(tmp_path: Path) -> None:
    # records may import core, so only the cycle itself is wrong here
    found = planted(tmp_path, {"arena/core/errors.py": "def late():\n    import arena.records"})
    assert any(f.startswith("import cycle") or "arena.core may not import" in f for f in found), (
        found
    )
    found = planted_cycle(tmp_path / "second")
    assert any(f.startswith("import cycle:") and "trainers.batch" in f for f in found), found


def planted_cycle(root: Path) -> list[str]:
    root.mkdir()
    return planted(root, {"trainers/advantages.py": "def late():\n    from trainers import batch"})


def test_a_planted_torch_save_in_trainers_is_caught(tmp_path: Path) -> None:
    found = planted(tmp_path, {"trainers/checkpoint.py": "def bad(x):\n    torch.save(x, 'f')"})
    assert any("calls torch.save" in f for f in found), found


def test_a_planted_third_party_import_in_deploy_is_caught(tmp_path: Path) -> None:
    found = planted(tmp_path, {"arena/deploy/files.py": "import numpy"})
    assert len(found) == 1 and "arena.deploy may not import numpy" in found[0], found


if __name__ == "__main__":  # rewrite the architecture page's "may import" column from ALLOWED
    ARCHITECTURE.write_text(documented_table(ARCHITECTURE.read_text()))
