"""games/interaction.py: graph validation, who may see which post, leak detection, rendering.

Run with `.venv/bin/python -m pytest -q tests/games/test_interaction.py`.
"""

from __future__ import annotations

import networkx as nx
import pytest

from games.interaction import (
    Interacting,
    Interaction,
    InteractionError,
    Post,
    public_graph,
    render,
    validate,
)

SEATS = ["proposer", "solver", "judge"]


def triangle() -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_node("proposer", role="proposer-v0")
    graph.add_node("solver", role="solver-v0", never_sees={"answer"})
    graph.add_node("judge", role="judge-v0")
    graph.add_node("tools")
    graph.add_edge("proposer", "solver", sees=frozenset({"question"}))
    graph.add_edge("proposer", "judge", sees=frozenset({"question", "answer"}))
    graph.add_edge("solver", "judge", sees=frozenset({"answer"}))
    graph.add_edge("tools", "solver", sees=frozenset({"tool_result"}))
    return graph


def test_public_graph_lets_every_seat_see_every_other_seats_actions() -> None:
    graph = public_graph(["a", "b", "c"])
    assert sorted(graph.edges) == [
        ("a", "b"),
        ("a", "c"),
        ("b", "a"),
        ("b", "c"),
        ("c", "a"),
        ("c", "b"),
    ]
    assert {graph.nodes[n]["role"] for n in graph} == {"player-v0"}
    Interaction(graph, ["a", "b", "c"], "a")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda g: g.remove_node("judge"), r"seats \['judge'\] are not nodes"),
        (lambda g: g.nodes["judge"].pop("role"), r"seats \['judge'\] have no 'role'"),
        (
            lambda g: g.remove_edges_from([("proposer", "judge"), ("solver", "judge")]),
            r"seats \['judge'\] are unreachable from proposer",
        ),
        (
            lambda g: g.add_edge("proposer", "solver", sees=frozenset({"question", "answer"})),
            r"edge proposer -> solver shows \['answer'\], which solver-v0 must never see",
        ),
        (lambda g: g.add_edge("judge", "proposer", sees=set()), "needs a non-empty 'sees' set"),
    ],
)
def test_validate_names_what_is_wrong(mutate, message: str) -> None:
    graph = triangle()
    mutate(graph)
    with pytest.raises(InteractionError, match=message):
        validate(graph, SEATS, "proposer")


def test_who_may_see_which_post() -> None:
    rules = Interaction(triangle(), SEATS, "proposer")
    question = Post("proposer", "question", "What is 2 + 2?")
    key = Post("proposer", "answer", "four, of course")
    attempt = Post("solver", "answer", "I say 5")
    assert [rules.may_see(v, question) for v in SEATS] == [True, True, True]
    assert [rules.may_see(v, key) for v in SEATS] == [True, False, True]
    assert [rules.may_see(v, attempt) for v in SEATS] == [False, True, True]
    posts = [question, key, attempt, Post("tools", "tool_result", "2 + 2 = 4")]
    assert rules.visible("solver", posts) == [question, attempt, posts[3]]
    assert rules.visible("proposer", posts) == [question, key]
    rules.check_send(question, SEATS)
    with pytest.raises(InteractionError, match="proposer -> solver carrying 'answer'"):
        rules.check_send(key, ["judge", "solver"])


def test_leaks_are_found_in_what_a_seat_is_shown() -> None:
    rules = Interaction(triangle(), SEATS, "proposer")
    key = Post("proposer", "answer", "four, of course")
    short = Post("proposer", "answer", "4")
    posts = [Post("proposer", "question", "What is 2 + 2? Say four, of course."), key, short]
    # The key is also part of the question the solver may see: not a leak.
    assert rules.leaks("solver", "... four, of course ...", posts) == []
    secret = [Post("proposer", "question", "What is 2 + 2?"), key, short]
    assert rules.leaks("solver", "hint: four, of course", secret) == [key]
    assert rules.leaks("judge", "hint: four, of course", secret) == []  # the judge may see it
    assert rules.leaks("solver", "the answer is 4", secret) == []  # too short to check


def test_render_lines() -> None:
    posts = [Post("proposer", "question", "Two lines:\nsecond"), Post("solver", "answer", "5")]
    assert render(posts) == "proposer (question): Two lines:\nsecond\nsolver (answer): 5"
    assert render([]) == ""


class _Board(Interacting):
    """A two-seat game with the default (public) graph and one secret each."""

    def __init__(self) -> None:
        self.possible_agents = ["player_0", "player_1"]
        self.posts = []

    def private_info(self, agent: str) -> list[str]:
        return [f"card of {agent}"]


def test_a_game_sees_public_actions_and_not_the_others_secrets() -> None:
    game = _Board()
    game._post("player_1", "action", "b2")
    game._post("player_1", "note", "a private note")
    assert game.seat_role("player_0") == "player-v0" and not game.simulatable("player_0")
    assert game.history_text("player_0") == "player_1 (action): b2"
    assert game.hidden_from("player_0") == ["card of player_1", "player_1 (note): a private note"]
    assert game.hidden_from("player_1") == ["card of player_0"]
