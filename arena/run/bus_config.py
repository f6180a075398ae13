"""The sections of the run config about the bus: its broker and heartbeats (``bus``), and the
actors a run waits for on it (``wait``). Re-exported by :mod:`arena.run.config`."""

from __future__ import annotations

from dataclasses import dataclass

from arena.core.errors import ConfigError


@dataclass
class BusConfig:
    address: str | None = None
    """Broker address. None: ``arena train`` starts a broker of its own on ``ipc://`` in the run
    directory (one machine), and restarts it if it dies. Set (e.g. ``tcp://HOST:5555``): a
    broker already running there (``arena broker --bind tcp://*:5555``), which the run's own
    processes connect to and no broker is started in its place; actors started on other hosts
    join the run through it. ``arena train`` fails within ``connect_timeout`` if none answers."""
    connect_timeout: float = 10.0
    """Seconds ``arena train`` waits for the broker at ``address`` to answer before it fails
    with an error that names the address (a broker of its own gets longer: it is starting)."""
    max_restarts: int = 3
    """Times the launcher restarts the run's own broker (``address`` unset), on the same
    address, before the run fails. Its actors register again by themselves."""
    routing: str | None = None
    """How the run's actors send requests (``arena.bus.peers``): ``auto`` (peer to peer where
    a connection is up, else through the broker), ``direct`` or ``brokered``. None leaves it to
    ``ARENA_ROUTING`` (else ``auto``); set, it is exported as ``ARENA_ROUTING`` to the run's
    processes. Actors started elsewhere choose their own."""
    heartbeat_interval: float = 1.0
    """Seconds between heartbeats."""
    heartbeat_timeout: float = 10.0
    """Seconds of silence before an actor is declared dead; a child of the run whose process
    still lives is then hung (stopped, or an inference actor with a backend call stuck past
    ``inference.hang_timeout``), and is killed and restarted (:mod:`arena.run.hangs`). At least
    3 heartbeats."""

    def __post_init__(self) -> None:
        if not self.heartbeat_interval > 0:
            raise ConfigError(f"bus.heartbeat_interval must be > 0, got {self.heartbeat_interval}")
        if self.heartbeat_timeout < 3 * self.heartbeat_interval:
            raise ConfigError(
                f"bus.heartbeat_timeout ({self.heartbeat_timeout:g} s) must span at least 3 "
                f"heartbeats (bus.heartbeat_interval={self.heartbeat_interval:g} s): one late "
                "beat would get a healthy actor declared dead and killed"
            )


@dataclass
class WaitConfig:
    """The actors a run waits for before it starts: its own children and those that join it
    from elsewhere through an external broker (``bus.address``)."""

    rollout_actors: int | None = None
    """Rollout actors (kind ``rollout``, named ``rollout-<i>``) that must be on the bus before
    the first collect. None: ``rollout.actors`` (the ones the run starts), at least 1. More may
    join later: each takes part from the next collect on."""
    inference_actors: int | None = None
    """Inference actors serving ``policy:<learner.name>`` that must be on the bus before the
    run starts. None: ``inference.actors`` (the ones the run starts), at least 1. Sync mode
    waits for every one on the bus to serve each new version, late joiners included."""
    timeout: float = 600.0
    """Seconds to wait for those actors and the learner before the run fails, naming what is
    missing and the commands that start it."""
    weights_timeout: float = 600.0
    """Seconds a wait for weights may take: every inference actor serving a new version (sync
    mode, and after a learner restart), the learner's re-publish after a broker restart, and the
    pool actor loading a checkpoint (population mode). Past it the wait is abandoned with a
    :class:`~arena.run.weight_sync.WeightSyncTimeout` that names the actor and the version, in
    ``events.log`` and on the console. Ten minutes: a large model's buckets over ``tcp://``
    while the inference actor finishes its batch."""
    report_every: float = 30.0
    """While the run waits on an actor (a collect, a learner step, weights reaching the
    inference actors), every this many seconds it reports what it waits for and on whom, with
    their heartbeats (console and ``events.log``), so a stalled actor shows by name."""
