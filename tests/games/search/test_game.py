"""Search Self-Play: hand-checked transcripts and rewards, RAG validation, what each seat sees,
malformed and illegal replies, the scripted bot, and conformance.

Run with ``.venv/bin/python -m pytest -q tests/games/search/test_game.py``.
"""

from __future__ import annotations

import json

import pytest

from games.bots.search import SearchBot
from games.conformance import check_game
from games.search.corpus import Fact, Question
from games.search.game import PROPOSER, SOLVER, VALIDATOR, SearchSelfPlay


def search(query: str) -> str:
    return f'<tool_call>{{"name": "search", "arguments": {{"query": "{query}"}}}}</tool_call>'


def propose(question: Question) -> str:
    return f"<question>{question.text}</question><answer>{question.answer}</answer>"


def new_game(**kwargs: object) -> tuple[SearchSelfPlay, Question]:
    env = SearchSelfPlay(**kwargs)
    env.reset(seed=0)
    fact = next(f for f in env.corpus.facts if f.relation == "born_in")
    return env, env.corpus.question_for(fact)


def play(env: SearchSelfPlay, *texts: str) -> None:
    for text in texts:
        assert not env.is_over, f"the game ended before {text!r}"
        env.step_text(text)


def rewards(env: SearchSelfPlay) -> dict[str, float]:
    return dict(env._cumulative_rewards)


# -- hand-checked transcripts ----------------------------------------------------------------------
def test_a_valid_question_the_solver_misses_pays_the_proposer() -> None:
    env, question = new_game()
    play(env, search(question.subject), propose(question))
    assert env.agent_selection == VALIDATOR
    play(env, f"\\boxed{{{question.answer}}}")
    assert env.agent_selection == SOLVER and env.proposal_valid is True
    play(env, "\\boxed{Nowhere}")
    assert env.is_over and env.infos[SOLVER]["termination_reason"] == "done"
    assert rewards(env) == {PROPOSER: 1.0, VALIDATOR: 0.0, SOLVER: 0.0}
    assert env.infos[PROPOSER]["solver_correct"] is False
    assert env.infos[PROPOSER]["proposer_searches"] == 1


def test_a_solver_that_searches_and_answers_right_takes_the_point() -> None:
    env, question = new_game()
    play(env, search(question.subject), propose(question), f"\\boxed{{{question.answer}}}")
    play(env, search(question.text))
    assert env.agent_selection == SOLVER and env.searches[SOLVER] == 1
    # the answer matches apart from case, punctuation and a leading article
    play(env, f"\\boxed{{the {question.answer.upper()}.}}")
    assert rewards(env) == {PROPOSER: 0.0, VALIDATOR: 0.0, SOLVER: 1.0}
    assert env.infos[SOLVER]["solver_searches"] == 1 and env.solver_correct is True


def test_a_question_that_contains_its_answer_is_invalid_at_once() -> None:
    env, question = new_game(invalid_penalty=0.5)
    play(
        env,
        f"<question>Was {question.subject} born in {question.answer}?</question>"
        f"<answer>{question.answer}</answer>",
    )
    assert env.is_over and env.proposal_valid is False
    assert rewards(env) == {PROPOSER: -0.5, VALIDATOR: 0.0, SOLVER: 0.0}


def test_a_question_the_validator_answers_differently_is_invalid() -> None:
    env, question = new_game(validator_reward=0.25)
    # no search: the validator sees only distractors, so it cannot confirm the answer
    play(env, propose(question), "\\boxed{Unknown}")
    assert env.is_over and env.proposal_valid is False and env.solver_correct is None
    assert rewards(env) == {PROPOSER: -1.0, VALIDATOR: 0.0, SOLVER: 0.0}


def test_the_validator_is_paid_its_agreement_reward_when_it_matches() -> None:
    env, question = new_game(validator_reward=0.25)
    play(env, search(question.subject), propose(question), f"\\boxed{{{question.answer}}}")
    play(env, f"\\boxed{{{question.answer}}}")
    assert rewards(env) == {PROPOSER: 0.0, VALIDATOR: 0.25, SOLVER: 1.0}


def test_the_validator_reads_the_proposers_documents_plus_distractors() -> None:
    env, question = new_game(k=2, distractors=3)
    play(env, search(question.subject), propose(question))
    found = env.seen_docs(PROPOSER)
    # a person's name is in no other document of this corpus: the search finds the gold one only
    assert [d.id for d in found] == [question.gold_doc_id]
    context = env.seen_docs(VALIDATOR)
    assert len(context) == 1 + 3 and set(found) <= set(context)
    again, _ = new_game(k=2, distractors=3)
    play(again, search(question.subject), propose(question))
    assert again.seen_docs(VALIDATOR) == context  # the seed fixes distractors and their order


def test_metrics_name_each_seats_headline_number_when_the_game_ends() -> None:
    env, question = new_game()
    play(env, search(question.subject), propose(question), f"\\boxed{{{question.answer}}}")
    assert "metrics" not in env.infos[PROPOSER]
    play(env, "\\boxed{Nowhere}")
    assert env.truth() == question.answer
    assert env.infos[PROPOSER]["metrics"] == {"valid": 1.0, "solver_failed": 1.0}
    assert env.infos[VALIDATOR]["metrics"] == {"validator_accuracy": 1.0}
    assert env.infos[SOLVER]["metrics"] == {"solver_accuracy": 0.0}


