"""Turn and Episode records: validation and exact round trips through the bus codec.

Run with ``.venv/bin/python -m pytest -q tests/arena/test_records.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from arena.bus.codec import decode, encode
from arena.records import Episode, RecordError, SeatAssignment, Turn, synthetic_turn


def make_turn(index: int = 0, seat: str = "player_0", **changes) -> Turn:
    fields = dict(
        episode_id="ep1",
        index=index,
        game="tictactoe-v0",
        seat=seat,
        role="player",
        prompt_ids=np.array([1, 2, 3], np.int32),
        response_ids=np.array([7, 8], np.int32),
        response_logprobs=np.array([-0.5, -1.25], np.float32),
        text="<answer>4</answer>",
        action=4,
        valid=True,
        reward=0.0,
        policy_version=3,
        trained=True,
        group="g0",
    )
    fields.update(changes)
    return Turn(**fields)


def make_episode() -> Episode:
    seats = {
        "player_0": SeatAssignment("player", "main"),
        "player_1": SeatAssignment("player", "random-v0", trained=False),
    }
    turns = [
        make_turn(0),
        make_turn(1, seat="player_1", trained=False, action=None, valid=False),
        make_turn(2, reward=1.0),
    ]
    return Episode(
        id="ep1",
        game="tictactoe-v0",
        seed=11,
        seats=seats,
        turns=turns,
        final_rewards={"player_0": 1.0, "player_1": -1.0},
        termination="win",
        stats={"turns": 3},
    )


def test_episode_roundtrips_exactly_through_the_codec() -> None:
    episode = make_episode()
    _, frames = encode("episode", episode.to_dict(), src="rollout-0", service="learner")
    assert len(frames) == 1 + 3 * 3  # every turn's three arrays travel as frames
    back = Episode.from_dict(decode([bytes(f) for f in frames]).body)
    assert back.id == episode.id and back.seats == episode.seats
    assert back.final_rewards == episode.final_rewards and back.termination == "win"
    for a, b in zip(back.turns, episode.turns, strict=True):
        np.testing.assert_array_equal(a.prompt_ids, b.prompt_ids)
        np.testing.assert_array_equal(a.response_logprobs, b.response_logprobs)
        assert a.response_ids.dtype == np.int32 and a.response_logprobs.dtype == np.float32
        assert (a.action, a.valid, a.reward, a.trained, a.group) == (
            b.action,
            b.valid,
            b.reward,
            b.trained,
            b.group,
        )
    assert [t.index for t in back.trained_turns()] == [0, 2]


def test_mismatched_lengths_are_rejected() -> None:
    with pytest.raises(RecordError, match="response_logprobs has 1"):
        make_turn(response_logprobs=np.array([-1.0], np.float32))


@pytest.mark.parametrize("field", ["prompt_ids", "reward", "valid", "episode_id", "action"])
def test_missing_field_is_named(field: str) -> None:
    data = make_episode().to_dict()
    del data["turns"][1][field]
    with pytest.raises(RecordError, match=f"missing field '{field}'"):
        Episode.from_dict(data)


def test_wrong_types_are_named() -> None:
    data = make_episode().to_dict()
    data["turns"][0]["response_ids"] = [7, 8]
    with pytest.raises(RecordError, match="'response_ids' must be ndarray"):
        Episode.from_dict(data)
    data = make_episode().to_dict()
    data["turns"][0]["response_logprobs"] = np.array(["a", "b"])
    with pytest.raises(RecordError, match="dtype float32"):
        Episode.from_dict(data)
    data = make_episode().to_dict()
    data["seed"] = "eleven"
    with pytest.raises(RecordError, match="'seed' must be int"):
        Episode.from_dict(data)


def test_episode_consistency_checks() -> None:
    with pytest.raises(RecordError, match="termination"):
        Episode(id="e", game="g", seed=0, seats={}, termination="exploded")
    with pytest.raises(RecordError, match="unknown seat"):
        Episode(id="ep1", game="g", seed=0, seats={}, turns=[make_turn()])


def choice_turn(**changes) -> Turn:
    """A choice turn of three legal replies ([5 6], [7], [8 9 10]); the second was played."""
    fields = {
        "response_ids": np.array([7], np.int32),
        "response_logprobs": np.array([-0.25], np.float32),
        "choice_ids": np.array([5, 6, 7, 8, 9, 10], np.int32),
        "choice_lengths": np.array([2, 1, 3], np.int32),
        "choice_logprobs": np.array([-1.5, -0.25, -4.0], np.float32),
        "choice_index": 1,
        "choice_logprob": -0.4,
    }
    return make_turn(**{**fields, **changes})


def test_a_choice_turn_roundtrips_and_a_generated_one_sends_no_choice_fields() -> None:
    turn = choice_turn()
    assert turn.is_choice and [c.tolist() for c in turn.choices()] == [[5, 6], [7], [8, 9, 10]]
    _, frames = encode("episode", turn.to_dict(), src="r", service="learner")
    back = Turn.from_dict(decode(frames).body)
    assert back.choice_index == 1 and back.choice_logprob == pytest.approx(-0.4)
    assert back.choice_ids.tolist() == [5, 6, 7, 8, 9, 10]
    assert back.choice_logprobs.tolist() == [-1.5, -0.25, -4.0]
    plain = make_turn()
    assert not plain.is_choice and plain.choices() == []
    assert not {"choice_ids", "choice_index"} & set(plain.to_dict())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"choice_lengths": np.array([2, 1, 2], np.int32)}, "add up to 5 for 6"),
        ({"choice_logprobs": np.array([-1.0], np.float32)}, "1 choice_logprobs for 3"),
        ({"choice_index": 3}, r"choice_index 3 is not in \[0, 3\)"),
        (
            {"choice_lengths": np.array([0, 3, 3], np.int32)},
            "an empty legal reply",
        ),
    ],
)
def test_malformed_choice_fields_are_refused(changes: dict, message: str) -> None:
    with pytest.raises(RecordError, match=message):
        choice_turn(**changes)


def test_synthetic_turns_fill_the_fields_tests_and_benchmarks_leave_out() -> None:
    made = synthetic_turn("e", 2, "p1", response=[4, 5, 6], logprobs=-5.0, version=3)
    assert (made.index, made.seat, made.policy_version, made.text) == (2, "p1", 3, "")
    assert made.prompt_ids.tolist() == [1, 2, 3] and made.response_logprobs.tolist() == [-5.0] * 3
    assert not made.is_choice
    chose = synthetic_turn("e", choices=[[5, 6], [7], [8, 9, 10]], choice_index=2)
    assert chose.response_ids.tolist() == [8, 9, 10] and chose.choice_lengths.tolist() == [2, 1, 3]
    assert chose.choice_logprobs.tolist() == [-2.0, -1.0, -3.0]
    assert chose.choice_logprob == pytest.approx(-np.log(3))
    assert Turn.from_dict(chose.to_dict()).choices()[2].tolist() == [8, 9, 10]
