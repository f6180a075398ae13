"""One exact read of a poker policy's strategy: the exploitability of the run's weights at one
point, read at every information state (:mod:`arena.run.strategy_reads` takes them, the
before/after summary and the run log show them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class StrategyReading:
    """The exploitability of the run's weights at one point, read at every information state."""

    game: str
    label: str
    """``before`` (the base model) or ``after`` (the final checkpoint)."""
    temperature: float
    """The temperature the policy plays at; 0 = greedy (read at 1, all mass on the argmax)."""
    exploitability: float
    invalid_mass: float
    """Mean over information states of the reply mass on no legal move (at temperature 1 when
    greedy: greedy decoding has no mass to report)."""
    step: int
    """The training step of the weights read (0: the base model)."""
    model: str
    """What was read: the model spec or the checkpoint's ``model/`` directory."""
    sampling: bool = False
    """Read at the training sampling temperature rather than the evaluation's (each seat at
    its policy's: ``temperature``, the run's, but those in ``seat_temperatures``)."""
    seconds: float = 0.0
    policy: dict[str, list[float]] = field(default_factory=dict)
    """The policy read: information-state string (OpenSpiel's) -> probability of each action
    id, normalized over the legal ones (Kuhn: 0 pass, 1 bet). Whether the policy plays its
    card shows here directly, e.g. ``"0"`` (player 0 holds the jack, nothing bet yet)."""
    policies: dict[str, str] = field(default_factory=dict)
    """What was read for each policy with a model of its own that plays a seat of the game:
    name -> its model spec or its checkpoint's ``model/`` directory (``model`` is the shared
    policy's). Empty where every seat plays the shared policy."""
    seat_temperatures: dict[str, float] = field(default_factory=dict)
    """Seat (agent) -> the temperature its rows were read at, for each seat read at another
    than ``temperature``: in a read at the training sampling temperatures, the seats whose
    policies sample at temperatures of their own (``policies.NAME.sampling``). Empty where
    every seat was read at ``temperature``."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
