"""Search Self-Play: a generated local corpus (:mod:`games.search.corpus`), a BM25 retriever
over it (:mod:`games.search.retrieval`), the seats' output formats, the reading of their replies
as actions and answer matching (:mod:`games.search.answers`) and the proposer/validator/solver
game (:mod:`games.search.game`, registered as ``search-selfplay-v0``)."""
