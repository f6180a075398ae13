"""arena/eval/roles.py: each role of a role game against references, and pass^k over tries.

The policy under test is itself a bot here (the MAE oracle, made to err on purpose), so every
number is known in advance.

Run with `.venv/bin/python -m pytest -q tests/arena/eval/test_roles.py`.
"""

from __future__ import annotations

import asyncio

import pytest

import games
from arena.eval.roles import evaluate_roles, is_role_game, role_seats
from arena.play.seats import BotSeat, PolicySeat
from arena.policies.types import ContextOverflow, SamplingParams
from games.bots.mae import MAEOracleBot
from simulators.base import Simulator, SimulatorView
from simulators.scripted_user import reply


def oracle(game_id, env, agent, seed) -> BotSeat:
    return BotSeat(MAEOracleBot(seed=seed), "mae-oracle-v0")


def wrong(game_id, env, agent, seed) -> BotSeat:
    return BotSeat(MAEOracleBot(seed=seed, error_rate=1.0), "always-wrong")


def test_one_seat_per_role_and_which_games_are_role_games() -> None:
    env = games.make("mae-v0", num_solvers=3)
    assert role_seats(env) == ["proposer", "solver_0", "judge"]
    assert role_seats(env, simulated=["judge"]) == ["proposer", "solver_0"]
    assert is_role_game(env) and not is_role_game(games.make("tictactoe-v0"))
    # one role, two jobs: the validator and the solver of Search Self-Play are both measured
    ssp = games.make("search-selfplay-v0")
    assert {ssp.seat_role(s) for s in ("validator", "solver")} == {"solver-v0"}
    assert role_seats(ssp) == ["proposer", "validator", "solver"]


def test_each_role_is_measured_against_the_references() -> None:
    results = asyncio.run(evaluate_roles(wrong, oracle, "mae-v0", tasks=4))
    table = {(r.seat, r.metric): (r.mean, r.episodes) for r in results}
    # The always-wrong bot proposes valid problems (which the reference solvers all solve: no
    # difficulty), solves none, and as a judge still judges by the truth.
    assert table == {
        ("proposer", "proposal_valid"): (1.0, 4),
        ("proposer", "difficulty"): (0.0, 4),
        ("solver_0", "solver_accuracy"): (0.0, 4),
        ("judge", "judge_accuracy"): (1.0, 4),
    }
    assert {r.role for r in results} == {"proposer-v0", "solver-v0", "judge-v0"}
    solver = next(r for r in results if r.seat == "solver_0")
    # Wilson's interval for 0 of 4: centre (z^2/2)/(4 + z^2) = 0.245, half-width 0.245; over
    # fewer than 10 episodes it is kept but printed as "n too small"
    assert solver.ci == pytest.approx((0.0, 0.490), abs=1e-3)
    assert solver.line() == (
        "mae-v0 solver-v0 (solver_0): solver_accuracy 0.000 (n too small)  (4 episodes)"
    )


def test_pass_k_over_tries_of_each_task() -> None:
    calls = []

    def flaky(game_id, env, agent, seed) -> BotSeat:
        calls.append(seed)
        error = 1.0 if len(calls) == 2 else 0.0  # the second try of the first task fails
        return BotSeat(MAEOracleBot(seed=seed, error_rate=error), "flaky")

    (result,) = asyncio.run(
        evaluate_roles(flaky, oracle, "mae-v0", tasks=2, tries=3, seats=["solver_0"], concurrency=1)
    )
    assert calls == [10_000] * 3 + [10_001] * 3
    # Task 0: 2 of 3 tries right, task 1: 3 of 3. pass^k = mean over tasks of C(c,k)/C(3,k):
    # k=1: (2/3 + 1)/2, k=2: (1/3 + 1)/2, k=3: (0 + 1)/2.
    assert result.mean == pytest.approx(5 / 6)
    assert result.pass_k == pytest.approx({1: 5 / 6, 2: 2 / 3, 3: 0.5})


