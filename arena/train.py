"""``arena train``: self-play training from a config, as a graph of local processes.

The trainer starts a broker on ``ipc://`` in the run directory, the inference actor(s), the
learner and N rollout actors (:mod:`arena.launch`), then coordinates them over the bus:

- **sync:** each step, the rollout actors collect ``episodes_per_step`` episodes with the current
  weights; the learner trains on them and publishes new weights; the next step starts once every
  inference actor has applied them.
- **async:** rollout actors keep collecting while the learner trains; a rollout actor waits
  while it is more than ``learner.batch.max_staleness`` steps ahead of the learner, and the
  learner drops (or down-weights) turns older than that.

Opponents: ``self-play`` (every seat trained), ``fixed`` (a reference bot on the other seats), or
``population``: before each step the trainer draws the opponent, the current policy (frozen for
that step) with ``opponents.latest_prob`` or else a checkpoint from the pool of the last
``opponents.pool_size`` (or the initial model), loads it into a second inference actor serving
``policy:pool``, and the rollout actors seat it on the untrained seats.

It evaluates before and after training (and every ``eval.every`` steps) against reference bots,
writes ``metrics.jsonl``, TensorBoard events, transcripts and checkpoints under
``<output_dir>/<name>/<time>/``, and ends with a before/after table (``eval_summary.md`` and
``eval_summary.json``). A crashed rollout actor is restarted; any other dead child stops the run
with an error that names it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from arena.bus import Actor, BusError, Message
from arena.config import RunConfig, load_run_config, to_yaml
from arena.evaluate import MatchResult, evaluate
from arena.launch import ChildDied, Launcher
from arena.models import load_tokenizer, model_dir
from arena.policies.chat import ChatFormat
from arena.policies.remote import RemotePolicy
from arena.rollout import SeatFactory, merge_collects
from arena.run_log import RunLog
from arena.run_plan import cpu_threads, device_for, make_run_dir, plan, resolve_for_run, validate
from arena.summary import write_eval_summary

log = logging.getLogger("arena.train")

POOL = "pool"
"""Policy name of the population opponents' inference actor."""


