"""``arena train``: self-play training from a config, as a graph of local processes.

The :class:`RunCoordinator` starts a broker on ``ipc://`` in the run directory (or, with
``bus.address`` set, connects to the broker already running there and starts none), the
inference actor(s), the learner and N rollout actors (:mod:`arena.run.processes`: every one an
``arena`` subcommand; each count may be 0), waits until the actors it needs are on the bus
(``wait.*``: its own children and any that joined from elsewhere), then drives them over the
bus:

- **sync:** each step, the rollout actors collect ``episodes_per_step`` episodes with the current
  weights, in groups of ``rollout.group_size`` that share a seed (:mod:`arena.run.collection`),
  so every group lands whole in the step's batch; once the learner holds them
  (:mod:`arena.run.delivery`: episodes travel apart from the collect's reply), it trains on
  them and publishes new weights; the next step starts once every inference actor has applied
  them (:mod:`arena.run.weight_sync`).
- **async:** rollout actors keep collecting (whole groups per order) while the learner trains;
  the staleness bound ``learner.batch.max_staleness`` is kept by pacing (:class:`CollectStream
  <arena.run.stream.CollectStream>`): an order starts only while the untrained episodes stay
  within (max_staleness + 1) batches, and a step waits for any order in flight that would
  otherwise end up older than the bound, so no turn is dropped for staleness.

Opponents: ``self-play`` (every seat trained), ``fixed`` (a reference bot on the other seats), or
``population`` (:mod:`arena.run.population`).

It evaluates before and after training (and every ``eval.every`` steps) against reference bots
(:mod:`arena.run.evaluation`), and a random legal mover once in the same games; in Kuhn and
Leduc poker it reads the exact strategy's exploitability before training, at each checkpoint and
after training (:mod:`arena.run.strategy_reads`).
It writes ``metrics.jsonl``, TensorBoard events, transcripts and checkpoints under
``<output_dir>/<name>/<time>/`` (:mod:`arena.run.run_log`), and ends with a before/after table
(``eval_summary.md`` and ``eval_summary.json``). A crashed rollout actor, inference actor, the
run's own broker, or the learner is restarted, and so is a hung one (:mod:`arena.run.hangs`);
any other dead child stops the run with an error that names it. A restarted learner resumes
from its last checkpoint, and the run goes back to that step and continues
(:mod:`arena.run.learner_restart`). An inference actor, learner or rollout actor the run waits
for and did not start that leaves the bus or dies is named at once, with the command that
starts it again, and again when it is back (:mod:`arena.run.departures`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from arena.bus import Actor, BusError
from arena.eval.summary import write_eval_summary
from arena.models import chat_tokenizer
from arena.play.stats import merge_collects
from arena.policies.chat import ChatFormat
from arena.run.addresses import bus_address, own_broker
from arena.run.bases import trained_bases
from arena.run.bus_join import join_bus
from arena.run.collection import Collector, sync_order_seed
from arena.run.config import RunConfig
from arena.run.delivery import Deliveries
from arena.run.departures import Departures
from arena.run.directory import listing, rollout_actors
from arena.run.evaluation import evaluate_baseline, evaluate_policy
from arena.run.failures import EmptySteps, Rejections, SkippedSteps
from arena.run.hangs import HangWatch
from arena.run.inference_settings import SettingsCheck
from arena.run.launcher import Launcher
from arena.run.learner_restart import LearnerClient, LearnerRestarted
from arena.run.policy_learners import PolicyLearners
from arena.run.population import Population
from arena.run.processes import actor_commands, start_processes
from arena.run.ray_launcher import RayLauncher
from arena.run.resume import before_training, saved_baseline
from arena.run.roster import wait_for_actors
from arena.run.run_log import RunLog
from arena.run.strategy_reads import StrategyReads
from arena.run.stream import CollectStream
from arena.run.watch import Watchdog
from arena.run.weight_sync import WeightSync


class RunCoordinator:
    """Runs one training job: starts its processes and drives its steps."""

    def __init__(self, config: RunConfig, run_dir: Path) -> None:
        self.config = config
        self.run_dir = run_dir
        self.address = bus_address(config, run_dir)
        self.own_broker = own_broker(config, run_dir)
        self.launcher = (
            RayLauncher(run_dir / "logs", config.ray, self.address, config.cpu_threads)
            if config.launcher == "ray"
            else Launcher(run_dir / "logs", preload=config.preload)
        )
        self.log = RunLog(run_dir, config)
        self.weights = WeightSync(
            config.learner.name, self.log.event, timeout=config.wait.weights_timeout
        )
        # the learners of named policies with models of their own (none in most runs)
        self.policy_learners = PolicyLearners(
            trained_bases(config.play), self.log.event, config.wait.weights_timeout
        )
        self.version = 0
        self.step = 0
        self.empty = EmptySteps(config.rollout.max_empty_steps, run_dir, self.log)
        self.rejections = Rejections(
            lambda: [("learner", self.learner), *self.policy_learners.askers()]
        )
        self.skipped = SkippedSteps(self.log)
        self.hangs = HangWatch(self.launcher, config.bus.heartbeat_timeout, self.log.event)
        # inference actors and learners the run waits for and does not start: named when
        # gone, and when back
        self.departures = Departures(config, run_dir, self.address, self.launcher, self.log.event)

    # -- processes and bus -----------------------------------------------------------------
    async def watch_children(self) -> None:
        ticks = 0
        while True:
            for event in self.launcher.check():
                self.log.event(event)
            if self.own_broker and hasattr(self, "actor"):
                self.hangs.broker_silent(self.actor)
            ticks += 1
            if ticks % 10 == 0 and hasattr(self, "actor"):  # every 5 s: batch times vs timeout
                with contextlib.suppress(BusError):
                    self.hangs.check(await listing(self.actor, timeout=2.0, attempts=1))
            await asyncio.sleep(0.5)

    async def connect(self) -> None:
        """Join the bus as ``trainer`` (:func:`~arena.run.bus_join.join_bus`)."""
        c = self.config
        actor = Actor(
            "trainer", self.address, kind="trainer", heartbeat_interval=c.bus.heartbeat_interval
        )
        self.weights.attach(actor)
        self.policy_learners.attach(actor)
        self.hangs.attach(actor)  # children the broker declares dead while they live: killed
        self.departures.attach(actor, self.hangs)
        actor.subscribe("metrics.learner", lambda m: None)
        await join_bus(actor, c.bus, self.own_broker)
        self.actor = actor
        self.collector = Collector(
            actor,
            lambda: rollout_actors(actor),
            c.rollout.max_restarts,
            self.log.event,
            c.rollout.group_size,
            wait_timeout=c.wait.timeout,
            lease_timeout=c.rollout.lease_timeout,
        )
        self.watchdog = Watchdog(self.log.event, lambda: listing(actor), c.wait.report_every)
        # what `arena status` shows of the run: its long waits and how its leases went
        actor.status["waiting"] = self.watchdog.current
        actor.status["leases"] = self.collector.leases.as_dict
        self.collector.watchdog = self.watchdog
        self.weights.watchdog = self.watchdog
        # an inference actor started with settings unlike the run's is named in events.log
        self.weights.inspect = SettingsCheck(c, self.run_dir, self.log.event)
        self.population = Population(c, self.run_dir, actor, self.weights)
        # `await self.learner(op)`: LearnerRestarted when the learner restarted meanwhile
        self.learner = LearnerClient(actor, self.watchdog, c.wait.timeout)
        self.policy_learners.connect(actor, self.watchdog, c.wait.timeout)
        self.deliveries = Deliveries(lambda: self.learner("status", timeout=30), self.log.event)
        self.weights.learner_check = self.learner.check_restart

    async def _rewind(self, restart: LearnerRestarted) -> None:
        """Go back to a restarted learner's step: drop the metrics rows past it, wait until
        every inference actor serves exactly its version (it rolled them back), and count
        deliveries from here."""
        while True:
            status = restart.status
            self.log.event(
                f"{restart} (the run was at step {self.step}, v{self.version}): continuing "
                f"from step {status['step']}"
            )
            self.step, self.version = int(status["step"]), int(status["version"])
            self.log.resume_at(self.step)
            try:
                await self.weights.wait_serving(self.version, exact=True)
                await self.deliveries.start()
                return
            except LearnerRestarted as again:  # restarted once more meanwhile
                restart = again

    # -- the run ---------------------------------------------------------------------------
    async def run(self) -> int:
        self.chat = ChatFormat(chat_tokenizer(self.config.model))
        self.strategy = StrategyReads(self.config, self.run_dir, self.log, self.chat)
        self.commands = actor_commands(self.config, self.run_dir)
        self.launcher.expect([c.name for c in self.commands])
        # the broker first: the trainer joins it before the actors start (an external broker
        # that does not answer then fails the run before anything was started)
        start_processes(self.launcher, [c for c in self.commands if c.name == "broker"])
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

    async def evaluate(self, label: str) -> list[dict[str, Any]]:
        results = await evaluate_policy(
            self.actor, self.config, self.chat, self.log, label, self.step
        )
        return [r.to_dict() for r in results]

    async def _train(self) -> int:
        await self.connect()
        start_processes(self.launcher, [c for c in self.commands if c.name != "broker"])
        await wait_for_actors(
            self.actor, self.config, self.run_dir, self.address, self.log.verbatim
        )
        status = await self.learner("status")
        self.step, self.version = status["step"], status["version"]
        for warning in status.get("warnings", []):
            self.log.event(f"learner: {warning}")
        self.log.resume_at(self.step)
        await self.weights.wait_serving(self.version)
        await self.policy_learners.start()
        before, said = before_training(self.log.load_eval("before"), self.config.eval, self.step)
        if said:
            self.log.event(said)
        if before is None:
            before = await self.evaluate("before")
        baseline, said = saved_baseline(self.log.load_eval("baseline"), self.config.eval)
        if said:
            self.log.event(said)
        if baseline is None:
            baseline = [r.to_dict() for r in await evaluate_baseline(self.config, self.log)]
        started = time.monotonic()
        await self.deliveries.start()
        episodes = 0
        while True:
            with self.log.training(first_step=self.step):
                if self.config.mode == "sync":
                    episodes += await self._train_sync()
                else:
                    episodes += await self._train_async()
            try:
                saved = await self.learner.final_checkpoint(self.step)
                break
            except LearnerRestarted as restart:  # died saving it: train its lost steps again
                await self._rewind(restart)
        wall = time.monotonic() - started
        await self.policy_learners.checkpoint()
        after = await self.evaluate("after")
        readings = await self.strategy.at_end(saved.get("path") if saved else None)
        summary = write_eval_summary(
            self.run_dir,
            before,
            after,
            self.config.name,
            baseline=baseline,
            readings=[r.to_dict() for r in readings],
        )
        self.log.finish(summary, episodes_per_s=episodes / max(wall, 1e-9), mode=self.config.mode)
        return 0

    async def _choose_opponent(self) -> None:
        self.collector.opponent = await self.population.choose(
            self.config.seed * 7 + self.step, self.version, self.policy_learners.versions()
        )

    async def _train_sync(self) -> int:
        c = self.config
        episodes = 0
        while self.step < c.steps:
            try:
                t0 = time.monotonic()
                await self._choose_opponent()
                again = self.empty.in_a_row + self.skipped.in_a_row
                collected = await self.collector.collect(
                    c.rollout.episodes_per_step, seed=sync_order_seed(c.seed, self.step, again)
                )
                await self.deliveries.wait(collected["episodes"])
                t_collect = time.monotonic() - t0
                sampled_with = self.version
                metrics = await self._step_learners(collected["episodes"])
                await self.rejections.note(metrics, collected, self.policy_learners.idle())
                if self.empty.untrained(metrics, self.step + 1, collected):
                    continue  # collected again; NothingToTrain once it keeps happening
                t_train = time.monotonic() - t0 - t_collect
                if metrics and "version" in metrics:
                    self.version = int(metrics["version"])
                    await self.weights.wait_serving(self.version)
                self.step = self.skipped.next_step(metrics, self.step)
                episodes += collected["episodes"]
                self.log.step(
                    self.step,
                    metrics or {},
                    collected,
                    collect_s=t_collect,
                    train_s=t_train,
                    learner_version=sampled_with,
                    leases=self.collector.leases.after_step(metrics),
                )
                await self._periodic()
            except LearnerRestarted as restart:  # the step runs again from its checkpoint
                await self._rewind(restart)
        return episodes

    async def _train_async(self) -> int:
        c = self.config
        consumed = 0  # episodes the steps trained on (the producers' last rounds may not be)
        stream = CollectStream(
            self.collector,
            c.rollout.episodes_per_step,
            # a resumed run's leases (and so episode ids) must differ from the ones its
            # checkpoint's learner has seen, or every episode is dropped as a duplicate
            seed=(c.seed + 1) * 10**7 + self.step * 10**8,
            version=self.admission_version,
            max_staleness=c.learner.batch.max_staleness,
            on_event=self.log.event,
        )
        # The stream orders at once: its first orders must carry the first step's opponent, or a
        # population run's first episodes would play the fixed bot (seating's fallback)
        await self._choose_opponent()
        producing = asyncio.create_task(stream.run())
        rewound = False
        try:
            while self.step < c.steps:
                try:
                    t0 = time.monotonic()
                    await self._choose_opponent()
                    while not stream.step_ready() or not stream.ready_for(self.version):
                        if producing.done():
                            producing.result()  # raises why it stopped
                        await asyncio.sleep(0.1)
                    sampled_with, t_wait = self.version, time.monotonic() - t0
                    # The learner takes every turn that reached it; episodes reported from here on
                    # go to the next step.
                    collected = merge_collects(stream.take())
                    consumed += collected["episodes"]
                    await self.deliveries.wait(collected["episodes"])
                    metrics = await self._step_learners(collected["episodes"])
                    if metrics is None and rewound:
                        # orders sampled by the dead learner's weights: all discarded
                        self.log.event("nothing to train on since the learner restarted; waiting")
                        rewound = False
                        continue
                    rewound = False
                    await self.rejections.note(metrics, collected, self.policy_learners.idle())
                    if self.empty.untrained(metrics, self.step + 1, collected):
                        continue
                    self.step = self.skipped.next_step(metrics, self.step)
                    if metrics and "version" in metrics:
                        self.version = int(metrics["version"])
                    # Generation went on the whole step long, while waiting and while training.
                    self.log.step(
                        self.step,
                        metrics or {},
                        collected,
                        collect_s=t_wait,
                        train_s=time.monotonic() - t0 - t_wait,
                        learner_version=sampled_with,
                        overlapped=True,
                        leases=self.collector.leases.after_step(metrics),
                    )
                    await self._periodic()
                except LearnerRestarted as restart:
                    # what was collected for the dead learner's step is gone with it
                    stream.take()
                    await self._rewind(restart)
                    rewound = True
        finally:
            stream.stop()
            producing.cancel()
        return consumed

    async def _step_learners(self, episodes: int) -> dict[str, Any] | None:
        """The run's learner's step metrics, with those of every named policy's own learner
        (stepped at the same time, on the same ``episodes``) under its name."""
        if not self.policy_learners.learners:
            return await self.learner.step(self.version)
        own, others = await asyncio.gather(
            self.learner.step(self.version), self.policy_learners.train(episodes, self.step + 1)
        )
        return {**own, **others} if own is not None else None

    async def admission_version(self) -> int:
        """The oldest version a turn of an order starting now can have
        (:meth:`WeightSync.admission_version`)."""
        return await self.weights.admission_version(
            self.version, self.config.learner.batch.max_staleness
        )

    async def _periodic(self) -> None:
        c = self.config
        if c.eval.every and self.step % c.eval.every == 0 and self.step < c.steps:
            await self.evaluate(f"step {self.step}")
        if c.checkpoint_every and self.step % c.checkpoint_every == 0 and self.step < c.steps:
            await self.strategy.at_checkpoint(self.step)
