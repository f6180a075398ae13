"""``arena show-game ID [-o FILE.png] [-p key=value ...]``: a game's seats and interaction graph.

Prints the game's spec line, then one line per seat (its role, whether a simulator may fill it,
what it never sees) and one per edge of the interaction graph (``proposer -> solver_0 sees
question``: the posts of which fields travel along it), and writes the graph as a PNG (default
``<id>.png`` in the current directory; ``-o -`` writes none). Seats are drawn as boxes labelled
with their roles, non-seat sources (``tools``) as grey circles, edges with the fields they carry.
An ID is a registered id or a ``module:Factory``; ``-p`` passes constructor arguments, as for
``arena check-game``. Exits 1 when the game's graph is invalid, naming what is wrong.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from arena.commands.check_game import add_param_argument

    parser.add_argument("id", metavar="ID", help="registered game id (or module:Factory)")
    parser.add_argument(
        "-o", "--output", default=None, help="PNG to write (default: ID.png; '-' for none)"
    )
    add_param_argument(parser)


def describe(env: Any) -> list[str]:
    """The seat and edge lines that ``show-game`` prints."""
    graph = env.interaction.graph
    lines = ["seats:"]
    for agent in env.possible_agents:
        node = graph.nodes[agent]
        extras = []
        if node.get("simulatable"):
            extras.append("simulatable")
        if node.get("never_sees"):
            extras.append(f"never sees {', '.join(sorted(node['never_sees']))}")
        suffix = f"  ({'; '.join(extras)})" if extras else ""
        lines.append(f"  {agent}: {node['role']}{suffix}")
    sources = [n for n in graph.nodes if n not in env.possible_agents]
    if sources:
        lines.append(f"sources: {', '.join(map(str, sources))}")
    lines.append("edges:")
    for sender, viewer, data in graph.edges(data=True):
        lines.append(f"  {sender} -> {viewer} sees {', '.join(sorted(data['sees']))}")
    return lines


def draw(env: Any, path: Path, title: str) -> None:
    """Write the interaction graph as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    graph = env.interaction.graph
    seats = [n for n in graph.nodes if n in env.possible_agents]
    sources = [n for n in graph.nodes if n not in env.possible_agents]
    layout = nx.circular_layout(graph) if len(graph) > 2 else nx.spring_layout(graph, seed=0)
    fig, ax = plt.subplots(figsize=(7, 6))
    nx.draw_networkx_nodes(
        graph, layout, nodelist=seats, node_color="#cfe3f6", node_size=2600, node_shape="s", ax=ax
    )
    nx.draw_networkx_nodes(
        graph, layout, nodelist=sources, node_color="#dddddd", node_size=1800, ax=ax
    )
    labels = {n: f"{n}\n{graph.nodes[n]['role']}" if n in seats else str(n) for n in graph.nodes}
    nx.draw_networkx_labels(graph, layout, labels=labels, font_size=8, ax=ax)
    nx.draw_networkx_edges(
        graph, layout, node_size=2600, arrowsize=14, connectionstyle="arc3,rad=0.12", ax=ax
    )
    edge_labels = {(u, v): ", ".join(sorted(d["sees"])) for u, v, d in graph.edges(data=True)}
    nx.draw_networkx_edge_labels(
        graph,
        layout,
        edge_labels=edge_labels,
        font_size=7,
        label_pos=0.35,
        connectionstyle="arc3,rad=0.12",
        ax=ax,
    )
    ax.set_title(title)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    import games
    from arena.commands.check_game import target
    from arena.core.config import parse_assignments
    from games.interaction import InteractionError

    env = target(args.id, parse_assignments(args.param))()
    try:
        lines = describe(env)
    except InteractionError as err:
        print(f"{args.id}: invalid interaction graph: {err}", file=sys.stderr)
        return 1
    if ":" not in args.id:
        spec = games.spec(args.id)
        print(f"{args.id}: {spec.kind}, {spec.information} information, seats {spec.seats}")
    print("\n".join(lines))
    if args.output != "-":
        path = Path(args.output or f"{args.id.replace(':', '_')}.png")
        draw(env, path, args.id)
        print(f"wrote {path}")
    return 0
