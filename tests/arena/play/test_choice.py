"""Seats that act by choice (arena/play/choice.py): the policy over the legal replies, on the real
tiny model through :class:`HFPolicy`, and what each turn records."""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import games
import roles
from arena.core.errors import ConfigError
from arena.play.choice import choice_logprobs, pick, reply_ids
from arena.play.config import GameConfig, PlayConfig
from arena.play.episode import play_episode
from arena.play.seating import SeatFactory
from arena.play.seats import PolicySeat, request_seed
from arena.policies.base import Policy
from arena.policies.chat import ChatFormat
from arena.policies.hf import HFPolicy
from arena.policies.types import PromptLike, SamplingParams, Scoring
from arena.records import Episode

ROLE = {"prefill": True, "show_rules": False, "turn_suffix": "Your move?"}


def choice_seat(policy: Policy, chat: ChatFormat, temperature: float = 1.0) -> PolicySeat:
    return PolicySeat(
        policy=policy,
        role=roles.make("player-v0", **ROLE),
        chat=chat,
        params=SamplingParams(temperature=temperature, max_new_tokens=6),
        act="choice",
    )


def play(game_id: str, seats: dict, seed: int = 0, episode_id: str = "ep") -> Episode:
    env = games.make(game_id)
    return asyncio.run(play_episode(env, game_id, seats, seed=seed, episode_id=episode_id))


@pytest.fixture
def hf(tiny_model) -> HFPolicy:
    model, tokenizer = tiny_model
    return HFPolicy(model, tokenizer)


def test_choice_turns_record_every_legal_reply_and_the_normalized_choice(hf: HFPolicy) -> None:
    chat = ChatFormat(hf.tokenizer)
    seats = {agent: choice_seat(hf, chat) for agent in ("player_0", "player_1")}
    episode = play("tictactoe-v0", seats)
    assert episode.termination in ("win", "draw") and episode.turns
    first = episode.turns[0]
    assert first.is_choice and first.valid and first.trained
    replies = first.choices()
    assert len(replies) == 9  # every cell is legal on the empty board
    env = games.make("tictactoe-v0")
    env.reset(seed=0)
    assert [r.tolist() for r in replies] == [
        reply_ids(seats["player_0"], env, "player_0", a).tolist() for a in range(9)
    ]
    # the played reply is the response, its tokens' logprobs sum to its recorded score
    assert first.response_ids.tolist() == replies[first.choice_index].tolist()
    assert float(first.response_logprobs.sum()) == pytest.approx(
        float(first.choice_logprobs[first.choice_index]), abs=1e-4
    )
    # the scores are the model's, recomputed here with the scorer the policy reader uses
    (scored,) = hf.score([first.prompt_ids], [replies])
    assert scored.sums == pytest.approx(first.choice_logprobs.astype(float), abs=1e-4)
    # the choice's logprob is log softmax(S / T) of the played reply (T = 1)
    top = first.choice_logprobs.max()
    log_z = top + math.log(np.exp(first.choice_logprobs - top).sum())
    assert first.choice_logprob == pytest.approx(
        float(first.choice_logprobs[first.choice_index]) - log_z, abs=1e-5
    )
    assert first.text == "<answer>" + hf.tokenizer.decode(first.response_ids.tolist())
    assert all(t.valid and t.is_choice for t in episode.turns)  # no reply is ever invalid


def test_each_request_carries_its_own_seed(hf: HFPolicy) -> None:
    chat = ChatFormat(hf.tokenizer)

    def moves(episode_id: str) -> list[Any]:
        seats = {agent: choice_seat(hf, chat) for agent in ("player_0", "player_1")}
        return [t.action for t in play("tictactoe-v0", seats, episode_id=episode_id).turns]

    assert moves("run-a-1") == moves("run-a-1")
    assert len({tuple(moves(f"run-a-{i}")) for i in range(4)}) > 1
    assert request_seed("e", 0) == request_seed("e", 0) != request_seed("e", 1)


