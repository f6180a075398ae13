"""The Leduc CFR+ policy: solved once, cached as JSON, low exploitability, plays both versions.

Run with ``.venv/bin/python -m pytest -q tests/games/bots/test_leduc_bot.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspiel")

import pyspiel  # noqa: E402
from open_spiel.python import policy as policy_lib  # noqa: E402
from open_spiel.python.algorithms.expected_game_score import policy_value  # noqa: E402

import games  # noqa: E402
from games.bots import leduc  # noqa: E402
from games.bots.leduc import LeducCFRBot, leduc_policy  # noqa: E402
from games.bots.random_bot import RandomBot  # noqa: E402
from games.bots.tabular import exploitability  # noqa: E402
from games.play import play_game  # noqa: E402

ITERATIONS = 100


def test_the_solution_is_cached_as_json(
    policy_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    solved = leduc_policy(ITERATIONS)
    path = policy_cache / f"leduc_poker-cfr_plus-{ITERATIONS}.json"
    on_disk = json.loads(path.read_text())
    assert on_disk["solver"] == "cfr+" and on_disk["iterations"] == ITERATIONS
    assert len(on_disk["policy"]) == 936 and on_disk == solved
    assert [p.name for p in policy_cache.iterdir() if p.name.endswith(".tmp")] == []

    def fail(iterations: int) -> None:
        raise AssertionError("solved again instead of reading the cache")

    monkeypatch.setattr(leduc, "solve_leduc", fail)
    assert leduc_policy(ITERATIONS)["exploitability"] == solved["exploitability"]


def test_a_corrupt_cache_file_is_solved_again(policy_cache: Path) -> None:
    path = policy_cache / "leduc_poker-cfr_plus-5.json"
    path.write_text("{not json")
    assert leduc_policy(5)["iterations"] == 5
    assert json.loads(path.read_text())["iterations"] == 5


def test_exploitability_is_low_and_matches_the_recorded_value() -> None:
    solved = leduc_policy(ITERATIONS)
    assert solved["exploitability"] < 0.03
    assert exploitability("leduc_poker", solved["policy"]) == pytest.approx(
        solved["exploitability"], abs=1e-9
    )
    assert leduc_policy(5)["exploitability"] > solved["exploitability"]


def test_the_policy_wins_against_uniform_random_play() -> None:
    game = pyspiel.load_game("leduc_poker")
    tabular = policy_lib.TabularPolicy(game)
    table = leduc_policy(ITERATIONS)["policy"]
    for state, row in tabular.state_lookup.items():
        tabular.action_probability_array[row] = table[state]
    uniform = policy_lib.UniformRandomPolicy(game)
    as_first = policy_value(game.new_initial_state(), [tabular, uniform])[0]
    as_second = policy_value(game.new_initial_state(), [uniform, tabular])[1]
    assert (as_first + as_second) / 2 > 0.6  # chips per hand, exactly


@pytest.mark.parametrize("game_id", ["leduc-holdem-v0", "openspiel-leduc_poker-v0"])
def test_the_bot_plays_both_versions(game_id: str) -> None:
    env, total, hands = games.make(game_id), 0.0, 200
    for seed in range(hands):
        cfr = LeducCFRBot(iterations=ITERATIONS, seed=10_000 + seed)
        mine = f"player_{seed % 2}"
        seats = {mine: cfr, f"player_{1 - seed % 2}": RandomBot(seed=20_000 + seed)}
        outcome = play_game(env, seats, seed=seed)
        assert outcome.invalid_counts[mine] == 0
        total += outcome.returns[mine]
    assert total > 0


def test_the_bot_refuses_other_games() -> None:
    env = games.make("kuhn-poker-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="leduc_poker"):
        LeducCFRBot(iterations=ITERATIONS).act(env, "player_0")
