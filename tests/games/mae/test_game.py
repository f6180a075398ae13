"""Proposer, solver and judge: hand-computed rewards on literal transcripts, the fallback for
invalid proposals, malformed output, who sees what, advantage groups, the oracle bot in every
seat, and the conformance kit.

Run with ``.venv/bin/python -m pytest -q tests/games/mae/test_game.py``.
"""

from __future__ import annotations

import hashlib

import pytest

from games.bots.mae import MAEOracleBot
from games.conformance import check_game
from games.interaction import Post
from games.mae.families import FAMILIES
from games.mae.game import REFERENCE, ProposerSolverJudge

PROBLEM = "Ann has 12 apples. Ann buys 5 more. Ann gives away 3. How many apples does Ann have?"
"""True answer 14 (12 + 5 - 3); the number 14 appears nowhere in the text."""
INVALID = "Ann has 3 apples. Ann gives away 5. How many apples does Ann have?"  # below zero


def game(seed: int = 0, **kwargs) -> ProposerSolverJudge:
    env = ProposerSolverJudge(family="arithmetic", **kwargs)
    env.reset(seed=seed)
    return env


def play(env: ProposerSolverJudge, *texts: str) -> None:
    for text in texts:
        env.step_text(text)


def group_of(seed: int, text: str) -> str:
    return f"mae:{seed}:{hashlib.sha1(text.encode()).hexdigest()[:12]}"


def test_one_right_one_wrong_answer_rewards_every_seat() -> None:
    env = game()
    play(env, PROBLEM, " 14.0 ", "13", "1 1")
    # proposer: 0.5 (valid) + 0.5 * (1 - 1/2 solved); judge: "1 1" against the truth [1, 0]
    assert env.returns == {"proposer": 0.75, "solver_0": 1.0, "solver_1": 0.0, "judge": 0.5}
    assert env.termination_reason == "done"
    assert env.posts == [
        Post("proposer", "question", PROBLEM),
        Post("solver_0", "answer", "14"),
        Post("solver_1", "answer", "13"),
        Post("judge", "score", "1 1"),
    ]
    assert env.infos["proposer"]["proposal_valid"] is True
    assert env.infos["judge"]["mae"] == {
        "family": "arithmetic",
        "proposal_valid": True,
        "task": PROBLEM,
        "answer": "14",
        "solver_correct": [True, False],
        "solver_accuracy": 0.5,
        "verdicts": [1, 1],
        "judge_accuracy": 0.5,
        "forfeits": [],
    }
    assert all(env.infos[a]["mae"] == env.infos["judge"]["mae"] for a in env.possible_agents)


def test_reward_weights_are_configurable() -> None:
    env = game(w_valid=0.2, w_difficulty=0.8)
    play(env, PROBLEM, "13", "15 apples", "0 0")
    # nobody solved it: 0.2 + 0.8 * (1 - 0); the judge called both right
    assert env.returns == {"proposer": 1.0, "solver_0": 0.0, "solver_1": 0.0, "judge": 1.0}
    env = game(num_solvers=3, w_valid=1.0, w_difficulty=0.0)
    play(env, PROBLEM, "14", "14", "2", "1 0 1")
    assert env.returns == {
        "proposer": 1.0,
        "solver_0": 1.0,
        "solver_1": 1.0,
        "solver_2": 0.0,
        "judge": pytest.approx(1 / 3),  # only the first verdict matches [1, 1, 0]
    }


def test_the_solvers_of_one_problem_share_a_group() -> None:
    env = game(seed=3)
    play(env, PROBLEM, "14", "13")
    assert env.infos["solver_0"]["group"] == env.infos["solver_1"]["group"] == group_of(3, PROBLEM)
    assert "group" not in env.infos["proposer"]  # the runner's default group
    other = game(seed=3)
    play(other, INVALID, "1", "2")  # the reference problem replaced it: another group
    assert other.infos["solver_0"]["group"] == group_of(3, other.reference.text)
    assert other.infos["solver_0"]["group"] != env.infos["solver_0"]["group"]


def test_seats_see_only_what_the_graph_allows_and_the_truth_never() -> None:
    env = game()
    seen = {}
    for text in (PROBLEM, "13", "15", "0 0"):
        for agent in env.possible_agents:
            shown = env.observe(agent)["text"]
            assert env.interaction.leaks(agent, shown, env.posts) == []
            assert all(secret not in shown for secret in env.hidden_from(agent))
            assert "14" not in shown  # nobody answered it, so nobody reads it
        seen[env.agent_selection] = env.observe(env.agent_selection)["text"]
        env.step_text(text)
    assert f"proposer (question): {PROBLEM}" in seen["solver_0"]
    assert "solver_0" not in seen["solver_1"].replace("You are solver_1", "")
    assert "solver_0 (answer): 13\nsolver_1 (answer): 15" in seen["judge"]
    assert "Task family: arithmetic." in seen["proposer"]
    assert {p.field for p in env.posts} == {"question", "answer", "score"}


