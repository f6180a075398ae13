"""The seeds of a sync run's collects (arena/run/collection.py:sync_order_seed): unique within a
run across steps, rollout actors, orders given again and steps collected again.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_collection.py``.
"""

from __future__ import annotations

from arena.run.collection import sync_order_seed


def test_first_collects_follow_the_step() -> None:
    assert sync_order_seed(0, 0) == 1_000_000
    assert sync_order_seed(0, 7) == 1_000_700
    assert sync_order_seed(2, 7) == 3_000_700  # a resumed run replays exactly these


def test_a_step_collected_again_shares_no_order_seed_with_any_collect_of_the_run() -> None:
    # Every order seed a collect can hand out: its seed + actor index (< 10) + 10 x attempt
    # (< 10 attempts), for 200 steps, each collected up to 4 times.
    def orders(seed: int) -> set[int]:
        return {seed + attempt * 10 + actor for attempt in range(10) for actor in range(10)}

    seen: set[int] = set()
    for step in range(200):
        for again in range(4):
            mine = orders(sync_order_seed(0, step, again))
            assert not seen & mine, (step, again)
            seen |= mine
    # again 1 is no longer the first seed + 1, which the second rollout actor had
    assert sync_order_seed(0, 3, 1) == 1_000_300_100
