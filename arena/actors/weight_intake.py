"""How an inference actor takes weight and adapter updates: between batches, each acknowledged.

:class:`WeightIntake` is the part of :class:`arena.actors.inference.InferenceActor` that applies
what reaches it: a complete update from its :class:`~arena.weights.receiver.WeightReceiver`
(``_deliver``) or a ``load`` of adapters (``_load_adapters``) runs on the actor's one
generation thread, so it lands between two batches and a batch plays one version; every
outcome, applied or refused, is announced on topic ``weights_ack.<name>`` (``_ack``; the message
is described in :mod:`arena.actors.inference`). It is a mixin of the actor, not an object of its
own, because it works on the actor's own state: its policy, counters, bus actor, backend watch
and generation thread. It logs as ``arena.actors.inference``, the actor it belongs to.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import torch

from arena.actors.backend_watch import BackendWatch
from arena.bus import Actor, BusError
from arena.models import EMBEDDED_ALIASES, TINY_NAME, model_dir
from arena.models.lora_files import read_adapter
from arena.policies.base import Policy
from arena.policies.config import InferenceConfig
from arena.weights.buckets import NOT_NEWER
from arena.weights.receiver import WeightReceiver

log = logging.getLogger("arena.actors.inference")


class WeightIntake:
    """Applies weight and adapter updates on the generation thread and acknowledges each one."""

    # set by InferenceActor.__init__
    policy: Policy
    config: InferenceConfig
    name: str
    counters: Counter[str]
    actor: Actor
    backend: BackendWatch
    weights: WeightReceiver
    _executor: concurrent.futures.ThreadPoolExecutor

    def _deliver(self, version: int, state: dict[str, torch.Tensor], transport: str) -> None:
        # The single generation thread runs this between two batches, never during one.
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, self.backend.call, self._apply, version, state
        )
        future.add_done_callback(lambda f: self._applied(version, transport, f))

    def _apply(self, version: int, state: dict[str, torch.Tensor]) -> float:
        start = time.monotonic()
        self.policy.update_weights(state, version)
        return time.monotonic() - start

    def _applied(self, version: int, transport: str, future: asyncio.Future[float]) -> None:
        if future.cancelled():
            return
        err = future.exception()
        if err is not None:
            log.error("%s could not apply weights %d: %r", self.actor.name, version, err)
            self._refuse(version, repr(err), transport)
            return
        self.counters["weights_applied"] += 1
        log.info(
            "%s serves version %d (%s, applied in %.2fs)",
            self.actor.name,
            version,
            transport,
            future.result(),
        )
        self._ack(version, True, "", transport)

    def _load_adapters(self, body: Mapping[str, Any]) -> None:
        """``load`` with ``adapters``: checked here, read and applied on the generation thread
        (between batches, so a batch plays one step's adapters), acknowledged as ``load``."""
        version, adapters = body.get("version"), body.get("adapters")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            self._refuse(-1, f"load needs an integer 'version' >= 0, got {version!r}", "load")
            return
        held = self.policy.adapters()
        if (
            not isinstance(adapters, Mapping)
            or not adapters
            or not all(isinstance(p, str) and p for p in adapters.values())
        ):
            self._refuse(
                version, f"load needs 'adapters': name -> directory, got {adapters!r}", "load"
            )
            return
        unknown = [name for name in adapters if name not in held]
        if unknown:
            self._refuse(
                version,
                f"load names adapter {unknown[0]!r}, which {self.name} does not serve "
                f"(held: {', '.join(held) or 'none'})",
                "load",
            )
            return
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, self.backend.call, self._apply_adapters, version, dict(adapters)
        )
        future.add_done_callback(lambda f: self._applied(version, "load", f))

    def _apply_adapters(self, version: int, adapters: dict[str, str]) -> float:
        start = time.monotonic()
        for path in adapters.values():  # every directory readable and for this base, first
            read_adapter(path, self.config.model)
        for name, path in adapters.items():
            self.policy.load_adapter(name, path, base=self.config.model)  # type: ignore[attr-defined]
        self.policy.version = version
        return time.monotonic() - start

    def _refuse(self, version: int, reason: str, transport: str) -> None:
        self.counters["weights_rejected"] += 1
        # a learner's start publish of the version 0 every receiver loaded is no news
        repeat = version == self.policy.version and NOT_NEWER in reason
        (log.info if repeat else log.warning)(
            "%s refused weights %s, version %d keeps serving: %s",
            self.actor.name,
            version,
            self.policy.version,
            reason,
        )
        self._ack(version, False, reason, transport)

    def _ack(self, version: int, applied: bool, reason: str, transport: str) -> None:
        body = {
            "actor": self.actor.name,
            "version": version,
            "applied": applied,
            "reason": reason,
            "serving": self.policy.version,
            "transport": transport,
            "device": self.weights.device,
        }
        try:
            self.actor.publish(f"weights_ack.{self.name}", body)
        except BusError as err:
            log.warning("%s could not announce weights %s: %s", self.actor.name, version, err)


def located(path: str) -> str:
    """A ``load``'s ``path`` on this host: a shipped model's spec (``tiny``, ``smollm2-135m``)
    is its directory in this host's cache; anything else is a directory path as it is."""
    return str(model_dir(path)) if path in EMBEDDED_ALIASES or path == TINY_NAME else path
