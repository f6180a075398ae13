"""arena/play/stats.py: per-game episode stats, the coordinator's merge of rollout actors'
collect replies (rates weighted by episodes), and transcripts, against hand-computed numbers.

Run with `.venv/bin/python -m pytest -q tests/arena/play/test_stats.py`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from arena.play.stats import episode_stats, merge_collects, transcript
from arena.records import Episode, SeatAssignment, Turn


def policy_turn(
    eid: str,
    index: int,
    seat: str,
    tokens: int,
    *,
    game: str = "ttt",
    valid: bool = True,
    version: int = 0,
    reward: float = 0.0,
    text: str = "",
) -> Turn:
    return Turn(
        episode_id=eid,
        index=index,
        game=game,
        seat=seat,
        role="player",
        prompt_ids=np.array([1, 2], np.int32),
        response_ids=np.arange(tokens, dtype=np.int32),
        response_logprobs=np.zeros(tokens, np.float32),
        text=text,
        action=index,
        valid=valid,
        reward=reward,
        policy_version=version,
    )


def bot_turn(eid: str, index: int, seat: str, game: str = "ttt") -> Turn:
    return Turn(
        episode_id=eid,
        index=index,
        game=game,
        seat=seat,
        role="bot",
        prompt_ids=np.zeros(0, np.int32),
        response_ids=np.zeros(0, np.int32),
        response_logprobs=np.zeros(0, np.float32),
        text="5",
        action=4,
        valid=True,
        policy_version=-1,
        trained=False,
    )


def self_play(eid: str, game: str, rewards: tuple[float, float], turns: list[Turn]) -> Episode:
    seats = {
        "player_0": SeatAssignment("player", "main"),
        "player_1": SeatAssignment("player", "main"),
    }
    return Episode(
        id=eid,
        game=game,
        seed=0,
        seats=seats,
        turns=turns,
        final_rewards={"player_0": rewards[0], "player_1": rewards[1]},
        termination="win",
    )


def against_bot(eid: str, reward: float, turns: list[Turn]) -> Episode:
    seats = {
        "player_0": SeatAssignment("player", "main"),
        "player_1": SeatAssignment("bot", "random-v0", trained=False),
    }
    return Episode(
        id=eid,
        game="ttt",
        seed=0,
        seats=seats,
        turns=turns,
        final_rewards={"player_0": reward, "player_1": -reward},
        termination="win",
    )


def test_episode_stats_by_hand() -> None:
    episodes = [
        # Self-play: both seats are trained, so both rewards count: +1 and -1.
        self_play(
            "a",
            "ttt",
            (1.0, -1.0),
            [
                policy_turn("a", 0, "player_0", 3, version=4),
                policy_turn("a", 1, "player_1", 2, version=5, valid=False),
                policy_turn("a", 2, "player_1", 1, version=5),
            ],
        ),
        # Against a bot: only player_0's -1 counts; the bot's turns count nowhere.
        against_bot(
            "b",
            -1.0,
            [
                policy_turn("b", 0, "player_0", 4, version=6, valid=False),
                bot_turn("b", 1, "player_1"),
                policy_turn("b", 2, "player_0", 5, version=6),
                bot_turn("b", 3, "player_1"),
            ],
        ),
        # Another game keeps its own key: Kuhn rewards +2 and -2.
        self_play(
            "c",
            "kuhn",
            (2.0, -2.0),
            [
                policy_turn("c", 0, "player_0", 1, game="kuhn", version=3),
                policy_turn("c", 1, "player_1", 1, game="kuhn", version=3),
            ],
        ),
    ]
    # one turn played by choice among three replies of 2, 1 and 2 tokens (the first played)
    chosen = episodes[0].turns[0]
    chosen.choice_ids = np.array([3, 4, 5, 6, 7], np.int32)
    chosen.choice_lengths = np.array([2, 1, 2], np.int32)
    chosen.choice_logprobs = np.zeros(3, np.float32)
    chosen.choice_index = 0
    stats = episode_stats(episodes)
    # ttt/player rewards: +1, -1, -1 -> mean -1/3. kuhn/player: +2, -2 -> 0.
    assert stats["reward"] == pytest.approx({"ttt/player": -1 / 3, "kuhn/player": 0.0})
    # ttt policy turns: 3 in a, 2 in b (bot turns excluded); invalid: 1 + 1 -> 2/5. kuhn: 0/2.
    assert stats["invalid_rate"] == pytest.approx({"ttt/player": 0.4, "kuhn/player": 0.0})
    assert stats["policy_turns"] == 7
    assert stats["generated_tokens"] == 3 + 2 + 1 + 4 + 5 + 1 + 1  # 17
    assert stats["scored_tokens"] == 2 + 5  # its prompt and every reply
    assert (stats["min_version"], stats["max_version"]) == (3, 6)


def test_staleness_counts_trained_turns_only() -> None:
    """A frozen judge's turns stay at version 0 (its policy never trains), a population
    opponent's at its snapshot's: counted, `staleness` grew by one every step of a run with a
    frozen policy though every trained turn was fresh."""
    frozen = policy_turn("a", 1, "player_1", 2, version=0)
    frozen.trained = False
    episode = self_play(
        "a", "ttt", (1.0, 0.0), [policy_turn("a", 0, "player_0", 3, version=7), frozen]
    )
    episode.seats["player_1"] = SeatAssignment("player", "judge", trained=False)
    stats = episode_stats([episode])
    assert (stats["min_version"], stats["max_version"]) == (7, 7)
    assert stats["policy_turns"] == 2 and stats["generated_tokens"] == 5  # still counted there
    assert stats["invalid_rate"] == {"ttt/player": 0.0}


def test_episode_stats_of_nothing() -> None:
    assert episode_stats([]) == {
        "reward": {},
        "invalid_rate": {},
        "policy_turns": 0,
        "generated_tokens": 0,
        "scored_tokens": 0,
        "min_version": -1,
        "max_version": -1,
    }


def reply(
    episodes: int,
    reward: dict[str, float],
    invalid: dict[str, float],
    *,
    failed: int = 0,
    seconds: float = 1.0,
    tokens: int = 0,
    turns: int = 0,
    min_version: int = 0,
    transcript: Any = None,
) -> dict[str, Any]:
    return {
        "episodes": episodes,
        "failed": failed,
        "seconds": seconds,
        "transcript": transcript,
        "stats": {
            "reward": reward,
            "invalid_rate": invalid,
            "policy_turns": turns,
            "generated_tokens": tokens,
            "min_version": min_version,
            "max_version": 9,
        },
    }


def test_merge_collects_weights_rates_by_episodes() -> None:
    replies = [
        reply(
            3,
            {"ttt/player": 0.5},
            {"ttt/player": 0.2},
            failed=1,
            seconds=2.5,
            tokens=30,
            turns=12,
            min_version=7,
        ),
        reply(
            1,
            {"ttt/player": -1.0, "kuhn/player": 1.0},
            {"ttt/player": 0.6, "kuhn/player": 0.0},
            seconds=4.0,
            tokens=10,
            turns=3,
            min_version=5,
            transcript={"id": "r1"},
        ),
        reply(
            4,
            {"kuhn/player": 0.25},
            {"kuhn/player": 0.5},
            failed=2,
            seconds=1.0,
            tokens=8,
            turns=8,
            min_version=6,
            transcript={"id": "r2"},
        ),
    ]
    merged = merge_collects(replies)
    # ttt reward: (0.5 * 3 + -1.0 * 1) / 4 = 0.125; kuhn: (1.0 * 1 + 0.25 * 4) / 5 = 0.4
    assert merged["reward"] == pytest.approx({"ttt/player": 0.125, "kuhn/player": 0.4})
    # ttt invalid: (0.2 * 3 + 0.6 * 1) / 4 = 0.3; kuhn: (0.0 * 1 + 0.5 * 4) / 5 = 0.4
    assert merged["invalid_rate"] == pytest.approx({"ttt/player": 0.3, "kuhn/player": 0.4})
    assert merged["episodes"] == 8 and merged["failed"] == 3
    assert merged["seconds"] == 4.0  # actors collect side by side: the slowest sets the time
    assert merged["generated_tokens"] == 48 and merged["policy_turns"] == 23
    assert merged["scored_tokens"] == 0  # none of these replies says (older actors)
    assert merged["min_version"] == 5
    assert merged["transcript"] == {"id": "r1"}  # the first reply that has one


def test_merge_collects_of_nothing() -> None:
    merged = merge_collects([])
    assert merged == {
        "episodes": 0,
        "failed": 0,
        "error": "",
        "seconds": 0.0,
        "generated_tokens": 0,
        "scored_tokens": 0,
        "policy_turns": 0,
        "min_version": -1,
        "reward": {},
        "invalid_rate": {},
        "transcript": None,
    }


def test_transcript_is_a_readable_conversation() -> None:
    ep = against_bot(
        "t",
        1.0,
        [
            policy_turn(
                "t", 0, "player_0", 2, version=3, reward=0.123456, text="<answer>5</answer>"
            ),
            bot_turn("t", 1, "player_1"),
        ],
    )
    assert transcript(ep) == {
        "id": "t",
        "game": "ttt",
        "termination": "win",
        "final_rewards": {"player_0": 1.0, "player_1": -1.0},
        "seats": {"player_0": "main", "player_1": "random-v0 (not trained)"},
        "turns": [
            {
                "seat": "player_0",
                "role": "player",
                "text": "<answer>5</answer>",
                "action": 0,
                "valid": True,
                "trained": True,
                "reward": 0.1235,
                "version": 3,
            },
            {
                "seat": "player_1",
                "role": "bot",
                "text": "5",
                "action": 4,
                "valid": True,
                "trained": False,
                "reward": 0.0,
                "version": -1,
            },
        ],
    }
