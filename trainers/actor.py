"""The learner on the bus: a thin actor around :class:`~trainers.learner.Learner`.

- **Input.** ``episode`` messages addressed to service ``learner`` (body = ``Episode.to_dict()``);
  malformed or duplicate ones are dropped with a logged reason and a counter.
- **Updates.** Once ``batch.batch_samples`` trained turns are pending, the learner steps on a
  worker thread (the event loop keeps answering and heartbeating meanwhile). With
  ``batch_samples = 0`` it steps only when asked (``{"op": "step"}``, for a synchronous loop).
- **Output.** After each update the weights go out as ``weights`` messages on topic
  ``weights.<name>``, one per bucket (arena/weights.py), and the step's metrics as a ``control``
  message on topic ``metrics.learner``. The current weights are published once at start, so
  inference actors serve a resumed policy. By default a version is written once into shared
  memory and the buckets reference it (same-host receivers map it; others fetch the bytes from
  this actor's ``weights:<name>`` service); ``--weight-transport bus`` sends the bytes in the
  buckets instead (arena/weight_publisher.py).
- **Requests** to service ``learner``, body ``{"op": ...}``:
  ``status`` -> {step, version, pending, counters, metrics};
  ``add`` with ``episodes: [...]`` -> {accepted, rejected};
  ``step`` -> the metrics of an update over whatever is pending (null when nothing is);
  ``checkpoint`` -> {path}; ``publish`` -> {version} (re-sends the current weights).

Run it as a process::

    python -m trainers.learner --address ipc:///tmp/arena.sock --config learner.yaml lr=...
    torchrun --nproc-per-node 4 -m trainers.learner --address tcp://host:5555 ...
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import logging
import signal
from collections.abc import Callable
from typing import Any

from omegaconf import OmegaConf

from arena.bus import Actor, Message
from arena.weight_publisher import WeightPublisher
from trainers.config import LearnerConfig
from trainers.learner import Learner

log = logging.getLogger("arena.learner")
METRICS_TOPIC = "metrics.learner"


class LearnerActor:
    """Serves ``learner`` on the bus for one in-process :class:`Learner` (rank 0)."""

    def __init__(self, learner: Learner, address: str, name: str = "learner", publish_on_start: bool = True,
                 shm_weights: bool = True) -> None:  # fmt: skip
        self.learner = learner
        self.address = address
        self.name = name
        self.publish_on_start = publish_on_start
        self.publisher = WeightPublisher(learner.config.name, shm=shm_weights,
                                         bucket_bytes=learner.config.bucket_bytes)  # fmt: skip
        self.last_metrics: dict[str, float] = {}
        # One worker thread: updates, exports and saves never overlap.
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="learner")
        self._wake = asyncio.Event()
        self._actor: Actor | None = None

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Serve until ``stop`` is set (or forever)."""
        stop = stop or asyncio.Event()
        actor = Actor(self.name, self.address, kind="learner")
        actor.serve("learner", self._on_request)
        actor.on("episode", self._on_episode)
        self.publisher.attach(actor)
        await actor.start()
        self._actor = actor
        try:
            if self.publish_on_start:
                await self._publish()
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
        if self.learner.add_episode(body):
            self._wake.set()

    async def _on_request(self, msg: Message) -> Any:
        body = msg.body if isinstance(msg.body, dict) else {}
        op = body.get("op")
        if op == "status":
            state = self.learner.state
            return {"step": state.step, "version": self.learner.version,
                    "pending": self.learner.pending_samples, "counters": dict(state.counters),
                    "metrics": self.last_metrics}  # fmt: skip
        if op == "add":
            episodes = body.get("episodes") or []
            accepted = self.learner.add_episodes(episodes)
            if accepted:
                self._wake.set()
            return {"accepted": accepted, "rejected": len(episodes) - accepted}
        if op == "step":
            return await self._train()
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

    async def _train(self) -> dict[str, float] | None:
        metrics = await self._in_worker(self.learner.step)
        if metrics is None:
            return None
        self.last_metrics = metrics
        log.info("step %d: loss %.4f, %d turns, %.0f tok/s", metrics["step"], metrics.get("loss", 0.0),
                 metrics["samples"], metrics.get("tokens_per_s", 0.0))  # fmt: skip
        assert self._actor is not None
        self._actor.publish(METRICS_TOPIC, metrics)
        if "version" in metrics:  # an update happened (skipped or empty steps keep the weights)
            await self._publish()
        return metrics

    async def _publish(self) -> None:
        actor, loop = self._actor, asyncio.get_running_loop()
        assert actor is not None

        def send(body: dict[str, Any]) -> None:  # from the worker; each bucket is its own callback
            loop.call_soon_threadsafe(actor.publish, self.publisher.topic, body, "weights")

        await self._in_worker(self._export_and_publish, send)

    def _export_and_publish(self, send: Callable[[dict[str, Any]], None]) -> None:
        """On the worker (never during an update): export, then bucket (write to shared memory)."""
        self.publisher.publish(self.learner.export_weights(), self.learner.version, send)


def load_config(path: str | None, overrides: list[str]) -> LearnerConfig:
    """Schema defaults, then the YAML file, then ``a.b=c`` overrides (omegaconf)."""
    merged = OmegaConf.structured(LearnerConfig)
    if path:
        merged = OmegaConf.merge(merged, OmegaConf.load(path))
    if overrides:
        merged = OmegaConf.merge(merged, OmegaConf.from_dotlist(overrides))
    return LearnerConfig.from_dict(OmegaConf.to_container(merged, resolve=True))  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trainers.learner", description=__doc__.split("\n")[0])
    parser.add_argument("--address", required=True, help="broker address (ipc://, tcp://)")
    parser.add_argument("--name", default="learner", help="actor name on the bus")
    parser.add_argument("--config", help="YAML file with LearnerConfig fields")
    parser.add_argument("--weight-transport", choices=["shm", "bus"], default="shm",
                        help="shm: same-host receivers map a shared-memory file (default); bus: bytes in the buckets")  # fmt: skip
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. optim.lr=1e-5")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    learner = Learner(load_config(args.config, args.overrides))
    if not learner.dist.is_main:
        learner.follow()
        return

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await LearnerActor(learner, args.address, args.name, shm_weights=args.weight_transport == "shm").run(stop)

    asyncio.run(serve())


if __name__ == "__main__":
    main()