def test_greedy_plays_the_likeliest_reply_and_sampling_follows_the_softmax() -> None:
    # S = -1, -3, -1 + ln 2: exp(S) is proportional to 1, e^-2, 2
    logprobs = choice_logprobs(np.array([-1.0, -3.0, -1.0 + math.log(2.0)]), 1.0)
    norm = 3.0 + math.exp(-2.0)
    assert np.exp(logprobs) == pytest.approx([1 / norm, math.exp(-2.0) / norm, 2 / norm])
    assert pick(logprobs, 0.0, seed=1) == 2
    draws = [pick(logprobs, 1.0, seed=s) for s in range(4000)]
    share = np.bincount(draws, minlength=3) / len(draws)
    assert share == pytest.approx(np.exp(logprobs), abs=0.03)
    # T = 2 flattens: the ratio of the top two probabilities is 2 ** (1 / 2)
    half = np.exp(choice_logprobs(np.array([0.0, math.log(2.0)]), 2.0))
    assert half[1] / half[0] == pytest.approx(math.sqrt(2.0))


class Scripted(Policy):
    """Scores every reply alike; ``during`` runs while the request is out (to change the game)."""

    def __init__(self, during: Any = None) -> None:
        self.during = during
        self.version = 4

    def generate(self, prompts: Sequence[PromptLike], params: Any = None) -> list:
        raise AssertionError("a choice seat never generates")

    async def ascore(self, prompts: Sequence[PromptLike], continuations: Sequence) -> list:
        if self.during is not None:
            self.during()
        return [
            Scoring(
                prompt_ids=np.asarray(p.ids, np.int32),
                logprobs=[np.full(len(c), -1.0, np.float32) for c in replies],
                version=self.version,
            )
            for p, replies in zip(prompts, continuations, strict=True)
        ]


def test_legal_actions_that_change_while_scoring_are_a_turn_error_not_trained(
    tiny_tokenizer,
) -> None:
    chat = ChatFormat(tiny_tokenizer)
    env = games.make("tictactoe-v0")

    taken: list[int] = []

    def occupy() -> None:  # another writer takes a cell while the seat's first request is out
        if not taken:  # one X and one O: the same player is still to move
            cells = [1 if i == 4 else 2 if i == 8 else c for i, c in enumerate(env.board.cells)]
            env.board = dataclasses.replace(env.board, cells=tuple(cells))
            taken.append(4)

    seats = {a: choice_seat(Scripted(occupy), chat) for a in ("player_0", "player_1")}
    episode = asyncio.run(play_episode(env, "tictactoe-v0", seats, seed=0, episode_id="x"))
    first = episode.turns[0]
    assert first.error == "the legal actions changed between scoring and stepping"
    assert not first.trained and first.policy_version == 4
    assert all(t.trained for t in episode.turns[1:])


def test_a_choice_seat_on_a_free_text_game_is_a_config_error(tiny_tokenizer) -> None:
    config = PlayConfig(games=[GameConfig(id="negotiation-v0", act="choice")])
    with pytest.raises(ConfigError, match="negotiation-v0.*free text.*act: generate"):
        SeatFactory(config, Scripted(), ChatFormat(tiny_tokenizer))
    with pytest.raises(ConfigError, match="act"):
        GameConfig(id="tictactoe-v0", act="chose")


def test_a_backend_that_cannot_score_is_named(tiny_tokenizer) -> None:
    from arena.policies.scripted import ScriptedPolicy

    policy = ScriptedPolicy.__new__(ScriptedPolicy)
    with pytest.raises(Exception, match="cannot score continuations.*act: generate"):
        policy.score([[1, 2]], [[[3]]])


def test_a_state_without_legal_actions_fails_the_episode_naming_the_hook(tiny_tokenizer) -> None:
    from arena.play.seats import EpisodeError
    from games.tictactoe import TicTacToe

    class Stuck(TicTacToe):  # player_0 may never move: a game with a bug, say
        def _legal_actions(self, agent: str) -> list[int]:
            return [] if agent == "player_0" else super()._legal_actions(agent)

    chat = ChatFormat(tiny_tokenizer)
    seats = {a: choice_seat(Scripted(), chat) for a in ("player_0", "player_1")}
    env = Stuck(max_retries=1)
    # it was retried and forfeited as if the seat had erred: the game's bug, hidden
    with pytest.raises(EpisodeError) as caught:
        asyncio.run(play_episode(env, "tictactoe-v0", seats, seed=0, episode_id="s"))
    assert "Stuck._legal_actions('player_0') is empty but the game is not over" in str(caught.value)
