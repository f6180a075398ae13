"""The evaluations of a run: the served policy against each opponent of ``eval.opponents``,
before and after training (and every ``eval.every`` steps), logged to ``evals.jsonl``."""

from __future__ import annotations

from dataclasses import replace

from arena.bus import Actor
from arena.eval.evaluate import MatchResult, evaluate
from arena.play.seating import SeatFactory
from arena.policies.chat import ChatFormat
from arena.policies.remote import RemotePolicy
from arena.run.config import RunConfig
from arena.run.run_log import RunLog


async def evaluate_policy(
    actor: Actor, config: RunConfig, chat: ChatFormat, log: RunLog, label: str, step: int
) -> list[MatchResult]:
    """Play ``eval.games`` games per game and opponent against the policy served now."""
    c = config
    factory = SeatFactory(c.play, RemotePolicy(actor, c.learner.name, timeout=600), chat)
    params = replace(factory.params, temperature=c.eval.temperature)
    total = c.eval.games * len(c.games) * len(c.eval.opponents)
    with log.progress(f"eval {label}", total) as advance:
        results = await evaluate(
            lambda game_id: factory.policy_seat(game_id, params=params),
            [g.id for g in c.games],
            c.eval.opponents,
            games_per_match=c.eval.games,
            seed=c.seed + 10_000,
            concurrency=c.eval.concurrency,
            game_kwargs={g.id: g.kwargs for g in c.games},
            on_episode=advance,
        )
    log.evaluation(label, step, results)
    return results
