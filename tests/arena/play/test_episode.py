"""arena/play/episode.py: play_episode with PolicySeat and BotSeat on real games.

Covers token-in/token-out prompts (each turn keeps exactly the ids the sampler saw; with
``conversation`` memory a seat's next prompt extends its previous prompt and response ids),
prefilled replies, invalid actions (retry with feedback, then forfeit), shaping and the outcome
on each seat's last turn, bot turns, the termination values (win, draw, illegal, max_turns,
context_overflow), EpisodeError when a policy fails or the bound on one episode (turns,
seconds) is passed, and group ids (game, seed and seat, or the
game's own ``infos["group"]``). The policy is a deterministic fake that answers a fixed script
of texts; the tokenizer is the real SmolLM2 one (``tiny_tokenizer``).

Run with `.venv/bin/python -m pytest -q tests/arena/play/test_episode.py`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import numpy as np
import pytest

import games
import games.bots
import roles
from arena.play.config import MAX_EPISODE_TURNS
from arena.play.episode import play_episode
from arena.play.seats import BotSeat, EpisodeError, PolicySeat, Seat
from arena.policies.base import Policy
from arena.policies.chat import ChatFormat
from arena.policies.types import (
    ContextOverflow,
    Generation,
    Prompt,
    PromptLike,
    SamplingParams,
    as_prompt,
)
from arena.records import Episode, SeatAssignment
from games.text_env import TextGame

LOGPROB = -0.5
VERSION = 3


class ScriptPolicy(Policy):
    """Answers the i-th request with ``texts[i]`` (ids of the text plus ``<|im_end|>``), and
    records every prompt it saw. An exception in the script is raised instead of answered."""

    def __init__(self, tokenizer, texts: Sequence[str | Exception]) -> None:
        self.tokenizer = tokenizer
        self.texts = list(texts)
        self.prompts: list[np.ndarray] = []
        self.end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def generate(self, prompts: Sequence[PromptLike], params=None) -> list[Generation]:
        out = []
        for raw in prompts:
            prompt = as_prompt(raw)
            assert prompt.messages is None, "a policy seat sends ids, rendered once on its side"
            self.prompts.append(prompt.ids)
            text = self.texts[len(self.prompts) - 1]
            if isinstance(text, Exception):
                raise text
            ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.end_id]
            out.append(
                Generation(
                    prompt_ids=prompt.ids,
                    token_ids=np.asarray(ids, np.int32),
                    logprobs=np.full(len(ids), LOGPROB, np.float32),
                    text=text,
                    finish_reason="stop",
                    version=VERSION,
                )
            )
        return out


@pytest.fixture
def chat(tiny_tokenizer) -> ChatFormat:
    return ChatFormat(tiny_tokenizer)


def seat(
    policy: Policy, chat: ChatFormat, *, invalid_penalty: float = 0.0, **role_kwargs
) -> PolicySeat:
    return PolicySeat(
        policy=policy,
        role=roles.make("player-v0", **role_kwargs),
        chat=chat,
        params=SamplingParams(max_new_tokens=8, stop=("</answer>",)),
        invalid_penalty=invalid_penalty,
    )


def play(
    env: TextGame,
    seats: dict[str, Seat],
    seed: int = 0,
    game_id: str = "tictactoe-v0",
    episode_id: str = "ep",
) -> Episode:
    return asyncio.run(play_episode(env, game_id, seats, seed=seed, episode_id=episode_id))


def answers(*cells: int | str) -> list[str]:
    return [f"<answer>{c}</answer>" for c in cells]


def self_play(
    chat: ChatFormat, texts: Sequence[str | Exception], **kwargs
) -> tuple[ScriptPolicy, dict[str, Seat]]:
    """Both seats on one scripted policy (each seat with its own conversation, as SeatFactory
    builds them); requests alternate between the seats in turn order."""
    policy = ScriptPolicy(chat.tokenizer, texts)
    return policy, {
        "player_0": seat(policy, chat, **kwargs),
        "player_1": seat(policy, chat, **kwargs),
    }


def fresh_prompt(chat: ChatFormat, env: TextGame, agent: str, **role_kwargs) -> np.ndarray:
    """The ids a first-turn (or memoryless) prompt must have: the role's messages for what
    ``agent`` sees now, rendered once with the chat template."""
    role = roles.make("player-v0", **role_kwargs)
    messages = role.messages(env.rules(agent), agent, env.observe(agent)["text"], first_turn=True)
    return chat.prompt_ids(Prompt(messages=messages))


def test_a_won_game_records_every_turn_token_in_token_out(chat: ChatFormat) -> None:
    # X takes 1, 5, 9 (the diagonal) while O takes 2, 3: X wins on turn index 4.
    policy, seats = self_play(chat, answers(1, 2, 5, 3, 9))
    ep = play(games.make("tictactoe-v0"), seats)
    assert [t.seat for t in ep.turns] == ["player_0", "player_1"] * 2 + ["player_0"]
    assert [t.action for t in ep.turns] == [0, 1, 4, 2, 8]
    assert all(t.valid and t.trained and t.role == "player" for t in ep.turns)
    assert [t.text for t in ep.turns] == answers(1, 2, 5, 3, 9)
    # The outcome goes on each seat's last turn: X's turn 4 gets +1, O's turn 3 gets -1.
    assert [t.reward for t in ep.turns] == [0.0, 0.0, 0.0, -1.0, 1.0]
    assert ep.final_rewards == {"player_0": 1.0, "player_1": -1.0}
    assert ep.termination == "win"
    assert ep.seats == {
        "player_0": SeatAssignment("player", "main", True),
        "player_1": SeatAssignment("player", "main", True),
    }
    # Token-in/token-out: each turn keeps the ids the sampler was given and the ids it sampled,
    # and each (memoryless) prompt is the role's messages for what the seat saw, rendered once.
    replay = games.make("tictactoe-v0")
    replay.reset(seed=0)
    end = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    for k, t in enumerate(ep.turns):
        assert t.prompt_ids.tolist() == policy.prompts[k].tolist()
        assert t.prompt_ids.tolist() == fresh_prompt(chat, replay, t.seat).tolist()
        assert t.response_ids.tolist() == [
            *chat.encode_text(answers(1, 2, 5, 3, 9)[k]).tolist(),
            end,
        ]
        assert t.response_logprobs.tolist() == [LOGPROB] * len(t.response_ids)
        assert (t.episode_id, t.index, t.game, t.policy_version) == (
            "ep",
            k,
            "tictactoe-v0",
            VERSION,
        )
        assert t.group == f"tictactoe-v0:0:{t.seat}"  # game, seed, seat: never the episode
        replay.step(t.action)
    # Each response is "<answer>N</answer>" (7 tokens) plus <|im_end|>: 5 x 8 = 40 tokens.
    assert {k: v for k, v in ep.stats.items() if k != "seconds"} == {
        "turns": 5,
        "policy_turns": 5,
        "invalid_turns": 0,
        "generated_tokens": 40,
    }


def test_attempts_from_one_seed_share_a_group_per_seat(chat: ChatFormat) -> None:
    # Two attempts from seed 7 (X wins, then O wins) and one from seed 8: the group id names the
    # game, the seed and the seat, so the two seed-7 attempts of a seat compare (GRPO), and
    # neither seat nor seed mixes with another.
    groups = []
    for seed, episode_id, script in (
        (7, "a", answers(1, 2, 5, 3, 9)),
        (7, "b", answers(1, 5, 2, 3, 4, 7)),
        (8, "c", answers(1, 2, 5, 3, 9)),
    ):
        _, seats = self_play(chat, script)
        ep = play(games.make("tictactoe-v0"), seats, seed=seed, episode_id=episode_id)
        groups.append({t.seat: t.group for t in ep.turns})
        assert len({t.group for t in ep.turns if t.seat == "player_0"}) == 1
    assert (
        groups[0]
        == groups[1]
        == {
            "player_0": "tictactoe-v0:7:player_0",
            "player_1": "tictactoe-v0:7:player_1",
        }
    )
    assert groups[2] == {
        "player_0": "tictactoe-v0:8:player_0",
        "player_1": "tictactoe-v0:8:player_1",
    }


def test_a_game_can_name_the_group_of_a_turn(
    chat: ChatFormat, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A role game names what is comparable itself: here O's turns carry the game's group
    # ("task-3/solver") in its infos after the step; X's turns keep game:seed:seat.
    env = games.make("tictactoe-v0")
    step_text = env.step_text

    def step_and_group(text: str) -> None:
        agent = env.agent_selection
        step_text(text)
        if agent == "player_1":
            env.infos[agent]["group"] = "task-3/solver"

    monkeypatch.setattr(env, "step_text", step_and_group)
    _, seats = self_play(chat, answers(1, 2, 5, 3, 9))
    ep = play(env, seats, seed=4)
    assert [t.group for t in ep.turns] == [
        "tictactoe-v0:4:player_0",
        "task-3/solver",
        "tictactoe-v0:4:player_0",
        "task-3/solver",
        "tictactoe-v0:4:player_0",
    ]


def test_conversation_memory_extends_the_seat_own_ids(chat: ChatFormat) -> None:
    policy, seats = self_play(chat, answers(1, 2, 5, 3, 9) * 2, memory="conversation")
    env = games.make("tictactoe-v0")
    ep = play(env, seats)
    t0, t1, t2, t3, t4 = ep.turns
    # player_0's second prompt is its first prompt and response, untouched, then new ids.
    conversation = np.concatenate([t0.prompt_ids, t0.response_ids])
    assert t2.prompt_ids[: len(conversation)].tolist() == conversation.tolist()
    replay = games.make("tictactoe-v0")
    replay.reset(seed=0)
    for action in (0, 1):
        replay.step(action)
    role = seats["player_0"].role
    new = role.messages(
        replay.rules("player_0"), "player_0", replay.observe("player_0")["text"], first_turn=False
    )
    assert new == [{"role": "user", "content": replay.observe("player_0")["text"]}]
    assert t2.prompt_ids.tolist() == chat.extend(conversation, new).tolist()
    # The response ended with <|im_end|>, so only the template's "\n" bridges to the next turn.
    assert t2.prompt_ids[len(conversation)] == chat.encode_text("\n")[0]
    # And again on the third turn; player_1's conversation is its own.
    assert t4.prompt_ids[: len(t2.prompt_ids) + len(t2.response_ids)].tolist() == (
        np.concatenate([t2.prompt_ids, t2.response_ids]).tolist()
    )
    assert t3.prompt_ids[: len(t1.prompt_ids) + len(t1.response_ids)].tolist() == (
        np.concatenate([t1.prompt_ids, t1.response_ids]).tolist()
    )
    assert len(t1.prompt_ids) < len(t2.prompt_ids)
    # A new episode starts every conversation afresh.
    again = play(env, seats, episode_id="ep2")
    assert again.turns[0].prompt_ids.tolist() == t0.prompt_ids.tolist()
    assert [t.action for t in again.turns] == [0, 1, 4, 2, 8]


def test_prefill_is_prompt_not_response(chat: ChatFormat) -> None:
    _, seats = self_play(
        chat, ["1</answer>", "2</answer>", "5</answer>", "3</answer>", "9</answer>"], prefill=True
    )
    ep = play(games.make("tictactoe-v0"), seats)
    opening = chat.encode_text("<answer>").tolist()
    assert all(t.prompt_ids[-len(opening) :].tolist() == opening for t in ep.turns)
    assert ep.turns[0].text == "<answer>1</answer>"
    # The response is only what the policy wrote after the prefill.
    end = chat.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert ep.turns[0].response_ids.tolist() == [*chat.encode_text("1</answer>").tolist(), end]
    assert [t.action for t in ep.turns] == [0, 1, 4, 2, 8] and ep.termination == "win"


def test_invalid_actions_are_retried_with_feedback_and_penalized(chat: ChatFormat) -> None:
    # X writes no answer (retry), then 1; O names the taken cell 1 (retry), then 2; then X 5,
    # O 3, X 9 wins. Seven turns; the two rejected ones cost invalid_penalty 0.25 each.
    texts = ["no idea", *answers(1, 1, 2, 5, 3, 9)]
    policy, seats = self_play(chat, texts, invalid_penalty=0.25)
    ep = play(games.make("tictactoe-v0"), seats)
    assert [t.seat for t in ep.turns] == [
        "player_0",
        "player_0",
        "player_1",
        "player_1",
        "player_0",
        "player_1",
        "player_0",
    ]
    assert [t.valid for t in ep.turns] == [False, True, False, True, True, True, True]
    # An unreadable reply has no action; a readable but illegal one keeps what it named.
    assert [t.action for t in ep.turns] == [None, 0, 0, 1, 4, 2, 8]
    assert [t.reward for t in ep.turns] == [-0.25, 0.0, -0.25, 0.0, 0.0, -1.0, 1.0]
    assert ep.termination == "win" and ep.final_rewards == {"player_0": 1.0, "player_1": -1.0}
    assert ep.stats["invalid_turns"] == 2 and ep.stats["policy_turns"] == 7
    # The retry prompts carry the game's feedback; the first prompts do not.
    seen = [chat.tokenizer.decode(ids.tolist()) for ids in policy.prompts]
    assert "Invalid action" not in seen[0] and "Invalid action" not in seen[2]
    assert (
        "Invalid action: could not read 'no idea' as an action. Try again "
        "(2 attempt(s) left before you forfeit)."
    ) in seen[1]
    assert "cell 1 is already taken" in seen[3]


def test_out_of_retries_forfeits_against_a_bot(chat: ChatFormat) -> None:
    # One retry allowed: the second unreadable reply forfeits. Zero-sum penalty 1: X -1, O +1.
    policy = ScriptPolicy(chat.tokenizer, ["pass", "pass"])
    seats = {
        "player_0": seat(policy, chat, invalid_penalty=0.5),
        "player_1": BotSeat(games.bots.make("random-v0", seed=0), "random-v0"),
    }
    ep = play(games.make("tictactoe-v0", max_retries=1), seats)
    assert [(t.seat, t.valid) for t in ep.turns] == [("player_0", False), ("player_0", False)]
    # Each invalid turn costs 0.5; the forfeit's -1 goes on the last: -0.5, -1.5.
    assert [t.reward for t in ep.turns] == [-0.5, -1.5]
    assert ep.termination == "illegal"
    assert ep.final_rewards == {"player_0": -1.0, "player_1": 1.0}
    assert ep.seats["player_1"] == SeatAssignment(role="bot", policy="random-v0", trained=False)
    assert ep.stats["invalid_turns"] == 2


def test_bot_turns_are_recorded_but_never_trained(chat: ChatFormat) -> None:
    # Kuhn: the policy (player_0) bets; the random bot folds (+1 to player_0) or calls (+-2).
    def once(seed: int) -> tuple[Episode, TextGame]:
        policy = ScriptPolicy(chat.tokenizer, answers("bet"))
        seats = {
            "player_0": seat(policy, chat),
            "player_1": BotSeat(games.bots.make("random-v0", seed=123), "random-v0"),
        }
        env = games.make("kuhn-poker-v0")
        return play(env, seats, seed=seed, game_id="kuhn-poker-v0"), env

    outcomes = set()
    for seed in range(6):
        ep, env = once(seed)
        mine, bot = ep.turns
        assert (mine.seat, mine.action, mine.valid, mine.trained) == ("player_0", 1, True, True)
        assert (bot.seat, bot.role, bot.trained, bot.policy_version) == (
            "player_1",
            "bot",
            False,
            -1,
        )
        assert len(bot.prompt_ids) == len(bot.response_ids) == len(bot.response_logprobs) == 0
        assert bot.text == env.action_to_text("player_1", bot.action) and bot.action in (0, 1)
        # The env's returns are the record's, and the policy seat's only turn carries them.
        assert ep.final_rewards == {a: float(env.returns[a]) for a in env.possible_agents}
        expected = 1.0 if bot.action == 0 else (2.0 if env.cards[0] > env.cards[1] else -2.0)
        assert mine.reward == ep.final_rewards["player_0"] == expected
        assert bot.reward == 0.0 and sum(ep.final_rewards.values()) == 0.0
        assert ep.stats["turns"] == 2 and ep.stats["policy_turns"] == 1
        # The bot is re-seeded with the episode seed: the same seed replays the same episode.
        assert once(seed)[0].turns[1].action == bot.action
        outcomes.add(mine.reward)
    assert len(outcomes) > 1


def test_draw_and_turn_limit_terminations(chat: ChatFormat) -> None:
    # X 1, O 2, X 3, O 5, X 4, O 6, X 8, O 7, X 9: a full grid with no line.
    _, seats = self_play(chat, answers(1, 2, 3, 5, 4, 6, 8, 7, 9))
    ep = play(games.make("tictactoe-v0"), seats)
    assert ep.termination == "draw" and len(ep.turns) == 9
    assert ep.final_rewards == {"player_0": 0.0, "player_1": 0.0}
    assert all(t.reward == 0.0 for t in ep.turns)
    # A two-move limit truncates the game after X 1, O 2.
    _, seats = self_play(chat, answers(1, 2))
    ep = play(games.make("tictactoe-v0", max_turns=2), seats)
    assert ep.termination == "max_turns" and [t.action for t in ep.turns] == [0, 1]


def test_context_overflow_ends_the_episode_with_what_was_played(chat: ChatFormat) -> None:
    _, seats = self_play(chat, [*answers(1), ContextOverflow("prompt of 9000 tokens")])
    ep = play(games.make("tictactoe-v0"), seats)
    assert ep.termination == "context_overflow"
    assert [t.action for t in ep.turns] == [0]
    assert ep.final_rewards == {"player_0": 0.0, "player_1": 0.0}


def test_a_failing_policy_raises_episode_error(chat: ChatFormat) -> None:
    boom = RuntimeError("the inference actor died")
    _, seats = self_play(chat, [*answers(1), boom])
    with pytest.raises(
        EpisodeError, match="tictactoe-v0 episode ep: main failed: the inference actor died"
    ) as info:
        play(games.make("tictactoe-v0"), seats)
    assert info.value.__cause__ is boom


class Broken(games.make("tictactoe-v0").__class__):
    """Tic-Tac-Toe whose own code raises on the third move: a plugin game's bug."""

    def _apply(self, agent, action):
        if self.turn >= 2:
            raise KeyError("the board has no such cell")
        return super()._apply(agent, action)


