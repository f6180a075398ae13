"""BM25 search over a corpus's documents, with ``bm25s``.

``Retriever(docs).search(query, k)`` returns the ``k`` best documents, best first. It is quiet
(no progress bars) and deterministic: documents are ranked by score, ties by their order in the
corpus, and documents that share no word with the query are never returned.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import bm25s
import numpy as np

from games.search.corpus import Doc

STOPWORDS = "en"

# bm25s logs every index build at DEBUG on a logger of its own level; a game's user sees none of it
logging.getLogger("bm25s").setLevel(logging.WARNING)


def _tokens(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords=STOPWORDS, return_ids=False, show_progress=False)


class Retriever:
    """A BM25 index over ``docs`` (each indexed as its title and text)."""

    def __init__(self, docs: Sequence[Doc]) -> None:
        if not docs:
            raise ValueError("Retriever needs at least one document")
        self.docs = list(docs)
        self.bm25 = bm25s.BM25()
        self.bm25.index(_tokens([f"{d.title}. {d.text}" for d in self.docs]), show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every document for ``query`` (zeros when no word is known)."""
        ids = self.bm25.get_tokens_ids(_tokens([query])[0])
        if not ids:
            return np.zeros(len(self.docs), dtype=np.float32)
        return np.asarray(self.bm25.get_scores(ids), dtype=np.float32)

    def search(self, query: str, k: int = 3) -> list[Doc]:
        """Up to ``k`` documents matching ``query``, best first."""
        if k <= 0:
            return []
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.docs[int(i)] for i in order if scores[i] > 0]


def format_results(docs: Sequence[Doc]) -> str:
    """Search results as prompt text: one ``[n] Title: text`` line per document."""
    if not docs:
        return "No documents found."
    return "\n".join(f"[{i}] {d.title}: {d.text}" for i, d in enumerate(docs, start=1))
