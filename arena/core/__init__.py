"""The bottom of Arena's runtime: what every layer may import, stdlib only (plus omegaconf).

- :mod:`arena.core.registry`: versioned ids to lazy ``module:Factory`` strings, plus entry points
  (games, bots, roles, simulators, policy backends, commands).
- :mod:`arena.core.commands`: the ``arena`` subcommands' registry (the CLI's parser, ``arena
  plugins``).
- :mod:`arena.core.errors`: :class:`~arena.core.errors.ConfigError` and the one "did you mean".
- :mod:`arena.core.config`: the one config loader (dataclasses + omegaconf) and flags derived
  from the same dataclasses.
- :mod:`arena.core.dtypes`: the one dtype table (bus frames, weights, checkpoints, models).
- :mod:`arena.core.process`: how every process stops on a signal and dies with its launcher.
"""