def test_a_game_that_raises_fails_its_episode_not_the_rollout(chat: ChatFormat) -> None:
    # A game's own exception must end that one episode as an EpisodeError (dropped, counted,
    # its reason on the step line), like a failing policy, bot or simulator; before, it escaped
    # play_episode and failed the rollout actor's whole collect, re-leased from actor to actor.
    _, seats = self_play(chat, answers(1, 2, 3))
    with pytest.raises(EpisodeError) as info:
        play(Broken(), seats)
    assert str(info.value) == (
        "tictactoe-v0 episode ep: the game failed: KeyError('the board has no such cell')"
    )
    assert isinstance(info.value.__cause__, KeyError)


def test_a_game_that_never_ends_fails_at_the_runs_turn_bound(chat: ChatFormat) -> None:
    # Prisoner's Dilemma for a million rounds between two bots: a game that, for a run, never
    # ends (a plugin's huge max_turns). Bots alone never await, so only the turn bound holds it.
    bots = {
        agent: BotSeat(games.bots.make("random-v0", seed=i), "random-v0")
        for i, agent in enumerate(("player_0", "player_1"))
    }
    env = games.make("prisoners-dilemma-v0", rounds=1_000_000)
    with pytest.raises(EpisodeError) as info:
        asyncio.run(
            play_episode(
                env, "prisoners-dilemma-v0", bots, seed=1, episode_id="r-3-0", max_turns=40
            )
        )
    assert str(info.value) == (
        "prisoners-dilemma-v0 episode r-3-0: not over after 40 turns, the bound on one "
        "episode (rollout.max_episode_turns); the game did not end it"
    )
    assert info.value.termination == "max_turns" and env.turn == 40 and env.agents
    # an evaluation's or a tournament's episode, given no bound, is held by the default one
    with pytest.raises(EpisodeError, match="not over after 1000 turns") as info:
        asyncio.run(play_episode(env, "prisoners-dilemma-v0", bots, seed=1, episode_id="e"))
    assert env.turn == MAX_EPISODE_TURNS == 1000
    # A game that ends on the bound's last turn is whole: X 1, O 2, X 3, O 4, X 5, O 6, X 7 wins.
    _, seats = self_play(chat, answers(1, 2, 3, 4, 5, 6, 7))
    ep = asyncio.run(
        play_episode(games.make("tictactoe-v0"), "t", seats, seed=0, episode_id="e", max_turns=7)
    )
    assert ep.termination == "win" and len(ep.turns) == 7
    _, seats = self_play(chat, answers(1, 2, 3, 4, 5, 6, 7))
    with pytest.raises(EpisodeError, match="e: not over after 6 turns, the bound"):
        asyncio.run(
            play_episode(
                games.make("tictactoe-v0"), "t", seats, seed=0, episode_id="e", max_turns=6
            )
        )