def test_an_invalid_proposal_scores_the_validator_against_the_corpus() -> None:
    env, question = new_game()
    # a wrong answer: the validator, reading the gold document, disagrees, and is right to
    play(
        env, search(question.subject), f"<question>{question.text}</question><answer>Kast</answer>"
    )
    play(env, f"\\boxed{{{question.answer}}}")
    assert env.is_over and env.proposal_valid is False
    assert env.infos[PROPOSER]["metrics"] == {"valid": 0.0}
    assert env.infos[VALIDATOR]["metrics"] == {"validator_accuracy": 1.0}
    assert "metrics" not in env.infos[SOLVER]


def test_a_forfeit_costs_the_forfeiter_only_in_this_general_sum_game() -> None:
    env, question = new_game(max_retries=0)
    play(env, search(question.subject), propose(question), "\\boxed{}")
    assert env.is_over and env.infos[VALIDATOR]["forfeit"]
    assert rewards(env) == {PROPOSER: 0.0, VALIDATOR: -1.0, SOLVER: 0.0}
    assert env.infos[VALIDATOR]["metrics"] == {"validator_accuracy": 0.0}


# -- who sees what ---------------------------------------------------------------------------------
def test_no_seat_reads_what_the_graph_keeps_from_it() -> None:
    env, question = new_game()
    play(env, search(question.subject), propose(question))
    validator = env.observe(VALIDATOR)["text"]
    assert f"proposer (question): {question.text}" in validator
    assert "retriever (documents): (1)" in validator
    assert "proposer (answer)" not in validator and "proposer (tool_result)" not in validator
    play(env, f"\\boxed{{{question.answer}}}")
    solver = env.observe(SOLVER)["text"]
    assert question.text in solver
    for hidden in ("(answer)", "(tool_result)", "(tool_call)", "retriever (documents)"):
        assert hidden not in solver
    # what the conformance kit checks: every post the graph keeps from a seat is in hidden_from
    assert "proposer (answer): " + question.answer in env.hidden_from(SOLVER)
    kept_from_proposer = env.hidden_from(PROPOSER)
    assert [s.split(":")[0] for s in kept_from_proposer] == [
        "retriever (documents)",
        "validator (answer)",
    ]


def test_a_graph_that_shows_the_solver_the_answer_is_refused() -> None:
    class Leaky(SearchSelfPlay):
        def interaction_graph(self):  # type: ignore[no-untyped-def]
            graph = super().interaction_graph()
            graph.add_edge(PROPOSER, SOLVER, sees=frozenset({"question", "answer"}))
            return graph

    env = Leaky()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="answer"):
        env.interaction  # noqa: B018


# -- bad input -------------------------------------------------------------------------------------
def test_malformed_and_illegal_replies_get_feedback_then_a_forfeit() -> None:
    env, question = new_game()
    play(env, "I would like to ask about rivers.")
    assert env.infos[PROPOSER]["invalid"] and env.agent_selection == PROPOSER
    play(env, search(question.subject), propose(question))
    play(env, search("anything"))  # the validator may not search
    assert env.infos[VALIDATOR]["invalid"]
    assert "cannot search" in env.infos[VALIDATOR]["invalid_reason"]
    play(env, "\\boxed{one two three four five six}")  # over five words
    assert env.infos[VALIDATOR]["retries"] == 2 and not env.is_over
    play(env, "\\boxed{}")  # the third rejected reply forfeits (max_retries=2)
    assert env.is_over and env.infos[VALIDATOR]["forfeit"]
    assert env.infos[VALIDATOR]["termination_reason"] == "illegal"


def test_a_bad_tool_call_uses_a_search_and_reports_the_error() -> None:
    env, question = new_game(max_searches=2)
    play(env, '<tool_call>{"name": "browse", "arguments": {"url": "x"}}</tool_call>')
    assert env.searches[PROPOSER] == 1 and "browse" in env.infos[PROPOSER]["tool_error"]
    play(env, search("zzzqqq"))
    assert env.infos[PROPOSER]["tool_error"] == "no document matched the query"
    play(env, search(question.subject))  # no searches left
    assert env.infos[PROPOSER]["invalid"] and "no searches left" in env.infos[PROPOSER]["feedback"]


# -- the scripted bot and conformance --------------------------------------------------------------
def test_the_scripted_bot_proposes_valid_questions_and_solves_them() -> None:
    env, bot = SearchSelfPlay(), SearchBot()
    for seed in range(30):
        env.reset(seed=seed)
        bot.reset(seed)
        while not env.is_over:
            env.step(bot.act(env, env.agent_selection))
        assert env.proposal_valid and env.solver_correct, env.posts
        assert rewards(env) == {PROPOSER: 0.0, VALIDATOR: 0.0, SOLVER: 1.0}


def test_the_scripted_validator_rejects_a_question_no_document_answers() -> None:
    env, bot = SearchSelfPlay(max_searches=1), SearchBot()
    env.reset(seed=0)
    fact = Fact("Nobody Known", "born_in", "Kast")
    bot.reset(0)
    assert json.loads(bot.act(env, PROPOSER))["name"] == "search"
    bot.fact = fact  # a question about no document: no seat can read its answer
    env.step_text(search("anything"))
    play(env, bot.act(env, PROPOSER))
    # spelled canonically: words that name nothing in the corpus are lower case
    assert env.question == "In which city was nobody known born?" and env.answer == "Kast"
    play(env, bot.act(env, VALIDATOR))
    assert env.is_over and env.proposal_valid is False
    assert env.posts[-1].text == "Unknown"


def test_search_selfplay_passes_the_conformance_kit() -> None:
    report = check_game(SearchSelfPlay, playthroughs=4, seed=0)
    assert report.passed, report.table()
    hidden = next(r for r in report.results if r.name == "hidden_info")
    assert "hidden strings absent" in hidden.detail
