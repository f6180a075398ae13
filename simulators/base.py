"""The simulator contract: a seat filled by something that is not trained.

A simulator plays one seat of a game, usually the user of a dialogue game. The episode runner
calls it the way it calls a policy, and records its turns with ``trained=False`` (role
``simulated_user`` unless the simulator says otherwise), so they are masked out of the loss.

To write one, subclass :class:`Simulator` and implement :meth:`Simulator.respond`::

    class Echo(Simulator):
        name = "echo"

        async def respond(self, view: SimulatorView) -> str:
            return "###STOP###" if view.turn > 2 else "Tell me more."

then register it (``simulators.registry.register("echo-v0", "mypkg.echo:Echo")``, or the
entry-point group ``arena.simulators``) and name it for a seat in the run config. The runner
gives every turn a :class:`SimulatorView`: the same rules and observation text a policy seat
would get, the posts the seat may see, and the game's :meth:`~games.TextGame.simulator_context`
for the seat (a user's hidden goal and persona). What :meth:`respond` returns is stepped as the
seat's action text (``env.step_text``). A simulator that raises, or takes longer than its
seat's ``timeout`` (seconds, default 60: ``games[].simulators.<seat>.timeout`` in the run config),
ends that episode with termination ``error``; the run goes on.

A simulator that talks through a language model gets one bound by the runner: the runner calls
:meth:`Simulator.bind` with an async ``generate(messages) -> str`` on the policy the run config
names for it, so simulators never import a model or the bus.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from games.interaction import Post

Message = dict[str, str]
Generate = Callable[[list[Message]], Awaitable[str]]
"""An async text generator: chat messages in, the reply's text out."""


@dataclass(frozen=True)
class SimulatorView:
    """What a simulator is shown on its turn."""

    game: str
    """The game's registered id."""
    seat: str
    """The seat the simulator fills."""
    rules: str
    """The game's rules text for the seat."""
    observation: str
    """The seat's observation text, exactly as a policy seat would read it."""
    history: tuple[Post, ...] = ()
    """The posts the seat may see (its interaction graph already applied), oldest first."""
    context: Mapping[str, Any] = field(default_factory=dict)
    """What the game lets a simulator of this seat know (``TextGame.simulator_context``)."""
    turn: int = 0
    """How many turns the simulator has played in this episode before this one."""


class Simulator:
    """Base class of simulators; see the module docstring for the contract."""

    name: str = "simulator"
    """Recorded as the seat's policy in the episode."""
    role: str = "simulated_user"
    """Recorded as the role of the simulator's turns."""
    needs_model: bool = False
    """Whether :meth:`bind` must be called before the first turn."""

    def __init__(self) -> None:
        self._generate: Generate | None = None

    def bind(self, generate: Generate) -> None:
        """Give the simulator a language model to talk through."""
        self._generate = generate

    def reset(self, seed: int) -> None:
        """Start a new episode; all randomness comes from ``seed``."""

    async def respond(self, view: SimulatorView) -> str:
        """The seat's action text for this turn."""
        raise NotImplementedError
