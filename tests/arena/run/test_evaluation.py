"""The run's extra evaluations: exploitability readings of the weights, the checkpoint they read,
and the random legal mover.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_evaluation.py``.
"""

from __future__ import annotations

import asyncio
import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import games
import roles
from arena.eval.exploitability import exploitability
from arena.eval.policy_reader import greedy, read_seat
from arena.play.config import GameConfig, PolicySpec, SamplingConfig
from arena.play.seats import BotSeat, PolicySeat
from arena.policies.chat import ChatFormat
from arena.policies.hf import HFPolicy
from arena.policies.types import SamplingParams
from arena.run.config import EvalConfig, RunConfig
from arena.run.evaluation import (
    _evaluate,
    base_weights,
    evaluate_baseline,
    final_checkpoint,
    read_bases,
    read_strategy,
    readable_games,
)
from arena.run.run_log import RunLog
from games.bots.random_bot import RandomBot
from tests.arena.eval.test_policy_reader import CONFIG_ROLE, TINY_EXPLOITABILITY

KUHN = "kuhn-poker-v0"


def test_read_strategy_reads_the_weights_at_both_temperatures(tiny_model) -> None:
    model, tokenizer = tiny_model
    config = RunConfig(
        model="tiny",
        games=[GameConfig(id="tictactoe-v0"), GameConfig(id=KUHN, role_kwargs=CONFIG_ROLE)],
        eval=EvalConfig(temperature=0.0),
        sampling=SamplingConfig(temperature=1.0),
    )
    # the weights are loaded as the inference actors load them: pin fp32, the reference's dtype
    config = replace(config, inference=replace(config.inference, dtype="float32", device="cpu"))
    readings = read_strategy(config, ChatFormat(tokenizer), "before", "tiny", 0)
    assert [(r.game, r.temperature, r.sampling) for r in readings] == [
        (KUHN, 0.0, False),
        (KUHN, 1.0, True),
    ]
    greedy_read, sampled = readings
    assert sampled.exploitability == pytest.approx(TINY_EXPLOITABILITY, abs=1e-4)
    # greedy: the temperature-1 table with all mass on each state's most likely move
    seat = PolicySeat(
        HFPolicy(model, tokenizer),
        roles.make("player-v0", **CONFIG_ROLE),
        ChatFormat(tokenizer),
        SamplingParams(),
    )
    table = read_seat(KUHN, seat, temperature=1.0).table
    assert greedy_read.exploitability == pytest.approx(exploitability(KUHN, greedy(table)))
    # the reading keeps the policy it read: 12 information states, each a distribution
    assert greedy_read.policy == greedy(table) and sampled.policy.keys() == table.keys()
    for state, row in table.items():
        assert sampled.policy[state] == pytest.approx(row, abs=1e-4)
    assert len(table) == 12 and all(sum(row) == pytest.approx(1.0) for row in table.values())
    assert greedy_read.invalid_mass == pytest.approx(sampled.invalid_mass)  # both read at T=1
    assert all(0.0 <= r.invalid_mass <= 1.0 for r in readings)
    assert {(r.label, r.step, r.model) for r in readings} == {("before", 0, "tiny")}
    # one temperature when training samples at the evaluation's
    same = replace(config, eval=EvalConfig(temperature=1.0))
    (only,) = read_strategy(same, ChatFormat(tokenizer), "after", "tiny", 3)
    assert only.exploitability == pytest.approx(TINY_EXPLOITABILITY, abs=1e-4)
    assert (only.label, only.step, only.sampling) == ("after", 3, False)
    # no poker game, no reading (and no model load)
    no_poker = replace(config, games=[GameConfig(id="tictactoe-v0")])
    assert read_strategy(no_poker, ChatFormat(tokenizer), "before", "no-such-model", 0) == []


def _checkpoint(root: Path, step: int, model: bool = True) -> Path:
    path = root / f"step-{step:08d}"
    path.mkdir(parents=True)
    (path / "state.json").write_text(json.dumps({"step": step}))
    if model:
        (path / "model").mkdir()
    return path


def test_final_checkpoint_prefers_the_one_just_saved(tmp_path: Path) -> None:
    config = RunConfig()
    config = replace(
        config, learner=replace(config.learner, checkpoint=replace(config.learner.checkpoint))
    )
    config.learner.checkpoint.dir = str(tmp_path)
    assert final_checkpoint(config) is None
    four, eight = _checkpoint(tmp_path, 4), _checkpoint(tmp_path, 8)
    assert final_checkpoint(config) == (8, eight)
    assert final_checkpoint(config, str(four)) == (4, four)
    # a reply that names no usable checkpoint: the newest complete one with a model
    broken = _checkpoint(tmp_path, 12, model=False)
    assert final_checkpoint(config, str(broken)) == (8, eight)
    assert final_checkpoint(config, "") == (8, eight)