class Trainer:
    """Runs one training job: processes, coordination, evaluation and logs."""

    def __init__(self, config: RunConfig, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        self.launcher = Launcher(run_dir / "logs")
        self.log = RunLog(run_dir, config)
        self.version = 0
        self._acks: dict[str, int] = {}
        """The version each inference actor last acknowledged applying."""
        self.opponent: dict[str, str] | None = None
        self._pool_loaded = "initial"
        self._applied_event = asyncio.Event()
        self.step = 0
        self._stalled = 0

    # -- processes -------------------------------------------------------------------------
    def start_processes(self) -> None:
        c = self.config
        address = c.bus.address
        assert address is not None
        (self.run_dir / "learner.yaml").write_text(OmegaConf.to_yaml(OmegaConf.structured(c.learner)))
        hb = str(c.bus.heartbeat_interval)
        threads = cpu_threads(c)
        inference_env = {"OMP_NUM_THREADS": str(threads["inference"])} if threads else None
        learner_env = {"OMP_NUM_THREADS": str(threads["learner"])} if threads else None
        self.launcher.start("broker", ["-m", "arena.cli", "broker", "--bind", address,
                                       "--heartbeat-interval", hb,
                                       "--heartbeat-timeout", str(c.bus.heartbeat_timeout)])  # fmt: skip
        inference = [(f"inference-{i}", c.learner.name, c.seed + i) for i in range(c.inference.actors)]
        if c.opponents.mode == "population":
            inference.append(("inference-pool", POOL, c.seed + 99))
        for actor_name, policy_name, seed in inference:
            self.launcher.start(actor_name, [
                "-m", "arena.inference", "--address", address, "--name", policy_name,
                "--backend", c.inference.backend, "--actor-name", actor_name, "--model", c.model,
                "--dtype", c.inference.dtype, "--device", device_for(c.inference.device), "--seed", str(seed),
                "--max-batch", str(c.inference.max_batch), "--max-wait-ms", str(c.inference.max_wait_ms),
                "--max-queue", str(c.inference.max_queue), "--heartbeat-interval", hb], env=inference_env)  # fmt: skip
        self.launcher.start("learner", ["-m", "trainers.learner", "--address", address,
                                        "--config", str(self.run_dir / "learner.yaml")], env=learner_env)  # fmt: skip
        for i in range(c.rollout.actors):
            self.launcher.start(f"rollout-{i}", ["-m", "arena.rollout", "--address", address,
                                                 "--config", str(self.run_dir / "config.yaml"),
                                                 "--index", str(i)],
                                restartable=True, max_restarts=c.rollout.max_restarts)  # fmt: skip

    async def watch_children(self) -> None:
        while True:
            for event in self.launcher.check():
                self.log.event(event)
            await asyncio.sleep(0.5)

    # -- bus -------------------------------------------------------------------------------
    async def connect(self) -> None:
        actor = Actor("trainer", self.config.bus.address or "", kind="trainer",
                      heartbeat_interval=self.config.bus.heartbeat_interval)  # fmt: skip
        actor.subscribe("weights_ack.", self._on_ack)
        actor.subscribe("metrics.learner", lambda m: None)
        deadline = time.monotonic() + 120
        while True:
            try:
                await actor.start(timeout=5)
                break
            except BusError:
                await actor.close()
                if time.monotonic() > deadline:
                    raise
        self.actor = actor
        needed = {"learner", f"policy:{self.config.learner.name}", "rollout"}
        if self.config.opponents.mode == "population":
            needed.add(f"policy:{POOL}")
        while True:
            offered = {s for a in (await actor.request(service="broker.actors")).body for s in a["services"]}
            ready = sum(1 for a in (await actor.request(service="broker.actors")).body if a["kind"] == "rollout")
            if needed <= offered and ready >= self.config.rollout.actors:
                break
            if time.monotonic() > deadline + 600:
                raise TimeoutError(f"actors never came up; still missing {sorted(needed - offered)}")
            await asyncio.sleep(0.5)

    def _on_ack(self, msg: Message) -> None:
        body = msg.body
        if body.get("applied"):
            self._acks[body["actor"]] = int(body["version"])
            self._applied_event.set()
        elif "not newer" not in str(body.get("reason")):  # a re-publish of served weights is no news
            self.log.event(f"{body.get('actor')} refused weights v{body.get('version')}: {body.get('reason')}")

    async def learner(self, op: str, timeout: float = 3600.0) -> Any:
        return (await self.actor.request({"op": op}, service="learner", timeout=timeout)).body

    async def wait_weights(self, version: int, timeout: float = 600.0) -> None:
        """Until every inference actor serves ``version`` (or newer), asking each its status."""
        deadline = time.monotonic() + timeout
        service = f"policy:{self.config.learner.name}:status"
        for i in range(self.config.inference.actors):
            while True:
                status = await self.actor.request(service=service, dst=f"inference-{i}", timeout=30)
                if status.body["version"] >= version:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"inference-{i} did not apply weights v{version} in {timeout:.0f}s")
                self._applied_event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._applied_event.wait(), 0.5)

    # -- rollouts --------------------------------------------------------------------------
    async def collect(self, total: int, seed: int) -> dict[str, Any]:
        """``total`` episodes split over the rollout actors; a dead actor's share is retried."""
        n = self.config.rollout.actors
        shares = [total // n + (i < total % n) for i in range(n)]
        replies = []
        for attempt in range(self.config.rollout.max_restarts + 1):
            orders = [(i, s) for i, s in enumerate(shares) if s > 0]
            results = await asyncio.gather(*(self._order(i, s, seed + attempt * 10 + i) for i, s in orders),
                                           return_exceptions=True)  # fmt: skip
            shares = [0] * n
            for (i, s), result in zip(orders, results, strict=True):
                if isinstance(result, BaseException):
                    self.log.event(f"rollout-{i} failed its collect ({result}); re-queueing {s} episodes")
                    shares[i] = s
                else:
                    replies.append(result)
                    shares[i] = result["failed"]
            if not any(shares):
                break
            await asyncio.sleep(2.0)  # give the launcher time to restart the actor
        return merge_collects(replies)

    async def _order(self, index: int, episodes: int, seed: int) -> dict[str, Any]:
        order: dict[str, Any] = {"op": "collect", "episodes": episodes, "seed": seed}
        if self.opponent is not None:
            order["opponent"] = self.opponent
        reply = await self.actor.request(order, dst=f"rollout-{index}", service="rollout", timeout=3600)
        return reply.body

    # -- population opponents -----------------------------------------------------------------
    async def choose_opponent(self, seed: int) -> None:
        """Population mode: the current policy with ``latest_prob``, else a past checkpoint (or
        the initial model) from the pool, loaded into the pool inference actor."""
        c = self.config.opponents
        if c.mode != "population":
            return
        rng = random.Random(seed)
        if rng.random() < c.latest_prob:
            self.opponent = {"policy": self.config.learner.name, "label": f"main@{self.version}"}
            return
        checkpoints = sorted((self.run_dir / "checkpoints").glob("step-*/model"))[-c.pool_size:]
        pool = [("initial", None), *((p.parent.name, p) for p in checkpoints)]
        label, path = rng.choice(pool)
        if label != self._pool_loaded:
            version = int(label.split("-")[1]) if path is not None else 0
            target = str(path) if path is not None else str(model_dir(self.config.model))
            self.actor.send("control", {"command": "load", "path": target, "version": version},
                            dst="inference-pool")  # fmt: skip
            await self._wait_applied("inference-pool", version, exact=True)
            self._pool_loaded = label
        self.opponent = {"policy": POOL, "label": f"{POOL}@{label}"}

    async def _wait_applied(self, actor: str, version: int, exact: bool, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        self._acks.pop(actor, None)
        while self._acks.get(actor) != version if exact else self._acks.get(actor, -1) < version:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{actor} did not load weights v{version} in {timeout:.0f}s")
            self._applied_event.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._applied_event.wait(), 1.0)

    # -- evaluation ------------------------------------------------------------------------
    async def evaluate(self, label: str) -> list[MatchResult]:
        c = self.config
        factory = SeatFactory(c, RemotePolicy(self.actor, c.learner.name, timeout=600), self.chat)
        params = replace(factory.params, temperature=c.eval.temperature)
        total = c.eval.games * len(c.games) * len(c.eval.opponents)
        with self.log.progress(f"eval {label}", total) as advance:
            results = await evaluate(
                lambda game_id: factory.policy_seat(game_id, params=params),
                [g.id for g in c.games], c.eval.opponents, games_per_match=c.eval.games,
                seed=c.seed + 10_000, concurrency=c.eval.concurrency,
                game_kwargs={g.id: g.kwargs for g in c.games}, on_episode=advance,
            )  # fmt: skip
        self.log.evaluation(label, self.step, results)
        return results

    # -- the run ---------------------------------------------------------------------------
    async def run(self) -> int:
        self.chat = ChatFormat(load_tokenizer(self.config.model))
        self.start_processes()
        watcher = asyncio.create_task(self.watch_children())
        main = asyncio.create_task(self._train())
        done, _ = await asyncio.wait({watcher, main}, return_when=asyncio.FIRST_COMPLETED)
        for task in (watcher, main):
            task.cancel()
        try:
            if main in done:
                return main.result()
            watcher.result()  # raises ChildDied
            return 1
        finally:
            if hasattr(self, "actor"):
                await self.actor.close()
            self.launcher.stop_all()

    async def _train(self) -> int:
        await self.connect()
        status = await self.learner("status")
        self.step, self.version = status["step"], status["version"]
        self.log.resume_at(self.step)
        await self.wait_weights(self.version)
        before = self.log.load_eval("before")
        if before is None:
            before = [r.to_dict() for r in await self.evaluate("before")]
        started = time.monotonic()
        episodes = 0
        with self.log.training(first_step=self.step):
            if self.config.mode == "sync":
                episodes = await self._train_sync()
            else:
                episodes = await self._train_async()
        wall = time.monotonic() - started
        await self.learner("checkpoint")
        after = [r.to_dict() for r in await self.evaluate("after")]
        summary = write_eval_summary(self.run_dir, before, after, self.config)
        self.log.finish(summary, episodes_per_s=episodes / max(wall, 1e-9), mode=self.config.mode)
        return 0

    async def _train_sync(self) -> int:
        c = self.config
        episodes = 0
        while self.step < c.steps:
            t0 = time.monotonic()
            # Seeds (and so episode ids) follow the step: unique within a run, and a resumed run
            # replays exactly the steps its checkpoint lacks.
            await self.choose_opponent(seed=c.seed * 7 + self.step)
            collected = await self.collect(c.rollout.episodes_per_step, seed=(c.seed + 1) * 10**6 + self.step * 100)
            t_collect = time.monotonic() - t0
            sampled_with = self.version
            metrics = await self.learner("step")
            t_train = time.monotonic() - t0 - t_collect
            if metrics and "version" in metrics:
                self.version = int(metrics["version"])
                await self.wait_weights(self.version)
            self.step = self._next_step(metrics)
            episodes += collected["episodes"]
            self.log.step(self.step, metrics or {}, collected, collect_s=t_collect, train_s=t_train,
                          learner_version=sampled_with)  # fmt: skip
            await self._periodic()
        return episodes

    async def _train_async(self) -> int:
        c = self.config
        per_actor = max(1, c.rollout.episodes_per_step // c.rollout.actors)
        consumed = 0  # episodes the steps trained on (the producers' last rounds may not be)
        since_step: list[dict[str, Any]] = []  # collect replies the next step's row summarizes
        stop = asyncio.Event()

        async def produce(index: int) -> None:
            rounds = 0
            while not stop.is_set():
                while rounds - self.step > c.learner.batch.max_staleness and not stop.is_set():
                    await asyncio.sleep(0.1)
                try:
                    reply = await self._order(index, per_actor, seed=(c.seed + 1) * 10**7 + index * 10**5 + rounds)
                except BusError as err:
                    self.log.event(f"rollout-{index} failed a collect ({err}); continuing")
                    await asyncio.sleep(2.0)
                    continue
                rounds += 1
                since_step.append(reply)

        producers = [asyncio.create_task(produce(i)) for i in range(c.rollout.actors)]
        try:
            while self.step < c.steps:
                t0 = time.monotonic()
                await self.choose_opponent(seed=c.seed * 7 + self.step)
                while sum(r["episodes"] for r in since_step) < c.rollout.episodes_per_step:
                    await asyncio.sleep(0.1)
                sampled_with, t_wait = self.version, time.monotonic() - t0
                # The learner takes every turn that reached it; episodes reported from here on
                # go to the next step.
                collected, since_step[:] = merge_collects(since_step), []
                consumed += collected["episodes"]
                metrics = await self.learner("step")
                self.step = self._next_step(metrics)
                if metrics and "version" in metrics:
                    self.version = int(metrics["version"])
                # Generation went on the whole step long, while waiting and while training.
                self.log.step(self.step, metrics or {}, collected, collect_s=t_wait,
                              train_s=time.monotonic() - t0 - t_wait, learner_version=sampled_with,
                              overlapped=True)  # fmt: skip
                await self._periodic()
        finally:
            stop.set()
            for task in producers:
                task.cancel()
        return consumed

    def _next_step(self, metrics: dict[str, Any] | None) -> int:
        """The learner's step count is the run's: it counts every batch, even one whose turns
        carried no signal. A step skipped for a non-finite loss does not count and is retried
        with fresh episodes, a few times at most."""
        if metrics is None or "step" not in metrics:
            raise RuntimeError("the learner had no turns to train on; did every episode fail?")
        step = int(metrics["step"])
        if step == self.step:
            self._stalled += 1
            self.log.event(f"learner skipped step {step + 1} ({self._stalled} in a row): non-finite loss")
            if self._stalled >= 5:
                raise RuntimeError("the learner skipped 5 steps in a row (non-finite losses)")
        else:
            self._stalled = 0
        return step

    async def _periodic(self) -> None:
        c = self.config
        if c.eval.every and self.step % c.eval.every == 0 and self.step < c.steps:
            await self.evaluate(f"step {self.step}")


def train(config_path: str, overrides: list[str], dry_run: bool = False) -> int:
    """Entry point of ``arena train``; returns the exit code."""
    config = load_run_config(config_path, overrides)
    validate(config)
    if dry_run:
        print(plan(config))
        return 0
    if config.resume:
        resumed = load_run_config(Path(config.resume) / "config.yaml")
        config = replace(resumed, resume=config.resume)
    run_dir = make_run_dir(config)
    config = resolve_for_run(config, run_dir)
    (run_dir / "config.yaml").write_text(to_yaml(replace(config, resume=None)))
    print(f"arena train: run directory {run_dir}", flush=True)
    print(plan(config), flush=True)
    trainer = Trainer(config, run_dir)
    try:
        return asyncio.run(trainer.run())
    except ChildDied as err:
        print(f"arena train: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("arena train: interrupted; children stopped", file=sys.stderr)
        return 130
    finally:
        sock = run_dir / "bus.sock"
        if sock.exists():
            with contextlib.suppress(OSError):
                sock.unlink()
        shutil.rmtree(run_dir / "tmp", ignore_errors=True)
