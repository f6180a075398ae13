"""The text layer every Arena game shares: a PettingZoo ``AECEnv`` that also speaks text.

A game subclasses :class:`TextGame` and writes only its rules, as a handful of hooks:

- ``_new_game(rng)``: set up a fresh game; all randomness comes from ``rng``.
- ``_current_agent()``: whose turn it is (chance is resolved inside the game).
- ``_legal_actions(agent)``: the legal actions of the agent to move.
- ``_apply(agent, action) -> rewards``: play a legal action; return the rewards it earned.
- ``_outcome() -> reason | None``: why the game ended (``"win"``, ``"draw"``, ...), or None.
- ``_observation_array(agent)`` and ``_describe(agent)``: what the agent sees, as numbers and text.
- ``action_names`` (or ``action_to_text``/``parse_action``) and, with hidden information,
  ``private_info(agent)``.

Role games (a proposer, solvers and a judge; an agent and a simulated user) also name their
seats and say who sees what: see :class:`games.interaction.Interacting`, which this class is. A
game sets ``infos[agent]["group"]`` to group comparable turns (the k attempts at one problem) and
``infos[agent]["tool_error"]`` when a tool call failed.

Besides who sees what and the characters text may use (:mod:`games.text`), this class owns
everything, once: the PettingZoo bookkeeping, observations
``{"observation", "action_mask", "text"}``, the invalid-action policy (retry with feedback, then
forfeit: the forfeiter loses ``forfeit_penalty``, shared out to the others in a zero-sum game and
to nobody in any other kind), the turn limit, ``step_text``, and the ``infos`` every seat gets:

``invalid`` (bool, the agent's last action was rejected), ``invalid_reason``, ``retries`` (rejected
attempts on the current turn), ``invalid_count`` (rejected attempts this episode), ``forfeit``,
``feedback`` (the retry message also shown in the agent's text) and ``termination_reason``
(``None`` until the game ends; then ``win``, ``draw``, ``illegal`` (a forfeit), ``max_turns`` (a
truncation), or a game's own word such as ``agreement`` or ``out_of_lives``).

Free-text games (an action space of type ``Text``) carry no ``action_mask`` in their observation:
PettingZoo's test harness samples a masked ``Text`` space differently, and no finite mask can list
every well-formed sentence. Their ``legal_actions`` still lists the legal actions as canonical text.
"""

from __future__ import annotations

import copy
import functools
import inspect
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from games.hook_checks import check_legal_indices, checked_rewards, whole_number
from games.interaction import Interacting, Post
from games.text import normalize, text_space, to_charset

KINDS = ("competitive", "cooperative", "general-sum")
INFORMATION = ("perfect", "hidden")
LISTED_ACTIONS_MAX = 40
"""Legal actions are spelled out in the observation text when there are at most this many."""


class GameOverError(RuntimeError):
    """``step`` was called after every agent has left the game; call ``reset()`` first."""


