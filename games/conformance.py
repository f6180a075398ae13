"""The conformance kit: does a game meet Arena's contract?

``check_game("tictactoe-v0")`` (or ``arena check-game tictactoe-v0``) builds the game and runs:

- ``construct``: it is a TextGame with valid metadata (its ``strongest_bot`` a registered bot)
  and rules text;
- ``api_test`` and ``seed_test``: PettingZoo's own checks (their warnings are reported, not failed);
- ``text_roundtrip``: ``parse_action(action_to_text(a)) == a`` for legal actions along random
  playthroughs, also in upper case with stray whitespace, and junk text parses to None (for a
  seat whose role speaks freely, a simulated user, only empty and blank text is junk);
- ``determinism``: the same seed gives the same game, in one environment and in two;
- ``hidden_info``: no seat's text ever shows what ``hidden_from(seat)`` lists while the game is on
  (strings equal to the seat's own ``private_info``, such as equal dice, are skipped);
- ``finishes``: random play ends within ``max_turns`` (at most :data:`PLAY_TURNS_MAX`), with finite (zero-sum where declared)
  returns and a termination reason;
- ``bad_input``: ``None``, out-of-range and unparseable actions are recorded as invalid, repeated
  ones forfeit the game with the configured penalty, and stepping a finished game raises.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pettingzoo.test import api_test, seed_test

import games.bots
from arena.core.errors import did_you_mean
from games.bots.random_bot import RandomBot
from games.text_env import INFORMATION, KINDS, GameOverError, TextGame

PLAY_TURNS_MAX = 10_000
"""Turns a random playthrough may take, whatever the game's ``max_turns``: a game that never ends
(a huge ``max_turns``) fails ``finishes`` in seconds instead of holding the kit for hours. A run
gives up on an episode far sooner, at ``rollout.max_episode_turns`` (1000 by default)."""
ROUNDTRIP_SAMPLE = 8
"""Legal actions round-tripped per decision (all of them when there are fewer)."""
JUNK = ("", "   ", "???", "not an action at all 12345")
PLAIN_TEXT_ROLES = frozenset({"simulated-user-v0"})
"""Roles whose action is any message (a user speaks freely): for their seats only the empty and
blank junk must be refused, as a sentence such as JUNK's last one is a valid message."""


def junk_for(env: TextGame, agent: str) -> tuple[str, ...]:
    """The junk texts ``agent``'s seat must refuse."""
    if env.seat_role(agent) in PLAIN_TEXT_ROLES:
        return tuple(j for j in JUNK if not j.strip())
    return JUNK


@dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str
    seconds: float


@dataclass
class Report:
    """The outcome of every check on one game."""

    game: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    def table(self) -> str:
        width = max(len(r.name) for r in self.results)
        lines = [f"{'check':<{width}}  result  seconds  detail"]
        for r in self.results:
            mark = "pass" if r.passed else "FAIL"
            lines.append(f"{r.name:<{width}}  {mark:<6}  {r.seconds:7.2f}  {r.detail}")
        verdict = "PASSED" if self.passed else "FAILED"
        lines.append(
            f"{self.game}: {verdict} ({sum(r.passed for r in self.results)}"
            f"/{len(self.results)} checks)"
        )
        return "\n".join(lines)


Factory = Callable[[], TextGame]


def check_game(
    game: str | Factory, *, playthroughs: int = 4, seed: int = 0, **kwargs: Any
) -> Report:
    """Run every check on ``game`` (a registered id, built with ``kwargs``, or a factory)."""
    if isinstance(game, str):
        from games import make

        name, factory = game, functools.partial(make, game, **kwargs)
    else:
        name, factory = getattr(game, "__name__", repr(game)), game
    report = Report(name)
    for check in CHECKS:
        start = time.perf_counter()
        try:
            detail, passed = check(factory, playthroughs, seed), True
        except Exception as exc:  # every failure is reported, none stops the kit
            detail, passed = f"{type(exc).__name__}: {exc}", False
        report.results.append(
            CheckResult(
                check.__name__.removeprefix("check_"), passed, detail, time.perf_counter() - start
            )
        )
        if not passed and check is check_construct:
            break  # nothing else can run on a game that cannot be built
    return report


