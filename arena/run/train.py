"""``arena train``'s process: make the run directory, write the files actors read, print the
plan, run the coordinator, and turn the ways a run ends into an exit status and one line."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import sys
from pathlib import Path

from arena.bus import BusError
from arena.bus.peers import ROUTING_ENV
from arena.core.registry import PluginFailed
from arena.run.addresses import local_address
from arena.run.bus_join import NoBroker
from arena.run.config import RunConfig
from arena.run.coordinator import RunCoordinator
from arena.run.failures import NothingToTrain
from arena.run.hangs import HangTimeoutTooShort
from arena.run.launcher import ChildDied
from arena.run.plan import plan
from arena.run.processes import write_configs
from arena.run.roster import ActorsMissing
from arena.run.run_dir import make_run_dir, resolve_for_run
from arena.run.run_lock import hold_run


def train(config: RunConfig) -> int:
    """Run a checked config (:func:`arena.run.prepare.prepare`) to its end; the exit code."""
    if config.bus.routing:  # read by every bus actor: the trainer's and the children's
        os.environ[ROUTING_ENV] = config.bus.routing
    run_dir = make_run_dir(config)
    lock = hold_run(run_dir)  # before anything is written: one trainer per run directory
    config = resolve_for_run(config, run_dir)
    # config.yaml and learner.yaml before anything starts: actors started elsewhere read them
    write_configs(config, run_dir)
    print(f"arena train: run directory {run_dir}", flush=True)
    print(plan(config, run_dir), flush=True)
    coordinator = RunCoordinator(config, run_dir)
    try:
        return asyncio.run(coordinator.run())
    except (ChildDied, NoBroker, ActorsMissing, NothingToTrain, HangTimeoutTooShort) as err:
        print(f"arena train: {err}", file=sys.stderr)
        return 1
    except PluginFailed as err:  # e.g. an evaluation's bot: built when first played
        print(f"arena train: {err}", file=sys.stderr)
        return 1
    except BusError as err:  # an actor's own error the run cannot go on from
        said = str(err).lower()
        hint = (
            f"free space there and continue with resume={run_dir}"
            if "no space left" in said
            else f"make it writable and continue with resume={run_dir}"
            if "read-only file system" in said
            else "see logs/"
        )
        print(f"arena train: {err.message} ({hint})", file=sys.stderr)
        return 1
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        # nothing a restart can fix: say so in one line; the checkpoints are renamed into place
        # only once complete (trainers/checkpoint.py), so the last one stays loadable
        print(
            f"arena train: the disk of {run_dir} is full ({err}); free space there and continue "
            f"with resume={run_dir}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("arena train: interrupted; children stopped", file=sys.stderr)
        return 130
    finally:
        sock = Path(local_address(run_dir).removeprefix("ipc://"))
        if sock.exists():
            with contextlib.suppress(OSError):
                sock.unlink()
        shutil.rmtree(run_dir / "tmp", ignore_errors=True)
        lock.close()