class TextGame(Interacting, AECEnv):
    """Base class of every Arena game: PettingZoo AEC mechanics plus the text layer."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "text_game_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": False,
        "seats": (2, 2),
        "kind": "competitive",
        "information": "perfect",
        "max_turns": 100,
        "strongest_bot": "random-v0",
        # role games: the 0/1 ``infos[seat]["metrics"]`` that are a pass or a fail, for pass^k
        "pass_metrics": (),
    }
    rules_text: ClassVar[str | None] = None
    """Rules shown to every seat; ``None`` means the game module's docstring."""

    action_names: Sequence[str] = ()
    """Text of each action index, for games whose actions have fixed names."""

    def __init__(
        self,
        num_players: int,
        action_space: spaces.Space,
        observation_box: spaces.Box,
        *,
        max_turns: int | None = None,
        max_retries: int = 2,
        forfeit_penalty: float = 1.0,
        render_mode: str | None = None,
        agents: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        low, high = self.metadata["seats"]
        if not low <= num_players <= high:
            raise ValueError(
                f"{type(self).__name__} seats {low}..{high} players, got {num_players}"
            )
        # a command line's --game-arg max_retries=x would otherwise fail later, unreadably
        for name, value in (("max_retries", max_retries), ("forfeit_penalty", forfeit_penalty)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"{name} must be a number, got {value!r}")
        if max_retries < 0 or forfeit_penalty < 0:
            raise ValueError("max_retries and forfeit_penalty must be >= 0")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.num_players = num_players
        self.max_turns = whole_number(
            "max_turns", max_turns if max_turns is not None else self.metadata["max_turns"]
        )
        self.max_retries = max_retries
        self.forfeit_penalty = float(forfeit_penalty)
        self.render_mode = render_mode
        self.possible_agents = (
            [f"player_{i}" for i in range(num_players)] if agents is None else list(agents)
        )
        if len(self.possible_agents) != num_players or len(set(self.possible_agents)) != len(
            self.possible_agents
        ):
            raise ValueError(f"agents must be {num_players} distinct names, got {agents!r}")
        self.free_text = isinstance(action_space, spaces.Text)
        obs: dict[str, spaces.Space] = {"observation": observation_box, "text": text_space()}
        if not self.free_text:
            obs["action_mask"] = spaces.Box(0, 1, (action_space.n,), dtype=np.int8)
        # one space object per agent, so that seeding one agent's space leaves the others alone
        self.observation_spaces = {a: spaces.Dict(copy.deepcopy(obs)) for a in self.possible_agents}
        self.action_spaces = {a: copy.deepcopy(action_space) for a in self.possible_agents}
        self._rng: np.random.Generator | None = None
        self.agents: list[str] = []
        self.posts: list[Post] = []

    # -- metadata ------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.metadata["kind"]

    @property
    def information(self) -> str:
        return self.metadata["information"]

    @property
    def zero_sum(self) -> bool:
        """Whether final returns always sum to zero (checked by the conformance kit)."""
        return self.metadata.get("zero_sum", self.kind == "competitive")

    def agent_index(self, agent: str) -> int:
        return self.possible_agents.index(agent)

    def observation_space(self, agent: str) -> spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces[agent]

    # -- hooks a game implements ---------------------------------------------------------------
    def _new_game(self, rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _current_agent(self) -> str:
        raise NotImplementedError

    def _legal_actions(self, agent: str) -> list[Any]:
        raise NotImplementedError

    def _apply(self, agent: str, action: Any) -> Mapping[str, float]:
        raise NotImplementedError

    def _outcome(self) -> str | None:
        raise NotImplementedError

    def _observation_array(self, agent: str) -> np.ndarray:
        raise NotImplementedError

    def _describe(self, agent: str) -> str:
        raise NotImplementedError

    def _is_legal(self, agent: str, action: Any) -> bool:
        return action in self._legal_actions(agent)

    def _why_illegal(self, agent: str, action: Any) -> str:
        """Feedback for a well-formed but illegal action; games may be more specific."""
        return f"{self.action_to_text(agent, action)!r} is not a legal action now"

    # -- the text layer ------------------------------------------------------------------------
    def rules(self, agent: str | None = None) -> str:
        """The game's rules as prompt text; the game module's docstring unless overridden."""
        text = self.rules_text or inspect.getmodule(type(self)).__doc__ or ""
        return inspect.cleandoc(text)

    def action_to_text(self, agent: str, action: Any) -> str:
        if self.free_text:
            return str(action)
        return self.action_names[int(action)]

    def parse_action(self, agent: str, text: str) -> Any | None:
        """The action ``text`` names, or None when it is malformed or out of range."""
        if not isinstance(text, str):
            return None
        if self.free_text:
            raise NotImplementedError("free-text games define parse_action")
        return self._name_index.get(normalize(text))

    @functools.cached_property
    def _name_index(self) -> dict[str, int]:
        return {normalize(name): i for i, name in enumerate(self.action_names)}

    def observation_text(self, agent: str) -> str:
        """What ``agent`` reads: the game's description, then the turn, feedback and legal moves."""
        described = self._describe(agent)
        if not isinstance(described, str):  # "\n".join would fail unreadably, or not at all
            raise TypeError(
                f"{type(self).__name__}._describe({agent!r}) returned "
                f"{type(described).__name__}, not str: a seat's observation is text"
            )
        parts = [self.history_text(agent), described]
        if self.termination_reason is not None:
            parts.append(
                f"Game over ({self.termination_reason}). "
                f"Your total reward: {self.returns[agent]:+g}."
            )
        elif agent == self.agent_selection:
            parts += [
                self._feedback[agent],
                self._legal_line(agent),
                f"You are {agent}; it is your turn.",
            ]
        else:
            parts.append(f"You are {agent}; waiting for {self.agent_selection}.")
        return to_charset("\n".join(p for p in parts if p))

    def _legal_line(self, agent: str) -> str:
        """The legal actions spelled out, or their range when there are many; free text says
        its format in its description instead."""
        legal = [] if self.free_text else self.legal_actions(agent)
        if not legal:
            return ""
        names = [self.action_to_text(agent, a) for a in legal]
        if len(names) <= LISTED_ACTIONS_MAX:
            return f"Legal actions: {', '.join(names)}"
        return f"Legal actions: {len(names)} in all, from {names[0]} to {names[-1]}"

    # -- PettingZoo API ------------------------------------------------------------------------
    @property
    def is_over(self) -> bool:
        return self.termination_reason is not None

    def legal_actions(self, agent: str | None = None) -> list[Any]:
        """Legal actions of ``agent`` (default: the agent to move); empty when it may not move."""
        agent = self.agent_selection if agent is None else agent
        if self.is_over or agent != self.agent_selection:
            return []
        legal = list(self._legal_actions(agent))
        if not self.free_text:
            check_legal_indices(self, agent, legal, self.action_space(agent).n)
        return legal

    def action_mask(self, agent: str) -> np.ndarray:
        mask = np.zeros(self.action_space(agent).n, dtype=np.int8)
        mask[self.legal_actions(agent)] = 1
        return mask

    def observe(self, agent: str) -> dict[str, Any]:
        obs = {"observation": self._observation_array(agent), "text": self.observation_text(agent)}
        if not self.free_text:
            obs["action_mask"] = self.action_mask(agent)
        return obs

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.returns = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: self._fresh_info() for a in self.agents}
        self._retries = dict.fromkeys(self.agents, 0)
        self._feedback = dict.fromkeys(self.agents, "")
        self._skip_agent_selection = None
        self.turn = 0
        self.termination_reason: str | None = None
        self.posts = []
        self._new_game(self._rng)
        self.agent_selection = self._current_agent()

    @staticmethod
    def _fresh_info() -> dict[str, Any]:
        return {
            "invalid": False,
            "invalid_reason": "",
            "retries": 0,
            "invalid_count": 0,
            "forfeit": False,
            "feedback": "",
            "termination_reason": None,
        }

    def step(self, action: Any) -> None:
        if not self._live_step(action):
            return
        agent = self.agent_selection
        parsed, error = self._validate(agent, action)
        self._resolve(agent, parsed, error)

    def step_text(self, text: str) -> None:
        """Parse ``text`` for the agent to move and step; unparseable text is an invalid action."""
        if not isinstance(text, str):
            raise TypeError(f"step_text expects str, got {type(text).__name__}")
        agent = self.agent_selection
        if self.agents and (self.terminations[agent] or self.truncations[agent]):
            raise ValueError(f"{agent} is done; step(None) removes it, step_text cannot")
        if not self._live_step(text):
            return
        parsed = self.parse_action(agent, text)
        if parsed is None:
            self._resolve(agent, None, f"could not read {text.strip()[:80]!r} as an action")
        else:
            self._resolve(agent, *self._validate(agent, parsed))

    def _live_step(self, action: Any) -> bool:
        """PettingZoo's dead-agent step; False when the step is handled already."""
        if not self.agents:
            raise GameOverError("the game is over and every agent has left; call reset()")
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return False
        self._clear_rewards()
        self._cumulative_rewards[agent] = 0.0
        return True

    def _validate(self, agent: str, action: Any) -> tuple[Any, str | None]:
        """The action in canonical form and, if it may not be played, why not."""
        if action is None:
            return None, "no action was given"
        if self.free_text:
            parsed = self.parse_action(agent, action) if isinstance(action, str) else None
            if parsed is None:
                return None, f"could not read {str(action).strip()[:80]!r} as an action"
        elif isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            return None, f"expected an integer action index, got {type(action).__name__}"
        else:
            parsed = int(action)
            if not 0 <= parsed < self.action_space(agent).n:
                return None, f"action {parsed} is out of range 0..{self.action_space(agent).n - 1}"
        if not self._is_legal(agent, parsed):
            return parsed, self._why_illegal(agent, parsed)
        return parsed, None

    def _resolve(self, agent: str, action: Any, error: str | None) -> None:
        if error is None:
            self._accept(agent, action)
        else:
            self._reject(agent, error)
        self._accumulate_rewards()

    def _accept(self, agent: str, action: Any) -> None:
        self._retries[agent] = 0
        self._feedback[agent] = ""
        self.infos[agent].update(invalid=False, invalid_reason="", retries=0, feedback="")
        self._add_rewards(checked_rewards(self, agent, action, self._apply(agent, action)))
        self.turn += 1
        reason = self._outcome()
        if reason is not None:
            self._finish(reason)
        elif self.turn >= self.max_turns:
            self._finish("max_turns", truncated=True)
        else:
            self.agent_selection = self._current_agent()

    def _reject(self, agent: str, reason: str) -> None:
        info = self.infos[agent]
        self._retries[agent] += 1
        info.update(
            invalid=True,
            invalid_reason=reason,
            retries=self._retries[agent],
            invalid_count=info["invalid_count"] + 1,
        )
        if self._retries[agent] > self.max_retries:
            info["forfeit"] = True
            rewards = {agent: -self.forfeit_penalty}
            if self.zero_sum:  # the others share what the forfeiter loses; nobody else gains
                others = [a for a in self.agents if a != agent]
                rewards.update(dict.fromkeys(others, self.forfeit_penalty / len(others)))
            self._add_rewards(rewards)
            self._finish("illegal")
            return
        left = self.max_retries - self._retries[agent] + 1
        self._feedback[agent] = (
            f"Invalid action: {reason}. Try again ({left} attempt(s) left before you forfeit)."
        )
        info["feedback"] = self._feedback[agent]

    def _add_rewards(self, rewards: Mapping[str, float]) -> None:
        for agent, reward in rewards.items():
            self.rewards[agent] += float(reward)
            self.returns[agent] += float(reward)

    def _finish(self, reason: str, truncated: bool = False) -> None:
        self.termination_reason = reason
        ended = self.truncations if truncated else self.terminations
        for agent in self.agents:
            ended[agent] = True
            self.infos[agent]["termination_reason"] = reason

    def render(self) -> str | None:
        """The text of the agent to move ("ansi" returns it, "human" prints it)."""
        if self.render_mode is None or not self.agents:
            return None
        text = self.observation_text(self.agent_selection)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass
