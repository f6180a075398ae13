"""Evaluation: the policy against reference bots, ratings, reports and exact strategy measures.

- :mod:`arena.eval.evaluate`: matches against bots, scores, win/draw/loss and invalid rates.
- :mod:`arena.eval.summary`: the before/after table that ends a training run.
- :mod:`arena.eval.progress`: a progress bar on a terminal, a line every 30 s off it.
- :mod:`arena.eval.match_log`: reading ``matches.jsonl`` (malformed lines skipped and counted;
  only ``game``, ``seed``, ``seats`` and ``scores`` required) and its seat-swapped clusters.
- :mod:`arena.eval.intervals`: Wilson and percentile-bootstrap 95% intervals.
- :mod:`arena.eval.pair_stats`: per-pairing tables (W/D/L, score with its interval, invalid
  rates, length, tokens; n/a where the log lacks a field).
- :mod:`arena.eval.ratings`: Bradley-Terry ratings with a first-mover term and bootstrap
  intervals; openskill for N-player games; the ``arena ratings --json`` object.
- :mod:`arena.eval.report`: ``report.md`` and a self-contained ``report.html``.
- :mod:`arena.eval.exploitability`: the exact exploitability of Kuhn and Leduc policies.
- :mod:`arena.eval.policy_reader`: an LLM's policy read at every information state.
- :mod:`arena.eval.optimal_moves`: the share of a policy's moves that minimax rates optimal.
"""