def test_pass_k_is_only_for_the_games_pass_fail_metrics() -> None:
    from arena.play.seats import SimulatorSeat
    from games.bots.retail import RetailAgentBot
    from simulators.scripted_user import ScriptedUser

    def retail(game_id, env, agent, seed) -> BotSeat | SimulatorSeat:
        if agent == "user":
            return SimulatorSeat(ScriptedUser(), "scripted-user-v0")
        return BotSeat(RetailAgentBot(seed=seed), "retail-agent-v0")

    results = asyncio.run(
        evaluate_roles(retail, retail, "retail-v0", tasks=2, tries=2, simulated=["user"])
    )
    table = {r.metric: r for r in results}
    assert table["success"].mean == 1.0 and table["success"].pass_k == {1: 1.0, 2: 1.0}
    # a count is no pass or fail, even when it is 0 every time: no pass^k for it
    assert table["tool_errors"].mean == 0.0 and table["tool_errors"].pass_k == {}
    assert table["tool_calls"].pass_k == {}


def test_bad_arguments_and_games_without_metrics() -> None:
    with pytest.raises(ValueError, match="tasks and tries must be >= 1"):
        asyncio.run(evaluate_roles(oracle, oracle, "mae-v0", tasks=0))
    random_seat = lambda game_id, env, agent, seed: BotSeat(  # noqa: E731
        games.bots.make("random-v0", seed=seed), "random-v0"
    )
    # a game that reports no metrics: a row that says so (it used to be no row at all, and a
    # log warning), with the counts and no score
    (row,) = asyncio.run(evaluate_roles(random_seat, random_seat, "tictactoe-v0", tasks=2))
    assert (row.metric, row.mean, row.ci, row.episodes, row.errors) == ("", None, None, 0, 0)
    assert row.unreported == {"win": 2}
    assert row.line() == (
        "tictactoe-v0 player-v0 (player_0): no episode reported metrics (2 of 2 ended normally "
        "(win); a game puts each seat's numbers in infos[seat]['metrics'])"
    )


class OverflowingSeat(PolicySeat):
    """A policy seat whose every prompt is past the context (an untrained model's replies
    fill it): the episode ends ``context_overflow`` before the game reports anything."""

    def prompt(self, env, agent, observation):
        raise ContextOverflow("the prompt leaves no room to generate")


def test_a_seat_whose_episodes_report_no_metrics_gets_a_row_saying_why() -> None:
    import json

    import roles

    def overflowing(game_id, env, agent, seed) -> PolicySeat:
        role = roles.make(env.seat_role(agent))
        return OverflowingSeat(None, role, None, SamplingParams())  # type: ignore[arg-type]

    (row,) = asyncio.run(evaluate_roles(overflowing, oracle, "mae-v0", tasks=3, seats=["solver_0"]))
    assert row.line() == (
        "mae-v0 solver-v0 (solver_0): no episode reported metrics (3 of 3 ran past the context)"
    )
    as_json = json.loads(json.dumps(row.to_dict()))  # what --json and evals.jsonl hold
    assert {k: as_json[k] for k in ("metric", "mean", "ci", "episodes", "unreported")} == {
        "metric": "",
        "mean": None,
        "ci": None,
        "episodes": 0,
        "unreported": {"context_overflow": 3},
    }
    # forfeits (a plugin game that reports nothing on a forfeit), beside a failed episode
    row.unreported, row.unreported_reason = {"illegal": 7}, "Invalid action: no <answer> tag"
    row.errors, row.first_error = 1, "simulator x failed"
    assert row.line() == (
        "mae-v0 solver-v0 (solver_0): no episode reported metrics (7 of 8 forfeited; the first: "
        "Invalid action: no <answer> tag)  1 error (first: simulator x failed)"
    )