# -- playing ------------------------------------------------------------------------------------
def decisions(env: TextGame, seed: int) -> Iterator[str]:
    """Play ``env`` from ``reset(seed)`` with random-legal bots, yielding the agent before each move."""
    env.reset(seed=seed)
    bot = RandomBot(seed + 1_000_003)  # not the game's seed: its draws would mirror the deal's
    bound = min(env.max_turns, PLAY_TURNS_MAX)
    steps_left = bound + 1
    while not env.is_over:
        if steps_left <= 0 and bound < env.max_turns:
            raise AssertionError(
                f"random play did not end within {bound} turns (max_turns {env.max_turns}); a "
                "run fails an episode after rollout.max_episode_turns turns (1000 by default)"
            )
        assert steps_left > 0, f"random play did not end within max_turns={env.max_turns}"
        agent = env.agent_selection
        yield agent
        env.step(bot.act(env, agent))
        steps_left -= 1


def trajectory(env: TextGame, seed: int) -> list[tuple[Any, ...]]:
    """Everything observable along one random playthrough, for comparing runs."""
    steps = []
    for agent in decisions(env, seed):
        steps.append((agent, env.observe(agent)["text"], dict(env.rewards), repr(env.infos)))
    steps.append((tuple(env.returns.items()), env.termination_reason))
    return steps


TEXT_GAME_WARNINGS = (
    "Observation is not a NumPy array",
    "Observation numpy array is all zeros",
    "Observation space for each agent probably should be",
)
"""The starts of the warnings PettingZoo's ``api_test`` gives every :class:`TextGame`: its
observation is a Dict of text and an action mask, not the array its heuristics expect."""


# -- the checks ---------------------------------------------------------------------------------
def check_construct(factory: Factory, playthroughs: int, seed: int) -> str:
    env = factory()
    assert isinstance(env, TextGame), f"{type(env).__name__} is not a games.TextGame"
    meta = env.metadata
    assert meta["kind"] in KINDS, f"kind {meta['kind']!r} is not one of {KINDS}"
    assert meta["information"] in INFORMATION, f"information must be one of {INFORMATION}"
    low, high = meta["seats"]
    assert low <= env.num_players <= high, f"{env.num_players} players outside seats {low}..{high}"
    assert env.max_turns > 0, "max_turns must be positive"
    for agent in env.possible_agents:
        assert env.rules(agent).strip(), (
            f"rules({agent!r}) is empty: a game's rules are its module's docstring "
            f"({type(env).__module__} has none)"
        )
    strongest = meta.get("strongest_bot", "random-v0")
    assert strongest in games.bots.registry, (  # else `strongest` fails in every evaluation
        f"metadata['strongest_bot'] {strongest!r} is not a registered bot"
        + did_you_mean(strongest, games.bots.registry.ids(), n=3)
    )
    return (
        f"{env.num_players} seats, {meta['kind']}, {meta['information']} information, "
        f"max_turns {env.max_turns}"
    )


def check_api_test(factory: Factory, playthroughs: int, seed: int) -> str:
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")
        api_test(factory(), num_cycles=1000)
    messages = sorted({str(w.message).splitlines()[0] for w in caught})
    unusual = [m for m in messages if not m.startswith(TEXT_GAME_WARNINGS)]
    expected = len(messages) - len(unusual)
    said = f"{len(unusual)} PettingZoo warning(s)" + (f": {'; '.join(unusual)}" if unusual else "")
    if expected:
        said += f", besides the {expected} a text game's Dict observation always raises"
    return said


def check_seed_test(factory: Factory, playthroughs: int, seed: int) -> str:
    seed_test(factory, num_cycles=500)
    return "two environments seeded alike agree step by step"


def check_text_roundtrip(factory: Factory, playthroughs: int, seed: int) -> str:
    env, rng, checked = factory(), np.random.default_rng(seed), 0
    for p in range(playthroughs):
        for agent in decisions(env, seed + p):
            legal = env.legal_actions(agent)
            picks = rng.permutation(len(legal))[:ROUNDTRIP_SAMPLE]
            for action in (legal[i] for i in picks):
                text = env.action_to_text(agent, action)
                for variant in (text, f"  {text.upper()}\n"):
                    parsed = env.parse_action(agent, variant)
                    assert parsed == action, (
                        f"parse_action({variant!r}) gave {parsed!r}, not {action!r}"
                    )
                checked += 1
            for junk in junk_for(env, agent):
                parsed = env.parse_action(agent, junk)
                assert parsed is None, f"parse_action({junk!r}) gave {parsed!r}, not None"
    return f"{checked} legal actions round-tripped over {playthroughs} playthroughs"


