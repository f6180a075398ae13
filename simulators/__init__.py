"""Simulators: seats that are simulated rather than trained, such as user simulators (an LLM
persona or a scripted user) that play the user's side of a dialogue game.

    import simulators
    simulators.ids()                          # every registered simulator id
    sim = simulators.make("mysim-v0", seed=0)

Simulator ids (the contract is :mod:`simulators.base`):

- ``llm-user-v0``: :class:`simulators.llm_user.LLMUser`, a persona with a hidden goal on any
  policy (the trained one, a frozen checkpoint, an ``openai`` endpoint), with a leak guard and a
  turn limit.
- ``scripted-user-v0``: :class:`simulators.scripted_user.ScriptedUser`, deterministic, for tests
  and cheap training.

Plugins add theirs through the entry-point group ``arena.simulators`` (the entry point's name is
a versioned id, its value the ``"module:Factory"`` string), e.g. in a plugin's
``pyproject.toml``::

    [project.entry-points."arena.simulators"]
    "mysim-v0" = "mypkg.simulators:MySimulator"

Like roles, simulators import games and roles at most, never a model or the bus.
"""

from __future__ import annotations

from typing import Any

from arena.core.registry import Registry

registry: Registry[Any] = Registry(
    "simulator", entry_point_group="arena.simulators", base="simulators.base:Simulator"
)
"""Simulator id -> its ``module:Factory``."""
registry.register("llm-user-v0", "simulators.llm_user:LLMUser")
registry.register("scripted-user-v0", "simulators.scripted_user:ScriptedUser")


def make(simulator_id: str, **kwargs: Any) -> Any:
    """Build the simulator registered as ``simulator_id``; kwargs override its registered
    defaults."""
    return registry.make(simulator_id, **kwargs)


def ids() -> list[str]:
    """Every registered simulator id, plugins included, sorted."""
    return registry.ids()


__all__ = ["ids", "make", "registry"]
