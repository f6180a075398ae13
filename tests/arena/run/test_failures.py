"""arena/run/failures.py: the one-line reason a step had nothing to train on, and steps the
learner skipped.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_failures.py``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from arena.run.failures import SkippedSteps, reason_of


def test_the_reason_names_the_first_failure_or_how_the_untrained_episodes_ended() -> None:
    assert reason_of({"episodes": 0, "failed": 0}) == "no episode was played"
    failed = {"episodes": 0, "failed": 8, "error": "kuhn-poker-v0 episode e-0: bot\n crashed"}
    assert reason_of(failed) == (
        "every episode failed (8/8); the first: kuhn-poker-v0 episode e-0: bot crashed"
    )
    # None failed, yet no trained turn (a game whose first prompt is longer than the context):
    # say how they ended, not "0/8 episodes failed (the first: no reason given)".
    overflowed = {"termination": "context_overflow", "turns": []}
    assert reason_of({"episodes": 8, "failed": 0, "error": "", "transcript": overflowed}) == (
        "none of the 8 episodes failed, but none had a turn to train on; the first ended with "
        "context_overflow after 0 turns"
    )
    some = {"episodes": 6, "failed": 2, "error": "x", "transcript": overflowed}
    assert reason_of(some) == (
        "2/8 episodes failed (the first: x), the others had no trained turn; the first ended "
        "with context_overflow after 0 turns"
    )


def test_episodes_the_learner_rejected_are_the_reason_with_its_last_word() -> None:
    # Invalid model output: a model whose replies carry NaN log-probabilities plays whole
    # episodes (none failed) that the learner rejects; the run stopped saying "none of the 8
    # episodes failed, but none had a turn to train on; the first ended with illegal".
    collected = {
        "episodes": 8,
        "failed": 0,
        "error": "",
        "transcript": {"termination": "illegal", "turns": [{}, {}]},
        "rejected": [
            {
                "learner": "learner",
                "count": 8,
                "last": "episode r-3: turn 0 of r-3:\n response_logprobs holds NaN or inf",
            }
        ],
    }
    assert reason_of(collected) == (
        "the learner rejected 8 episodes as unusable (the last: episode r-3: turn 0 of r-3: "
        "response_logprobs holds NaN or inf)"
    )


def test_a_step_that_trained_nothing_is_told_the_rejections_since_the_last_look() -> None:
    import asyncio

    from arena.run.failures import Rejections

    counts = iter([3, 3, 11])

    async def learner(op: str) -> dict:
        assert op == "status"
        return {"counters": {"rejected_bad_record": next(counts)}, "last_rejection": "why"}

    rejections = Rejections(lambda: [("learner", learner)])
    steps = []
    for metrics in (None, {"step": 4}, None, {"loss": 0.0}):  # the last: skipped, no step
        collected: dict = {}
        asyncio.run(rejections.note(metrics, collected))
        steps.append(collected)
    # asked only after a step that trained nothing; each time, only what is new since
    told = {"learner": "learner", "last": "why"}
    assert steps == [
        {"rejected": [{**told, "count": 3}]},
        {},
        {},
        {"rejected": [{**told, "count": 8}]},
    ]


def test_a_named_policys_own_learner_rejections_are_told_with_its_own_log(tmp_path) -> None:
    # configs/two_models.yaml: the responder's own model diverged, its learner
    # (learner-responder, logs/learner-responder.log) rejects every episode, while the run's
    # learner rejected none; the step line and the stop line must name the responder's.
    import asyncio

    from arena.run.failures import EmptySteps, NothingToTrain, Rejections

    statuses = {
        "learner": {"counters": {"rejected_bad_record": 0}, "last_rejection": ""},
        "learner-responder": {
            "counters": {"rejected_bad_record": 8},
            "last_rejection": "episode r-7: turn 1 of r-7: response_logprobs holds NaN or inf",
        },
    }

    def asker(name: str):
        async def ask(op: str) -> dict:
            return statuses[name]

        return ask

    rejections = Rejections(lambda: [(name, asker(name)) for name in statuses])
    collected = {"episodes": 8, "failed": 0, "error": ""}
    asyncio.run(rejections.note(None, collected))
    assert collected["rejected"] == [
        {
            "learner": "learner-responder",
            "count": 8,
            "last": "episode r-7: turn 1 of r-7: response_logprobs holds NaN or inf",
        }
    ]
    printed: list[str] = []
    events: list[str] = []
    log = SimpleNamespace(
        console=SimpleNamespace(print=printed.append),
        config=SimpleNamespace(steps=10),
        event=events.append,
    )
    empty = EmptySteps(1, tmp_path, log)  # type: ignore[arg-type]
    reason = (
        "learner-responder rejected 8 episodes as unusable (the last: episode r-7: turn 1 of "
        "r-7: response_logprobs holds NaN or inf)"
    )
    with pytest.raises(NothingToTrain) as stopped:
        empty.untrained(None, 4, collected)
    assert events == [
        f"step 4: no turn to train on (1 in a row; the run stops after 1, "
        f"rollout.max_empty_steps): {reason}"
    ]
    assert str(stopped.value) == (
        f"stopped after 1 steps in a row with no turn to train on: {reason}; read "
        f"{tmp_path / 'events.log'} and {tmp_path / 'logs' / 'learner-responder.log'}"
    )
    # both learners rejected (the shared model and the responder's diverged): both named,
    # each with its own log
    statuses["learner"] = {"counters": {"rejected_bad_record": 5}, "last_rejection": "x"}
    statuses["learner-responder"]["counters"]["rejected_bad_record"] = 16
    again = {"episodes": 8, "failed": 0, "error": ""}
    asyncio.run(rejections.note(None, again))
    with pytest.raises(NothingToTrain) as stopped:
        empty.untrained(None, 4, again)
    assert str(stopped.value) == (
        "stopped after 2 steps in a row with no turn to train on: the learner rejected 5 "
        "episodes as unusable (the last: x); learner-responder rejected 8 episodes as unusable "
        "(the last: episode r-7: turn 1 of r-7: response_logprobs holds NaN or inf); read "
        f"{tmp_path / 'events.log'}, {tmp_path / 'logs' / 'learner.log'} and "
        f"{tmp_path / 'logs' / 'learner-responder.log'}"
    )


def test_the_learner_keeps_why_it_last_rejected_an_episode() -> None:
    from collections import Counter

    from trainers.inbox import Inbox

    inbox = Inbox(1.0, Counter())
    assert inbox.last_rejection == ""
    assert inbox.add_group(["garbage", {"id": "e-1"}]) == 0
    assert inbox.counters["rejected_bad_record"] == 2
    assert inbox.last_rejection.startswith("episode e-1: ")


def test_skipped_steps_are_retried_and_five_in_a_row_stop_the_run() -> None:
    events: list[str] = []
    skipped = SkippedSteps(SimpleNamespace(event=events.append))  # type: ignore[arg-type]
    assert skipped.next_step({"step": 4}, 3) == 4  # trained: the learner's step is the run's
    for n in range(1, 5):
        assert skipped.next_step({"step": 4}, 4) == 4  # skipped: step 5 is collected again
        assert events[-1] == f"learner skipped step 5 ({n} in a row): non-finite loss"
    assert skipped.next_step({"step": 5}, 4) == 5 and skipped.in_a_row == 0
    for _ in range(4):
        skipped.next_step({"step": 5}, 5)
    with pytest.raises(RuntimeError, match="skipped 5 steps in a row"):
        skipped.next_step({"step": 5}, 5)
    with pytest.raises(RuntimeError, match="no turns to train on"):
        skipped.next_step({}, 5)


def test_a_named_policy_that_trains_nothing_while_the_run_trains_is_told_each_step(
    tmp_path,
) -> None:
    # configs/two_models.yaml: the run's learner trains, the responder's own learner rejects
    # every episode (NaN log-probabilities) or has no turn: the run went on and only
    # logs/learner-responder.log said so. Each such step says it, once, naming the policy.
    import asyncio

    from arena.run.failures import EmptySteps, Rejections

    statuses = {
        "learner": {"counters": {"rejected_bad_record": 2}, "last_rejection": "not asked"},
        "learner-responder": {
            "counters": {"rejected_bad_record": 8},
            "last_rejection": "episode r-7: turn 1 of r-7:\n response_logprobs holds NaN",
        },
    }
    asked: list[str] = []

    def asker(name: str):
        async def ask(op: str) -> dict:
            asked.append(name)
            return statuses[name]

        return ask

    rejections = Rejections(lambda: [(name, asker(name)) for name in statuses])
    events: list[str] = []
    log = SimpleNamespace(console=None, config=SimpleNamespace(steps=10), event=events.append)
    empty = EmptySteps(3, tmp_path, log)  # type: ignore[arg-type]
    read = f"read {tmp_path / 'logs' / 'learner-responder.log'}"

    def step(n: int, idle: list[str]) -> dict:
        collected: dict = {"episodes": 8, "failed": 0}
        asyncio.run(rejections.note({"step": float(n)}, collected, idle))
        assert empty.untrained({"step": float(n)}, n, collected) is False  # the step counts
        return collected

    assert step(4, ["learner-responder"])["idle"] == ["learner-responder"]
    assert asked == ["learner-responder"]  # only the idle one: the run's learner trained
    assert events == [
        "step 4: policy responder trained nothing (1 in a row; the run goes on): its learner "
        "rejected 8 episodes as unusable (the last: episode r-7: turn 1 of r-7: "
        f"response_logprobs holds NaN); {read}"
    ]
    step(5, ["learner-responder"])  # no new rejection: it had no turn of its own
    assert events[1] == (
        "step 5: policy responder trained nothing (2 in a row; the run goes on): its learner "
        f"had no turn to train on; {read}"
    )
    assert step(6, []) == {"episodes": 8, "failed": 0}  # it trained: nothing said
    step(7, ["learner-responder"])
    assert len(events) == 3 and events[2].startswith("step 7: policy responder trained nothing (1 ")


def test_a_policy_learner_is_idle_when_it_trained_nothing_not_when_ahead_or_trained() -> None:
    import asyncio

    from arena.run.policy_learners import PolicyLearners

    learners = PolicyLearners(["responder"], lambda text: None, 1.0)
    learner = learners.learners[0]
    replies: list = []

    async def step(version: int, at: int) -> dict | None:
        return replies.pop(0)

    async def nothing(*args) -> None:
        return None

    learner.client = SimpleNamespace(step=step, actor_name="learner-responder")  # type: ignore[assignment]
    learner.deliveries = SimpleNamespace(wait=nothing)  # type: ignore[assignment]
    learner.weights = SimpleNamespace(wait_serving=nothing)  # type: ignore[assignment]
    for reply, at, idle in (
        (None, 1, ["learner-responder"]),  # nothing pending: every episode rejected, or no turn
        ({"step": 1.0, "version": 1.0}, 1, []),
        (None, 1, []),  # ahead of the run (it went back): keeps its turns, not idle
        (None, 2, ["learner-responder"]),
    ):
        replies.append(reply)
        asyncio.run(learners.train(8, at))
        assert learners.idle() == idle
