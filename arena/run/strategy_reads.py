"""When a run reads its policy's exact strategy, and with which weights.

In the run's poker games (Kuhn, Leduc; :func:`arena.run.evaluation.readable_games`) the
coordinator reads the exploitability of the base model before training, of each checkpoint as it
is saved (a curve, ``arena plot``) and of the final checkpoint after training. Each seat is read
with the policy it plays: a policy on a model of its own with its ``model`` before training and
when frozen, else with its newest checkpoint at or before the step read
(:func:`arena.run.evaluation.base_weights`). The reads run in a thread: they take seconds to
minutes, and the event loop must keep the bus's heartbeats going meanwhile. Without OpenSpiel
nothing is read, and one event says why.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from arena.eval.exploitability import openspiel_missing
from arena.eval.strategy_reading import StrategyReading
from arena.policies.chat import ChatFormat
from arena.run.config import RunConfig
from arena.run.evaluation import base_weights, final_checkpoint, read_strategy, readable_games
from arena.run.run_log import RunLog
from trainers.checkpoint_dirs import step_dir_name


class StrategyReads:
    """The strategy reads of one run, logged to ``evals.jsonl`` (:meth:`RunLog.strategy`)."""

    def __init__(self, config: RunConfig, run_dir: Path, log: RunLog, chat: ChatFormat) -> None:
        self.config = config
        self.run_dir = run_dir
        self.log = log
        self.chat = chat
        """The shared policy's chat format (a policy on a model of its own brings its own)."""
        self.games = readable_games(config)
        self._said_on_base: set[str] = set()

    async def at_end(self, checkpoint: str | None) -> list[StrategyReading]:
        """The base model (before) and the final checkpoint (after: ``checkpoint``, what the
        learner's last ``checkpoint`` request returned, else the newest with a ``model/``)."""
        c = self.config
        if not self.games:
            return []
        missing = openspiel_missing()
        if missing is not None:  # one warning; the run's other results are still written
            self.log.event(
                f"strategy: not read (no exploitability of {', '.join(self.games)} before or "
                f"after training): {missing}"
            )
            return []
        sources = [("before", c.model, 0, self.base_weights(None))]
        final = final_checkpoint(c, checkpoint)
        if final is None:
            self.log.event("no checkpoint with a model/ to read: no exploitability after training")
        else:
            step, path = final
            sources.append(("after", str(path / "model"), step, self.base_weights(step)))
        readings: list[StrategyReading] = []
        for label, model, step, bases in sources:
            what = "".join(f", {name} {weights}" for name, weights in bases.items())
            self.log.console.print(
                f"strategy {label}: reading {model}{what} in {', '.join(self.games)}"
            )
            readings += await self._read(label, model, step, bases)
        return readings

    async def at_checkpoint(self, step: int) -> None:
        """The checkpoint of ``step`` just saved, read before ``checkpoint.keep`` may delete it.
        Seconds for Kuhn; nothing without OpenSpiel (:meth:`at_end` says why, once)."""
        model = self.run_dir / "checkpoints" / step_dir_name(step) / "model"
        if not self.games or openspiel_missing() is not None or not model.is_dir():
            return
        await self._read(f"step {step}", str(model), step, self.base_weights(step))

    def base_weights(self, step: int | None) -> dict[str, str]:
        """What each policy with a model of its own is read with at the run's ``step`` (None:
        before training). A trained one with no checkpoint at or before ``step`` is read on its
        ``model``, which the events log says once."""
        weights, missing = base_weights(self.config, self.run_dir, step)
        for name in missing:
            if name not in self._said_on_base:
                self._said_on_base.add(name)
                self.log.event(
                    f"strategy: policy {name} has no checkpoint at or before step {step}: its "
                    f"seats are read on its model {weights[name]}"
                )
        return weights

    async def _read(
        self, label: str, model: str, step: int, bases: dict[str, str]
    ) -> list[StrategyReading]:
        read = await asyncio.to_thread(
            read_strategy, self.config, self.chat, label, model, step, bases
        )
        self.log.strategy(read)
        return read
