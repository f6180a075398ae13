"""The actor processes of the runtime (the learner actor lives in :mod:`trainers.learner_actor`).

- :mod:`arena.actors.inference`: serves one policy, batching requests from every rollout actor,
  and applies weight updates between batches (``arena inference``).
- :mod:`arena.actors.rollout`: plays many episodes at once and sends them to the learner
  (``arena rollout``).
"""
