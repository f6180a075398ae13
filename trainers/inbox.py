"""The learner's input queue: episodes in, validated samples out.

Each episode is parsed (``Episode.from_dict`` for bus bodies), turned into samples (returns,
token checks, :func:`trainers.batch.check_turn`: finite numbers, log-probabilities at most 0)
and queued. A malformed record or a duplicate id is dropped with a logged reason
and a counter, and the others go on. The bus thread adds while the training thread takes, so
the queue is guarded by a lock.

Episodes arrive in *units*: one episode (:meth:`Inbox.add`), or the episodes of one GRPO group
at once (:meth:`Inbox.add_group`). A step takes whole units, so it never trains on part of a
group (whose advantages would then be normalized over the members that happened to arrive) nor
on part of an episode, whatever the timing of the step against the arrivals and whatever
``max_batch_samples`` is.

Each take logs the ids of the episodes it took (``took N episodes: ID ...``, at INFO), so a
run's records say which episodes each step trained on: ``bench/chaos.py`` checks from them
that no episode was trained twice across faults and restarts.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable, Sequence
from typing import Any

from arena.records import Episode
from trainers.batch import Sample, episode_samples

log = logging.getLogger("arena.learner")


class Inbox:
    """Pending trained turns, oldest first, from de-duplicated, validated episodes."""

    def __init__(
        self,
        gamma: float,
        counters: Counter[str],
        policy: str | None = None,
        vocab_size: int | None = None,
        dedupe_window: int = 100_000,
        known_policies: Sequence[str] = (),
    ) -> None:
        self.gamma = gamma
        self.known_policies = tuple(known_policies)
        self.policy = policy
        self.vocab_size = vocab_size
        self.dedupe_window = dedupe_window
        self.counters = counters
        self._pending: deque[tuple[list[str], list[Sample]]] = deque()  # units, oldest first
        self._count = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        self.last_rejection = ""
        """Why the last episode was rejected (``episode ID: reason``): the run names it when a
        step is left with nothing to train on (a model whose replies carry NaN log-probs)."""

    def add(self, item: Episode | dict[str, Any]) -> bool:
        """Queue one episode's trained turns; False (and a counted reason) if it is dropped."""
        return self.add_group([item]) == 1

    def add_group(self, items: Iterable[Episode | dict[str, Any]]) -> int:
        """Queue several episodes as one unit that a step takes whole (the members of one
        group); each is checked on its own, and the number accepted is returned."""
        parsed: list[tuple[Episode, list[Sample]]] = []
        for item in items:
            try:
                episode = item if isinstance(item, Episode) else Episode.from_dict(item)
                parsed.append(
                    (
                        episode,
                        episode_samples(
                            episode, self.gamma, self.policy, self.vocab_size, self.known_policies
                        ),
                    )
                )
            except Exception as err:  # any malformed input: drop it, keep training
                ident = item.get("id", "?") if isinstance(item, dict) else getattr(item, "id", "?")
                self.reject(str(ident), err)
        unit: list[Sample] = []
        ids: list[str] = []
        accepted = 0
        with self._lock:
            for episode, samples in parsed:
                if episode.id in self._seen:
                    self.counters["rejected_duplicate"] += 1
                    log.info("dropped duplicate episode %s", episode.id)
                    continue
                self._seen[episode.id] = None
                unit.extend(samples)
                ids.append(episode.id)
                accepted += 1
                self.counters["episodes_accepted"] += 1
                if not samples:
                    self.counters["episodes_without_trained_turns"] += 1
            while len(self._seen) > self.dedupe_window:
                self._seen.popitem(last=False)
            if unit:
                self._pending.append((ids, unit))
                self._count += len(unit)
        return accepted

    def reject(self, ident: str, reason: Exception | str) -> None:
        """Count and log an episode that could not be used."""
        with self._lock:
            self.counters["rejected_bad_record"] += 1
            self.last_rejection = f"episode {ident}: {reason}"
        log.warning("rejected episode %s: %s", ident, reason)

    def take(self, limit: int = 0) -> list[Sample]:
        """The oldest pending samples, in whole units (episodes or groups): as many units as
        fit in ``limit`` samples, but at least one (all of them when limit <= 0)."""
        taken: list[Sample] = []
        ids: list[str] = []
        with self._lock:
            while self._pending and (
                limit <= 0 or not taken or len(taken) + len(self._pending[0][1]) <= limit
            ):
                unit_ids, unit = self._pending.popleft()
                taken.extend(unit)
                ids.extend(unit_ids)
            self._count -= len(taken)
        if ids:
            log.info("took %d episodes: %s", len(ids), " ".join(ids))
        return taken

    def __len__(self) -> int:
        return self._count

    def seen_ids(self) -> list[str]:
        with self._lock:
            return list(self._seen)

    def load_seen_ids(self, ids: list[str]) -> None:
        with self._lock:
            self._seen = OrderedDict((ident, None) for ident in ids[-self.dedupe_window :])