@pytest.mark.e2e
def test_arena_eval_measures_each_role_of_a_role_game(tmp_path) -> None:
    import json
    import subprocess
    import sys

    out = tmp_path / "roles.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "arena",
            "eval",
            "mae-oracle-v0",
            "--games",
            "mae-v0",
            "--n",
            "3",
            "--tries",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected = (
        "mae-v0 solver-v0 (solver_0): solver_accuracy 1.000 (n too small)  pass^1 1.000  "
        "pass^2 1.000  (6 episodes)"
    )
    assert expected in lines, lines
    rows = json.loads(out.read_text())
    # Wilson's interval for 6 of 6: centre (1 + z^2/12) / (1 + z^2/6) = 0.805, half 0.195.
    (solver,) = [r for r in rows if r["seat"] == "solver_0"]
    assert solver["ci"] == pytest.approx([0.610, 1.0], abs=1e-3)
    assert {(r["seat"], r["metric"]) for r in rows} == {
        ("proposer", "proposal_valid"),
        ("proposer", "difficulty"),
        ("solver_0", "solver_accuracy"),
        ("judge", "judge_accuracy"),
    }


def test_the_references_of_retail_are_the_scripted_user_and_the_agent_bot() -> None:
    from arena.eval.roles import reference_seat
    from arena.play.seats import SimulatorSeat
    from games.bots.retail import RetailAgentBot

    env = games.make("retail-v0")
    user, agent = (reference_seat("retail-v0", env, seat, 0) for seat in ("user", "agent"))
    assert isinstance(user, SimulatorSeat) and user.name == "scripted-user-v0"
    assert isinstance(agent, BotSeat) and agent.name == "retail-agent-v0"
    assert games.spec("retail-v0").simulator == "scripted-user-v0"

    def agent_bot(game_id, env, agent, seed) -> BotSeat:
        return BotSeat(RetailAgentBot(seed=seed), "retail-agent-v0")

    # the agent bot in the agent seat against the game's reference user: every task solved
    results = asyncio.run(
        evaluate_roles(agent_bot, reference_seat, "retail-v0", tasks=2, seats=["agent"])
    )
    success = next(r for r in results if r.metric == "success")
    assert (success.mean, success.episodes, success.errors) == (1.0, 2, 0)
    assert success.seats == {"user": "simulator scripted-user-v0"}
    assert success.seats_line() == "retail-v0 agent: user = simulator scripted-user-v0"


def test_an_episode_that_fails_is_an_error_of_its_row_and_the_rest_go_on() -> None:
    from arena.play.seats import SimulatorSeat
    from games.bots.retail import RetailAgentBot

    def agent_bot(game_id, env, agent, seed) -> BotSeat:
        return BotSeat(RetailAgentBot(seed=seed), "retail-agent-v0")

    def flaky_user(game_id, env, agent, seed) -> SimulatorSeat:
        return SimulatorSeat(FlakyBySeed(seed), "flaky-v0")

    results = asyncio.run(
        evaluate_roles(agent_bot, flaky_user, "retail-v0", tasks=4, seats=["agent"], seed=0)
    )
    success = next(r for r in results if r.metric == "success")
    # tasks 1 and 3 (odd seeds) fail: never averaged in, counted with the first reason
    assert (success.mean, success.episodes, success.errors) == (1.0, 2, 2)
    assert "simulator flaky-v0 failed: RuntimeError('the persona service is down')" in (
        success.first_error
    )
    assert success.line().endswith("(2 episodes)  2 errors (first: " + success.first_error + ")")

    # a bot that cannot play the seat: every episode fails, and the row says so
    (failed,) = asyncio.run(
        evaluate_roles(agent_bot, agent_bot, "retail-v0", tasks=2, seats=["agent"])
    )
    assert (failed.metric, failed.mean, failed.ci, failed.episodes, failed.errors) == (
        "",
        None,
        None,
        0,
        2,
    )
    assert failed.line().startswith("retail-v0 executor-v0 (agent): every episode failed  2 errors")
    assert "RetailAgentBot cannot play retail_v0" in failed.first_error


class FlakyBySeed(Simulator):
    """The scripted user, except in episodes with an odd seed: a unit-test fake."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.odd = seed % 2 == 1

    async def respond(self, view: SimulatorView) -> str:
        if self.odd:
            raise RuntimeError("the persona service is down")
        return reply(view.context, view.history, view.seat)
