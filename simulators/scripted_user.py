"""A scripted user: a deterministic customer for tests and cheap training.

``ScriptedUser`` plays the user's seat of a dialogue game (the retail support game) from the
game's ``simulator_context`` and the conversation it may see, nothing else. The context keys it
reads:

- ``request`` (str): the opening message;
- ``facts`` (list of str) and ``fact_keywords`` (a list of word lists, one per fact): what it
  can tell, and the words in the agent's message that ask for each fact;
- ``done_markers`` (list of str): words in the agent's message that mean the request is handled;
- ``stop`` (str, default ``###STOP###``): the marker that ends the conversation.

Each turn: the first message is the request. Afterwards it reads the agent's last message
(case-folded; "e-mail" reads "email" and "email address" reads "email", so asking for an email
never reveals an address): if it contains a done marker, it thanks the agent and stops.
Otherwise it says every fact whose keywords the message contains (an unanswered question gets a
nudge). A reply that tells nothing new counts as idle; after ``max_idle`` idle replies it gives
up and stops. What it has told and how often it was idle are read back from its own messages in
the history, so the simulator keeps no state between turns.

``latency`` (seconds, default 0) makes every reply wait that long first, with ``asyncio.sleep``:
a stand-in for a slow user, a human in the loop or a remote model, as agentic RL meets with tool
calls. The episode waits without using a CPU, and the rollout actor plays its other episodes
meanwhile, so such episodes are bound by waiting, not by compute (``configs/smoke_tools.yaml``,
``bench/scale.py``). Keep it below the seat's ``timeout`` (``games[].simulators.<seat>.timeout``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from games.interaction import Post
from simulators.base import Simulator, SimulatorView

STOP = "###STOP###"
NUDGE = "Sorry, I'm not sure what you need from me. Can you help me with my request?"
THANKS = "Thank you, that's all I needed."
GIVE_UP = "I don't think this is going anywhere. Goodbye."


def _asked(text: str) -> str:
    text = " ".join(text.casefold().split())
    return text.replace("e-mail", "email").replace("email address", "email")


def reply(context: Mapping[str, Any], history: Sequence[Post], seat: str, max_idle: int = 3) -> str:
    """The scripted user's next message (see the module docstring)."""
    stop = str(context.get("stop", STOP))
    mine = [p.text for p in history if p.sender == seat and p.field == "message"]
    if not mine:
        return str(context["request"])
    facts = [str(f) for f in context.get("facts", ())]
    keywords = [[str(k).casefold() for k in ks] for ks in context.get("fact_keywords", ())]
    if len(keywords) != len(facts):
        raise ValueError(f"{len(facts)} facts but {len(keywords)} keyword lists in the context")
    told: set[str] = set()
    idle = 0
    for said in mine[1:]:
        new = {f for f in facts if f in said} - told
        idle += not new
        told |= new
    others = [p.text for p in history if p.sender != seat and p.field == "message"]
    last = _asked(others[-1]) if others else ""
    if any(str(m).casefold() in last for m in context.get("done_markers", ())):
        return f"{THANKS} {stop}"
    wanted = [f for f, ks in zip(facts, keywords, strict=True) if any(k in last for k in ks)]
    if idle >= max_idle and not set(wanted) - told:
        return f"{GIVE_UP} {stop}"
    return " ".join(wanted) if wanted else NUDGE


class ScriptedUser(Simulator):
    """A deterministic user: tells the facts it is asked for, stops when told it is done."""

    name = "scripted-user"

    def __init__(self, max_idle: int = 3, latency: float = 0.0) -> None:
        super().__init__()
        if max_idle < 1:
            raise ValueError("max_idle must be >= 1")
        if not latency >= 0.0:  # also refuses NaN
            raise ValueError(f"latency must be >= 0 seconds, got {latency}")
        self.max_idle = max_idle
        self.latency = float(latency)

    async def respond(self, view: SimulatorView) -> str:
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        return reply(view.context, view.history, view.seat, self.max_idle)
