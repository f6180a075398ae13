"""Who sends to whom and who sees what: a game's interaction graph, and the posts it carries.

Role games are conversations: a proposer writes a question, solvers answer it, a judge scores
both. Every message is a :class:`Post` with a *field* (``question``, ``answer``, ``score``,
``tool_call``, ``tool_result``, ``message``, ``action``), sent by a seat or by a non-seat source
such as ``tools``. The game declares, as a ``networkx.DiGraph``, which posts reach which seat:

- **nodes** are the seats (attribute ``role``: the role id that plays it) and the non-seat
  sources (``role=None``);
- an **edge** ``u -> v`` with attribute ``sees`` (a set of field names) means seat ``v`` is
  shown the posts of ``u`` in those fields, and only those;
- a seat always sees its own posts;
- a node may list ``never_sees`` (fields it must never be shown, from anyone), e.g. a solver never
  sees an ``answer`` key written by the proposer.

:func:`validate` checks the graph when a game is built: every seat is a node with a role, every
seat can be reached from the seat that moves first, and no edge carries a field its target's
``never_sees`` forbids. The game shows a seat its history through :meth:`visible` (nothing else
is rendered by roles), and the episode runner checks each prompt with :meth:`Interaction.leaks`:
the text of a post the seat may not see must not appear in what it is shown. A leak ends the
episode with an error; it is never trained on.

Player games need not declare anything: :func:`public_graph` (every seat sees every other seat's
``action``, the public board) is their graph, and private information stays the business of
``TextGame.private_info``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

LEAK_MIN_CHARS = 8
"""Posts shorter than this are not checked for leaks: ``"42"`` or ``"yes"`` appear in honest text
by chance. Games keep secrets worth checking longer than this (an answer phrase, a goal)."""


class InteractionError(ValueError):
    """An interaction graph that breaks the rules of :func:`validate`, or a post along an edge
    the graph does not have."""


class VisibilityError(RuntimeError):
    """A seat was about to be shown a post its interaction graph forbids it to see."""

    def __init__(self, viewer: str, post: Post) -> None:
        self.viewer = viewer
        self.post = post
        super().__init__(
            f"{viewer} may not see {post.sender}'s {post.field!r} post "
            f"({post.text[:40]!r}), yet it appears in {viewer}'s prompt"
        )


@dataclass(frozen=True)
class Post:
    """One message in a game: who wrote it, what kind of content it is, and the text."""

    sender: str
    """A seat (``solver_0``) or a non-seat source of the graph (``tools``)."""
    field: str
    """What the text is: ``question``, ``answer``, ``score``, ``message``, ``tool_call``, ..."""
    text: str


def public_graph(agents: Sequence[str], role: str = "player-v0") -> nx.DiGraph:
    """The graph of a game whose seats all see the public record: every seat sees every other
    seat's ``action``."""
    graph = nx.DiGraph()
    for agent in agents:
        graph.add_node(agent, role=role)
    for sender in agents:
        for viewer in agents:
            if sender != viewer:
                graph.add_edge(sender, viewer, sees=frozenset({"action"}))
    return graph


def validate(graph: nx.DiGraph, agents: Sequence[str], first: str) -> None:
    """Raise :class:`InteractionError` unless every seat is a node with a role, every seat is
    reachable from ``first`` (the seat that moves first), and no edge shows a node a field its
    ``never_sees`` forbids."""
    missing = [a for a in agents if a not in graph]
    if missing:
        raise InteractionError(f"seats {missing} are not nodes of the interaction graph")
    roleless = [a for a in agents if not graph.nodes[a].get("role")]
    if roleless:
        raise InteractionError(f"seats {roleless} have no 'role' in the interaction graph")
    reached = nx.descendants(graph, first) | {first}
    unreachable = [a for a in agents if a not in reached]
    if unreachable:
        raise InteractionError(
            f"seats {unreachable} are unreachable from {first}: nothing they are shown comes "
            "from the game's first mover"
        )
    for sender, viewer, data in graph.edges(data=True):
        sees = data.get("sees")
        if not isinstance(sees, (set, frozenset)) or not sees:
            raise InteractionError(f"edge {sender} -> {viewer} needs a non-empty 'sees' set")
        forbidden = set(graph.nodes[viewer].get("never_sees", ())) & set(sees)
        if forbidden:
            raise InteractionError(
                f"edge {sender} -> {viewer} shows {sorted(forbidden)}, which "
                f"{graph.nodes[viewer].get('role') or viewer} must never see"
            )


