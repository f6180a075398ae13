"""pass^k: how reliably a policy solves a task, every time, over k tries (tau-bench).

For a task tried n times with c successes, the chance that k tries drawn without replacement
from those n all succeed is C(c, k) / C(n, k); pass^k averages it over tasks. pass^1 is the
plain success rate; pass^k falls as k grows unless every task is solved every time. (pass@k,
"at least one of k", is the optimistic counterpart; this is the pessimistic one that matters for
an agent serving real users.)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence


def pass_hat_k(results: Mapping[Hashable, Sequence[bool]], k: int) -> float:
    """The mean over tasks of C(c, k) / C(n, k), with n the tries of a task and c its
    successes. Raises ValueError for k < 1, no tasks, or a task with fewer than k tries."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a whole number >= 1, got {k!r}")
    if not results:
        raise ValueError("pass^k needs at least one task")
    total = 0.0
    for task, tries in results.items():
        n, c = len(tries), sum(1 for t in tries if t)
        if n < k:
            raise ValueError(
                f"task {task!r} has {n} tries, fewer than k={k}: pass^{k} is undefined"
            )
        total += math.comb(c, k) / math.comb(n, k)
    return total / len(results)


def pass_hat_curve(results: Mapping[Hashable, Sequence[bool]]) -> dict[int, float]:
    """pass^k for k = 1 .. the fewest tries of any task."""
    if not results:
        raise ValueError("pass^k needs at least one task")
    return {k: pass_hat_k(results, k) for k in range(1, min(map(len, results.values())) + 1)}