def test_baseline_is_the_random_mover_in_the_policy_seat(tmp_path: Path) -> None:
    # Nim on heaps (1, 1) is lost for whoever moves first, whatever anyone plays: the random
    # mover loses the games it opens (seat 0: even games) and wins the others, a score of 0.5,
    # with one move a game;
    # every move it makes keeps the (forced) outcome, so its optimal-move rate is 1. Against
    # minimax-v0 the random mover can never win Tic-Tac-Toe.
    config = RunConfig(
        games=[GameConfig(id="nim-v0", kwargs={"heaps": [1, 1]}), GameConfig(id="tictactoe-v0")],
        eval=EvalConfig(games=6, opponents=["random-v0", "minimax-v0"], concurrency=4),
    )
    log = RunLog(tmp_path, config)
    results = asyncio.run(evaluate_baseline(config, log))
    by = {(r.game, r.opponent): r for r in results}
    nim = by[("nim-v0", "random-v0")]
    assert (nim.score, nim.win, nim.loss) == (0.5, 0.5, 0.5)
    assert (nim.optimal_move_rate, nim.optimal_moves_judged) == (1.0, 6)  # one move a game
    assert (nim.policy_turns, nim.invalid_rate) == (0, 0.0)
    assert by[("tictactoe-v0", "minimax-v0")].win == 0.0
    ttt = by[("tictactoe-v0", "random-v0")]
    assert ttt.optimal_move_rate is not None and 0.0 < ttt.optimal_move_rate < 1.0
    assert ttt.optimal_moves_judged >= 6 * 2
    saved = log.load_eval("baseline")
    assert saved is not None and [r["game"] for r in saved] == [r.game for r in results]
    assert json.loads((tmp_path / "evals.jsonl").read_text())["label"] == "baseline"


def test_the_evaluation_before_training_plays_opponents_before(tmp_path: Path) -> None:
    config = RunConfig(
        games=[GameConfig(id="nim-v0", kwargs={"heaps": [1, 1]})],
        eval=EvalConfig(
            games=2, opponents=["random-v0", "strongest"], opponents_before=["random-v0"]
        ),
    )
    log = RunLog(tmp_path, config)

    def evaluated(label: str) -> list[str]:
        results = asyncio.run(
            _evaluate(
                config, log, label, lambda game, env, agent: BotSeat(RandomBot(), "random-v0")
            )
        )
        return [r.opponent for r in results]

    strongest = games.spec("nim-v0").strongest_bot
    assert evaluated("before") == ["random-v0"]
    assert evaluated("after") == ["random-v0", strongest]


@pytest.mark.parametrize(
    ("games_per_eval", "setting", "read"),
    [(4, None, True), (0, None, False), (0, True, True), (4, False, False), (0, False, False)],
)
def test_eval_games_0_stops_the_strategy_reads_unless_asked_for(
    games_per_eval: int, setting: bool | None, read: bool
) -> None:
    # the reads before, after and at each checkpoint all go through readable_games
    config = RunConfig(
        model="tiny",
        games=[GameConfig(id="tictactoe-v0"), GameConfig(id=KUHN)],
        eval=EvalConfig(games=games_per_eval, exploitability=setting),
    )
    assert readable_games(config) == ([KUHN] if read else [])


def _two_models(**policies: PolicySpec) -> RunConfig:
    """Kuhn (and Tic-Tac-Toe) with seats on policies of their own; fp32 on the CPU, one
    temperature."""
    seats = {"kuhn-poker-v0:player_1": "responder"}
    if "judge" in policies:
        seats["kuhn-poker-v0:player_0"] = "judge"
    if "other" in policies:
        seats["tictactoe-v0:player_1"] = "other"
    config = RunConfig(
        model="tiny",
        games=[GameConfig(id="tictactoe-v0"), GameConfig(id=KUHN, role_kwargs=CONFIG_ROLE)],
        eval=EvalConfig(temperature=1.0, exploitability=True),
        sampling=SamplingConfig(temperature=1.0),
        policies=policies,
        seat_policies=seats,
    )
    return replace(config, inference=replace(config.inference, dtype="float32", device="cpu"))


