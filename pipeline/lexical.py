"""A small BM25 ranker (bm25s + Snowball stemming) for the catalog-level keyword stages.

Identifiers are split before stemming (``top_rated``/``topRated`` -> ``top rated``), so
query words meet operationIds and path segments.
"""

from __future__ import annotations

import re
from functools import lru_cache

import bm25s
import numpy as np
import Stemmer

from pipeline.specs.render import split_identifier

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*|\d+")

# A standard English list plus the filler of questions put to an assistant. API verbs (get, list,
# search, create, find, show, send) stay: they match operation names.
STOPWORDS = sorted(set("""
a about above after again against all also am an and any are aren as at be because been before being
below between both but by can cannot could couldn did didn do does doesn doing don down during each
few for from further had hadn has hasn have haven having he her here hers herself him himself his how
i if in into is isn it its itself just let ll me more most my myself no nor not now of off on once only
or other our ours ourselves out over own re s same she should shouldn so some such t than that the their
theirs them themselves then there these they this those through to too under until up very was wasn we
were weren what when where which while who whom why will with won would wouldn you your yours yourself
yourselves d m o ve y ain
please hey hi hello thanks thank want wants wanted like would could need needs needed help tell know
let lets ok okay really also maybe something anything someone somebody able sure possible way
i'm im i'd i've
""".split()))


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def normalise(text: str) -> str:
    """Split identifiers and lowercase: the form every BM25 text and query goes through."""
    return " ".join(split_identifier(w) for w in _WORD.findall(text or "")).lower()


_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's token pattern
_STOPSET = frozenset(STOPWORDS)


def stem_terms(text: str) -> list[str]:
    """Stemmed, stopword-free terms of a text, as bm25s.tokenize makes them (without its
    per-call overhead): the unit for matching query words to API names."""
    return _stemmer().stemWords([w for w in _TOKEN.findall(normalise(text)) if w not in _STOPSET])


class Bm25Ranker:
    def __init__(self, texts: list[str], k1: float = 1.2, b: float = 0.75):
        self.size = len(texts)
        self._bm25 = bm25s.BM25(k1=k1, b=b)
        if texts:
            tokens = bm25s.tokenize([normalise(t) for t in texts], stopwords=STOPWORDS, stemmer=_stemmer(),
                                    show_progress=False)
            self._bm25.index(tokens, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document (zeros when no query term is known)."""
        terms = stem_terms(query)
        if not self.size or not terms:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(terms), dtype=np.float32)

    def top(self, query: str, k: int) -> list[tuple[int, float]]:
        scores = self.scores(query)
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]
