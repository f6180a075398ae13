"""Tournaments: participants, a seat-swapped schedule, concurrent matches over the bus, a
resumable match log, and ratings with a report (``arena tournament``)."""