def test_a_seat_on_a_model_of_its_own_is_read_with_that_model(tiny_model) -> None:
    """Kuhn's second seat on a policy of its own: its rows come from that policy's weights
    (here the seed-1 tiny model, as a checkpoint's model/ would be given), the first seat's
    from the shared model; before training, the policy's own ``model`` spec."""
    from arena.models import tiny_dir
    from arena.models import tiny_model as build

    model, tokenizer = tiny_model
    config = _two_models(responder=PolicySpec(model="tiny"))
    other = str(tiny_dir(1))
    (after,) = read_strategy(
        config, ChatFormat(tokenizer), "after", "tiny", 3, {"responder": other}
    )
    assert after.policies == {"responder": other} and after.model == "tiny"
    role = roles.make("player-v0", **CONFIG_ROLE)

    def alone(m) -> dict[str, list[float]]:
        return read_seat(
            KUHN, PolicySeat(HFPolicy(m, tokenizer), role, ChatFormat(tokenizer), SamplingParams())
        ).table

    shared, own = alone(model), alone(build(seed=1, tokenizer=tokenizer)[0])
    firsts = [k for k in shared if len(k) % 2 == 1]  # Kuhn: player 0 acts after 0 or 2 moves
    assert len(firsts) == 6
    for key in shared:
        want = shared[key] if key in firsts else own[key]
        assert after.policy[key] == pytest.approx(want, abs=1e-5), key
    assert any(own[k] != pytest.approx(shared[k], abs=1e-3) for k in shared if k not in firsts)
    assert after.exploitability != pytest.approx(TINY_EXPLOITABILITY, abs=1e-3)
    # before training: the policy's model spec, "tiny" (seed 0), as the shared model
    (before,) = read_strategy(config, ChatFormat(tokenizer), "before", "tiny", 0)
    assert before.policies == {"responder": "tiny"}
    assert before.exploitability == pytest.approx(TINY_EXPLOITABILITY, abs=1e-4)


