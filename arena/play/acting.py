"""How a policy seat acts, in one place: by *generating* a reply or by *choosing* a legal one.

A seat on a policy acts in one of two ways (its ``act``):

- ``generate``: it writes free text, which its role reads (any game; every free-text role,
  proposer, solver, user, planner, executor, must);
- ``choice``: it samples one of the legal replies by the softmax of their scored sequence
  log-probabilities (:mod:`arena.play.choice`); only a game that lists its legal actions as text
  has replies to choose from.

Several settings may say which: :func:`resolve_act` decides between them, in one documented
order, and :func:`check_act` refuses a way of acting the game cannot be played in. Every command,
config check and seat factory calls these two rather than reading ``act`` on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from arena.core.errors import ConfigError, check_choice

if TYPE_CHECKING:
    from games.text_env import TextGame

GENERATE = "generate"
"""Write a reply that the seat's role reads."""
CHOICE = "choice"
"""Pick one of the legal replies by their scores (:mod:`arena.play.choice`)."""
ACTS = (GENERATE, CHOICE)
"""How a policy seat acts: ``generate`` writes free text that its role reads; ``choice`` picks
one of the legal replies by their scores (:mod:`arena.play.choice`)."""
DEFAULT_ACT = GENERATE
"""How a seat acts when nothing says otherwise: generating works in every game."""


def resolve_act(
    command_line: str | None = None,
    participant: str | None = None,
    game: str | None = None,
) -> str:
    """How a seat acts: the first of these that is set (not None), in this order,

    1. ``command_line``: the command's override (``arena eval --act``, ``arena play --act``),
       for every game it plays;
    2. ``participant``: the participant's or policy's own setting (a tournament participant's
       ``act``), for every game it plays;
    3. ``game``: the game's section of the run config (``games[i].act``; a checkpoint's run
       config when a command plays one);
    4. :data:`DEFAULT_ACT` (``generate``).

    Each value given must be one of :data:`ACTS` (a :class:`ConfigError` names the source)."""
    for where, act in (("--act", command_line), ("participant act", participant), ("act", game)):
        if act is not None:
            check_choice(where, act, ACTS)
            return act
    return DEFAULT_ACT


def check_act(
    act: str,
    game_id: str,
    env: TextGame | Callable[[], TextGame],
    simulated: Collection[str] = (),
) -> None:
    """Refuse a way of acting the game cannot be played in: ``choice`` needs a game that lists
    its legal actions as text, so a free-text game's seats must ``generate``. The error names the
    game and the seats the policy plays (those not in ``simulated``). ``env`` is the game, or a
    function that builds it (called only for ``choice``, so a generating game is not built for
    the check)."""
    check_choice("act", act, ACTS)
    if act != CHOICE:
        return
    game = env if hasattr(env, "free_text") else env()  # type: ignore[operator]
    if game.free_text:
        seats = [a for a in game.possible_agents if a not in simulated]
        raise ConfigError(
            f"games.{game_id}: act: choice needs a game that lists its legal actions, but "
            f"{game_id} takes free text (seats {', '.join(seats)}); use act: generate"
        )
