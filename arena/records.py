"""Turn and Episode records: what rollouts produce and what the learner trains on.

A :class:`Turn` keeps the exact token ids the sampler saw (token-in, token-out): chat history is
never re-tokenized to rebuild them. Token ids and logprobs are numpy arrays, which the bus codec
sends as raw binary frames. ``to_dict``/``from_dict`` give plain msgpack-able dicts (with the
arrays left as arrays), and ``from_dict`` validates, naming the offending field.

Only turns with ``trained=True`` contribute tokens to the loss; prompts, other seats, simulators
and tool output are masked out by the batch assembly in ``trainers``.

:func:`synthetic_turn` makes up a turn for the tests and benchmarks that feed the learner
records without playing a game.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

TERMINATIONS = frozenset(
    {"win", "draw", "illegal", "max_turns", "context_overflow", "user_stop", "error", "done"}
)
"""How an episode can end. ``done`` is a normal end with no winner notion (e.g. cooperative)."""


class RecordError(ValueError):
    """A record with a missing field, a wrong type or mismatched lengths."""


def _array(value: Any, dtype: type, name: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise RecordError(f"field {name!r} must be a numpy array, got {type(value).__name__}")
    if value.ndim != 1:
        raise RecordError(f"field {name!r} must be 1-D, got shape {value.shape}")
    if value.dtype != np.dtype(dtype):
        if np.issubdtype(value.dtype, np.integer) and np.issubdtype(np.dtype(dtype), np.integer):
            return value.astype(dtype)
        if np.issubdtype(value.dtype, np.floating) and np.issubdtype(np.dtype(dtype), np.floating):
            return value.astype(dtype)
        raise RecordError(f"field {name!r} must have dtype {np.dtype(dtype)}, got {value.dtype}")
    return value


def _require(data: dict[str, Any], name: str, types: type | tuple[type, ...], where: str) -> Any:
    if name not in data:
        raise RecordError(f"{where}: missing field {name!r}")
    value = data[name]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise RecordError(
            f"{where}: field {name!r} must be {_type_names(types)}, got {type(value).__name__}"
        )
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _type_names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in _as_tuple(types))


@dataclass
class Turn:
    """One seat's move: the prompt the sampler saw, what it generated, and what came of it."""

    episode_id: str
    index: int
    game: str
    seat: str
    role: str
    prompt_ids: np.ndarray
    """int32 token ids of the full prompt given to the sampler for this turn."""
    response_ids: np.ndarray
    """int32 token ids the sampler generated."""
    response_logprobs: np.ndarray
    """float32 sampler logprob of each generated token; same length as ``response_ids``."""
    text: str
    action: Any
    """The parsed game action (int, str or None when the text did not parse)."""
    valid: bool
    reward: float = 0.0
    """Per-turn reward; the outcome is added to the seat's last turn when the episode ends."""
    policy_version: int = 0
    trained: bool = True
    """Whether the trained policy generated this turn (False for bots, simulators, frozen models)."""
    group: str = ""
    """Prompt-group id for group-normalized advantages (GRPO); empty when unused."""
    error: str = ""
    """What went wrong on this turn, if anything: why the game rejected the action, or the error
    a tool call returned (the game's ``infos[seat]["tool_error"]``)."""
    choice_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    """A turn played by choice (``arena/play/choice.py``): the token ids of every legal reply,
    one after another (``choice_lengths`` splits them); empty for a generated turn."""
    choice_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    """The token count of each legal reply in ``choice_ids``."""
    choice_logprobs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    """Each legal reply's sequence log-probability after the prompt (T = 1, untempered)."""
    choice_index: int = -1
    """Which legal reply was played (``response_ids`` holds its ids); -1 for a generated turn."""
    choice_logprob: float = 0.0
    """The played reply's log-probability under the legal-normalized policy that sampled it,
    ``log softmax(choice_logprobs / T)[choice_index]``: the sampler logprob of a choice turn."""

    def __post_init__(self) -> None:
        self.prompt_ids = _array(self.prompt_ids, np.int32, "prompt_ids")
        self.response_ids = _array(self.response_ids, np.int32, "response_ids")
        self.response_logprobs = _array(self.response_logprobs, np.float32, "response_logprobs")
        self.choice_ids = _array(self.choice_ids, np.int32, "choice_ids")
        self.choice_lengths = _array(self.choice_lengths, np.int32, "choice_lengths")
        self.choice_logprobs = _array(self.choice_logprobs, np.float32, "choice_logprobs")
        where = f"turn {self.index} of {self.episode_id}"
        if len(self.response_ids) != len(self.response_logprobs):
            raise RecordError(
                f"{where}: response_ids has {len(self.response_ids)} tokens but "
                f"response_logprobs has {len(self.response_logprobs)}"
            )
        n = len(self.choice_lengths)
        if int(self.choice_lengths.sum()) != len(self.choice_ids) or len(self.choice_logprobs) != n:
            raise RecordError(
                f"{where}: choice_lengths add up to {int(self.choice_lengths.sum())} for "
                f"{len(self.choice_ids)} choice_ids, with {len(self.choice_logprobs)} "
                f"choice_logprobs for {n} replies"
            )
        if n and not 0 <= self.choice_index < n:
            raise RecordError(f"{where}: choice_index {self.choice_index} is not in [0, {n})")
        if n and (self.choice_lengths <= 0).any():
            raise RecordError(f"{where}: an empty legal reply in choice_lengths")

    @property
    def is_choice(self) -> bool:
        """Played by choice among the legal replies (not generated)."""
        return len(self.choice_lengths) > 0

    def choices(self) -> list[np.ndarray]:
        """The token ids of each legal reply of a choice turn."""
        return (
            np.split(self.choice_ids, np.cumsum(self.choice_lengths)[:-1]) if self.is_choice else []
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field; a generated turn leaves out the empty choice fields."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if self.is_choice or f.name not in _CHOICE_FIELDS
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        if not isinstance(data, dict):
            raise RecordError(f"turn must be a map, got {type(data).__name__}")
        where = f"turn {data.get('index', '?')}"
        kwargs = {
            "episode_id": _require(data, "episode_id", str, where),
            "index": _require(data, "index", int, where),
            "game": _require(data, "game", str, where),
            "seat": _require(data, "seat", str, where),
            "role": _require(data, "role", str, where),
            "prompt_ids": _require(data, "prompt_ids", np.ndarray, where),
            "response_ids": _require(data, "response_ids", np.ndarray, where),
            "response_logprobs": _require(data, "response_logprobs", np.ndarray, where),
            "text": _require(data, "text", str, where),
            "valid": _require(data, "valid", bool, where),
            "reward": float(_require(data, "reward", (int, float), where)),
            "policy_version": _require(data, "policy_version", int, where),
            "trained": _require(data, "trained", bool, where),
            "group": _require(data, "group", str, where),
            "error": _require(data, "error", str, where) if "error" in data else "",
        }
        for name, types in _CHOICE_FIELDS.items():  # optional: absent on generated turns
            if name in data:
                kwargs[name] = _require(data, name, types, where)
        if "choice_logprob" in kwargs:
            kwargs["choice_logprob"] = float(kwargs["choice_logprob"])
        if "action" not in data:
            raise RecordError(f"{where}: missing field 'action'")
        kwargs["action"] = data["action"]
        return cls(**kwargs)


_CHOICE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "choice_ids": np.ndarray,
    "choice_lengths": np.ndarray,
    "choice_logprobs": np.ndarray,
    "choice_index": int,
    "choice_logprob": (int, float),
}


