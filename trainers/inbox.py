"""The learner's input queue: episodes in, validated samples out.

Each episode is parsed (``Episode.from_dict`` for bus bodies), turned into samples (returns,
token checks) and queued. A malformed record or a duplicate id is dropped with a logged reason
and a counter, and the others go on. The bus thread adds while the training thread takes, so
the queue is guarded by a lock.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict, deque
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
    ) -> None:
        self.gamma = gamma
        self.policy = policy
        self.vocab_size = vocab_size
        self.dedupe_window = dedupe_window
        self.counters = counters
        self._pending: deque[Sample] = deque()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, item: Episode | dict[str, Any]) -> bool:
        """Queue one episode's trained turns; False (and a counted reason) if it is dropped."""
        try:
            episode = item if isinstance(item, Episode) else Episode.from_dict(item)
            samples = episode_samples(episode, self.gamma, self.policy, self.vocab_size)
        except Exception as err:  # any malformed input: drop it, keep training
            ident = item.get("id", "?") if isinstance(item, dict) else getattr(item, "id", "?")
            self.reject(str(ident), err)
            return False
        with self._lock:
            if episode.id in self._seen:
                self.counters["rejected_duplicate"] += 1
                log.info("dropped duplicate episode %s", episode.id)
                return False
            self._seen[episode.id] = None
            while len(self._seen) > self.dedupe_window:
                self._seen.popitem(last=False)
            self._pending.extend(samples)
            self.counters["episodes_accepted"] += 1
            if not samples:
                self.counters["episodes_without_trained_turns"] += 1
        return True

    def reject(self, ident: str, reason: Exception | str) -> None:
        """Count and log an episode that could not be used."""
        with self._lock:
            self.counters["rejected_bad_record"] += 1
        log.warning("rejected episode %s: %s", ident, reason)

    def take(self, limit: int = 0) -> list[Sample]:
        """The oldest ``limit`` pending samples (all of them when limit <= 0)."""
        with self._lock:
            count = len(self._pending) if limit <= 0 else min(limit, len(self._pending))
            return [self._pending.popleft() for _ in range(count)]

    def __len__(self) -> int:
        return len(self._pending)

    def seen_ids(self) -> list[str]:
        with self._lock:
            return list(self._seen)

    def load_seen_ids(self, ids: list[str]) -> None:
        with self._lock:
            self._seen = OrderedDict((ident, None) for ident in ids[-self.dedupe_window :])
