"""The learner's inbox: whole episodes and whole groups per step, whatever the timing.

Run with ``.venv/bin/python -m pytest -q tests/trainers/test_inbox.py``.
"""

from __future__ import annotations

import threading
from collections import Counter

from synthetic import episode, turn

from trainers.inbox import Inbox


def two_turn_episode(episode_id: str, group: str = "") -> dict:
    # One trained seat with two turns: two samples per episode.
    turns = [turn(episode_id, i, "p0", reward=float(i), group=group) for i in range(2)]
    return episode(episode_id, turns, final_rewards={"p0": 1.0}).to_dict()


def test_a_group_is_one_unit_and_counts_each_member() -> None:
    inbox = Inbox(1.0, Counter())
    members = [two_turn_episode(f"g-{i}", "g") for i in range(3)]
    assert inbox.add_group([*members, "garbage", members[0]]) == 3
    assert inbox.counters["rejected_bad_record"] == 1
    assert inbox.counters["rejected_duplicate"] == 1
    assert inbox.counters["episodes_accepted"] == 3
    assert len(inbox) == 6
    assert inbox.add_group([]) == 0 and len(inbox) == 6


def test_max_batch_samples_takes_whole_units_oldest_first() -> None:
    inbox = Inbox(1.0, Counter())
    inbox.add_group([two_turn_episode(f"a-{i}", "a") for i in range(3)])  # 6 samples
    inbox.add(two_turn_episode("b-0"))  # 2
    inbox.add(two_turn_episode("c-0"))  # 2
    # A limit below the first group's size still takes that group whole, and nothing after.
    first = inbox.take(4)
    assert [s.episode_id for s in first] == ["a-0", "a-0", "a-1", "a-1", "a-2", "a-2"]
    # 3 fits one 2-sample episode, not a second one.
    assert [s.episode_id for s in inbox.take(3)] == ["b-0", "b-0"]
    assert len(inbox) == 2
    assert [s.episode_id for s in inbox.take(0)] == ["c-0", "c-0"]
    assert inbox.take(5) == [] and len(inbox) == 0


def test_a_step_never_takes_part_of_a_group_that_is_arriving() -> None:
    # The bus thread adds groups while the training thread takes: every take holds whole
    # groups (the race that split a group when its episodes were queued one at a time).
    inbox = Inbox(1.0, Counter())
    groups = 200
    taken: list[list] = []
    done = threading.Event()

    def train() -> None:
        while not done.is_set() or len(inbox):
            batch = inbox.take()
            if batch:
                taken.append(batch)

    trainer = threading.Thread(target=train)
    trainer.start()
    for g in range(groups):
        inbox.add_group([two_turn_episode(f"{g}-{i}", str(g)) for i in range(4)])
    done.set()
    trainer.join(timeout=30)
    sizes: Counter[tuple[int, str]] = Counter()
    for index, batch in enumerate(taken):
        for sample in batch:
            sizes[index, sample.group] += 1
    assert all(count == 8 for count in sizes.values())  # 4 episodes x 2 turns, never fewer
    assert sum(sizes.values()) == groups * 8 and len(sizes) == groups


def test_a_positive_logprob_is_rejected_like_nan_within_a_float_tolerance() -> None:
    # A log-probability is at most 0; above 0 by more than 1e-4 only a broken backend or a
    # malformed message gives, and the episode is refused (counted, its reason kept) as NaN is.
    inbox = Inbox(1.0, Counter())
    near_zero = episode("near", [turn("near", 0, "p0", logprobs=[5e-5, -1.0])])  # float error
    positive = episode("pos", [turn("pos", 0, "p0", logprobs=[-1.0, 0.25])])
    chosen = turn("ch", 0, "p0", choices=[[4, 5], [6]], choice_index=1)
    chosen.choice_logprob = 0.5  # log softmax(...)[played] can never be above 0
    scored = turn("sc", 0, "p0", choices=[[4, 5], [6]], choice_index=0)
    scored.choice_logprobs[1] = 2.0
    assert inbox.add(near_zero.to_dict()) is True
    assert inbox.add(positive.to_dict()) is False
    assert inbox.last_rejection == (
        "episode pos: turn 0 of pos: response_logprobs holds 0.25, above 0 (a log-probability "
        "is at most 0; a broken backend or a malformed message)"
    )
    assert inbox.add(episode("ch", [chosen]).to_dict()) is False
    assert "choice_logprob holds 0.5, above 0" in inbox.last_rejection
    assert inbox.add(episode("sc", [scored]).to_dict()) is False
    assert "choice_logprobs holds 2, above 0" in inbox.last_rejection
    assert inbox.counters["rejected_bad_record"] == 3
    assert inbox.counters["episodes_accepted"] == 1 and len(inbox) == 1