def check_determinism(factory: Factory, playthroughs: int, seed: int) -> str:
    env, other = factory(), factory()
    for p in range(playthroughs):
        first = trajectory(env, seed + p)
        assert trajectory(env, seed + p) == first, "reset(seed) twice gave different games"
        assert trajectory(other, seed + p) == first, "two environments seeded alike differ"
    return f"{playthroughs} seeds replayed identically"


def check_hidden_info(factory: Factory, playthroughs: int, seed: int) -> str:
    env, checked, declared = factory(), 0, 0
    for p in range(playthroughs):
        for _ in decisions(env, seed + p):
            for agent in env.possible_agents:
                text = env.observe(agent)["text"]
                # a secret that reads the same as the seat's own (equal dice, say) proves nothing
                own = set(env.private_info(agent))
                hidden = set(env.hidden_from(agent))
                declared += len(hidden)
                for secret in hidden - own:
                    assert secret not in text, f"{agent} can read {secret!r}:\n{text}"
                    checked += 1
    if checked == 0:
        if declared:
            return (
                "every hidden string read the same as the seat's own secret: nothing checked "
                "(name the seat in private_info's strings, or give more --playthroughs)"
            )
        if env.information == "hidden":
            return "declares no private_info/hidden_from strings: nothing checked"
        return "perfect information: nothing to hide"
    return f"{checked} hidden strings absent from other seats' text"


def check_finishes(factory: Factory, playthroughs: int, seed: int) -> str:
    env, turns = factory(), []
    for p in range(playthroughs):
        for _ in decisions(env, seed + p):
            pass
        assert env.turn <= env.max_turns, f"{env.turn} turns exceed max_turns={env.max_turns}"
        assert env.termination_reason, "the game ended without a termination reason"
        returns = list(env.returns.values())
        assert all(math.isfinite(r) for r in returns), f"non-finite returns {returns}"
        if env.zero_sum:
            assert abs(sum(returns)) < 1e-6, f"returns {returns} of a zero-sum game do not sum to 0"
        for agent, info in env.infos.items():
            assert info["termination_reason"] == env.termination_reason, f"{agent}'s info disagrees"
        turns.append(env.turn)
    return f"random play ended after {min(turns)}-{max(turns)} turns (max_turns {env.max_turns})"


def check_bad_input(factory: Factory, playthroughs: int, seed: int) -> str:
    env = factory()
    env.reset(seed=seed)
    agent = env.agent_selection
    out_of_range = "\x01" if env.free_text else env.action_space(agent).n
    attempts = [None, out_of_range, junk_for(env, agent)[-1]]
    for attempt, bad in enumerate(attempts[: env.max_retries + 1], start=1):
        if isinstance(bad, str):
            env.step_text(bad)
        else:
            env.step(bad)
        info = env.infos[agent]
        assert info["invalid"] and info["invalid_count"] == attempt, f"{bad!r} was not recorded"
        if attempt <= env.max_retries:
            assert env.agent_selection == agent and not env.is_over, "a retry left the seat"
            assert info["feedback"] in env.observe(agent)["text"], "no retry feedback in the text"
    while not env.is_over:  # max_retries > 2: keep failing until the forfeit
        env.step(None)
    assert env.termination_reason == "illegal" and env.infos[agent]["forfeit"], "no forfeit"
    assert env.returns[agent] <= -env.forfeit_penalty + 1e-9, (
        "the forfeiting seat was not penalized"
    )
    assert abs(sum(env.returns.values())) < 1e-6 or not env.zero_sum, "forfeit is not zero-sum"
    while env.agents:
        env.step(None)
    try:
        env.step(0)
    except GameOverError:
        return (
            "None, out-of-range and junk recorded; forfeit applied; a finished game refuses steps"
        )
    raise AssertionError("step() after the game ended did not raise GameOverError")


CHECKS: tuple[Callable[[Factory, int, int], str], ...] = (
    check_construct,
    check_api_test,
    check_seed_test,
    check_text_roundtrip,
    check_determinism,
    check_hidden_info,
    check_finishes,
    check_bad_input,
)
