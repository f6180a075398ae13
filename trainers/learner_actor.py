"""The learner on the bus: a thin actor around :class:`~trainers.learner.Learner`.

It lives in ``trainers/``, not beside the other actors in ``arena/actors/``, because it is the
learner's bus front: there it would make the actors layer depend on ``trainers``, which
``tests/test_layers.py`` forbids. Nothing needs it there, since the launcher starts it as the
``arena learner`` subcommand (``arena/commands/learner.py`` imports it when run), never by a
static import.

- **Input.** ``episode`` messages addressed to service ``learner``. The body is one
  ``Episode.to_dict()``, or a list of them: the episodes of one group (``rollout.group_size``
  episodes from one seed), which a step then takes all together or not at all, so a step never
  normalizes a group's advantages over only the members that had arrived (the rollout actor
  sends each group so). Malformed or duplicate episodes are dropped with a logged reason and a
  counter; the others of their group go on.
- **Updates.** Once ``batch.batch_samples`` trained turns are pending, the learner steps on a
  worker thread (the event loop keeps answering and heartbeating meanwhile). With
  ``batch_samples = 0`` it steps only when asked (``{"op": "step"}``, for a synchronous loop).
- **Output.** After each update the weights go out as ``weights`` messages on topic
  ``weights.<name>``, one per bucket (arena/weights/buckets.py), and the step's metrics as a
  ``control`` message on topic ``metrics.learner``; among them the staleness of the step's
  turns (``staleness_mean``, ``staleness_p50``, ``staleness_max``, in versions; ``arena train``
  logs them to ``metrics.jsonl`` as ``learner/staleness_*``). The current weights are published
  once at start, so inference actors serve a resumed policy. By default a version is written
  once into shared memory and the buckets reference it (same-host receivers map it; others
  fetch the bytes from this actor's ``weights:<name>`` service); ``--weight-transport bus``
  sends the bytes in the buckets instead (arena/weights/publisher.py). With named policies
  (trainers/adapters.py) a step's update is a delta: only the adapters that changed, on top of
  the version published before (``since``); a receiver that does not serve that version refuses
  it, saying it needs a full update, and the learner then publishes every adapter again.
- **Late joiners.** The learner listens to the broker's ``actor.joined`` notices. When an actor
  that will receive ``weights.<name>`` joins (it subscribed to that topic or a prefix of it,
  such as ``weights.``), the current weights go out again, so an inference actor started after
  a publish (a restart, a scale-up, a resumed run) does not serve version 0 forever. Joins
  coalesce: one catch-up publish runs at a time and at most one more waits behind it, whatever
  the number of joins. Version 0 is never sent again: every receiver starts from version 0
  weights and refuses a version that is not newer than the one it serves.
- **Restarts.** A learner started again (killed, then restarted by ``arena train``'s launcher
  or by hand) resumes from its last checkpoint (``checkpoint.resume``), so its version goes back
  to that checkpoint's step, which may be older than what the inference actors serve. Every
  learner process has an ``epoch`` (its start time in nanoseconds) that its weight buckets and
  its ``status`` carry: receivers take a newer epoch's weights even when their version is not
  newer (arena/weights/assembler.py), so its start publish rolls every inference actor back to
  the checkpoint, and the trainer tells the restart from the epoch and continues from there
  (arena/run/learner_restart.py). An episode with a trained turn sampled under a version newer
  than this learner's (by weights of the dead learner that no checkpoint holds) is discarded,
  counted (``discarded_newer_version``, in the metrics as ``count/discarded_newer_version``) and
  logged.
- **Requests** to service ``learner``, body ``{"op": ...}``:
  ``status`` -> {step, version, epoch, pending, training, counters, metrics, warnings}
  (``training``: a step is under way, its weights' publish included; ``metrics``: the last
  step's; ``warnings``: what the run should show, e.g. a disk short of room for the checkpoints
  to keep, which ``arena train`` prints as an event);
  ``add`` with ``episodes: [...]`` -> {accepted, rejected};
  ``step`` -> the metrics of an update over whatever is pending (null when nothing is);
  with ``at`` (the run's step, sent to a named policy's own learner) it is numbered ``at`` when
  this learner missed steps, and it is not taken (null, the turns kept) when this learner is
  already at ``at`` (:meth:`~trainers.learner.Learner.step`);
  ``checkpoint`` -> {path}; ``publish`` -> {version} (re-sends the current weights).

Run it as a process::

    arena learner --address ipc:///tmp/arena.sock --config learner.yaml optim.lr=1e-5
    torchrun --nproc-per-node 4 -m arena learner --address tcp://host:5555 ...
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from typing import Any

from arena.bus import Actor, Message
from arena.weights.buckets import NEEDS_FULL
from arena.weights.cuda_ipc import NEEDS_BYTES
from arena.weights.publisher import WeightPublisher
from trainers.learner import Learner

log = logging.getLogger("arena.learner")
METRICS_TOPIC = "metrics.learner"
JOINED_TOPIC = "actor.joined"
"""The broker's notice of a (re)registered actor: its public info, ``topics`` included."""


