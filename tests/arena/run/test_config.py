"""Run configs: merging, overrides, and errors that name the key and its nearest valid name.

Run with ``.venv/bin/python -m pytest -q tests/arena/run/test_config.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arena.run.config import ConfigError, load_run_config

CONFIGS = Path(__file__).resolve().parents[3] / "configs"


RUN_CONFIGS = sorted(p.name for p in CONFIGS.glob("*.yaml") if not p.name.startswith("tournament"))
"""Run configs (tournament configs are checked in tests/arena/tournament/test_config.py)."""


@pytest.mark.parametrize("name", RUN_CONFIGS)
def test_every_shipped_config_resolves(name: str) -> None:
    config = load_run_config(CONFIGS / name)
    assert config.games and config.steps > 0
    assert config.learner.model == config.model  # the learner follows the run's model


def test_extends_and_overrides_merge_in_order() -> None:
    config = load_run_config(CONFIGS / "mars-gpu.yaml", ["steps=7", "games.0.weight=2.5"])
    assert config.name == "mars-gpu" and config.steps == 7
    assert [g.id for g in config.games] == ["tictactoe-v0", "kuhn-poker-v0", "mini-hanabi-v0"]
    assert config.games[0].weight == 2.5
    assert config.inference.backend == "vllm" and config.learner.advantage.mode == "batch"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("stepz=3", "did you mean 'steps'"),
        ("learner.optim.lrr=1e-5", "did you mean 'learner.optim.lr'"),
        ("games.0.idd=x", "did you mean 'games.0.id'"),
        ("steps=many", "steps"),
        ("mode=asynch", "did you mean 'async'"),
        ("inference.backend=vlm", "did you mean 'vllm'"),
        ("inference.backend=openai", "inference.backend = 'openai' is not one of ['hf', 'vllm']"),
        ("steps", "key=value"),
        ("rollout.max_episode_turns=0", "rollout.max_episode_turns must be > 0, got 0"),
        ("rollout.episode_timeout=-1", "rollout.episode_timeout must be > 0, got -1.0"),
        # the seat's key, not "simulator timeout"; a negative game weight was taken
        (
            "games.0.simulators.user={id: scripted-user-v0, timeout: 0}",
            "games[tictactoe-v0].simulators.user.timeout must be > 0, got 0.0",
        ),
        ("games.0.weight=-1", "games[tictactoe-v0].weight must be >= 0, got -1.0"),
        ("games=[{id: nim-v0, weight: 0}]", "every game's weight is 0, so the mixture draws none"),
    ],
)
def test_bad_overrides_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_run_config(CONFIGS / "smoke.yaml", [override])


def test_unknown_key_in_a_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("extends: " + str(CONFIGS / "smoke.yaml") + "\nrollout:\n  concurency: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'rollout.concurrency'"):
        load_run_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_run_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sampling.temperature=0"], "greedy sampling has no policy gradient"),
        (["rollout.group_size=0"], "rollout.group_size must be >= 1"),
        (["rollout.group_size=3"], r"episodes_per_step \(8\) must be a positive multiple"),
        (["learner.advantage.mode=group"], "set rollout.group_size >= 2"),
        (["learner.advantage.mode=broadcast"], "set rollout.group_size >= 2"),
        (
            # both entries' episodes, metrics and evaluation rows were merged under one id
            ["games:=[{id: kuhn-poker-v0}, {id: nim-v0}, {id: kuhn-poker-v0, act: choice}]"],
            r"games\[2\]: kuhn-poker-v0 is listed twice \(games\[0\] too\); a game's episodes",
        ),
        (
            ["learner.per_state.enabled=true"],
            "per_state trains choice turns only, but tictactoe-v0 is played with act: generate",
        ),
    ],
)
def test_training_that_cannot_learn_is_refused(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_run_config(CONFIGS / "smoke.yaml", overrides)


def test_the_evaluation_before_training_may_play_fewer_opponents() -> None:
    config = load_run_config(CONFIGS / "selfplay_text.yaml")
    assert config.eval.opponents_at("before") == ["random-v0"]
    assert config.eval.opponents_at("after") == ["random-v0", "strongest"]
    assert config.eval.opponents_at("step 4") == ["random-v0", "strongest"]
    plain = load_run_config(CONFIGS / "smoke.yaml")
    assert plain.eval.opponents_before is None
    assert plain.eval.opponents_at("before") == plain.eval.opponents
    with pytest.raises(ConfigError, match="eval.opponents_before is empty"):
        load_run_config(CONFIGS / "smoke.yaml", ["eval.opponents_before=[]"])


def test_groups_and_greedy_evaluation_are_accepted() -> None:
    config = load_run_config(
        CONFIGS / "smoke.yaml",
        ["rollout.group_size=4", "learner.advantage.mode=group", "eval.temperature=0"],
    )
    assert config.rollout.group_size == 4 and config.rollout.episodes_per_step == 8
    assert config.eval.temperature == 0.0  # greedy evaluation stays allowed
    assert load_run_config(CONFIGS / "smoke.yaml").rollout.group_size == 1  # the default


@pytest.mark.parametrize("override", ["sampling.top_p=0.9", "sampling.top_k=20"])
def test_truncated_sampling_is_refused_for_training(override: str) -> None:
    with pytest.raises(ConfigError, match="whole tempered distribution"):
        load_run_config(CONFIGS / "smoke.yaml", [override])


def test_the_learning_rate_decays_over_the_run_unless_told_otherwise() -> None:
    config = load_run_config(CONFIGS / "smoke.yaml", ["steps=12", "learner.optim.schedule=cosine"])
    assert config.learner.optim.total_steps == 12
    told = load_run_config(CONFIGS / "smoke.yaml", ["learner.optim.total_steps=40"])
    assert told.learner.optim.total_steps == 40


def test_eval_games_zero_means_no_evaluation_and_negative_is_refused() -> None:
    from arena.run.plan import plan

    config = load_run_config(CONFIGS / "smoke.yaml", ["eval.games=0"])
    assert config.eval.games == 0
    assert "  eval         none (eval.games=0)" in plan(config).splitlines()
    with pytest.raises(ConfigError, match=r"eval.games must be >= 0 \(0: no evaluation\), got -1"):
        load_run_config(CONFIGS / "smoke.yaml", ["eval.games=-1"])


def test_a_role_argument_no_role_takes_is_refused_before_anything_starts() -> None:
    from arena.run.validation import validate

    config = load_run_config(CONFIGS / "smoke.yaml", ["games.0.role_kwargs.bogus=1"])
    with pytest.raises(ConfigError) as caught:
        validate(config)
    assert str(caught.value) == (
        "games[tictactoe-v0]: seat 'player_0' plays player-v0, which refuses role_kwargs "
        "{'prefill': True, 'bogus': 1}: Player.__init__() got an unexpected keyword argument "
        "'bogus' (it takes: name, job, output, what, memory, prefill, format_bonus, example, "
        "show_rules, turn_suffix)"
    )
    bad_game = load_run_config(CONFIGS / "smoke.yaml", ["games.0.kwargs.nope=3"])
    with pytest.raises(ConfigError, match=r"games\[tictactoe-v0\].kwargs .*'nope'"):
        validate(bad_game)
    validate(load_run_config(CONFIGS / "user_tool_use.yaml"))  # the simulated seat is skipped


def test_an_override_may_name_a_simulator_for_a_seat_the_yaml_does_not_list(
    tmp_path: Path,
) -> None:
    from arena.play.config import SimulatorConfig
    from arena.run.validation import validate

    retail = ["games.0.id=retail-v0", "games.0.role_kwargs:={}"]
    config = load_run_config(
        CONFIGS / "smoke.yaml", [*retail, "games.0.simulators.user.id=llm-user-v0"]
    )
    assert config.games[0].simulators == {"user": SimulatorConfig(id="llm-user-v0")}
    assert config.games[1].simulators == {}
    validate(config)
    # a seat that cannot be simulated: the message the same setting in YAML gives
    wrong = load_run_config(CONFIGS / "smoke.yaml", ["games.0.simulators.player_1.id=x-v0"])
    yaml = tmp_path / "wrong.yaml"
    yaml.write_text(
        f"extends: {CONFIGS / 'smoke.yaml'}\ngames:\n  - id: tictactoe-v0\n"
        "    simulators:\n      player_1: {id: x-v0}\n"
    )
    from_yaml = load_run_config(yaml)
    assert wrong.games[0].simulators == from_yaml.games[0].simulators
    messages = []
    for config in (wrong, from_yaml):
        with pytest.raises(ConfigError) as caught:
            validate(config)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert "registered" in messages[0] and "'x-v0'" in messages[0]
    wrong_seat = load_run_config(
        CONFIGS / "smoke.yaml", ["games.0.simulators.player_1.id=scripted-user-v0"]
    )
    with pytest.raises(ConfigError, match="seat 'player_1' cannot be simulated; the game's"):
        validate(wrong_seat)


def test_a_simulator_argument_it_does_not_take_is_refused_before_anything_starts() -> None:
    from arena.run.validation import validate

    tools = CONFIGS / "smoke_tools.yaml"  # its user: scripted-user-v0 with latency 0.5
    validate(load_run_config(tools, ["games.0.simulators.user.id=llm-user-v0"]))
    for override, message in (
        (
            "games.0.simulators.user.kwargs.bogus=1",
            "scripted-user-v0 refuses kwargs {'latency': 0.5, 'bogus': 1}: "
            "ScriptedUser.__init__() got an unexpected keyword argument 'bogus' "
            "(it takes: max_idle, latency)",
        ),
        (  # a new id drops the old kwargs; the ones given beside it are the new one's
            "games.0.simulators.user.id=llm-user-v0 games.0.simulators.user.kwargs.latency=1",
            "llm-user-v0 refuses kwargs {'latency': 1}: "
            "LLMUser.__init__() got an unexpected keyword argument 'latency' "
            "(it takes: persona, max_turns, stop, leak_words, retries)",
        ),
    ):
        with pytest.raises(ConfigError) as caught:
            validate(load_run_config(tools, override.split()))
        assert str(caught.value) == f"games[retail-v0].simulators.user: {message}"


def test_a_name_that_matches_no_seat_is_refused_not_ignored() -> None:
    """A misspelled seat under ``roles`` or ``seat_policies`` matched nothing and was dropped
    (the judge then played the shared adapter, its own trained nothing), and a scripted
    simulator's ``policy`` was never used: each is refused in one line naming the key."""
    from arena.run.validation import validate

    mae, roles = CONFIGS / "mae.yaml", CONFIGS / "mae_lora_roles.yaml"
    validate(load_run_config(mae, ["games.0.roles.judge=judge-v0"]))  # by seat
    validate(load_run_config(mae, ["games.0.roles.solver-v0=solver-v0"]))  # by role id
    with pytest.raises(ConfigError) as caught:
        validate(load_run_config(mae, ["games.0.roles.judgee=judge-v0"]))
    assert str(caught.value) == (
        "games[mae-v0].roles.judgee: mae-v0 has no seat or role 'judgee'; did you mean "
        "'judge'? (seats: proposer, solver_0, solver_1, judge; roles: judge-v0, proposer-v0, "
        "solver-v0)"
    )
    validate(load_run_config(roles))
    with pytest.raises(ConfigError, match=r"^seat_policies.judg: no seat of the run's games is "):
        validate(load_run_config(roles, ["seat_policies.judg=judge"]))
    tools = CONFIGS / "smoke_tools.yaml"
    validate(
        load_run_config(
            tools,
            ["games.0.simulators.user.id=llm-user-v0", "games.0.simulators.user.policy=judge"],
        )
    )
    with pytest.raises(ConfigError) as caught:
        validate(load_run_config(tools, ["games.0.simulators.user.policy=judge"]))
    assert str(caught.value).startswith(
        "games[retail-v0].simulators.user.policy: scripted-user-v0 talks through no model"
    )


def test_a_policy_declared_for_a_simulator_says_how_a_simulator_gets_one() -> None:
    """A simulator talks through a policy served apart; declared in ``policies`` it plays no
    seat, and the refusal says both ways to get the frozen simulated user meant."""
    tools, frozen = CONFIGS / "smoke_tools.yaml", "policies={userlm: {model: tiny, train: false}}"
    llm_user = "games.0.simulators.user:={id: llm-user-v0, policy: userlm}"
    with pytest.raises(ConfigError) as caught:
        load_run_config(tools, [llm_user, frozen])
    assert str(caught.value).startswith(
        "policies: 'userlm' plays no seat; games[retail-v0].simulators.user.policy names it, "
        "but a simulator talks through a policy served apart (`arena inference --connect ADDR "
        "--name userlm --model MODEL`)"
    )
    # the other way: no simulator, the seat mapped to the frozen model
    config = load_run_config(tools, ["games.0.simulators:={}", frozen, "seat_policies.user=userlm"])
    assert config.seat_policies == {"user": "userlm"}
