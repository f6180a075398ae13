"""The Nash-equilibrium family of Kuhn poker (Kuhn, 1950), exact.

With alpha in [0, 1/3], the first player bets a J with probability alpha, never bets a Q but
calls a bet with it with probability alpha + 1/3, and bets a K with probability 3 * alpha. The
second player always bets or calls with a K, bluffs a J with probability 1/3 after a pass, calls
a bet with a Q with probability 1/3, and otherwise passes. Every such pair is an equilibrium:
the first player's value is -1/18, and no deviation gains anything.
"""

from __future__ import annotations

from games.bots.tabular import PolicyTable, TabularPolicyBot

J, Q, K = "0", "1", "2"  # OpenSpiel's card ids, the first character of an information state


def kuhn_nash_policy(alpha: float = 0.0) -> PolicyTable:
    """The equilibrium for ``alpha``, keyed by OpenSpiel information state, as [P(pass), P(bet)]."""
    if not 0.0 <= alpha <= 1.0 / 3.0:
        raise ValueError("alpha must lie in [0, 1/3]")
    bet = {
        # first player, opening
        J: alpha,
        Q: 0.0,
        K: 3 * alpha,
        # first player, after pass-bet: call?
        J + "pb": 0.0,
        Q + "pb": alpha + 1.0 / 3.0,
        K + "pb": 1.0,
        # second player, after a pass: bet?
        J + "p": 1.0 / 3.0,
        Q + "p": 0.0,
        K + "p": 1.0,
        # second player, after a bet: call?
        J + "b": 0.0,
        Q + "b": 1.0 / 3.0,
        K + "b": 1.0,
    }
    return {state: [1.0 - p, p] for state, p in bet.items()}


class KuhnNashBot(TabularPolicyBot):
    """Plays the Kuhn poker equilibrium with parameter ``alpha``."""

    game = "kuhn_poker"

    def __init__(self, alpha: float = 0.0, seed: int | None = None) -> None:
        self.alpha = alpha
        super().__init__(kuhn_nash_policy(alpha), seed)
