"""The waits longer than a minute that no config field sets, in one place.

Every wait in Arena is bounded, and a bound over :data:`CONSTANT_WAIT_MAX` seconds is either a
config field (whose docstring says what it bounds) or a constant here, with why it is that long.
``tests/arena/core/test_limits.py`` fails on any literal wait over that in ``arena/`` outside
this module and the config dataclasses' defaults. Stdlib only, so every layer may import it.
"""

from __future__ import annotations

CONSTANT_WAIT_MAX = 60.0
"""Seconds a wait written as a plain literal in the code may last. Longer ones depend on the
model, the hardware and the batch, so they are config fields or named here."""

LEARNER_REQUEST = 3600.0
"""Seconds ``arena train`` waits for the learner's reply to one request (a ``step``, a
``checkpoint``): a step trains a whole batch, which for a large model on a CPU takes tens of
minutes. Meanwhile the run's watchdog reports the wait every ``wait.report_every`` seconds, and
a learner that dies is noticed sooner (its request fails and ``wait.timeout`` bounds the wait
for it to come back)."""

WEIGHT_UPDATE = 120.0
"""Seconds an inference actor gives one weight update (all its buckets, fetched or mapped) to
arrive whole before dropping it, and one bucket fetch to answer: the default of
``inference.weight_timeout`` (:class:`arena.policies.config.InferenceConfig`) and of the weight
receiver and assembler (:mod:`arena.weights`), which sit below the config. Two minutes carry a
few GB over ``tcp://``; a dropped update is re-sent with the next version."""

BROKER_PENDING_TTL = 600.0
"""Seconds the broker remembers where a request it routed went (counted in that actor's load
when a service picks its least-loaded actor, and failed at once if that actor dies). Past it
the entry is dropped to bound the broker's memory (a lost reply costs nothing more: the requester's own timeout still ends its
wait); ten minutes outlasts any reply that is not a learner step."""