def test_the_interaction_graph() -> None:
    graph = ProposerSolverJudge(num_solvers=3).interaction.graph
    roles = {n: graph.nodes[n].get("role") for n in graph.nodes}
    assert roles == {
        "proposer": "proposer-v0",
        "solver_0": "solver-v0",
        "solver_1": "solver-v0",
        "solver_2": "solver-v0",
        "judge": "judge-v0",
        REFERENCE: None,
    }
    edges = {(u, v): set(d["sees"]) for u, v, d in graph.edges(data=True)}
    assert edges[("proposer", "judge")] == edges[(REFERENCE, "judge")] == {"question"}
    for solver in ("solver_0", "solver_1", "solver_2"):
        assert edges[("proposer", solver)] == edges[(REFERENCE, solver)] == {"question"}
        assert edges[(solver, "judge")] == {"answer"}
        assert graph.nodes[solver]["never_sees"] == {"answer", "score"}
    assert len(edges) == 2 + 3 * 3
    assert graph.nodes["judge"]["role_kwargs"]["example"] == "1 0 1"


def test_an_invalid_problem_is_replaced_by_the_reference_problem() -> None:
    env = game()
    env.step_text(INVALID)
    assert not env.infos["proposer"]["invalid"]  # well formed: accepted, scored invalid
    assert env.infos["proposer"]["proposal_valid"] is False
    assert env.posts == [
        Post("proposer", "invalid_question", INVALID.casefold()),
        Post(REFERENCE, "question", env.reference.text),
    ]
    shown = env.observe("solver_0")["text"]
    assert f"reference (question): {env.reference.text}" in shown
    assert "gives away 5" not in shown
    assert "was invalid" in env.observe("proposer")["text"]
    wrong = str(int(env.reference.answer) + 1)
    play(env, env.reference.answer, wrong, "1 0")
    # no reward for an invalid problem, however hard the replacement was
    assert env.returns == {"proposer": 0.0, "solver_0": 1.0, "solver_1": 0.0, "judge": 1.0}
    assert env.termination_reason == "done"
    assert env.infos["judge"]["mae"]["proposal_valid"] is False


def test_a_proposer_that_never_writes_a_problem_forfeits_its_turn_only() -> None:
    env = game()
    for attempt in (1, 2):
        env.step_text("Here is a problem for you")  # no question: malformed
        assert env.agent_selection == "proposer" and env.infos["proposer"]["retries"] == attempt
        assert env.infos["proposer"]["feedback"] in env.observe("proposer")["text"]
    env.step_text("")
    assert env.infos["proposer"]["forfeit"] and env.agent_selection == "solver_0"
    assert env.posts == [Post(REFERENCE, "question", env.reference.text)]
    play(env, env.reference.answer, env.reference.answer, "1 1")
    assert env.returns == {"proposer": -1.0, "solver_0": 1.0, "solver_1": 1.0, "judge": 1.0}
    assert env.termination_reason == "illegal"
    assert env.infos["judge"]["mae"]["forfeits"] == ["proposer"]


def test_malformed_answers_are_retried_then_count_as_wrong() -> None:
    env = game()
    play(env, PROBLEM, "I think it is fourteen")
    assert env.agent_selection == "solver_0" and env.infos["solver_0"]["invalid"]
    env.step_text("14")
    assert not env.infos["solver_0"]["invalid"] and env.agent_selection == "solver_1"
    play(env, "fourteen", "14 or 15", "?")
    assert env.infos["solver_1"]["forfeit"] and env.agent_selection == "judge"
    assert env.infos["solver_1"]["group"] == group_of(0, PROBLEM)
    assert "solver_1 gave no answer" in env.observe("judge")["text"]
    env.step_text("1 0")
    # proposer: 0.5 + 0.5 * (1 - 1/2); solver_1: the forfeit and no correctness
    assert env.returns == {"proposer": 0.75, "solver_0": 1.0, "solver_1": -1.0, "judge": 1.0}
    assert env.termination_reason == "illegal"


def test_malformed_verdicts_are_retried_then_the_judge_forfeits() -> None:
    env = game()
    play(env, PROBLEM, "14", "13", "1")
    assert env.infos["judge"]["invalid"] and not env.is_over
    play(env, "yes no")
    assert env.infos["judge"]["retries"] == 2
    env.step_text(" 1,0 ")
    assert env.posts[-1] == Post("judge", "score", "1 0") and env.termination_reason == "done"
    env = game()
    play(env, PROBLEM, "14", "13", "1 0 1", "2 0", "")
    assert env.termination_reason == "illegal" and env.infos["judge"]["forfeit"]
    assert env.returns == {"proposer": 0.75, "solver_0": 1.0, "solver_1": 0.0, "judge": -1.0}
    assert env.infos["judge"]["mae"]["verdicts"] is None


