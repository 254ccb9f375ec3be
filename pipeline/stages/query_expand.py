"""Stage 2 without an LLM: add the selected APIs' own vocabulary that matches the query.

Candidates are the operationIds, schema names and path segments of the selected APIs'
detailed indexes; one is added when the query covers most of its IDF-weighted stems. The user's
words always come first; added terms follow, best match first.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter
from typing import Callable

from specrag.catalog.models import ApiIndex
from specrag.core.analysis import normalise, query_terms
from specrag.core.records import QueryExpansion
from specrag.stages.timing import elapsed_ms

MAX_ADDED_TERMS = 8
MIN_COVERAGE = 0.5
IndexLoader = Callable[[str], ApiIndex | None]


def index_vocabulary(index: ApiIndex) -> list[str]:
    """Names an API uses: operationIds, schema names, literal path segments (deduped, in order)."""
    names: list[str] = []
    for ep in index.endpoints:
        names += ep.operation_ids
        names += [seg for seg in ep.path.strip("/").split("/") if seg and not seg.startswith("{")]
    names += [s.name for s in index.schemas]
    return list(dict.fromkeys(n for n in names if n))


class _Vocabulary:
    """An API's names with their stem weights, found by stem: a query reads only the names that
    share one of its stems (scanning every name of a big API was 6 % of a query)."""

    def __init__(self, names: list[tuple[str, dict[str, float]]]):
        self.names = [(name, weights, sum(weights.values())) for name, weights in names]
        self.by_stem: dict[str, list[int]] = {}
        for i, (_, weights, _) in enumerate(self.names):
            for stem in weights:
                self.by_stem.setdefault(stem, []).append(i)

    def sharing(self, stems: set[str]) -> list[tuple[str, dict[str, float], float]]:
        """(name, stem weights, their sum) of the names with one of ``stems``, in vocabulary order."""
        rows = sorted({i for stem in stems for i in self.by_stem.get(stem, ())})
        return [self.names[i] for i in rows]


class KeywordQueryExpander:
    """Offline stage 2; also the LLM expander's fallback."""

    def __init__(self, load_index: IndexLoader, max_added: int = MAX_ADDED_TERMS):
        self.load_index = load_index
        self.max_added = max_added
        self._vocab: dict[str, _Vocabulary] = {}
        self._lock = threading.Lock()

    def _vocabulary(self, file_id: str) -> "_Vocabulary":
        """Each name with its stems weighted by IDF inside this API (its ubiquitous words weigh ~0)."""
        with self._lock:
            cached = self._vocab.get(file_id)
        if cached is not None:
            return cached
        index = self.load_index(file_id)
        names = index_vocabulary(index) if index else []
        stems = [set(query_terms(n)) for n in names]
        df = Counter(s for group in stems for s in group)
        idf = {s: math.log((1 + len(names)) / (1 + n)) for s, n in df.items()}
        # stems in sorted order: a name's weights then sum in the same order in every process
        # (set order follows the hash seed, and float sums of equal names could differ in the
        # last bit, which broke ties between equally good names differently from run to run)
        vocab = _Vocabulary([(n, {s: idf[s] for s in sorted(group)}) for n, group in zip(names, stems) if group])
        with self._lock:
            return self._vocab.setdefault(file_id, vocab)

    def expand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion:
        start = time.perf_counter()
        original = [w for w in normalise(query).split() if query_terms(w)]
        query_stems = set(query_terms(query))
        scored: dict[str, float] = {}
        for api in selected_apis:
            for name, weights, total in self._vocabulary(api).sharing(query_stems):
                matched = sum(w for s, w in weights.items() if s in query_stems)
                if matched and total and matched / total >= MIN_COVERAGE:  # the query covers most of the name
                    words = normalise(name)
                    scored[words] = max(scored.get(words, 0.0), matched / total + 0.01 * matched)
        query_words = set(normalise(query).split())
        added = [w for w, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
                 if not set(w.split()) <= query_words][: self.max_added]
        result = QueryExpansion(expanded_query=" ".join([query.strip(), *added]),
                                original_terms=list(dict.fromkeys(original)), added_terms=added)
        result.fall_back("no_llm", "offline: keyword expansion")
        result.ms = elapsed_ms(start)
        return result

    async def aexpand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion:
        return await asyncio.to_thread(self.expand_query, query, selected_apis)