def test_each_seat_is_read_at_its_policys_sampling_temperature(
    tiny_model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The responder samples at T=0.5, the frozen judge greedily, the run at T=1 (the
    evaluation's too): the evaluation's read has every seat at T=1; the sampling read, made
    now though the run's two temperatures agree, has each seat at its policy's, and
    ``evals.jsonl`` says which seat was read at what."""
    model, tokenizer = tiny_model
    config = _two_models(
        responder=PolicySpec(model="tiny", sampling={"temperature": 0.5}),
        judge=PolicySpec(model="tiny", train=False, sampling={"temperature": 0.0}),
    )
    evaluated, sampled = read_strategy(config, ChatFormat(tokenizer), "before", "tiny", 0)
    assert (evaluated.temperature, evaluated.sampling, evaluated.seat_temperatures) == (
        1.0,
        False,
        {},
    )
    assert (sampled.temperature, sampled.sampling) == (1.0, True)
    assert sampled.seat_temperatures == {"player_0": 0.0, "player_1": 0.5}
    seat = PolicySeat(
        HFPolicy(model, tokenizer),
        roles.make("player-v0", **CONFIG_ROLE),
        ChatFormat(tokenizer),
        SamplingParams(),
    )
    # every policy here is the seed-0 tiny model: the seats differ by temperature alone
    one = read_seat(KUHN, seat, temperature=1.0).table
    half = read_seat(KUHN, seat, temperature=0.5).table
    assert evaluated.exploitability == pytest.approx(TINY_EXPLOITABILITY, abs=1e-4)
    firsts = [k for k in one if len(k) % 2 == 1]  # player 0's (the judge's) states
    mixed = {k: greedy(one)[k] if k in firsts else half[k] for k in one}
    for key in one:
        assert evaluated.policy[key] == pytest.approx(one[key], abs=1e-5), key
        assert sampled.policy[key] == pytest.approx(mixed[key], abs=1e-5), key
    assert any(half[k] != pytest.approx(one[k], abs=1e-3) for k in one if k not in firsts)
    assert sampled.exploitability == pytest.approx(exploitability(KUHN, mixed), abs=1e-5)
    log = RunLog(tmp_path, config)
    log.strategy([evaluated, sampled])
    line = json.loads((tmp_path / "evals.jsonl").read_text())
    assert [r["seat_temperatures"] for r in line["readings"]] == [
        {},
        {"player_0": 0.0, "player_1": 0.5},
    ]
    assert "T=1 (training sampling, player_0 at greedy, player_1 at T=0.5)" in (
        capsys.readouterr().out
    )


def test_a_policy_of_its_own_is_read_at_its_newest_checkpoint_up_to_the_step(
    tmp_path: Path,
) -> None:
    config = _two_models(
        responder=PolicySpec(model="tiny"),
        judge=PolicySpec(model="tiny", train=False),
        other=PolicySpec(model="tiny"),
    )
    # the policies that play a seat of Kuhn, in seat order; "other" plays Tic-Tac-Toe only
    assert read_bases(config) == ["judge", "responder"]
    root = tmp_path / "checkpoints" / "policies" / "responder"
    two = _checkpoint(root, 2)
    for step, model in ((1, True), (3, False), (4, True)):
        _checkpoint(root, step, model)
    _checkpoint(tmp_path / "checkpoints" / "policies" / "judge", 1)  # frozen: never read
    spec = {"judge": "tiny", "responder": "tiny"}
    assert base_weights(config, tmp_path, None) == (spec, [])
    # step 3 has no model/: the newest readable one up to step 3 is step 2's
    assert base_weights(config, tmp_path, 3) == ({**spec, "responder": str(two / "model")}, [])
    assert base_weights(config, tmp_path, 9)[0]["responder"].endswith("step-00000004/model")
    assert base_weights(config, tmp_path, 0) == (spec, ["responder"])
    assert readable_games(replace(config, eval=EvalConfig(exploitability=False))) == []


def test_a_policy_of_its_own_training_an_adapter_is_read_through_it(
    tiny_model, tmp_path: Path
) -> None:
    """Its checkpoint keeps the adapter beside ``model/`` (``adapters/shared-lora``): the read
    plays the adapter unmerged on the policy's own base, as it was served, not ``model/``
    (left empty here: loading it would fail)."""
    from arena.models.adapter_shape import AdapterShape
    from arena.models.lora import adapter_state, add_adapters
    from arena.models.lora_files import write_adapter

    model, tokenizer = tiny_model
    shape = AdapterShape(r=4, alpha=8, target_modules=("q_proj", "v_proj"))
    moved = copy.deepcopy(model)
    add_adapters(moved, ["shared-lora"], shape)
    generator = torch.Generator().manual_seed(0)
    state = {
        k: torch.randn(v.shape, generator=generator) * 0.5
        for k, v in adapter_state(moved, "shared-lora").items()
    }
    step = tmp_path / "policies" / "responder" / "step-00000002"
    write_adapter(step / "adapters" / "shared-lora", shape, state, "tiny")
    (step / "model").mkdir()
    config = _two_models(responder=PolicySpec(model="tiny", lora={"r": 4}))
    chat = ChatFormat(tokenizer)
    (after,) = read_strategy(config, chat, "after", "tiny", 2, {"responder": str(step / "model")})
    role = roles.make("player-v0", **CONFIG_ROLE)
    served = HFPolicy(copy.deepcopy(model), tokenizer)
    served.load_adapter("shared-lora", state, shape=shape)
    served.serve_by_default("shared-lora")
    through = read_seat(KUHN, PolicySeat(served, role, chat, SamplingParams())).table
    plain = read_seat(KUHN, PolicySeat(HFPolicy(model, tokenizer), role, chat, SamplingParams()))
    firsts = [k for k in through if len(k) % 2 == 1]  # player 0's states
    for key in through:
        want = plain.table[key] if key in firsts else through[key]
        assert after.policy[key] == pytest.approx(want, abs=1e-5), key
    assert any(through[k] != pytest.approx(plain.table[k], abs=1e-3) for k in through)


def test_a_run_with_named_policies_evaluates_and_summarises_each_policy_on_its_rows(
    tmp_path: Path,
) -> None:
    # Nim on heaps (1, 1) is lost for whoever moves first: the shared policy plays player_0
    # (it always opens: score 0), responder player_1 (it always answers: score 1). Before,
    # both seats went on one row with no policy, the random mover's score 0.5.
    from arena.eval.summary import before_after, markdown

    config = RunConfig(
        games=[GameConfig(id="nim-v0", kwargs={"heaps": [1, 1]})],
        eval=EvalConfig(games=4, opponents=["random-v0"], concurrency=4),
        policies={"responder": PolicySpec(model="tiny")},  # unmapped seats: the shared one
        seat_policies={"nim-v0:player_1": "responder"},
    )
    log = RunLog(tmp_path, config)
    results = asyncio.run(evaluate_baseline(config, log))
    assert [(r.policy, r.games, r.score) for r in results] == [
        ("main", 4, 0.0),
        ("responder", 4, 1.0),
    ]
    rows = [r.to_dict() for r in results]
    roles = [
        {
            "game": "mae-v0",
            "seat": "judge",
            "role": "judge",
            "metric": "accuracy",
            "mean": 0.5,
            "ci": [0.1, 0.9],
            "episodes": 4,
            "policy": "judge",
        }
    ]
    summary = before_after([*rows, *roles], [*rows, *roles], rows)
    assert summary["nim-v0, policy main"]["random_baseline_score"] == 0.0
    assert summary["nim-v0, policy responder"]["random_baseline_score"] == 1.0
    assert summary["mae-v0"]["roles"][0]["policy"] == "judge"
    table = markdown(summary)
    assert "| nim-v0, policy responder | score vs random-v0 | 1.000" in table
    assert "| mae-v0 | judge (judge, policy judge) | accuracy |" in table
