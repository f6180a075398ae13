"""``arena eval PARTICIPANT [--adapter PATH] [--games ID ...] [--opponents BOT ...] [--n N]``:
evaluate one checkpoint, model, LoRA adapter or bot against reference bots, the way training
evaluates its policy.

PARTICIPANT is a checkpoint directory (``runs/selfplay/<time>/checkpoints/step-00000012``, or
``step-12`` for short), a run directory (its newest checkpoint, named on the first line), a
Hugging Face directory, ``smollm2-135m``, ``tiny``, or a registered bot id; ``--model SPEC`` names
a model instead, and ``--backend NAME`` the policy backend that serves it (``hf`` by default;
``vllm``; or a plugin backend, which gets the model string as it is; ``openai``, ``remote``,
``scripted`` and an unknown name are refused, exit 2). ``--adapter PATH`` plays a
LoRA adapter (a peft directory, e.g. a run's ``checkpoints/step-00000008/adapters/solver``) on
that model, which must be the base it was made for (else exit 2, naming both). A checkpoint inside a run directory (the model's, else the
adapter's) takes that run's games (with their ``kwargs`` and role settings) and its evaluation
opponents, games, temperature and reply length (a named policy's own ``max_new_tokens`` for
its checkpoint, ``RUN:POLICY``, or its adapter) unless the flags say otherwise. The participant plays every
seat in turn; the code is :func:`arena.eval.evaluate.evaluate`, the one training's evaluations
call, and a model is served by an inference actor on a private broker as in a tournament.

A run with named policies (``policies``, ``seat_policies``) is evaluated as it was trained
(:mod:`arena.tournament.run_policies`): its directory or a checkpoint of it plays each seat with
the policy that plays it in the run at that step (the shared policy's ``model/``, an adapter's
``adapters/<policy>/`` on the run's base, a model of its own's newest checkpoint by then, a
frozen model as it is), each listed first with its weights and seats; one policy alone
(``--adapter .../adapters/<policy>``, ``RUN:POLICY``, ``RUN:main``) plays only the seats it plays
in its run, the others filled as for any role game or player game (a run's game it plays no
seat of is left out, one ``--games`` names refused); ``--every-seat`` plays it in every seat.
Each row then names its policy (``kuhn-poker-v0 vs random-v0, policy responder: ...``; a player
game whose seats two policies play gets a row each, ``--n`` games apiece), and every seat
samples at the evaluation's temperature with its policy's other settings.

Prints one line per game and opponent (score with a 95% interval, W/D/L, invalid rate) and, with
``--json PATH``, writes the results as a JSON list. Exit 2 when the participant cannot be loaded.

Role games (``mae-v0``, ``retail-v0``, ...) have no opponents: the participant plays each role in
turn against the game's references (its strongest bot: scripted solvers, a ground-truth judge, a
scripted agent; the simulators its game config names, e.g. the scripted user), and each role's
own metric is printed with its 95% interval (:mod:`arena.eval.roles`). ``--n`` is the number of
tasks; ``--tries K`` plays each task K times and adds pass^1..pass^K for 0/1 metrics (sample
with ``--temperature`` above 0 for the tries to differ; refused where no game is a role game).

Simulated seats: a checkpoint's run config names the simulators it trained with, and those fill
their seats here. ``--simulator SEAT=ID`` (or ``--simulator ID`` for every seat a simulator may
fill) names one instead, e.g. ``--simulator user=llm-user-v0``; a seat no simulator may fill is
refused (exit 2), and so is a simulator for a seat of a player game (every seat plays
``player-v0``, evaluated against ``--opponents``; ``arena play --simulator`` plays one) or a bare
``--simulator ID`` where no evaluated game has a seat a simulator may fill; ``--opponents`` where
every evaluated game is a role game is refused too, and an opponent that cannot play a player
game (:mod:`arena.commands.eval_checks`). A
simulated seat is not evaluated. A seat a simulator may fill that none is named for is
evaluated, and gets the game's reference simulator while another seat is (the
retail user: ``scripted-user-v0``). Before its metrics, each evaluated seat's line says what
filled every other seat (``retail-v0 agent: user = simulator scripted-user-v0``).

An episode that cannot finish (a simulator or bot that fails) is counted as an error of its row,
with the first reason, and the evaluation goes on; a row whose every episode failed says so.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from arena.commands.participant_options import (
    add_backend_argument,
    add_seat_arguments,
    participant_config,
)

if TYPE_CHECKING:
    from arena.play.config import GameConfig
    from arena.play.seats import Seat


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "participant",
        nargs="?",
        default=None,
        help="checkpoint dir (or its run dir: the newest), HF dir, smollm2-135m, tiny or bot "
        "id (or give --model)",
    )
    parser.add_argument(
        "--model",
        default=None,
        metavar="SPEC",
        help="the model to evaluate, instead of PARTICIPANT: checkpoint dir, HF dir, "
        "smollm2-135m or tiny",
    )
    add_backend_argument(parser)
    parser.add_argument(
        "--adapter",
        default=None,
        metavar="PATH",
        help="play the LoRA adapter in this peft directory (e.g. a run's "
        "checkpoints/step-00000008/adapters/solver) on the model, the base it was made for",
    )
    parser.add_argument(
        "--games", nargs="+", default=None, help="game ids (default: the run's, else tictactoe-v0)"
    )
    parser.add_argument(
        "--opponents",
        nargs="+",
        default=None,
        help="bot ids; `strongest` is each game's strongest bot (default: the run's "
        "eval.opponents, else random-v0 strongest)",
    )
    parser.add_argument(
        "--n",
        type=int,
        default=None,
        help="games per game and opponent (default: the run's eval.games, else 200)",
    )
    parser.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="0 is greedy (default: the run's eval.temperature, else 0)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="longest reply (default: as in training, else 24)",
    )
    parser.add_argument(
        "--seed", type=int, default=10_000, help="seed of the first game (default: 10000)"
    )
    parser.add_argument(
        "--tries", type=int, default=1, help="role games: tries per task, for pass^k (1)"
    )
    add_seat_arguments(parser)
    parser.add_argument(
        "--every-seat",
        action="store_true",
        help="a run with named policies: play the one model or adapter in every seat, not "
        "only those its policy plays in the run",
    )
    parser.add_argument(
        "--concurrency", type=int, default=64, help="games played at once (default: 64)"
    )
    parser.add_argument("--json", default=None, metavar="PATH", help="write the results here")


def run(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import shutil
    import sys
    import tempfile

    import games as registry_games
    from arena.commands.eval_checks import (
        check_opponents,
        refuse_simulated_player_games,
        refuse_unused_flags,
        with_simulators,
    )
    from arena.core.errors import CannotStart, ConfigError
    from arena.eval.evaluate import evaluate
    from arena.eval.progress import Progress
    from arena.eval.roles import RoleResult, evaluate_roles, is_role_game
    from arena.play.acting import check_act, resolve_act
    from arena.play.config import GameConfig
    from arena.run.config import RunConfig
    from arena.run.launcher import ChildDied
    from arena.tournament.checkpoint_paths import checkpoint_of, on_disk, refuse_frozen_base
    from arena.tournament.config import TournamentConfig
    from arena.tournament.participants import (
        adapter_run_config,
        resolve_participants,
        run_config_of,
        trained_sampling,
    )
    from arena.tournament.run_policies import (
        Routing,
        evaluated_policy,
        games_played,
        header,
        run_participants,
    )
    from arena.tournament.serving import Seating

    typed = evaluated_spec(args.participant, args.model)
    # a run directory plays its newest checkpoint; RUN/checkpoints/step-12 is step-00000012
    spec, taken = checkpoint_of(typed)
    if taken:
        print(taken, flush=True)
    if args.adapter:
        args.adapter = on_disk(args.adapter)
    run_config = (
        run_config_of(spec)
        or (adapter_run_config(args.adapter) if args.adapter else None)
        or RunConfig()
    )
    named_run = bool(run_config.play.policies)
    if args.every_seat and not named_run:
        raise ConfigError(
            f"--every-seat: {args.adapter or typed} is no policy of a run with named policies; "
            "it plays every seat already"
        )
    named_run = named_run and not args.every_seat
    only = evaluated_policy(typed, spec, args.adapter) if named_run else None
    whole_run = named_run and only is None  # every policy of the run, each in its own seats
    if not args.adapter and not whole_run:
        refuse_frozen_base(spec)  # a LoRA run's checkpoint: its model/ is the untrained base
    known = {g.id: g for g in run_config.games}
    games = (
        [known.get(game_id, GameConfig(id=game_id)) for game_id in args.games]
        if args.games
        else run_config.games
    )
    flagged = [with_simulators(g, args.simulator) for g in games]
    named = [new.id for old, new in zip(games, flagged, strict=True) if new != old]
    games = flagged
    opponents = args.opponents or run_config.eval.opponents
    check_opponents(opponents, games)  # before any model loads
    for game in games:  # --act choice on a free-text game, before any model loads too
        act = resolve_act(args.act, None, game.act)
        check_act(act, game.id, lambda g=game: registry_games.make(g.id, **g.kwargs))
    n = run_config.eval.games if args.n is None else args.n
    if n < 1 or args.tries < 1:
        raise ConfigError(f"--n and --tries must be >= 1, got {n} and {args.tries}")
    temperature = run_config.eval.temperature if args.temperature is None else args.temperature
    notes: list[str] = []
    if whole_run:
        participants, notes = run_participants(Path(spec), run_config, games, temperature)
        if args.backend is not None:  # checked as for one model, then given to each
            participant_config(spec, args.backend, model=True)
        for each in participants:
            each.backend = args.backend or each.backend
    else:
        participant = participant_config(spec, args.backend, model=args.model is not None)
        if participant.model is None and args.act is not None:
            raise ConfigError(f"--act {args.act} says how a model acts; bot {spec!r} plays its own")
        participant.adapter = args.adapter
        participant.sampling.temperature = temperature
        if participant.model is not None:  # as long as the policy's replies were in training
            trained = trained_sampling(run_config, spec, args.adapter)
            participant.sampling.max_new_tokens = trained.max_new_tokens
        participants = [participant]
    if args.max_new_tokens is not None:
        for each in participants:
            each.sampling.max_new_tokens = args.max_new_tokens
    config = TournamentConfig(participants=participants, games=games)
    found = resolve_participants(participants, games, minimum=1)
    if len(found) != len(participants):  # a glob over checkpoints or adapters
        names = ", ".join(p.name for p in found)
        raise ConfigError(
            f"{args.adapter or spec!r} names {len(found)} models ({names}): arena eval "
            "evaluates one; pick one, or play them all in arena tournament"
        )
    name = found[0].name
    routing = Routing(name)
    if whole_run:
        routing = Routing(name, run_config.play, {p.name: p.name for p in found})
    elif only is not None:
        routing = Routing(name, run_config.play, {only: name})
    games, left_out = games_played(routing, games, run_config.games, bool(args.games))
    if whole_run:
        print(
            f"evaluating run {Path(spec).parent.parent} at {Path(spec).name}, each seat by "
            "the policy that plays it in the run:",
            flush=True,
        )
    elif only is None:
        print(f"evaluating {name} ({found[0].describe()})", flush=True)
    for line in [
        *header(routing, games, {p.name: p.describe() for p in found}, whole_run),
        *notes,
        *left_out,
    ]:
        print(line, flush=True)

    role_games = [g for g in games if is_role_game(registry_games.make(g.id, **g.kwargs))]
    player_games = [g for g in games if g not in role_games]
    refuse_simulated_player_games(named, [g.id for g in player_games])
    refuse_unused_flags(args.simulator, args.opponents, role_games, player_games)
    if args.tries > 1 and not role_games:
        raise ConfigError(
            f"--tries {args.tries}: pass^k is measured on a role game's tasks; "
            f"{', '.join(g.id for g in games)} play games against --opponents (raise --n)"
        )

    def policy_seat(game_id: str, env: Any, agent: str, seed: int = 0, role: bool = False) -> Seat:
        game = seating.game(game_id)
        player = routing.player(game, env, agent) or name
        return seating.seat(player, game, seed, *((env, agent) if role else ()))

    def labels(game: GameConfig) -> Callable[[str], str]:
        probe = registry_games.make(game.id, **game.kwargs)
        return lambda agent: routing.label(game, probe, agent)

    # the inference actors' logs: kept where a failure names them, removed after a whole eval
    logs = Path(tempfile.mkdtemp(prefix="arena-eval-"))
    seating = Seating(config, found, logs, act=args.act)

    async def main() -> list:
        episodes = n * len(opponents) * sum(len(routing.player_seats(g)) for g in player_games)
        episodes += n * args.tries * sum(len(routing.role_seats(g)) for g in role_games)
        try:
            await seating.start()
            with Progress("eval", episodes) as progress:
                # a crashed inference actor is restarted meanwhile (its requests sent again)
                return await seating.supervise(play(progress))
        finally:
            await seating.close()

    async def play(progress: Progress) -> list:
        results: list = []
        if player_games:
            results += await evaluate(
                lambda game_id, env, agent: policy_seat(game_id, env, agent),
                [g.id for g in player_games],
                opponents,
                games_per_match=n,
                seed=args.seed,
                concurrency=args.concurrency,
                game_kwargs={g.id: g.kwargs for g in player_games},
                on_episode=progress.advance,
                seats={g.id: routing.player_seats(g) for g in player_games},
            )
        for game in role_games:
            results += await evaluate_roles(
                lambda g, env, agent, seed: policy_seat(g, env, agent, seed, role=True),
                lambda g, env, agent, seed: seating.reference(
                    name, seating.game(g), env, agent, seed
                ),
                game.id,
                tasks=n,
                tries=args.tries,
                seats=routing.role_seats(game),
                simulated=list(game.simulators),
                seed=args.seed,
                concurrency=args.concurrency,
                game_kwargs=game.kwargs,
                on_episode=progress.advance,
                policy_of=labels(game),
            )
        return results

    try:
        results = asyncio.run(main())
    except ChildDied as err:
        if isinstance(err, CannotStart):  # before the first episode: the CLI's line, exit 2
            raise
        print(f"arena eval: stopped: {err}", file=sys.stderr)
        return 1
    shutil.rmtree(logs, ignore_errors=True)
    shown: set[tuple[str, str]] = set()
    for result in results:
        if isinstance(result, RoleResult) and (result.game, result.seat) not in shown:
            shown.add((result.game, result.seat))
            print(result.seats_line())
        print(result.line())
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in results], indent=1) + "\n")
    return 0


def evaluated_spec(participant: str | None, model: str | None) -> str:
    """What is evaluated: PARTICIPANT or ``--model``, exactly one of them (else a usage error,
    exit 2)."""
    from arena.core.errors import ConfigError

    if (participant is None) == (model is None):
        raise ConfigError(
            "give the participant to evaluate either as PARTICIPANT or as --model SPEC "
            f"(got {'both' if participant is not None else 'neither'})"
        )
    return str(participant if participant is not None else model)