@dataclass
class SeatAssignment:
    """Who fills a seat: the role it plays and the policy (or bot/simulator) behind it."""

    role: str
    policy: str
    trained: bool = True
    adapter: str | None = None
    """The named adapter on the policy's base that played the seat (a run with named
    policies); None: the base itself."""


def _seat_dict(seat: SeatAssignment) -> dict[str, Any]:
    """A seat on the wire; ``adapter`` only where one played (older readers never see it)."""
    out: dict[str, Any] = {"role": seat.role, "policy": seat.policy, "trained": seat.trained}
    if seat.adapter is not None:
        out["adapter"] = seat.adapter
    return out


@dataclass
class Episode:
    """A finished game: seats, every turn in order, final rewards and how it ended."""

    id: str
    game: str
    seed: int
    seats: dict[str, SeatAssignment]
    turns: list[Turn] = field(default_factory=list)
    final_rewards: dict[str, float] = field(default_factory=dict)
    termination: str = "done"
    stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.termination not in TERMINATIONS:
            raise RecordError(
                f"episode {self.id}: termination {self.termination!r} is not one of "
                f"{sorted(TERMINATIONS)}"
            )
        for turn in self.turns:
            if turn.episode_id != self.id:
                raise RecordError(
                    f"episode {self.id}: turn {turn.index} belongs to episode {turn.episode_id!r}"
                )
            if turn.seat not in self.seats:
                raise RecordError(
                    f"episode {self.id}: turn {turn.index} has unknown seat {turn.seat!r}"
                )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "game": self.game,
            "seed": self.seed,
            "seats": {seat: _seat_dict(a) for seat, a in self.seats.items()},
            "turns": [t.to_dict() for t in self.turns],
            "final_rewards": dict(self.final_rewards),
            "termination": self.termination,
            "stats": dict(self.stats),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        if not isinstance(data, dict):
            raise RecordError(f"episode must be a map, got {type(data).__name__}")
        where = f"episode {data.get('id', '?')}"
        seats_raw = _require(data, "seats", dict, where)
        seats = {}
        for seat, raw in seats_raw.items():
            if not isinstance(raw, dict):
                raise RecordError(f"{where}: seat {seat!r} must be a map")
            adapter = raw.get("adapter")
            if adapter is not None and not isinstance(adapter, str):
                raise RecordError(f"{where} seat {seat}: adapter must be a string or absent")
            seats[seat] = SeatAssignment(
                role=_require(raw, "role", str, f"{where} seat {seat}"),
                policy=_require(raw, "policy", str, f"{where} seat {seat}"),
                trained=_require(raw, "trained", bool, f"{where} seat {seat}"),
                adapter=adapter,
            )
        turns_raw = _require(data, "turns", list, where)
        rewards = _require(data, "final_rewards", dict, where)
        return cls(
            id=_require(data, "id", str, where),
            game=_require(data, "game", str, where),
            seed=_require(data, "seed", int, where),
            seats=seats,
            turns=[Turn.from_dict(t) for t in turns_raw],
            final_rewards={str(k): float(v) for k, v in rewards.items()},
            termination=_require(data, "termination", str, where),
            stats=_require(data, "stats", dict, where),
        )

    def trained_turns(self) -> list[Turn]:
        """The turns whose tokens the learner may train on."""
        return [t for t in self.turns if t.trained]


