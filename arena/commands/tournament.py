"""``arena tournament CONFIG [key=value ...]``: play participants against each other and rate them.

CONFIG is a YAML file (see ``configs/tournament.yaml``); ``key=value`` overrides any field
(``pairs=20``, ``out=runs/t1``, ``participants.0.sampling.temperature=0.7``). Participants are
reference bots, checkpoints (or a glob over a run's checkpoints), Hugging Face directories, the
embedded model, LoRA adapters on a base model (``model: smollm2-135m`` with ``adapter: PATH``, a
peft directory or a glob over a run's ``checkpoints/step-*/adapters/<policy>``),
OpenAI-compatible endpoints, or models of a plugin policy backend (``backend: NAME``, served by
an inference actor as ``hf`` is; the ``model`` string is passed to it as is); each has a name
and its own sampling settings.

Two-player games are played in seat-swapped pairs with a shared seed; N-player games rotate the
seats. Matches run concurrently, and each model participant's requests are batched across
matches by its inference actor; the participants on one base share one actor, which holds all
their adapters (each request names its own). Written to the output directory
(``runs/tournaments/<name>`` unless ``out`` is set):

- ``matches.jsonl``: one line per match (game, seed, seats, scores, returns, moves, termination,
  tokens, seconds, invalid, turns, forfeit), appended as each finishes;
- ``ratings.json``: the ``arena ratings --json`` object (Bradley-Terry ratings with 95%
  bootstrap intervals, the first-mover term, per-pairing tables);
- ``report.md`` and ``report.html`` (self-contained), with ``winrate.png`` and ``ratings.png``.

Running it again on the same output directory resumes: finished matches are not replayed and
none is recorded twice. A participant that cannot be loaded is named before any match starts
(exit 2; an adapter made for another base names both bases); one that fails mid-match forfeits
that match only, and the reason is recorded. A match that fails through no participant's doing
(the game's own code raises, a game that never ends) is not recorded: a line names it and the
exit status is 1; the same command plays it again. An inference actor that dies (killed, out of
memory) is started again, twice at most, and its matches go on; one that dies a third time
stops the tournament in one line naming it and its log, saying how many finished matches the
log keeps (exit 1): run the same command again to play the rest.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="tournament YAML file")
    parser.add_argument("overrides", nargs="*", help="key=value overrides")


def run(args: argparse.Namespace) -> int:
    from arena.core.errors import CannotStart
    from arena.run.launcher import ChildDied
    from arena.tournament.config import load_tournament_config
    from arena.tournament.records import finished_ids
    from arena.tournament.runner import output_dir, run_tournament

    config = load_tournament_config(args.config, args.overrides)
    log = output_dir(config) / "matches.jsonl"

    def kept() -> str:
        count = len(finished_ids(log)) if log.exists() else 0
        return f"{count} finished matches are in {log}; run the same command again to play the rest"

    try:
        result = run_tournament(config)
    except KeyboardInterrupt:  # Ctrl-C: what finished is in the log, and a rerun resumes
        print(f"\ninterrupted: {kept()}", file=sys.stderr)
        return 130
    except ChildDied as err:
        if isinstance(err, CannotStart):  # before the first match: the CLI's one line, exit 2
            raise
        print(f"arena tournament: stopped: {err}\n{kept()}", file=sys.stderr)
        return 1
    if result.forfeits:
        print(f"{result.forfeits} matches forfeited (reasons in matches.jsonl)")
    return 1 if result.failed else 0  # the line saying so was printed with the ratings
