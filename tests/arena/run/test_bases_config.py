"""Several models in one run, before anything starts: the config errors a user meets, which
policy each seat plays, what each policy's learner is given, and the memory plan's arithmetic.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_bases_config.py``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from arena.core.errors import ConfigError
from arena.play.config import SamplingConfig
from arena.run.bases import learner_services, own_bases, shared_adapters, trained_bases
from arena.run.config import load_run_config
from arena.run.memory_plan import (
    check_fits,
    count_params,
    elsewhere_lines,
    memory_plan,
    model_shape,
    process_plans,
)
from arena.run.plan import plan
from arena.run.processes import actor_commands, policy_learners, write_configs
from arena.run.run_dir import resolve_for_run
from tests.cli import ROOT
from tests.served import served_by
from trainers.logprobs import token_logprobs

TWO = str(ROOT / "configs" / "two_models.yaml")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["policies.judge.model=null"],
            "policies.judge.train is false, but the policy has no model",
        ),
        (
            ["policies.responder.lora={r: 4}", "policies.responder.model=null"],
            "policies.responder.lora shapes",
        ),
        (["policies.judge.lora={r: 4}"], "policies.judge: train is false"),
        (["policies.responder.model=''"], "policies.responder.model is empty"),
        (["learner.name=judge"], "learner.name='judge' names a policy of policies (a frozen one"),
        (["seat_policies.mae-v0:judge=responder"], "claimed by two policies, judge and responder"),
        (["seat_policies.nobody=responder"], None),  # a key that maps no seat is harmless
        (["opponents.mode=population"], None),  # the responder's snapshots: a pool actor's
        (
            ["opponents.mode=population", "policies.pool={model: tiny}"],
            "policies.pool: with opponents.mode=population, policy:pool is the name",
        ),
    ],
)
def test_bad_policy_settings_name_the_key(overrides: list[str], message: str | None) -> None:
    if message is None:
        load_run_config(TWO, overrides).play.seat_policy(
            "kuhn-poker-v0", "player_0", "player-v0", "player"
        )
        return
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        config = load_run_config(TWO, overrides)
        config.play.seat_policy("mae-v0", "judge", "judge-v0", "judge")


def test_an_unknown_lora_field_is_named(tmp_path: Path) -> None:
    config = load_run_config(TWO, ["policies.responder.lora={rank: 4}", "model=tiny"])
    with pytest.raises(ConfigError, match=r"policies.responder.lora.rank is not a LoRA setting"):
        resolve_for_run(config, tmp_path)


def test_each_seat_plays_its_policy_and_unmapped_seats_the_shared_one() -> None:
    play = load_run_config(TWO).play
    assert play.seat_policy("kuhn-poker-v0", "player_0", "player-v0", "player") is None
    assert play.seat_policy("kuhn-poker-v0", "player_1", "player-v0", "player") == "responder"
    assert play.seat_policy("mae-v0", "judge", "judge-v0", "judge") == "judge"
    assert play.seat_policy("mae-v0", "solver_0", "solver-v0", "solver") is None
    assert list(own_bases(play)) == ["responder", "judge"] and shared_adapters(play) == []
    assert trained_bases(play) == ["responder"]
    assert learner_services(play) == ["learner", "learner:responder"]
    # with an adapter on the shared base declared, the base is frozen: every seat needs a map
    adapters = load_run_config(TWO, ["policies.first={}", "seat_policies.proposer=first"]).play
    with pytest.raises(ConfigError, match="plays none of the policies"):
        adapters.seat_policy("kuhn-poker-v0", "player_0", "player-v0", "player")


def test_each_trained_policy_gets_an_inference_actor_and_a_learner_of_its_own(
    tmp_path: Path,
) -> None:
    config = resolve_for_run(load_run_config(TWO, ["model=tiny"]), tmp_path)
    names = [c.name for c in actor_commands(config, tmp_path)]
    assert names == [
        "broker", "inference-0", "inference-responder", "inference-judge",
        "learner", "learner-responder", "rollout-0", "rollout-1",
    ]  # fmt: skip
    # the run's learner keeps the shared policy's turns only; the responder's its own
    assert config.learner.batch.policy == "main" and config.learner.service == "learner"
    responder = policy_learners(config, tmp_path)["responder"]
    assert (responder.name, responder.service, responder.model) == (
        "responder",
        "learner:responder",
        "tiny",
    )
    assert responder.batch.policy == "responder" and not responder.lora.enabled
    assert responder.checkpoint.dir == str(tmp_path.resolve() / "checkpoints/policies/responder")
    write_configs(config, tmp_path)
    judge = next(c for c in actor_commands(config, tmp_path) if c.name == "inference-judge")
    assert (served_by(judge.argv).name, served_by(judge.argv).model) == ("judge", "tiny")


def test_parameters_are_counted_as_by_hand() -> None:
    # tiny: embeddings 49152*64 (tied); per layer q 64*64, k and v 64*32, o 64*64, gate, up and
    # down 64*128 each, two norms of 64; two layers; the last norm
    per_layer = 4096 + 2048 + 2048 + 4096 + 3 * 8192 + 128
    assert count_params(model_shape("tiny")) == 49152 * 64 + 2 * per_layer + 64 == 3_219_776
    # SmolLM2-135M: the figure its model card gives
    assert count_params(model_shape("smollm2-135m")) == 134_515_008
    from arena.models import tiny_model

    model, _ = tiny_model()
    assert sum(p.numel() for p in model.parameters()) == 3_219_776


def big_model(tmp_path: Path) -> Path:
    """A 70B-shaped model directory: its config.json only (a plan reads nothing else)."""
    big = tmp_path / "big"
    big.mkdir()
    shape = dict(
        vocab_size=128000, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=8,
    )  # fmt: skip
    (big / "config.json").write_text(json.dumps(shape))
    return big


def test_a_plan_larger_than_the_host_is_refused_naming_the_policy(tmp_path: Path) -> None:
    big = big_model(tmp_path)
    config = load_run_config(TWO, ["model=tiny", f"policies.responder.model={big}"])
    plans = {p.policy: p for p in memory_plan(config)}
    assert plans["responder"].params > 60e9
    # full weights: float32 inference copy + float32 learner copy + 12 bytes a trained parameter
    assert plans["responder"].weights == 8 * plans["responder"].params
    assert plans["responder"].optimizer == 12 * plans["responder"].params
    assert plans["judge"].optimizer == 0  # frozen
    with pytest.raises(ConfigError, match=r"largest is policy responder"):
        check_fits(list(plans.values()), host=64 * 2**30)
    check_fits([plans["judge"], plans["main"]], host=64 * 2**30)


def test_only_what_this_host_starts_counts_against_it_the_rest_is_sized_per_process(
    tmp_path: Path,
) -> None:
    big = big_model(tmp_path)
    tiny = 3_219_776  # test_parameters_are_counted_as_by_hand
    kv = 16 * 2**20 + 4 * 1024 * (2 * 2 * 32 * 4)  # prefix cache, 4 x 1024 tokens, float32
    hand = ["model=tiny", f"policies.responder.model={big}", "inference.dtype=float32"]
    hand += ["inference.prefix_cache_mb=16", "inference.max_batch=4"]
    # the learners (the 70B-sized responder's among them) run elsewhere: not this host's
    config = load_run_config(TWO, [*hand, "start_learner=false"])
    plans = {p.policy: p for p in memory_plan(config)}
    assert (plans["main"].weights, plans["main"].optimizer) == (4 * tiny, 0)  # inference-0
    assert plans["main"].kv_cache == kv
    check_fits([plans["main"], plans["judge"]], host=64 * 2**30)
    away = [(p.name, p.here) for p in process_plans(config) if not p.here]
    assert away == [("learner", False), ("learner-responder", False)]
    params = plans["responder"].params
    lines = elsewhere_lines(config)
    assert lines[0].startswith(f"learner                  main tiny: {16 * tiny / 2**30:.2f} GiB")
    assert lines[1].startswith(
        f"learner-responder        responder {big}: {16 * params / 2**30:.2f}"
    )
    assert lines[1].endswith(f"optimizer {12 * params / 2**30:.2f} GiB)")
    # nothing started here: nothing counts against this host, every process is listed
    config = load_run_config(
        TWO, [*hand, "start_learner=false", "inference.actors=0", "wait.inference_actors=3"]
    )
    assert memory_plan(config) == []
    check_fits(memory_plan(config), host=1)
    lines = elsewhere_lines(config)
    assert lines[0] == (
        f"inference-0..2           main tiny: {(4 * tiny + kv) / 2**30:.2f} GiB each (weights "
        f"{4 * tiny / 2**30:.2f} GiB, KV cache {kv / 2**30:.2f} GiB)"
    )
    names = [line.split()[0] for line in lines]
    assert names == [
        "inference-0..2",
        "learner",
        "inference-responder",
        "learner-responder",
        "inference-judge",
    ]
    assert "elsewhere    what each process started on another host needs there:" in plan(config)


def test_a_policy_whose_model_cannot_be_loaded_fails_at_start_naming_it(tmp_path: Path) -> None:
    from arena.run.validation import validate

    missing = tmp_path / "gone"
    with pytest.raises(ConfigError, match=rf"policies.responder.model: no model '{missing}'"):
        validate(load_run_config(TWO, [f"policies.responder.model={missing}"]))
    (missing).mkdir()  # a directory, but no model in it
    with pytest.raises(ConfigError, match="policies.responder.model: no model"):
        validate(load_run_config(TWO, [f"policies.responder.model={missing}"]))
    (missing / "config.json").write_text("{}")
    validate(load_run_config(TWO, [f"policies.responder.model={missing}"]))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["policies.responder.sampling.temperature=0"],
            "policies.responder.sampling.temperature is 0.0, but greedy sampling has no policy",
        ),
        (
            ["policies.responder.sampling.top_k=5"],
            "policies.responder.sampling.top_p=1.0, policies.responder.sampling.top_k=5: training",
        ),
        (
            ["policies.judge.sampling.temprature=0.3"],
            "policies.judge.sampling.temprature is not a sampling setting; did you mean "
            "'policies.judge.sampling.temperature'",
        ),
        (
            ["policies.judge.sampling.temperature=200"],
            r"policies.judge.sampling.temperature must be in \[0, 100\], got 200.0",
        ),
        (
            ["policies.judge.sampling.max_new_tokens=0"],
            "policies.judge.sampling.max_new_tokens must be an int >= 1, got 0",
        ),
        (
            ["policies.judge.sampling.temperature=hot"],
            "policies.judge.sampling.temperature: Value 'hot' of type 'str' could not be",
        ),
        (  # an adapter on the shared base trains too
            ["policies.first={sampling: {top_p: 0.9}}", "seat_policies.proposer=first"],
            "policies.first.sampling.top_p=0.9, policies.first.sampling.top_k=0: training",
        ),
    ],
)
def test_bad_policy_sampling_is_named_by_its_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_run_config(TWO, overrides)
    assert "\n" not in str(caught.value)


def test_a_policys_sampling_takes_the_runs_fields_it_leaves_out(tmp_path: Path) -> None:
    config = load_run_config(
        TWO,
        [
            "model=tiny",
            "sampling.temperature=0.8",
            "policies.responder.sampling.temperature=0.5",
            "policies.responder.sampling.max_new_tokens=12",
            "policies.judge.sampling={temperature: 0, top_p: 0.9}",  # frozen: greedy, truncated
        ],
    )
    play = config.play
    assert play.sampling_of("responder") == SamplingConfig(0.5, 1.0, 0, 12)
    assert play.sampling_of("judge") == SamplingConfig(0.0, 0.9, 0, 6)  # smoke.yaml's length
    assert play.sampling_of(None) == play.sampling == SamplingConfig(0.8, 1.0, 0, 6)
    # each learner re-scores its turns at the temperature they were sampled at, and its
    # overlong filter knows its own generation limit; the plan shows what differs
    resolved = resolve_for_run(config, tmp_path)
    responder = policy_learners(resolved, tmp_path)["responder"]
    assert (responder.loss.temperature, responder.batch.max_response_tokens) == (0.5, 12)
    assert (resolved.learner.loss.temperature, resolved.learner.batch.max_response_tokens) == (
        0.8,
        6,
    )
    # logits (0, ln 3): at T = 1 the second token has p = 3/4; at T = 0.5 the logits are
    # (0, ln 9) and p = 9/10: the responder's learner scores the second, the run's the first
    logits, target = torch.tensor([[0.0, math.log(3.0)]]), torch.tensor([1])
    ours = token_logprobs(logits, target, responder.loss.temperature)[0]
    at_one = token_logprobs(logits, target, 1.0)[0]
    assert ours.item() == pytest.approx(math.log(0.9)) and at_one.item() == pytest.approx(
        math.log(0.75)
    )
    shown = plan(config)
    assert (
        "policy:responder, trained by learner-responder (service learner:responder, full "
        "weights); samples with temperature=0.5 max_new_tokens=12 (the run's sampling "
        "otherwise)" in shown
    )
    assert (
        "frozen (train: false; its turns are not trained); samples with temperature=0 "
        "top_p=0.9 (the run's" in shown
    )


def test_adapters_on_the_shared_base_tell_the_learner_their_own_sampling(tmp_path: Path) -> None:
    config = load_run_config(
        str(ROOT / "configs" / "kuhn_lora_seats.yaml"),
        [
            "model=tiny",
            "policies.responder.sampling={temperature: 0.5, max_new_tokens: 9}",
            "policies.poker.sampling.temperature=1.0",  # the run's own value: nothing to say
        ],
    )
    learner = resolve_for_run(config, tmp_path).learner
    assert (learner.loss.temperature, learner.loss.adapter_temperatures) == (
        1.0,
        {"responder": 0.5},
    )
    assert learner.batch.adapter_max_response_tokens == {"responder": 9}
    assert (
        "policy       responder: an adapter on the shared base; samples with "
        "temperature=0.5 max_new_tokens=9 (the run's sampling otherwise)" in plan(config)
    )