def synthetic_turn(
    episode_id: str,
    index: int = 0,
    seat: str = "p0",
    *,
    role: str = "player",
    game: str = "g",
    prompt: Sequence[int] = (1, 2, 3),
    response: Sequence[int] | None = None,
    logprobs: Sequence[float] | float = -1.0,
    reward: float = 0.0,
    valid: bool = True,
    version: int = 0,
    trained: bool = True,
    group: str = "",
    action: Any = None,
    choices: Sequence[Sequence[int]] = (),
    choice_index: int = 0,
) -> Turn:
    """A made-up :class:`Turn` with every field but the ids defaulted: scaffolding for the tests
    and the benchmarks (``tests/trainers/synthetic.py``, ``bench/learner.py``), which feed the
    learner records without playing a game. Nothing in a run calls it.

    ``logprobs`` is one sampler logprob per response token, or one number for every token;
    ``response`` defaults to ``(4, 5)``. With ``choices`` (the token ids of each legal reply) it
    is a turn played by choice: the reply ``choice_index`` is the response, each reply's sequence
    log-probability is -1 a token, and the sampler chose uniformly (``choice_logprob`` is
    ``-log(len(choices))``).
    """
    replies = [np.asarray(reply, dtype=np.int32) for reply in choices]
    if response is None:
        response = replies[choice_index] if replies else (4, 5)
    response_ids = np.asarray(response, dtype=np.int32)
    if isinstance(logprobs, int | float):
        response_logprobs = np.full(len(response_ids), float(logprobs), dtype=np.float32)
    else:
        response_logprobs = np.asarray(logprobs, dtype=np.float32)
    chosen: dict[str, Any] = {}
    if replies:
        chosen = {
            "choice_ids": np.concatenate(replies),
            "choice_lengths": np.array([len(r) for r in replies], dtype=np.int32),
            "choice_logprobs": np.array([-float(len(r)) for r in replies], dtype=np.float32),
            "choice_index": choice_index,
            "choice_logprob": -float(np.log(len(replies))),
        }
    return Turn(
        episode_id=episode_id,
        index=index,
        game=game,
        seat=seat,
        role=role,
        prompt_ids=np.asarray(prompt, dtype=np.int32),
        response_ids=response_ids,
        response_logprobs=response_logprobs,
        text="",
        action=action,
        valid=valid,
        reward=reward,
        policy_version=version,
        trained=trained,
        group=group,
        **chosen,
    )
