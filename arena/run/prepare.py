"""What ``arena train`` does before anything starts: the config loaded, a resume's saved config
taken, every id and argument checked, the bus's keys found.

Nothing here imports torch or the coordinator, so ``arena train --dry-run`` and every config
error answer in about a second; :mod:`arena.run.coordinator` is imported only to run.
"""

from __future__ import annotations

from arena.bus.security import resolve_security
from arena.run.config import RunConfig, load_run_config
from arena.run.memory_plan import check_fits, host_memory, memory_plan
from arena.run.resume import resume_run
from arena.run.validation import validate


def prepare(config_path: str, overrides: list[str]) -> RunConfig | None:
    """The checked config of ``arena train CONFIG OVERRIDES``; None when there is nothing to do
    (a resumed run that is already complete, which said so). A bad config raises
    :class:`~arena.core.errors.ConfigError`, missing keys a security error."""
    config = load_run_config(config_path, overrides)
    if config.resume:  # the run's saved config, with the command line's overrides on top
        resumed = resume_run(config.resume, overrides)
        if resumed is None:
            return None  # already complete: said so
        config = resumed
    validate(config)
    if config.launcher == "local":  # every process on this host: the models must fit it
        check_fits(memory_plan(config), host_memory())
    if config.bus.address:
        # keys for a non-loopback address (or --insecure): a SecurityError, before anything
        resolve_security(config.bus.address)
    return config
