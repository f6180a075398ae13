"""Optional dependencies, imported only where a feature needs them, with an error that says how
to install them (``pip install 'arena-selfplay[EXTRA]'``)."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise an ImportError that names the extra providing it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{module!r} is not installed; install it with: pip install 'arena-selfplay[{extra}]'"
        ) from exc
