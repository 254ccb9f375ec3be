"""The lexical side of the local index: BM25 over term postings (terms from specrag.core.analysis).

Scores are bm25s's (Lucene variant: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), k1 1.5, b 0.75),
but computed at query time from stored term frequencies instead of precomputed per document.
That is what lets one API's rows be added or dropped without re-tokenizing the others: the
corpus statistics (N, average length, df) are sums over rows, recomputed when a generation is
written (milliseconds), and a query touches only the postings of its own terms.

Why not filter in the libraries: ``BM25Retriever`` fixes its metadata filter at construction and
returns filtered-out hits at score 0, and bm25s scores every document of the corpus per query.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
from specrag.core.analysis import index_tokens, query_terms

LEXICAL_VERSION = "2"  # bump when specrag.core.analysis changes index terms: stored search texts are re-tokenized
K1, B = 1.5, 0.75
__all__ = ["LEXICAL_VERSION", "Postings", "document_terms", "query_terms", "top_k"]


def document_terms(texts: list[str]) -> list[list[str]]:
    """Index-side terms of each text (specrag.core.analysis: identifier parts, standard stopwords, stems)."""
    return index_tokens(texts, return_ids=False)


# ---- scoring -----------------------------------------------------------------------------

class Postings:
    """Term -> (documents, term frequencies), sorted by term then document; each document's
    length; and each row's document. A document is a distinct token list: rows that repeat one
    (versions of an API, shared schemas, copies) share its postings, and a query scores it once.
    The corpus statistics still count rows (N, average length, df with each document counted as
    often as rows use it), so every row's score is the one a posting per row would give."""

    def __init__(self, vocab: list[str], ptr: np.ndarray, docs: np.ndarray, tf: np.ndarray, doc_len: np.ndarray,
                 doc_of: np.ndarray):
        self.vocab = vocab
        self.ptr, self.docs, self.tf, self.doc_len, self.doc_of = ptr, docs, tf, doc_len, doc_of
        n = len(doc_of)
        self.avg_len = float(doc_len[doc_of].mean()) if n else 1.0
        uses = np.bincount(doc_of, minlength=len(doc_len)).astype(np.int64)  # rows per document
        used = np.zeros(len(docs) + 1, np.int64)
        np.cumsum(uses[docs], out=used[1:])
        df = (used[ptr[1:]] - used[ptr[:-1]]).astype(np.float64)  # rows holding each term
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5)).astype(np.float32) if n else np.zeros(0, np.float32)

    @cached_property
    def _term_id(self) -> dict[str, int]:
        return {term: i for i, term in enumerate(self.vocab)}

    def term_ids(self, terms: list[str]) -> list[int]:
        """Known terms only, repeats kept (a repeated query word counts twice, as in bm25s)."""
        return [self._term_id[t] for t in terms if t in self._term_id]

    @cached_property
    def _scores(self) -> np.ndarray:
        """Each posting's BM25 term score, which no query changes: computed once per generation
        (4 bytes a posting: 5 MB for the fleet's 1.3M), so a query only adds them up (a query's
        ~17 terms and ~43k postings: 0.36 -> 0.10 ms)."""
        tf = self.tf.astype(np.float32)
        norm = (K1 * ((1 - B) + B * self.doc_len[self.docs] / self.avg_len)).astype(np.float32)
        scores = np.repeat(self.idf, np.diff(self.ptr)) * (tf / (norm + tf))
        scores.flags.writeable = False
        return scores

    def document_totals(self, term_ids: tuple[int, ...]) -> np.ndarray:
        """Every document's BM25 score (read-only); a row's is its document's (``doc_of``).
        Summed in float32 in query-term order per document, as bm25s does per row; a score never
        depends on which rows a search allows, so one array serves every scope of a query (see
        ``LocalIndex.search``), and each search reads only its own rows' scores from it."""
        totals = np.zeros(len(self.doc_len), dtype=np.float32)
        scores = self._scores
        for t in term_ids:
            start, end = self.ptr[t], self.ptr[t + 1]
            np.add.at(totals, self.docs[start:end], scores[start:end])
        totals.flags.writeable = False
        return totals

    def totals(self, term_ids: tuple[int, ...]) -> np.ndarray:
        """Every row's BM25 score."""
        return self.document_totals(term_ids)[self.doc_of]


def top_k(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Best ``k`` rows and their scores, best first, ties by row among the ``k`` picked."""
    if k <= 0 or not len(rows):
        return rows[:0], scores[:0]
    k = min(k, len(rows))
    best = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
    best = best[np.lexsort((rows[best], -scores[best]))]
    return rows[best], scores[best]
