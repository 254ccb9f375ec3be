"""A small in-memory BM25 ranker (bm25s) for the catalog-level keyword stages.

Its documents (one per API) are only ever matched against questions, so both sides go through
the question analyser of ``specrag.core.analysis``.
"""

from __future__ import annotations

import bm25s
import numpy as np
from specrag.core.analysis import query_terms, question_tokens


class Bm25Ranker:
    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75):
        self.size = len(texts)
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        if texts:
            self._bm25.index(question_tokens(texts), show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document (zeros when no query term is known)."""
        terms = query_terms(query)
        if not self.size or not terms:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(terms), dtype=np.float32)

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]