class Interaction:
    """A validated interaction graph and the checks made with it."""

    def __init__(self, graph: nx.DiGraph, agents: Sequence[str], first: str) -> None:
        validate(graph, agents, first)
        self.graph = graph
        self.agents = tuple(agents)

    def may_see(self, viewer: str, post: Post) -> bool:
        if post.sender == viewer:
            return True
        if post.field in self.graph.nodes[viewer].get("never_sees", ()):
            return False
        edge = self.graph.get_edge_data(post.sender, viewer)
        return edge is not None and post.field in edge["sees"]

    def check_send(self, post: Post, to: Iterable[str]) -> None:
        """Raise :class:`InteractionError` when ``post`` is addressed along a missing edge."""
        for viewer in to:
            if viewer != post.sender and not self.may_see(viewer, post):
                raise InteractionError(
                    f"{post.sender} -> {viewer} carrying {post.field!r} is not an edge of the "
                    "interaction graph"
                )

    def visible(self, viewer: str, posts: Iterable[Post]) -> list[Post]:
        """The posts ``viewer`` may be shown, in order."""
        return [p for p in posts if self.may_see(viewer, p)]

    def leaks(self, viewer: str, shown: str, posts: Iterable[Post]) -> list[Post]:
        """Posts ``viewer`` may not see whose text (at least :data:`LEAK_MIN_CHARS` long, and not
        also said in a post it may see) appears in ``shown``."""
        posts = list(posts)
        allowed = {p.text.strip() for p in posts if self.may_see(viewer, p)}
        found = []
        for post in posts:
            text = post.text.strip()
            if (
                len(text) >= LEAK_MIN_CHARS
                and not self.may_see(viewer, post)
                and text not in allowed
                and not any(text in a for a in allowed)
                and text in shown
            ):
                found.append(post)
        return found


def render(posts: Iterable[Post]) -> str:
    """A seat's visible posts as ``sender (field): text`` lines, oldest first: the history block
    of its observation (``TextGame.history_text``) and what roles render (``roles.render_posts``).
    Text is kept verbatim (only stripped), so the leak check finds a post's text in a prompt
    exactly as it was written."""
    return "\n".join(f"{p.sender} ({p.field}): {p.text.strip()}" for p in posts)


class Interacting:
    """Who sees what, for a game: the seat half of :class:`games.text_env.TextGame`, which reads
    the game's ``possible_agents`` and ``posts``.

    Role games (a proposer, solvers and a judge; an agent and a simulated user) name their seats
    (``agents=[...]``), record what each seat says as posts (``self._post(sender, field,
    text)``) and declare who sees which posts with :meth:`interaction_graph`: the graph's nodes
    give each seat its role id (:meth:`seat_role`), the role's arguments (:meth:`role_kwargs`)
    and whether a simulator may fill it (:meth:`simulatable`); each seat's visible posts open its
    observation text, and :meth:`simulator_context` is what a simulator of the seat may know."""

    possible_agents: list[str]
    posts: list[Post]

    def interaction_graph(self) -> nx.DiGraph:
        """Who sends to whom and who sees what; role games override it (see
        :mod:`games.interaction` for the node and edge attributes). The default: every seat plays
        the player role and sees every other seat's ``action`` (the public board)."""
        return public_graph(self.possible_agents)

    @functools.cached_property
    def interaction(self) -> Interaction:
        """The validated interaction graph (built on first use)."""
        return Interaction(self.interaction_graph(), self.possible_agents, self.possible_agents[0])

    def seat_role(self, agent: str) -> str:
        """The role id that plays ``agent``'s seat."""
        return self.interaction.graph.nodes[agent]["role"]

    def role_kwargs(self, agent: str) -> dict[str, Any]:
        """Keyword arguments the game gives the role of ``agent`` (its instruction, example)."""
        return dict(self.interaction.graph.nodes[agent].get("role_kwargs", {}))

    def simulatable(self, agent: str) -> bool:
        """Whether a simulator may fill ``agent``'s seat instead of a policy."""
        return bool(self.interaction.graph.nodes[agent].get("simulatable", False))

    def simulator_context(self, agent: str) -> dict[str, Any]:
        """What a simulator filling ``agent``'s seat may know (a user's hidden goal, persona)."""
        return {}

    def _post(self, sender: str, field: str, text: str) -> Post:
        """Record a message; seats see it as their interaction graph allows."""
        post = Post(sender, field, str(text))
        self.posts.append(post)
        return post

    def visible_posts(self, agent: str) -> list[Post]:
        return self.interaction.visible(agent, self.posts)

    def history_text(self, agent: str) -> str:
        """The posts ``agent`` may see, rendered; the start of its observation text."""
        return render(self.visible_posts(agent))

    def private_info(self, agent: str) -> list[str]:
        """Strings in ``agent``'s text that no other seat may ever see while the game is live (a
        hand of cards, a hidden goal). Posts are not listed here: the interaction graph says who
        sees them, and :meth:`hidden_from` adds them."""
        return []

    def hidden_from(self, agent: str) -> list[str]:
        """Strings that must not appear in ``agent``'s text while the game is live: the other
        seats' :meth:`private_info`, and every post the interaction graph keeps from ``agent``
        as its history would render it. A post is a secret of some seats only (a solver's answer
        is hidden from the other solvers, not from the judge), so posts belong here and never in
        ``private_info``."""
        secrets = [
            s for other in self.possible_agents if other != agent for s in self.private_info(other)
        ]
        return secrets + [render([p]) for p in self.posts if not self.interaction.may_see(agent, p)]
