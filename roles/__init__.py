"""Role agents: the text layer between a game seat and a policy.

    import roles
    player = roles.make("player-v0", prefill=True)   # a roles.Role; kwargs set its fields

Role ids (``arena.roles`` is the entry-point group for more):

- ``player-v0``: plays a game seat, answering each turn with ``<answer>MOVE</answer>``.

A plugin's role subclasses :class:`roles.base.Role` and registers in its ``pyproject.toml``::

    [project.entry-points."arena.roles"]
    "myrole-v0" = "mypkg.roles:MyRole"

Roles import games at most, never a model or the bus.
"""

from __future__ import annotations

from typing import Any

from arena.core.registry import Registry
from roles.base import Reply, Role

registry: Registry[Role] = Registry("role", entry_point_group="arena.roles")
"""Role id -> its ``module:Role`` factory."""
registry.register("player-v0", "roles.player:Player")


def make(role_id: str, **kwargs: Any) -> Role:
    """Build the role registered as ``role_id``; kwargs override its registered defaults."""
    return registry.make(role_id, **kwargs)


__all__ = ["Reply", "Role", "make", "registry"]