def test_actions_are_read_into_canonical_form() -> None:
    env = game()
    shouted = (
        "  ANN HAS 12 APPLES.\n ANN BUYS 5 MORE. ann gives away 3. how many apples does ann have?"
    )
    assert env.parse_action("proposer", shouted) == PROBLEM
    assert env.parse_action("proposer", "Is this  a PROBLEM?") == "is this a problem?"
    assert env.parse_action("proposer", "No question mark") is None
    assert env.parse_action("proposer", "?") is None
    assert env.parse_action("solver_0", " 14.0 ") == "14"
    assert env.parse_action("solver_0", "Ann") is None  # an arithmetic answer is a number
    assert env.parse_action("judge", "1\n0") == "1 0"
    assert env.parse_action("judge", "1 0 1") is None
    assert env.parse_action("judge", None) is None


def test_the_seed_picks_the_family_unless_it_is_fixed() -> None:
    env = ProposerSolverJudge()
    picked = set()
    for seed in range(20):
        env.reset(seed=seed)
        picked.add(env.family.name)
    assert picked == set(FAMILIES)
    with pytest.raises(ValueError, match="family"):
        ProposerSolverJudge(family="chess")
    assert "1 solver(s) (solver_0)" in ProposerSolverJudge(num_solvers=1).rules()


def test_difficulty_knobs_reach_the_families() -> None:
    env = ProposerSolverJudge(family="ordering", max_people=2, max_rank=1, max_steps=1)
    assert env.families["arithmetic"].max_steps == 1
    env.reset(seed=4)
    assert "at most 2 people" in env.observe("proposer")["text"]
    assert len(set(env.family.candidates(env.reference))) == 2  # the fallback is easy too
    three = "Ann is taller than Bob. Bob is taller than Cy. Who is the tallest?"
    play(env, three)  # valid by default, too many people here: replaced
    assert env.proposal_valid is False and env.task == env.reference
    env.reset(seed=4)
    play(env, "Bob is shorter than Ann. Who is the tallest?", "Ann", "Bob", "1 0")
    assert env.returns == {"proposer": 0.75, "solver_0": 1.0, "solver_1": 0.0, "judge": 1.0}
    assert ProposerSolverJudge().families["ordering"].max_people == 6  # defaults: full families
    with pytest.raises(TypeError, match="max_persons"):
        ProposerSolverJudge(max_persons=2)
    with pytest.raises(ValueError, match="max_people"):
        ProposerSolverJudge(max_people=9)


def test_role_overrides_reach_one_role_only() -> None:
    env = ProposerSolverJudge(num_solvers=2, role_overrides={"solver": {"example": "Jo"}})
    assert env.role_kwargs("solver_0")["example"] == env.role_kwargs("solver_1")["example"] == "Jo"
    assert env.role_kwargs("solver_0")["what"] == "your final answer alone (a number or a name)"
    assert env.role_kwargs("judge")["example"] == "1 0"
    assert "example" not in env.role_kwargs("proposer")
    judged = ProposerSolverJudge(role_overrides={"judge": {"example": "0 0"}})
    assert judged.role_kwargs("judge")["example"] == "0 0"
    assert "example" not in judged.role_kwargs("solver_0")
    with pytest.raises(ValueError, match="role_overrides"):
        ProposerSolverJudge(role_overrides={"solver_0": {}})


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("num_solvers", [1, 2, 3])
def test_the_oracle_bot_plays_every_seat(family: str, num_solvers: int) -> None:
    env = ProposerSolverJudge(num_solvers=num_solvers, family=family)
    for error_rate, proposer, solver in ((0.0, 0.5, 1.0), (1.0, 1.0, 0.0)):
        bot = MAEOracleBot(seed=1, error_rate=error_rate)
        for seed in range(10):
            env.reset(seed=seed)
            while not env.is_over:
                env.step(bot.act(env, env.agent_selection))
                assert not env.infos[env.possible_agents[env.turn - 1]]["invalid"]
            assert env.termination_reason == "done"
            assert env.returns == {
                "proposer": proposer,
                **dict.fromkeys(env.solvers, solver),
                "judge": 1.0,
            }


def test_an_erring_oracle_solver_is_judged_truthfully() -> None:
    env = ProposerSolverJudge(num_solvers=4)
    bot, accuracies = MAEOracleBot(seed=2, error_rate=0.5), []
    for seed in range(20):
        env.reset(seed=seed)
        while not env.is_over:
            env.step(bot.act(env, env.agent_selection))
        metrics = env.infos["judge"]["mae"]
        assert metrics["judge_accuracy"] == 1.0
        assert env.returns["proposer"] == 0.5 + 0.5 * (1 - metrics["solver_accuracy"])
        accuracies.append(metrics["solver_accuracy"])
    assert 0.3 < sum(accuracies) / len(accuracies) < 0.7


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"num_solvers": 1},
        {"num_solvers": 3, "family": "ordering"},
        {"num_solvers": 8, "family": "ordering", "max_people": 2, "max_rank": 1},
    ],
)
def test_conformance(kwargs: dict) -> None:
    report = check_game(lambda **kw: ProposerSolverJudge(**kwargs, **kw))
    assert report.passed, report.table()
    hidden = next(r for r in report.results if r.name == "hidden_info")
    assert "hidden strings absent" in hidden.detail  # the check had something to check