class LearnerActor:
    """Serves ``learner`` on the bus for one in-process :class:`Learner` (rank 0)."""

    def __init__(
        self,
        learner: Learner,
        address: str,
        name: str = "learner",
        publish_on_start: bool = True,
        shm_weights: bool = True,
    ) -> None:
        self.learner = learner
        self.address = address
        self.name = name
        self.publish_on_start = publish_on_start
        self.epoch = time.time_ns()
        """This process's start: a later learner (a restart) has a larger one (hosts' clocks
        agree far better than the seconds a restart takes)."""
        self.publisher = WeightPublisher(
            learner.config.name,
            shm=shm_weights,
            bucket_bytes=learner.config.bucket_bytes,
            epoch=self.epoch,
        )
        self.last_metrics: dict[str, float] = {}
        # present from the start, so that every step's metrics report it (0 until a restart)
        learner.state.counters["discarded_newer_version"] += 0
        # One worker thread: updates, exports and saves never overlap.
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="learner")
        self._wake = asyncio.Event()
        self._actor: Actor | None = None
        self._started = asyncio.Event()
        """Set once the start publish (if any) is done: catch-ups wait for it."""
        self._catch_up: asyncio.Task[None] | None = None
        self._catch_up_again = False
        self._closing = False
        self._published: int | None = None
        """The version last published (a delta is made against it); None before the first."""
        self._training = 0
        """Steps under way, their weights' publish included (``training`` in ``status``)."""

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (or forever)."""
        stop = stop or asyncio.Event()
        actor = Actor(self.name, self.address, kind="learner")
        actor.serve(self.learner.config.service, self._on_request)
        actor.status["policy_version"] = lambda: self.learner.version
        actor.on("episode", self._on_episode)
        actor.subscribe(JOINED_TOPIC, self._on_actor_joined)
        actor.subscribe(f"weights_ack.{self.publisher.name}", self._on_weights_ack)
        self.publisher.attach(actor)
        await actor.start()
        self._actor = actor
        try:
            if self.learner.version > 0:
                log.info(
                    "%s starts at version %d (epoch %d): inference actors roll back to it, and "
                    "episodes sampled under a newer version are discarded",
                    self.name,
                    self.learner.version,
                    self.epoch,
                )
            if self.publish_on_start:
                await self._publish()
            self._started.set()
            while not stop.is_set():
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=0.2)
                except TimeoutError:
                    continue
                self._wake.clear()
                while not stop.is_set() and self._batch_ready():
                    try:
                        await self._train()
                    except Exception:  # e.g. out of memory on one batch: log it, keep serving
                        self.learner.state.counters["step_errors"] += 1
                        log.exception("learner step failed; its turns are dropped")
        finally:
            self._closing = True
            self._started.set()  # wakes a catch-up still waiting for the start publish
            if self._catch_up is not None:  # let a running catch-up finish; none starts after it
                await asyncio.gather(self._catch_up, return_exceptions=True)
            await actor.close()
            self.publisher.close()
            await self._in_worker(self.learner.close)
            self._worker.shutdown(wait=True)

    def _batch_ready(self) -> bool:
        threshold = self.learner.config.batch.batch_samples
        return threshold > 0 and self.learner.pending_samples >= threshold

    # -- handlers --------------------------------------------------------------------------
    def _on_episode(self, msg: Message) -> None:
        try:
            body = msg.body
        except Exception as err:  # an unreadable body: count it like any bad record
            self.learner.inbox.reject(f"in message {msg.id}", err)
            return
        group = body if isinstance(body, list) else [body]
        if self.learner.add_group([e for e in group if self._admit(e)]):
            self._wake.set()

    def _admit(self, body: Any) -> bool:
        """False (counted and logged) for an episode with a trained turn sampled under a newer
        version than this learner's: weights of a learner that died after publishing them, and
        that no checkpoint holds. A malformed body passes, for the inbox to reject."""
        turns = body.get("turns") if isinstance(body, dict) else None
        versions = [
            t.get("policy_version")
            for t in (turns if isinstance(turns, list) else [])
            if isinstance(t, dict) and t.get("trained", True) and self._mine(body, t)
        ]
        newest = max((v for v in versions if isinstance(v, int)), default=-1)
        if newest <= self.learner.version:
            return True
        counters = self.learner.state.counters
        counters["discarded_newer_version"] += 1
        log.warning(
            "discarded episode %s: sampled under version %d, newer than this learner's %d "
            "(a learner before a restart published it; %d discarded so far)",
            body.get("id"),
            newest,
            self.learner.version,
            counters["discarded_newer_version"],
        )
        return False

    def _mine(self, episode: dict[str, Any], turn: dict[str, Any]) -> bool:
        """Whether ``turn`` is of a seat this learner trains: every seat, or (``batch.policy``,
        a run of several models) its policy's only; the others' versions are other learners'."""
        policy = self.learner.config.batch.policy
        if policy is None:
            return True
        seats = episode.get("seats")
        seat = seats.get(turn.get("seat")) if isinstance(seats, dict) else None
        return not isinstance(seat, dict) or seat.get("policy") == policy

    def _on_actor_joined(self, msg: Message) -> None:
        """An actor (re)registered: if it receives this learner's weights, send them again."""
        try:
            info = msg.body
            name, topics = info["name"], info["topics"]
        except Exception:  # an unreadable notice: nothing to catch up on
            return
        if name == self.name or not isinstance(topics, list):
            return
        if not any(isinstance(t, str) and self.publisher.topic.startswith(t) for t in topics):
            return
        log.debug("%s joined, subscribed to %s", name, topics)
        self._publish_again()

    def _on_weights_ack(self, msg: Message) -> None:
        """A receiver refused a delta (it did not serve the version the delta was made against:
        it restarted, or missed an update): send every tensor again."""
        body = msg.body if isinstance(msg.body, dict) else {}
        if isinstance(body.get("actor"), str) and "device" in body:
            device = body["device"]
            self.publisher.note_receiver(body["actor"], device if isinstance(device, str) else None)
        reason = str(body.get("reason", ""))
        if body.get("applied") is False and (NEEDS_FULL in reason or NEEDS_BYTES in reason):
            log.info("%s: %s; publishing every tensor again", body.get("actor"), reason)
            self._publish_again()

    def _publish_again(self) -> None:
        """Schedule a full publish of the current weights (coalesced, see the module docstring)."""
        if self._catch_up is not None and not self._catch_up.done():
            self._catch_up_again = True  # it may have sent buckets before this need arose
        else:
            self._catch_up = asyncio.get_running_loop().create_task(self._catch_up_publish())

    async def _catch_up_publish(self) -> None:
        """Publish the current weights for late joiners, again while more joined meanwhile."""
        await self._started.wait()
        self._catch_up_again = True
        while self._catch_up_again and not self._closing:
            self._catch_up_again = False
            if self.learner.version == 0:  # every receiver serves version 0 already
                return
            log.info(
                "publishing version %d again for actors that joined late", self.learner.version
            )
            try:
                await self._publish()
            except Exception:
                log.exception("publishing weights for a late joiner failed")
                return
            self.learner.state.counters["catch_up_publishes"] += 1

    async def _on_request(self, msg: Message) -> Any:
        body = msg.body if isinstance(msg.body, dict) else {}
        op = body.get("op")
        if op == "status":
            state = self.learner.state
            return {
                "step": state.step,
                "version": self.learner.version,
                "epoch": self.epoch,
                "pending": self.learner.pending_samples,
                "training": self._training > 0,
                "counters": dict(state.counters),
                "last_rejection": self.learner.inbox.last_rejection,
                "metrics": self.last_metrics,
                "warnings": list(self.learner.warnings),
            }
        if op == "add":
            episodes = body.get("episodes") or []
            accepted = self.learner.add_episodes(e for e in episodes if self._admit(e))
            if accepted:
                self._wake.set()
            return {"accepted": accepted, "rejected": len(episodes) - accepted}
        if op == "step":
            at = body.get("at")
            if at is not None and (isinstance(at, bool) or not isinstance(at, int)):
                raise ValueError(f"step: 'at' must be the run's step (an integer), not {at!r}")
            return await self._train(at)
        if op == "checkpoint":
            path = await self._in_worker(self.learner.save_checkpoint)
            return {"path": str(path)}
        if op == "publish":
            await self._publish()
            return {"version": self.learner.version}
        raise ValueError(f"unknown op {op!r}; expected status, add, step, checkpoint or publish")

    # -- work ------------------------------------------------------------------------------
    async def _in_worker(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    async def _train(self, at: int | None = None) -> dict[str, float] | None:
        self._training += 1
        try:
            return await self._train_and_publish(at)
        finally:
            self._training -= 1

    async def _train_and_publish(self, at: int | None = None) -> dict[str, float] | None:
        metrics = await self._in_worker(self.learner.step, at)
        if metrics is None:
            return None
        self.last_metrics = metrics
        log.info(
            "step %d: loss %.4f, %d turns, %.0f tok/s, staleness p50 %.1f max %.0f",
            metrics["step"],
            metrics.get("loss", 0.0),
            metrics["samples"],
            metrics.get("tokens_per_s", 0.0),
            metrics.get("staleness_p50", 0.0),
            metrics.get("staleness_max", 0.0),
        )
        assert self._actor is not None
        self._actor.publish(METRICS_TOPIC, metrics)
        if "version" in metrics:  # an update happened (skipped or empty steps keep the weights)
            await self._publish(delta=True)
        return metrics

    async def _publish(self, delta: bool = False) -> None:
        """Send the current weights. ``delta``: where the learner's weights are separable
        (named policies), only what changed since the version published last."""
        actor, loop = self._actor, asyncio.get_running_loop()
        assert actor is not None

        def send(body: dict[str, Any]) -> None:  # from the worker; each bucket is its own callback
            loop.call_soon_threadsafe(actor.publish, self.publisher.topic, body, "weights")

        since = self._published if delta and self.learner.separable_weights else None
        await self._in_worker(self._export_and_publish, send, since)

    def _export_and_publish(
        self, send: Callable[[dict[str, Any]], None], since: int | None
    ) -> None:
        """On the worker (never during an update): export, then bucket (write to shared memory)."""
        version = self.learner.version
        state = self.learner.export_weights(
            changed_only=since is not None, on_device=self.publisher.on_device(self.learner.device)
        )
        self.publisher.publish(state, version, send, since=since)
        self._published = version
