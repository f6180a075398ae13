"""Who plays each seat when ``arena eval`` evaluates a run with named policies
(arena/tournament/run_policies.py), on the shipped configs and checkpoint folders made by hand:
no model loads, a few seconds in all. The whole command on trained runs is tested end to end in
tests/arena/run/test_bases.py (configs/two_models.yaml) and tests/arena/run/test_policies.py
(configs/mae_lora_roles.yaml).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from arena.core.errors import ConfigError
from arena.eval.evaluate import evaluate
from arena.eval.roles import evaluate_roles, reference_seat
from arena.play.seats import BotSeat
from arena.run.config import load_run_config
from arena.tournament.run_policies import (
    MAIN,
    Routing,
    evaluated_policy,
    games_played,
    run_participants,
)
from games.bots.random_bot import RandomBot
from tests.cli import ROOT


def two_models():
    return load_run_config(f"{ROOT}/configs/two_models.yaml", ["model=tiny"])


def checkpoint(folder: Path) -> Path:
    """A complete checkpoint directory as the learners leave it (``state.json``, ``model/``)."""
    (folder / "model").mkdir(parents=True)
    (folder / "state.json").write_text("{}")
    return folder


def test_a_runs_checkpoint_plays_each_seat_with_its_own_policys_weights(tmp_path: Path) -> None:
    config = two_models()
    run = tmp_path / "run"
    step_2 = checkpoint(run / "checkpoints" / "step-00000002")
    for step in (1, 3):  # the responder's newest at or before step 2 is its step 1
        checkpoint(run / "checkpoints" / "policies" / "responder" / f"step-{step:08d}")
    configs, notes = run_participants(step_2, config, config.games, temperature=0.0)
    got = {c.name: (c.model, c.adapter, c.sampling.temperature) for c in configs}
    assert got == {
        "main": (str(step_2 / "model"), None, 0.0),
        "responder": (str(run / "checkpoints/policies/responder/step-00000001/model"), None, 0.0),
        "judge": ("tiny", None, 0.0),  # frozen: its model as it is, at the evaluation's T
    }
    assert notes == []
    routing = Routing(MAIN, config.play, {c.name: c.name for c in configs})
    kuhn, mae = config.games
    assert routing.player_seats(kuhn) == {"main": ["player_0"], "responder": ["player_1"]}
    assert routing.role_seats(mae) == ["proposer", "solver_0", "judge"]
    assert routing.player(mae, None, "judge") == "judge"  # type: ignore[arg-type]
    # a trained policy with no checkpoint by then plays its model as it started, and says so
    (run / "checkpoints" / "policies" / "responder" / "step-00000001" / "state.json").unlink()
    configs, notes = run_participants(step_2, config, config.games, temperature=0.0)
    assert configs[1].model == "tiny"
    assert notes == [
        "policy responder has no checkpoint at or before step 2: it plays its model "
        "tiny as it started"
    ]


def test_a_lora_runs_checkpoint_plays_each_role_through_its_adapter(tmp_path: Path) -> None:
    config = load_run_config(f"{ROOT}/configs/mae_lora_roles.yaml", ["model=tiny"])
    step = checkpoint(tmp_path / "run" / "checkpoints" / "step-00000004")
    for name in ("proposer", "shared"):
        (step / "adapters" / name).mkdir(parents=True)
        (step / "adapters" / name / "adapter_config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"policy 'judge': no adapter .*adapters/judge in the"):
        run_participants(step, config, config.games, temperature=0.0)
    (step / "adapters" / "judge").mkdir()
    (step / "adapters" / "judge" / "adapter_config.json").write_text("{}")
    configs, _ = run_participants(step, config, config.games, temperature=0.0)
    assert {c.name: (c.model, c.adapter) for c in configs} == {
        name: ("tiny", str(step / "adapters" / name)) for name in ("proposer", "shared", "judge")
    }


def test_one_policy_is_evaluated_in_the_seats_it_plays_in_its_run() -> None:
    config = two_models()
    kuhn, mae = config.games
    judge = Routing("tiny", config.play, {"judge": "tiny"})
    assert judge.role_seats(mae) == ["judge"] and judge.player_seats(kuhn) == {}
    assert judge.label(mae, None, "judge") == "judge"  # type: ignore[arg-type]
    assert judge.label(mae, None, "proposer") == ""  # type: ignore[arg-type]
    main = Routing("two@step-2", config.play, {MAIN: "two@step-2"})
    assert main.role_seats(mae) == ["proposer", "solver_0"]
    assert main.player_seats(kuhn) == {MAIN: ["player_0"]}  # rows under the run's name
    # the run's games it plays no seat of are left out, saying so; one asked for is refused
    kept, notes = games_played(judge, config.games, config.games, explicit=False)
    assert kept == [mae] and notes == [
        "kuhn-poker-v0: tiny plays no seat of it in its run; not evaluated"
    ]
    with pytest.raises(ConfigError) as caught:
        games_played(judge, [kuhn], config.games, explicit=True)
    assert str(caught.value) == (
        "tiny plays no seat of kuhn-poker-v0 in its run (its seats: mae-v0 judge); evaluate a "
        "game it plays, or play it in every seat with --every-seat"
    )
    # a model of no run plays every seat, and its rows name no policy
    anyone = Routing("tiny")
    assert anyone.player_seats(kuhn) == {"": ["player_0", "player_1"]}
    assert anyone.role_seats(mae) == ["proposer", "solver_0", "judge"]
    assert anyone.label(mae, None, "judge") == ""  # type: ignore[arg-type]


def test_the_command_line_names_one_policy_or_the_whole_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    step = run / "checkpoints" / "step-00000002"
    (run / "checkpoints").mkdir(parents=True)
    assert evaluated_policy(str(run), str(step), None) is None  # the run: every policy
    assert evaluated_policy(f"{run}:main", str(step), None) == MAIN
    assert evaluated_policy("tiny", "tiny", str(step / "adapters" / "judge")) == "judge"
    assert evaluated_policy("tiny", "tiny", str(step / "adapters" / "shared-lora")) == MAIN
    own = run / "checkpoints" / "policies" / "responder" / "step-00000002"
    assert evaluated_policy(f"{run}:responder", str(own), None) == "responder"


def test_each_policy_gets_rows_of_its_own_in_its_own_seats() -> None:
    """Kuhn with player_0 and player_1 told apart: each policy plays its own seat in every one
    of its games, on a row that names it; without ``seats`` one row plays both seats."""
    played: list[tuple[str, str]] = []

    def seat(game_id: str, env, agent: str) -> BotSeat:
        played.append((game_id, agent))
        return BotSeat(RandomBot(), "random-v0")

    groups = {"kuhn-poker-v0": {"first": ["player_0"], "second": ["player_1"]}}
    rows = asyncio.run(
        evaluate(seat, ["kuhn-poker-v0"], ["random-v0"], games_per_match=3, seats=groups)
    )
    assert [(r.policy, r.games) for r in rows] == [("first", 3), ("second", 3)]
    assert played == [("kuhn-poker-v0", "player_0")] * 3 + [("kuhn-poker-v0", "player_1")] * 3
    assert rows[1].line().startswith("kuhn-poker-v0 vs random-v0, policy second: score ")
    played.clear()
    (row,) = asyncio.run(evaluate(seat, ["kuhn-poker-v0"], ["random-v0"], games_per_match=3))
    assert row.policy == "" and row.line().startswith("kuhn-poker-v0 vs random-v0: score ")
    assert [agent for _, agent in played] == ["player_0", "player_1", "player_0"]


def test_a_role_row_names_the_policy_that_played_its_seat() -> None:
    """mae-v0's judge and solver_0 on the oracle bot, named as a run's policies would be."""

    def bot(game_id: str, env, agent: str, seed: int):
        return reference_seat(game_id, env, agent, seed)

    names = {"judge": "judge", "solver_0": "shared"}
    rows = asyncio.run(
        evaluate_roles(
            bot,
            bot,
            "mae-v0",
            tasks=2,
            seats=["solver_0", "judge"],
            game_kwargs={"num_solvers": 1},
            policy_of=names.get,
        )
    )
    assert {(r.seat, r.policy) for r in rows} == {("solver_0", "shared"), ("judge", "judge")}
    judge = next(r for r in rows if r.seat == "judge")
    assert judge.line().startswith("mae-v0 judge-v0 (judge, policy judge): ")
    assert judge.to_dict()["policy"] == "judge"