class Stalled(ScriptPolicy):
    """A policy whose every reply takes an hour."""

    async def agenerate(self, prompts, params=None) -> list[Generation]:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


class TimesOut(games.make("tictactoe-v0").__class__):
    """Tic-Tac-Toe whose own code raises TimeoutError: the game's bug, not the run's bound."""

    def _apply(self, agent, action):
        raise TimeoutError("the board's clock ran out")


def test_an_episode_past_the_runs_time_bound_fails(chat: ChatFormat) -> None:
    seats = {agent: seat(Stalled(chat.tokenizer, []), chat) for agent in ("player_0", "player_1")}
    start = time.monotonic()
    with pytest.raises(EpisodeError) as info:
        asyncio.run(
            play_episode(
                games.make("tictactoe-v0"),
                "tictactoe-v0",
                seats,
                seed=0,
                episode_id="e",
                timeout=0.3,
            )
        )
    took = time.monotonic() - start
    assert str(info.value) == (
        "tictactoe-v0 episode e: not over after 0.3 s, the bound on one episode "
        "(rollout.episode_timeout)"
    )
    assert info.value.termination == "error" and 0.3 <= took < 3.0
    # A TimeoutError of the game's own is the game failing, named as such, bound or not.
    _, seats = self_play(chat, answers(1))
    with pytest.raises(EpisodeError, match=r"the game failed: TimeoutError\("):
        asyncio.run(play_episode(TimesOut(), "t", seats, seed=0, episode_id="e", timeout=60))


