"""Evaluation: the policy against reference bots, with confidence intervals.

- :mod:`arena.eval.evaluate`: matches against bots, scores, win/draw/loss and invalid rates.
- :mod:`arena.eval.summary`: the before/after table that ends a training run.
"""
