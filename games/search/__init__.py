"""Search Self-Play: a generated local corpus (:mod:`games.search.corpus`), a BM25 retriever
over it (:mod:`games.search.retrieval`) and the proposer/validator/solver game
(:mod:`games.search.game`)."""
