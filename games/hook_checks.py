"""What a game's author hands :class:`~games.text_env.TextGame`, checked where it comes in, so that a
plugin's mistake fails in one line naming the argument or the hook, not later as an
``IndexError`` of an action mask, a bot's "no legal action" or a silent NaN return."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np


def whole_number(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int, or a ValueError naming ``name``: a game argument that must count
    something (turns, rounds, dice, a heap). A ``--game-arg`` of 0, 2.5 or ``x`` would otherwise
    build a game that ends after one move, round silently, or fail later, unreadably."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def check_legal_indices(game: Any, agent: str, legal: list[Any], size: int) -> None:
    """Refuse a ``_legal_actions`` that no seat could play from, naming the hook: each action
    must be an index of the ``size`` actions of the seat's space, and the list must not be
    empty while the game is on (an index outside would fail as an ``IndexError`` of the action
    mask, and an empty list as a bot's "no legal action", blaming the bot)."""
    hook = f"{type(game).__name__}._legal_actions({agent!r})"
    for action in legal:
        if (
            isinstance(action, (bool, np.bool_))
            or not isinstance(action, (int, np.integer))
            or not 0 <= action < size
        ):
            raise ValueError(
                f"{hook} listed {action!r}, not an action index 0..{size - 1} of its action space"
            )
    if not legal:
        raise ValueError(
            f"{hook} is empty but the game is not over (_outcome() is None): the seat to move "
            "needs a legal action (end the game in _outcome, or give the seat one, such as a pass)"
        )


def checked_rewards(
    game: Any, agent: str, action: Any, rewards: Mapping[str, float]
) -> Mapping[str, float]:
    """What ``_apply`` returned, if it is rewards: a mapping of the game's seats to finite
    numbers. A NaN would otherwise make every return NaN and score the game as a loss, with no
    word said; an unknown seat would fail as a ``KeyError``."""
    where = f"{type(game).__name__}._apply({agent!r}, {action!r})"
    if not isinstance(rewards, Mapping):
        raise TypeError(
            f"{where} returned {type(rewards).__name__}, not a mapping of seat to reward ({{}} "
            "when the move earns nothing)"
        )
    for seat, reward in rewards.items():
        if seat not in game.rewards:
            raise ValueError(f"{where} rewarded {seat!r}, not a seat of the game")
        if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
            raise TypeError(f"{where} gave {seat} a reward of {reward!r}, not a number")
        if not np.isfinite(reward):
            raise ValueError(f"{where} gave {seat} a reward of {reward!r}: not finite")
    return rewards
