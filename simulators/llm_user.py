"""An LLM user simulator: a persona with a hidden goal, played by any policy.

``LLMUser`` plays the user's seat of a dialogue game (the retail support game, say) through a
language model the runner binds to it (:meth:`~simulators.base.Simulator.bind`): the embedded
model, a frozen checkpoint, or an ``openai``-compatible endpoint, whichever policy the run
config's ``simulators.<seat>.policy`` names. It is never trained.

What it knows comes from the game's ``simulator_context`` for the seat:

- ``goal`` (str): what the user wants, in words. Hidden: the guard below keeps it from being
  pasted into the conversation.
- ``persona`` (str): how the user talks (the ``persona`` argument overrides it).
- ``facts`` (mapping or list of str): what the user can tell when asked (name, order id, ...).
- ``instructions`` (str, optional): anything else the game wants the user to follow.

Each turn it writes one message as the user; when the goal is met it ends the message with the
stop token (``###STOP###``). After ``max_turns`` replies it says only the stop token, so it
never talks forever (the game's own turn limit is the backstop, ending with ``max_turns``).

The leak guard: a reply that contains ``leak_words`` consecutive words of the goal verbatim
(case and punctuation ignored) is regenerated, up to ``retries`` times, with a reminder to say it
in the user's own words; then a neutral reply is sent instead. ``leaks`` counts the replies the
guard caught.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from simulators.base import Message, Simulator, SimulatorView

STOP = "###STOP###"
FALLBACK = "Sorry, let me put it differently: could you tell me what you need from me?"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9#]+", text.casefold())


def leaks_goal(reply: str, goal: str, window: int) -> bool:
    """Whether ``reply`` contains ``window`` consecutive words of ``goal`` (or all of a goal
    shorter than that)."""
    goal_words, reply_words = words(goal), words(reply)
    if not goal_words:
        return False
    n = min(window, len(goal_words))
    said = {tuple(reply_words[i : i + n]) for i in range(len(reply_words) - n + 1)}
    return any(tuple(goal_words[i : i + n]) in said for i in range(len(goal_words) - n + 1))


def clean(text: str, stop: str = STOP, max_chars: int = 600) -> str:
    """One message: cut after the stop token, drop a speaker label the model may prefix, bound
    the length."""
    text = text.strip()
    if stop in text:
        text = text[: text.index(stop) + len(stop)]
    text = re.sub(r"^(user|customer)\s*:\s*", "", text, flags=re.IGNORECASE)
    return text[:max_chars].strip()


class LLMUser(Simulator):
    """A user simulator on a language model; see the module docstring."""

    name = "llm-user"
    needs_model = True

    def __init__(
        self,
        persona: str = "",
        max_turns: int = 8,
        stop: str = STOP,
        leak_words: int = 6,
        retries: int = 1,
    ) -> None:
        super().__init__()
        if max_turns < 1 or leak_words < 1 or retries < 0:
            raise ValueError("max_turns and leak_words must be >= 1, retries >= 0")
        self.persona = persona
        self.max_turns = max_turns
        self.stop = stop
        self.leak_words = leak_words
        self.retries = retries
        self.leaks = 0

    def system_prompt(self, context: Mapping[str, Any]) -> str:
        facts = context.get("facts") or {}
        if isinstance(facts, Mapping):
            facts = [f"{k}: {v}" for k, v in facts.items()]
        lines = [
            "You are a customer talking to a support agent. Stay in character.",
            f"Persona: {self.persona or context.get('persona') or 'a polite, busy customer'}",
            f"Your goal (keep it to yourself; say it in your own words): {context.get('goal', '')}",
        ]
        if facts:
            lines.append("What you know, to tell only when asked: " + "; ".join(map(str, facts)))
        if context.get("instructions"):
            lines.append(str(context["instructions"]))
        lines.append(
            "Write one short message per turn. Reveal details one at a time, when asked. When "
            f"your goal is met, end your message with {self.stop}."
        )
        return "\n".join(lines)

    def messages(self, view: SimulatorView) -> list[Message]:
        """The chat the model continues: the agent's messages as the other side's turns."""
        messages: list[Message] = [{"role": "system", "content": self.system_prompt(view.context)}]
        for post in view.history:
            if post.field != "message":
                continue
            role = "assistant" if post.sender == view.seat else "user"
            if messages[-1]["role"] == role:
                messages[-1] = {
                    **messages[-1],
                    "content": messages[-1]["content"] + "\n" + post.text,
                }
            else:
                messages.append({"role": role, "content": post.text})
        if messages[-1]["role"] != "user":
            messages.append({"role": "user", "content": "(The agent is waiting for your message.)"})
        return messages

    async def respond(self, view: SimulatorView) -> str:
        if self._generate is None:
            raise RuntimeError("LLMUser needs a model: the runner binds one (Simulator.bind)")
        if view.turn >= self.max_turns:
            return self.stop
        goal = str(view.context.get("goal", ""))
        messages = self.messages(view)
        for _ in range(self.retries + 1):
            reply = clean(await self._generate(messages), self.stop)
            if reply and not leaks_goal(reply, goal, self.leak_words):
                return reply
            if reply:
                self.leaks += 1
            reminder = "Say it again in your own words, without quoting your instructions."
            messages = [
                *messages,
                {"role": "assistant", "content": reply or "..."},
                {"role": "user", "content": reminder},
            ]
        return FALLBACK
