"""``arena play GAME --against PARTICIPANT``: play a game in the terminal against a model or a bot.

PARTICIPANT is a reference bot (``minimax-v0``, see ``arena games`` for each game's strongest),
the embedded model (``smollm2-135m``), the tiny test model (``tiny``), a Hugging Face model
directory, or a checkpoint directory (``runs/<run>/checkpoints/step-00000012``: its ``model/``
plays; its run directory: the newest; ``RUN:POLICY``: that policy's newest). A model is loaded
in this process by its backend and plays through its role exactly as in a tournament: the rules
and its view of the board as a prompt, a reply whose ``<answer>`` is its move. Its raw reply is
shown, and the game's own retry and forfeit rules apply to it. A checkpoint inside a run
directory is prompted as it was trained: that run's settings for GAME (its ``kwargs``, role and
role kwargs, such as a prefilled answer tag) and its reply length (a named policy's own
``max_new_tokens`` for its checkpoint, ``RUN:POLICY``), unless ``--game-arg``, ``--role-arg`` or
``--max-new-tokens`` say otherwise. The opponent fills every seat but yours, each in the role
the game gives it, except the seats that are simulated: those of the run's simulators (a
checkpoint of ``configs/user_tool_use.yaml``: the retail user is ``scripted-user-v0``), or those
``--simulator SEAT=ID`` (``--simulator ID``: every seat a simulator may fill) names. The first
line says what fills each seat: ``You play agent, against simulator scripted-user-v0 (user)``.

``--backend NAME`` serves the model, read as ``arena eval`` reads it (one definition:
:func:`arena.commands.participant_options.participant_config`): ``hf`` (the default: transformers, float32),
``vllm`` (the model directory, a checkpoint's ``model/``, in the ``auto`` dtype as ``arena eval``
loads it: bfloat16 where this machine computes it faster, else float32), or a plugin policy
backend (``arena plugins backends``; docs/plugins.md), which gets PARTICIPANT as it is, except
that a run directory or ``RUN:POLICY`` becomes its newest checkpoint's directory (whose
``model/`` holds the weights, and whose run's prompt settings apply), with the ``auto`` dtype
and SmolLM2's tokenizer rendering its prompts. ``--backend`` with a bot, an unknown name (the
nearest are named), ``openai``, ``remote`` or ``scripted`` is refused before anything loads.

The rules are shown once; before each of your moves, your view of the board and the legal
moves. Type a move at ``your move>``: one that cannot be read or played now is explained and
asked again (it never counts against you). ``quit`` (or end of input, Ctrl-D) resigns; ``rules``
shows the rules again. At the end: the final board and the result from your side (win, draw or
loss, and every seat's return). Plain text in and out, so any terminal works.

Examples:

    arena play tictactoe-v0 --against minimax-v0 --seat first
    arena play connect-four-v0 --against runs/selfplay/x/checkpoints/step-00000012 --seat random
    arena play nim-v0 --against smollm2-135m --temperature 0.7 --game-arg max_retries=0
    arena play retail-v0 --against tiny --seat agent --simulator user=scripted-user-v0
    arena play tictactoe-v0 --against runs/selfplay/x --backend vllm
    arena play tictactoe-v0 --against rules --backend first-legal   # docs/plugins.md's backend

Exit status: 0 when the game ends or you resign; 2 for an unknown game, a bad --game-arg,
--seat or --backend, or a participant that cannot be loaded (named with its backend, before the
game starts); 1 when the game stops on an error of the game, of a bot or of a simulator (one
line naming it: a bot's action that is not legal, a game whose observation is not text, a
simulator that raised or replied with no text), or when a model opponent's context is full.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from arena.commands.participant_options import add_backend_argument, add_seat_arguments

if TYPE_CHECKING:
    from arena.play.config import GameConfig
    from arena.play.seats import Seat
    from arena.policies.config import PolicyConfig
    from arena.tournament.participants import Participant
    from games.text_env import TextGame


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("game", help="registered game id (see `arena games`)")
    parser.add_argument(
        "--against",
        required=True,
        metavar="PARTICIPANT",
        help="a bot id, smollm2-135m, tiny, a Hugging Face directory, a checkpoint directory "
        "(or its run directory: the newest; RUN:POLICY), or what --backend NAME loads",
    )
    add_backend_argument(parser)
    parser.add_argument(
        "--seat",
        default="first",
        help="your seat: first, second, random, or a player index (1 is player_1); default first",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="game and bot seed (default: a fresh one, printed)"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="a model opponent's sampling temperature (default 0: greedy)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="longest reply of a model opponent per turn (default: its run's, else 24)",
    )
    parser.add_argument(
        "--game-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="game constructor argument, value read as a Python literal (repeatable)",
    )
    add_seat_arguments(parser)
    parser.add_argument(
        "--role-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a model opponent's role argument, e.g. prefill=True (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    from arena.commands.eval_checks import with_simulators
    from arena.core.config import parse_assignments
    from arena.core.errors import ConfigError
    from arena.play.acting import check_act, resolve_act
    from arena.play.config import GameConfig
    from arena.tournament.checkpoint_paths import checkpoint_of, refuse_frozen_base
    from arena.tournament.human import pick_seat, play_human

    check_game_id(args.game)
    # a run directory plays its newest checkpoint; RUN/checkpoints/step-12 is step-00000012
    args.against, taken = checkpoint_of(args.against)
    if taken:
        print(taken, flush=True)
    refuse_frozen_base(args.against, "--against")  # a LoRA run's: its model/ is the base
    trained, max_new_tokens = trained_defaults(args.against, args.game)
    game = GameConfig(
        id=args.game,
        kwargs={**trained.kwargs, **parse_assignments(args.game_arg)},
        role=trained.role,
        role_kwargs={**trained.role_kwargs, **parse_assignments(args.role_arg)},
        roles=dict(trained.roles),
        simulators=dict(trained.simulators),
        act=resolve_act(command_line=args.act, game=trained.act),
    )
    if args.max_new_tokens is None:
        args.max_new_tokens = max_new_tokens
    env = make_env(game)
    game = with_simulators(game, args.simulator)
    check_act(game.act, game.id, env, game.simulators)  # before the model loads
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    human = pick_seat(args.seat, env.possible_agents, random.Random(seed))
    participant = resolve_one(args.against, game, args.backend, human)
    if participant.kind == "bot" and args.act is not None:
        raise ConfigError(
            f"--act {args.act} says how a model acts; bot {args.against!r} plays its own"
        )
    fill = seat_filler(participant, game, args, seed, env)
    opponents = {agent: fill(agent) for agent in env.possible_agents if agent != human}
    print(f"{game.id} against {participant.describe()}, seed {seed}")
    if all(agent in game.simulators for agent in opponents):
        print(f"note: every other seat is simulated; {participant.name} plays none of them")
    try:
        result = play_human(env, human, opponents, seed=seed, game_id=game.id)
    except KeyboardInterrupt:
        print("\nyou resigned; bye")
        return 130
    except Exception as err:  # a game's or a bot's bug mid-game: one line, not a traceback
        from arena.core.errors import CannotStart
        from arena.core.registry import RegistryError

        if isinstance(err, (ConfigError, RegistryError, CannotStart)):
            raise
        print(f"arena play: {game.id} stopped: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    return 1 if result.outcome == "stopped" else 0  # a simulator failed, or a model's context


def trained_defaults(spec: str, game_id: str) -> tuple[GameConfig, int | None]:
    """The game settings (``kwargs``, role, role kwargs) and reply length a checkpoint was
    trained with, read from its run's ``config.yaml``: a model trained with a prefilled answer
    tag and no rules in its prompt plays far worse when prompted any other way. Plain defaults
    for anything else (a bot, a Hugging Face directory, a checkpoint outside a run)."""
    from arena.play.config import GameConfig
    from arena.tournament.participants import run_config_of, trained_sampling

    try:
        run_config = run_config_of(spec)
    except Exception as err:  # an old or foreign run config: play with the defaults
        print(f"note: not reading the run config of {spec} ({err}); playing with the default role")
        return GameConfig(id=game_id), None
    if run_config is None:
        return GameConfig(id=game_id), None
    trained = next((g for g in run_config.games if g.id == game_id), None)
    max_new_tokens = trained_sampling(run_config, spec).max_new_tokens
    if trained is None:
        print(f"note: {spec} was not trained on {game_id}; playing with the default role")
        return GameConfig(id=game_id), max_new_tokens
    print(
        f"as trained: game {trained.kwargs}, {roles_line(trained)} {trained.role_kwargs}, "
        f"replies of at most {max_new_tokens} tokens"
    )
    return trained, max_new_tokens


def roles_line(game: GameConfig) -> str:
    """``role player-v0`` for a player game; a role game's role per seat (``roles
    proposer=proposer-v0 solver_0=solver-v0 ...``), which ``game.role`` does not say."""
    import games
    from arena.play.seating import seat_role_id

    try:
        env = games.make(game.id, **game.kwargs)
    except Exception:  # the game's own refusal is reported where it is built for play
        return f"role {game.role}"
    seats = {
        agent: f"simulator:{game.simulators[agent].id}"
        if agent in game.simulators
        else seat_role_id(game, env, agent)
        for agent in env.possible_agents
    }
    if set(seats.values()) == {game.role}:
        return f"role {game.role}"
    return "roles " + " ".join(f"{agent}={role}" for agent, role in seats.items())


def check_game_id(game_id: str) -> None:
    """An unknown id ends the command (exit 2) naming the nearest registered ids."""
    import games
    from arena.core.errors import ConfigError, nearest

    if game_id in games.ids():
        return
    close = nearest(game_id, games.ids(), n=3, cutoff=0.3)
    hint = (
        f"; did you mean {', '.join(map(repr, close))}?"
        if close
        else f"; registered games: {', '.join(games.ids())}"
    )
    raise ConfigError(f"unknown game {game_id!r}{hint} (see `arena games`)")


def make_env(game: GameConfig) -> TextGame:
    """The game, built once here so that a bad ``--game-arg`` is a config error, not a crash."""
    import games
    from arena.core.errors import ConfigError

    try:
        return games.make(game.id, **game.kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{game.id} with --game-arg {game.kwargs}: {err}") from None


def resolve_one(
    text: str, game: GameConfig, backend: str | None = None, human: str | None = None
) -> Participant:
    """The opponent on ``backend`` (``--backend``, as ``arena eval`` reads it:
    :func:`arena.commands.participant_options.participant_config`), checked as a tournament checks its
    participants (an unknown bot names the nearest, a path must be a model, a bot must be able
    to play the game, in a seat other than the person's ``human``; a plugin backend's model
    string is its own business)."""
    from arena.commands.participant_options import participant_config
    from arena.core.errors import ConfigError
    from arena.tournament.participants import resolve_participants

    config = participant_config(text, backend)
    resolved = resolve_participants([config], [game], minimum=1, taken=[human] if human else [])
    if len(resolved) != 1:
        names = ", ".join(p.name for p in resolved)
        raise ConfigError(f"--against {text!r} names {len(resolved)} models ({names}); pick one")
    return resolved[0]


def seat_filler(
    participant: Participant,
    game: GameConfig,
    args: argparse.Namespace,
    seed: int,
    env: TextGame,
) -> Callable[[str], Seat]:
    """A function from an agent to a fresh seat: the simulator ``game`` names for it, else
    ``participant`` in the seat's role. A model is loaded once, here, by its backend
    (:func:`policy_config`), and a model that fails to load is a config error naming it."""
    import games.bots
    import roles
    import simulators
    from arena.core.errors import ConfigError
    from arena.play.config import PlayConfig, SamplingConfig
    from arena.play.seats import BotSeat, SimulatorSeat

    if participant.kind == "bot":
        c = participant.config
        counter = itertools.count()

        def bot_seat(agent: str) -> Seat:
            if agent in game.simulators:
                spec = game.simulators[agent]
                simulator = simulators.make(spec.id, **spec.kwargs)
                if simulator.needs_model:
                    raise ConfigError(
                        f"simulator {spec.id} talks through a model: play --against a model"
                    )
                return SimulatorSeat(simulator, spec.id, timeout=spec.timeout)
            bot = games.bots.make(str(c.bot), seed=seed + next(counter), **c.bot_kwargs)
            return BotSeat(bot, participant.name)

        return bot_seat

    from arena.models import chat_tokenizer
    from arena.play.seating import SeatFactory
    from arena.policies.chat import ChatFormat
    from arena.policies.factory import make_policy
    from arena.policies.types import SamplingParams
    from arena.run.failures import one_line

    try:
        roles.make(game.role, **game.role_kwargs)
    except Exception as err:  # an unknown role or role argument, found before the model loads
        raise ConfigError(f"role {game.role} with --role-arg {game.role_kwargs}: {err}") from None
    try:
        params = SamplingParams(
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens or SamplingConfig().max_new_tokens,
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"--temperature/--max-new-tokens: {err}") from None
    config = policy_config(participant, seed)
    on = "" if config.backend == "hf" else f" on backend {config.backend}"
    print(f"loading {participant.model}{on} ...", flush=True)
    try:
        policy = make_policy(config)
        chat = ChatFormat(chat_tokenizer(participant.tokenizer))
    except Exception as err:
        raise ConfigError(
            f"participant {participant.name!r}: cannot load {participant.model}{on}: "
            f"{one_line(str(err))}"
        ) from None
    factory = SeatFactory(PlayConfig(games=[game], policy_name=participant.name), policy, chat)

    def model_seat(agent: str) -> Seat:
        if agent in game.simulators:  # a model-backed simulator talks through this model
            return factory.simulator_seat(game.id, env, agent)
        return factory.policy_seat(game.id, trained=False, params=params, env=env, agent=agent)

    return model_seat


def policy_config(participant: Participant, seed: int) -> PolicyConfig:
    """How this process builds the opponent's policy: on its backend, with the participant's
    tokenizer (a plugin backend reads its prompts' ids with it). ``hf`` loads float32 (a
    person waits on one reply at a time, and float32 replies are the ones a CPU run evaluated);
    ``vllm`` and plugin backends get the participant's ``dtype``, ``auto`` as in ``arena eval``
    (bfloat16 where this machine computes it faster, else float32)."""
    from arena.policies.config import PolicyConfig

    backend = participant.config.backend
    return PolicyConfig(
        backend=backend,
        model=str(participant.model),
        tokenizer=participant.tokenizer,
        name=participant.name,
        dtype="float32" if backend == "hf" else participant.config.dtype,
        seed=seed,
    )
