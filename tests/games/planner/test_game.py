"""Planner, executor and verifier: tasks, hand-checked transcripts, tool errors, the round limit,
what each seat sees, the broadcast groups, the scripted bot and conformance.

Run with ``.venv/bin/python -m pytest -q tests/games/planner/test_game.py``.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from games.bots.planner import ScriptedPlannerBot
from games.conformance import check_game
from games.interaction import Post
from games.planner.actions import canonical_call, plan_text
from games.planner.calculator import evaluate
from games.planner.game import PlannerExecutor
from games.planner.tasks import KINDS, Step, Task, TaskSampler, check_answer
from games.search.corpus import read_answer
from trainers.advantages import compute_advantages

TASK = Task(
    "arithmetic",
    "What is 4837 * 29 - 1120?",
    "139153",  # 4837 * 29 = 140273, minus 1120
    (Step("calculator", "4837 * 29 - 1120", "compute 4837 * 29 - 1120"),),
)
PLAN_CALC = "<subgoal>Compute 4837 * 29 - 1120</subgoal>\n<tool>calculator</tool>"
PLAN_ANSWER = "<subgoal>Report the result</subgoal>\n<tool>answer</tool>"
CALL_CALC = '{"name": "calculator", "arguments": {"expression": "4837 * 29 - 1120"}}'


def call(name: str, **arguments: object) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def fixed(**kwargs: object) -> PlannerExecutor:
    env = PlannerExecutor(tasks=[TASK], **kwargs)
    env.reset(seed=0)
    return env


def play(env: PlannerExecutor, *texts: str) -> None:
    for text in texts:
        env.step_text(text)


def play_bot(env: PlannerExecutor, seed: int, bot: ScriptedPlannerBot) -> None:
    env.reset(seed=seed)
    while not env.is_over:
        env.step(bot.act(env, env.agent_selection))


# -- tasks -----------------------------------------------------------------------------------------
def test_tasks_of_every_kind_have_answers_their_steps_reach() -> None:
    sampler = TaskSampler()
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(60):
        task = sampler.sample(rng)
        seen.add(task.kind)
        if task.kind == "arithmetic":
            (step,) = task.steps
            assert step.tool == "calculator" and evaluate(step.argument) == task.answer
            assert int(task.answer) > 0
        else:
            search = task.steps[0]
            docs = sampler.retriever.search(search.argument.lower(), k=3)
            found = read_answer(search.argument, docs)
            if task.kind == "lookup":
                assert found == task.answer
            else:
                year, calc = int(found), task.steps[1]
                assert calc.argument.endswith(f" - {year}")
                assert evaluate(calc.argument) == task.answer
    assert seen == set(KINDS)


def test_tasks_are_determined_by_the_seed() -> None:
    first = [TaskSampler().sample(np.random.default_rng(s)) for s in range(5)]
    again = [TaskSampler().sample(np.random.default_rng(s)) for s in range(5)]
    assert first == again
    assert len({t.text for t in first}) == 5


@pytest.mark.parametrize(
    ("given", "correct"),
    [
        ("139153", True),
        (" 139,153. ", True),
        ("139153.0", True),
        ("139152", False),
        ("", False),
        (None, False),
        ("about 139153", False),
    ],
)
def test_check_answer_numbers(given: str | None, correct: bool) -> None:
    assert check_answer(TASK, given) is correct


def test_check_answer_names_ignore_case_and_spacing() -> None:
    task = Task("lookup", "Which company does X work for?", "Drolnoul Motors", ())
    assert check_answer(task, "drolnoul   MOTORS")
    assert not check_answer(task, "Drolnoul")


def test_unknown_kinds_and_empty_tasks_are_refused() -> None:
    with pytest.raises(ValueError, match="kinds must be"):
        PlannerExecutor(kinds=("poetry",))
    with pytest.raises(ValueError, match="must not be empty"):
        PlannerExecutor(tasks=[])
    with pytest.raises(TypeError, match="max_rounds"):
        PlannerExecutor(max_turns=9)
    with pytest.raises(ValueError, match="seat rewards"):
        PlannerExecutor(executor_reward="half")


# -- transcripts, rewards by hand ------------------------------------------------------------------
def test_a_correct_transcript_rewards_every_seat_one() -> None:
    env = fixed()
    assert env.agent_selection == "planner"
    play(env, PLAN_CALC, CALL_CALC, "CONTINUE", PLAN_ANSWER, call("answer", text="139,153"))
    assert not env.is_over and env.rewards == dict.fromkeys(env.possible_agents, 0.0)
    env.step_text("STOP")
    assert env.termination_reason == "done"
    assert env.returns == {"planner": 1.0, "executor": 1.0, "verifier": 1.0}
    assert env.turn == 6
    for agent in env.possible_agents:
        info = env.infos[agent]
        assert (info["correct"], info["rounds"], info["tool_errors"]) == (True, 2, 0)
        assert (info["final_answer"], info["task_kind"]) == ("139,153", "arithmetic")
    assert env.posts == [
        Post("task", "task", "What is 4837 * 29 - 1120?"),
        Post("planner", "subgoal", "compute 4837 * 29 - 1120"),
        Post("planner", "tool", "calculator"),
        Post(
            "executor",
            "tool_call",
            '{"arguments": {"expression": "4837 * 29 - 1120"}, "name": "calculator"}',
        ),
        Post("tools", "tool_result", "139153"),
        Post("verifier", "verdict", "CONTINUE"),
        Post("planner", "subgoal", "report the result"),
        Post("planner", "tool", "answer"),
        Post("executor", "tool_call", '{"arguments": {"text": "139,153"}, "name": "answer"}'),
        Post("tools", "tool_result", "answer recorded: 139,153"),
        Post("verifier", "verdict", "STOP"),
    ]


def test_the_last_answer_counts() -> None:
    env = fixed()
    play(env, PLAN_ANSWER, call("answer", text="139153"), "CONTINUE")
    play(env, PLAN_ANSWER, call("answer", text="140273"), "STOP")
    assert env.returns == {"planner": 0.0, "executor": 0.0, "verifier": 0.0}
    assert env.infos["planner"]["final_answer"] == "140273"
    assert env.infos["planner"]["correct"] is False


def test_stop_without_an_answer_is_wrong() -> None:
    env = fixed()
    play(env, PLAN_CALC, CALL_CALC, "STOP")
    assert env.termination_reason == "done"
    assert env.returns == {"planner": 0.0, "executor": 0.0, "verifier": 0.0}
    info = env.infos["verifier"]
    assert (info["correct"], info["rounds"], info["final_answer"]) == (False, 1, "")


def test_executor_and_verifier_rewards_can_be_zero() -> None:
    env = fixed(executor_reward="zero", verifier_reward="zero")
    play(env, PLAN_ANSWER, call("answer", text="139153"), "STOP")
    assert env.returns == {"planner": 1.0, "executor": 0.0, "verifier": 0.0}
    assert "the executor gets 0 always; the verifier gets 0 always" in env.rules()


# -- tool errors -----------------------------------------------------------------------------------
def test_a_bad_tool_call_is_the_tool_output_not_a_forfeit() -> None:
    env = fixed()
    play(env, PLAN_CALC, call("calculator", expression="4837 * 29 - 1120 / 0"))
    info = env.infos["executor"]
    assert not info["invalid"] and not info["forfeit"]
    assert info["tool_error"] == "division by zero"
    assert env.posts[-1] == Post("tools", "tool_result", "Error: division by zero")
    assert env.agent_selection == "verifier" and not env.is_over
    play(env, "CONTINUE", PLAN_CALC, call("calculator", expr="1 + 1"))
    assert env.infos["executor"]["tool_error"].startswith("calculator takes no argument 'expr'")
    play(env, "CONTINUE", PLAN_CALC, CALL_CALC)
    assert env.infos["executor"]["tool_error"] == ""  # cleared by a call that works
    assert env.posts[-1] == Post("tools", "tool_result", "139153")
    env.step_text("STOP")
    assert env.termination_reason == "done" and env.returns["planner"] == 0.0  # no answer
    assert env.infos["planner"]["tool_errors"] == 2


def test_an_unknown_tool_is_a_tool_error() -> None:
    env = fixed()
    play(env, PLAN_CALC, call("python", code="print(1)"))
    error = env.infos["executor"]["tool_error"]
    assert error.startswith("unknown tool 'python'")
    assert "the tools are calculator, search, answer" in error.casefold()
    assert env.posts[-1] == Post("tools", "tool_result", f"Error: {error}")
    assert not env.infos["executor"]["invalid"]


def test_a_tool_other_than_the_planned_one_is_a_tool_error() -> None:
    env = fixed()
    play(env, PLAN_CALC, call("answer", text="139153"))
    assert env.infos["executor"]["tool_error"] == (
        "the planner chose the calculator tool: call calculator, not answer"
    )
    assert env.final_answer is None  # the refused answer does not count
    env.step_text("STOP")
    assert env.returns["planner"] == 0.0 and env.infos["planner"]["tool_errors"] == 1


def test_search_returns_the_documents() -> None:
    env = PlannerExecutor(kinds=("lookup",))
    env.reset(seed=3)
    task = env.task
    play(env, plan_text("look it up", "search"), call("search", query=task.text))
    result = env.posts[-1]
    assert result.sender == "tools" and result.text.startswith("[1] ")
    assert task.answer in result.text.split("\n")[0]  # the subject's own document is first
    assert env.infos["executor"]["tool_error"] == ""


def test_a_planner_tool_outside_the_list_gets_a_retry() -> None:
    env = fixed()
    env.step_text("<subgoal>run code</subgoal><tool>python</tool>")
    info = env.infos["planner"]
    assert info["invalid"] and info["retries"] == 1
    assert (
        info["invalid_reason"] == "the tool must be one of calculator, search, answer, not 'python'"
    )
    assert info["feedback"] in env.observe("planner")["text"]
    assert env.agent_selection == "planner" and env.posts == [Post("task", "task", TASK.text)]


def test_unreadable_calls_forfeit_the_executor_only() -> None:
    env = fixed()
    env.step_text(PLAN_CALC)
    for _ in range(env.max_retries + 1):
        env.step_text("let me compute 4837 * 29 - 1120")
    assert env.termination_reason == "illegal" and env.infos["executor"]["forfeit"]
    assert env.returns == {"planner": 0.0, "executor": -1.0, "verifier": 0.0}
    assert env.infos["planner"]["correct"] is False


# -- the round limit -------------------------------------------------------------------------------
def test_a_verifier_that_never_stops_is_cut_at_max_rounds() -> None:
    env = fixed(max_rounds=2)
    assert env.max_turns == 6
    play(env, PLAN_ANSWER, call("answer", text="139153"), "CONTINUE", PLAN_CALC, CALL_CALC)
    assert not env.is_over
    env.step_text("CONTINUE")
    assert env.termination_reason == "max_turns"
    assert all(env.truncations.values()) and not any(env.terminations.values())
    # the last answer given still stands at the cut
    assert env.returns == {"planner": 1.0, "executor": 1.0, "verifier": 1.0}
    assert env.infos["planner"]["rounds"] == 2


def test_cut_without_an_answer_scores_zero() -> None:
    env = fixed(max_rounds=1)
    play(env, PLAN_CALC, CALL_CALC, "CONTINUE")
    assert env.termination_reason == "max_turns"
    assert env.returns == {"planner": 0.0, "executor": 0.0, "verifier": 0.0}


# -- who sees what ---------------------------------------------------------------------------------
def test_each_seat_sees_only_its_edges() -> None:
    env = fixed()
    play(env, PLAN_CALC, CALL_CALC, "CONTINUE", PLAN_ANSWER)
    call_text = '{"arguments": {"expression": "4837 * 29 - 1120"}, "name": "calculator"}'
    planner, executor = env.observe("planner")["text"], env.observe("executor")["text"]
    verifier = env.observe("verifier")["text"]
    assert TASK.text in planner and TASK.text in executor and TASK.text in verifier
    assert "tools (tool_result): 139153" in planner + executor + verifier
    assert call_text not in planner  # the planner never sees the executor's calls
    assert "verifier (verdict)" not in executor  # the executor never sees verdicts
    assert "planner (subgoal)" not in verifier and "planner (tool)" not in verifier
    assert "planner (subgoal): report the result" in executor
    for agent in env.possible_agents:
        assert env.interaction.leaks(agent, env.observe(agent)["text"], env.posts) == []
    assert env.seat_role("planner") == "planner-v0"
    assert env.seat_role("executor") == "executor-v0"
    assert env.seat_role("verifier") == "verifier-v0"
    assert env.role_kwargs("executor")["example"] == (
        '{"arguments": {"expression": "4837 * 29 - 1120"}, "name": "calculator"}'
    )


def test_the_bot_never_shows_a_seat_a_post_it_may_not_see() -> None:
    env, bot = PlannerExecutor(), ScriptedPlannerBot(0)
    for seed in range(6):
        env.reset(seed=seed)
        while not env.is_over:
            agent = env.agent_selection
            shown = env.observe(agent)["text"]
            assert env.interaction.leaks(agent, shown, env.posts) == []
            env.step(bot.act(env, agent))


# -- broadcast groups ------------------------------------------------------------------------------
def test_every_turn_of_a_task_shares_one_group() -> None:
    env = fixed()
    digest = hashlib.sha1(b"arithmetic|What is 4837 * 29 - 1120?").hexdigest()[:12]
    groups = []
    for text in (PLAN_CALC, CALL_CALC, "CONTINUE", PLAN_ANSWER):
        agent = env.agent_selection
        env.step_text(text)
        groups.append(env.infos[agent]["group"])
    assert groups == [f"planner:{digest}"] * 4
    other = PlannerExecutor()
    other.reset(seed=0)
    assert other.infos["planner"]["group"] != groups[0]


def test_broadcast_gives_every_planner_turn_the_episode_outcome() -> None:
    # two episodes of one task: the first answers right in 2 rounds, the second wrong in 1
    records = []  # (group, outcome) for each planner turn
    for texts in (
        [PLAN_CALC, CALL_CALC, "CONTINUE", PLAN_ANSWER, call("answer", text="139153"), "STOP"],
        [PLAN_ANSWER, call("answer", text="1"), "STOP"],
    ):
        env, groups = fixed(), []
        for text in texts:
            agent = env.agent_selection
            env.step_text(text)
            if agent == "planner":
                groups.append(env.infos["planner"]["group"])
        records += [(g, env.returns["planner"]) for g in groups]
    assert [o for _, o in records] == [1.0, 1.0, 0.0]
    adv = compute_advantages(
        "broadcast",
        returns=[0.0] * 3,
        outcomes=[o for _, o in records],
        keys=[("planner-executor-v0", "planner")] * 3,
        groups=[g for g, _ in records],
        scale_by_std=False,
    )
    # one group of three values 1, 1, 0: mean 2/3
    np.testing.assert_allclose(adv, [1 / 3, 1 / 3, -2 / 3])


# -- the scripted bot and conformance --------------------------------------------------------------
def test_the_scripted_bot_solves_every_kind() -> None:
    env, bot = PlannerExecutor(), ScriptedPlannerBot(0)
    kinds = set()
    for seed in range(12):
        play_bot(env, seed, bot)
        kinds.add(env.task.kind)
        assert env.termination_reason == "done"
        assert env.returns == {"planner": 1.0, "executor": 1.0, "verifier": 1.0}
        info = env.infos["planner"]
        assert info["correct"] and info["tool_errors"] == 0
        assert info["rounds"] == len(env.task.steps) + 1  # each step, then the answer
    assert kinds == set(KINDS)


def test_a_wrong_bot_answer_earns_zero() -> None:
    env, bot = PlannerExecutor(), ScriptedPlannerBot(0, error_rate=1.0)
    play_bot(env, 4, bot)
    assert env.returns["planner"] == 0.0 and env.infos["planner"]["correct"] is False
    assert env.infos["planner"]["final_answer"] == f"not {env.task.answer}".casefold()


def test_bot_actions_are_canonical() -> None:
    env, bot = fixed(), ScriptedPlannerBot(0)
    action = bot.act(env, "planner")
    assert action == plan_text("compute 4837 * 29 - 1120", "calculator")
    assert env.parse_action("planner", action) == action
    env.step(action)
    assert bot.act(env, "executor") == canonical_call(
        {"name": "calculator", "arguments": {"expression": "4837 * 29 - 1120"}}
    )


@pytest.mark.parametrize(
    "kwargs", [{}, {"max_rounds": 1}, {"kinds": ("lookup",), "executor_reward": "zero"}]
)
def test_conformance(kwargs: dict) -> None:
    report = check_game(lambda: PlannerExecutor(**kwargs), playthroughs=6)
    assert report.passed, report.table()
