"""Text analysis for lexical matching: identifier splitting, stopwords and stemming, in one place.

Specs name things ``getMovieCredits``, ``movie_id``, ``HTTPResponse``; people write "movie
credits". Every lexical view (chunk BM25, catalog BM25, keyword expansion, LLM term checks) splits
identifiers with :func:`identifier_parts`, so a word means the same thing everywhere.

Two analysers, side by side, and why they differ:

- **Index time** (:func:`index_tokens`, chunk BM25): the search text keeps each identifier whole
  *and* appends its parts (:func:`with_identifier_parts`), and drops only bm25s's standard
  English stopwords. The stored document lengths then depend on no list of ours, so the
  question-filler list below can change without re-indexing.
- **Query time** (:func:`query_terms`): identifiers split, lowercased, and the fuller list of
  question filler removed (``please``, ``want``, ``help`` ... the words of a request to an
  assistant, which match descriptions but never mean an operation).

Both stem with the same Snowball English stemmer.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer
from specrag.core import caches

INDEX_STOPWORDS = "en"  # bm25s's standard English list (see the module docstring)

# A standard English list plus the filler of questions put to an assistant. API verbs (get, list,
# search, create, find, show, send) stay: they match operation names.
QUERY_STOPWORDS = frozenset("""
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
""".split())

_RUN = re.compile(r"[^\W_]+")  # letters and digits (any script); separators split identifiers
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")  # fooBar, HTTPResponse
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's token pattern: words of two characters or more
_LONG_WORD = re.compile(r"\w{4,}")


def identifier_parts(text: str) -> list[str]:
    """``getMovieCredits`` -> get, Movie, Credits; ``movie_id`` -> movie, id; ``HTTPResponse`` ->
    HTTP, Response. Case is kept; any non-alphanumeric character separates."""
    return [part for run in _RUN.findall(text or "") for part in _CAMEL.split(run) if part]


@caches.register
@lru_cache(maxsize=65536)
def split_identifier(text: str) -> str:
    """``getMovieCredits`` -> ``get Movie Credits`` (cached: chunk texts split the same names again and again)."""
    return " ".join(identifier_parts(text))


def identifier_words(text: str) -> list[str]:
    """Lowercase parts: the unit for comparing a term with a question word by word."""
    return [part.lower() for part in identifier_parts(text)]


def with_identifier_parts(text: str) -> str:
    """The text, then the parts of its compound words (index time: ``getMovieCredits`` stays
    searchable whole and as 'credits')."""
    extra = [p for word in _LONG_WORD.findall(text) if len(parts := identifier_parts(word)) > 1 for p in parts]
    return f"{text} {' '.join(extra)}" if extra else text


def normalise(text: str) -> str:
    """Identifiers split, lowercased: the form every question goes through before stemming."""
    return " ".join(identifier_words(text))


@caches.register
@lru_cache(maxsize=1)
def stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def query_terms(text: str) -> list[str]:
    """Stemmed, filler-free terms of a question (or of a short name matched against one)."""
    return list(_query_terms(text))


@caches.register
@lru_cache(maxsize=256)
def _query_terms(text: str) -> tuple[str, ...]:
    """Cached: one query reads the terms of its question, of each of its words and of the same
    resource names in several stages. Small, so it serves one query's repeats (and common
    names), not a benchmark's next pass over the same questions."""
    return tuple(stemmer().stemWords([w for w in _TOKEN.findall(normalise(text)) if w not in QUERY_STOPWORDS]))


def index_tokens(texts: list[str], return_ids: bool = True):
    """bm25s tokens of chunk documents: identifier parts appended, standard stopwords, stemmed
    (``return_ids=False``: a list of term lists)."""
    import bm25s

    return bm25s.tokenize([with_identifier_parts(t) for t in texts], stopwords=INDEX_STOPWORDS,
                          stemmer=stemmer(), return_ids=return_ids, show_progress=False)


def question_tokens(texts: list[str]):
    """bm25s tokens of documents that only questions are matched against (the catalog): analysed
    exactly like a question, so both sides drop the same filler."""
    import bm25s

    return bm25s.tokenize([normalise(t) for t in texts], stopwords=sorted(QUERY_STOPWORDS), stemmer=stemmer(),
                          show_progress=False)