class Mute(games.make("tictactoe-v0").__class__):
    """Tic-Tac-Toe whose observation text is None: a plugin game's bug."""

    def observation_text(self, agent):
        return None


def test_a_game_whose_observation_is_not_text_fails_its_episode(chat: ChatFormat) -> None:
    _, seats = self_play(chat, answers(1, 2, 3))
    with pytest.raises(EpisodeError) as info:
        play(Mute(), seats)
    assert str(info.value) == (
        "tictactoe-v0 episode ep: the game failed: its observation for player_0 is NoneType, "
        "not text (TextGame.observation_text)"
    )


def test_every_seat_needs_a_filler(chat: ChatFormat) -> None:
    _, seats = self_play(chat, [])
    del seats["player_1"]
    with pytest.raises(ValueError, match=r"no seat filler for \['player_1'\]"):
        play(games.make("tictactoe-v0"), seats)


def test_format_bonus_rewards_only_well_formed_replies(chat: ChatFormat) -> None:
    # A bare "2" is still read by the game (a valid move) but earns no format bonus.
    _, seats = self_play(chat, [answers(1)[0], "2", *answers(5, 3, 9)], format_bonus=0.1)
    ep = play(games.make("tictactoe-v0"), seats)
    assert [t.valid for t in ep.turns] == [True] * 5
    # Bonus 0.1 on turns 0, 2, 3, 4; outcome on the last turns: O's turn 3 -1, X's turn 4 +1.
    assert [t.reward for t in ep.turns] == pytest.approx([0.1, 0.0, 0.1, 0.1 - 1.0, 0.1 + 1.0])
