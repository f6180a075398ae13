"""Role agents: the text layer between a game seat and a policy.

    import roles
    player = roles.make("player-v0", prefill=True)   # a roles.Role; kwargs set its fields

A game passes per-seat role kwargs (``what``, ``example``, ``memory``, ...) so the instruction
fits it. Output formats, and the canonical content each hands the game, are in
``games.formats``. Role ids (``arena.roles`` is the entry-point group for more), with the
recorded role name, the output format and an example reply:

- ``player-v0`` (``player``): ``<answer>`` -- ``<answer>e4</answer>``
- ``proposer-v0`` (``proposer``): ``<question>`` -- ``<question>What is 17 * 3?</question>``;
  with ``with_answer=True`` also ``<answer>`` --
  ``<question>What is 17 * 3?</question><answer>51</answer>``
- ``solver-v0`` (``solver``): ``\\boxed{}`` -- ``17 * 3 = 51, so \\boxed{51}``
- ``judge-v0`` (``judge``): ``<score>`` -- ``<score>8</score>``
- ``simulated-user-v0`` (``simulated_user``): plain text, ``###STOP###`` once the goal is met --
  ``Thanks, that is all I needed. ###STOP###``
- ``planner-v0`` (``planner``): ``<subgoal>`` then ``<tool>`` --
  ``<subgoal>Find the order's status</subgoal><tool>search_orders</tool>``
- ``executor-v0`` (``executor``): ``<tool_call>`` JSON --
  ``<tool_call>{"name": "get_order", "arguments": {"order_id": "A17"}}</tool_call>``; with
  ``allow_message=True`` also ``<message>`` -- ``<message>Which order do you mean?</message>``
- ``verifier-v0`` (``verifier``): ``<verdict>STOP|CONTINUE</verdict>`` --
  ``<verdict>CONTINUE</verdict>``

A plugin's role subclasses :class:`roles.base.Role` and registers in its ``pyproject.toml``::

    [project.entry-points."arena.roles"]
    "myrole-v0" = "mypkg.roles:MyRole"

Roles import games and ``arena.core`` at most, never a model or the bus.
"""

from __future__ import annotations

from typing import Any

from arena.core.registry import Registry
from roles.base import Reply, Role, render_posts

registry: Registry[Role] = Registry("role", entry_point_group="arena.roles", base=Role)
"""Role id -> its ``module:Role`` factory."""
registry.register("player-v0", "roles.player:Player")
registry.register("proposer-v0", "roles.proposer:Proposer")
registry.register("solver-v0", "roles.solver:Solver")
registry.register("judge-v0", "roles.judge:Judge")
registry.register("simulated-user-v0", "roles.simulated_user:SimulatedUser")
registry.register("planner-v0", "roles.planner:Planner")
registry.register("executor-v0", "roles.executor:Executor")
registry.register("verifier-v0", "roles.verifier:Verifier")


def make(role_id: str, **kwargs: Any) -> Role:
    """Build the role registered as ``role_id``; kwargs override its registered defaults."""
    return registry.make(role_id, **kwargs)


__all__ = ["Reply", "Role", "make", "registry", "render_posts"]
