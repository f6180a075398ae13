"""Playing episodes: seats filled by role agents on policies, by bots or by simulators.

- :mod:`arena.play.episode`: :func:`~arena.play.episode.play_episode` and the seat fillers.
- :mod:`arena.play.seating`: :class:`~arena.play.seating.SeatFactory`, who sits where.
- :mod:`arena.play.config`: the game mixture, opponents and sampling sections of a run config.
- :mod:`arena.play.stats`: per-game rewards, invalid rates and transcripts of played episodes.
"""
