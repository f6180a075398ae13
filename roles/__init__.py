"""Role agents: the text layer between a game seat and a policy.

``roles.make("player-v0", prefill=True)`` builds a role from the registry; plugins add roles
through the entry-point group ``arena.roles``. Roles import games at most, never a model or the
bus.
"""

from __future__ import annotations

from typing import Any

from games.registry import Registry
from roles.base import Reply, Role

registry: Registry[Role] = Registry("role", entry_point_group="arena.roles")
registry.register("player-v0", "roles.player:Player")


def make(role_id: str, **kwargs: Any) -> Role:
    return registry.make(role_id, **kwargs)


__all__ = ["Reply", "Role", "make", "registry"]
