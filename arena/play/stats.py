"""Summaries of played episodes: per-game rewards and invalid rates, and readable transcripts.

A rollout actor answers each collect with :func:`episode_stats` of its episodes and one
:func:`transcript`; the coordinator of ``arena train`` combines the actors' answers with
:func:`merge_collects`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from arena.records import Episode


def episode_stats(episodes: list[Episode]) -> dict[str, Any]:
    """Per (game, role) reward and invalid rate, plus token and staleness counts (the versions
    of trained turns only: the staleness the learner sees)."""
    by_key: dict[str, list[float]] = defaultdict(list)
    invalid: Counter[str] = Counter()
    turns: Counter[str] = Counter()
    versions: list[int] = []
    tokens = scored = 0
    for episode in episodes:
        for turn in episode.turns:
            if turn.role == "bot":
                continue
            key = f"{turn.game}/{turn.role}"
            turns[key] += 1
            invalid[key] += not turn.valid
            tokens += len(turn.response_ids)
            if turn.is_choice:  # a turn by choice: its prompt and every reply, scored
                scored += len(turn.prompt_ids) + len(turn.choice_ids)
            if turn.trained:  # a frozen policy's or a past snapshot's version never moves on
                versions.append(turn.policy_version)
        for seat, assignment in episode.seats.items():
            if assignment.trained:
                by_key[f"{episode.game}/{assignment.role}"].append(episode.final_rewards[seat])
    return {
        "reward": {k: sum(v) / len(v) for k, v in by_key.items()},
        "invalid_rate": {k: invalid[k] / turns[k] for k in turns},
        "policy_turns": sum(turns.values()),
        "generated_tokens": tokens,
        "scored_tokens": scored,
        "min_version": min(versions, default=-1),
        "max_version": max(versions, default=-1),
    }


def merge_collects(replies: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine rollout actors' collect replies into one summary (rates weighted by episodes)."""

    def weighted(key: str) -> dict[str, float]:
        sums: dict[str, float] = {}
        weights: dict[str, int] = {}
        for r in replies:
            for k, v in r["stats"][key].items():
                w = r["episodes"]
                sums[k] = sums.get(k, 0.0) + v * w
                weights[k] = weights.get(k, 0) + w
        return {k: sums[k] / max(weights[k], 1) for k in sums}

    return {
        "episodes": sum(r["episodes"] for r in replies),
        "failed": sum(r["failed"] for r in replies),
        # the first failure's reason (older actors send none)
        "error": next((r["error"] for r in replies if r.get("error")), ""),
        "seconds": max((r["seconds"] for r in replies), default=0.0),
        "generated_tokens": sum(r["stats"]["generated_tokens"] for r in replies),
        "scored_tokens": sum(r["stats"].get("scored_tokens", 0) for r in replies),
        "policy_turns": sum(r["stats"]["policy_turns"] for r in replies),
        "min_version": min((r["stats"]["min_version"] for r in replies), default=-1),
        "reward": weighted("reward"),
        "invalid_rate": weighted("invalid_rate"),
        "transcript": next((r["transcript"] for r in replies if r.get("transcript")), None),
    }


def transcript(episode: Episode) -> dict[str, Any]:
    """An episode as a readable conversation (for transcripts.jsonl). Each turn says whether it
    is trained on: ``trained`` is False for a bot's, a simulator's or a frozen policy's turn,
    whose tokens are masked out of the loss (its ``version`` is -1 where no policy sampled it).
    A seat played by a named adapter reads ``policy@adapter`` (``main@solver``)."""
    return {
        "id": episode.id,
        "game": episode.game,
        "termination": episode.termination,
        "final_rewards": episode.final_rewards,
        "seats": {
            seat: a.policy
            + (f"@{a.adapter}" if a.adapter else "")
            + ("" if a.trained else " (not trained)")
            for seat, a in episode.seats.items()
        },
        "turns": [
            {
                "seat": t.seat,
                "role": t.role,
                "text": t.text,
                "action": t.action,
                "valid": t.valid,
                "trained": t.trained,
                "reward": round(t.reward, 4),
                "version": t.policy_version,
            }
            for t in episode.turns
        ],
    }
