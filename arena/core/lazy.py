"""Packages that re-export their modules' names without importing them all up front.

A package ``__init__`` that imports every module makes ``import arena.models.specs`` pay for
torch and transformers, because Python runs the package first. :func:`lazy_exports` gives a
package a module ``__getattr__`` (PEP 562) that imports the module of a name on first use, so
``from arena.models import load_model`` still works, and reading a run config imports no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``exports`` (name -> the
    module, relative to the package, that defines it) is imported from its module when first
    read, then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
