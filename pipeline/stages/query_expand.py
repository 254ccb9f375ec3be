"""Stage 2 without an LLM: add the selected APIs' own vocabulary that matches the query.

Candidates are the operationIds, schema names and path segments of the selected APIs'
detailed indexes; one is added when it shares a stemmed term with the query. The user's
words always come first; added terms follow, best match first.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Callable

from pipeline.catalog.io import load_api_index
from pipeline.catalog.models import ApiIndex
from pipeline.context import RetrievalStats
from pipeline.lexical import normalise, stem_terms
from pipeline.stages.types import QueryExpansion

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


class KeywordQueryExpander:
    def __init__(self, load_index: IndexLoader, max_added: int = MAX_ADDED_TERMS):
        self.load_index = load_index
        self.max_added = max_added
        self._vocab: dict[str, list[tuple[str, dict[str, float]]]] = {}

    @classmethod
    def from_catalog_dir(cls, catalog_dir: Path) -> "KeywordQueryExpander":
        return cls(lambda file_id: load_api_index(catalog_dir, file_id))

    def _vocabulary(self, file_id: str) -> list[tuple[str, dict[str, float]]]:
        """Each name with its stems weighted by IDF inside this API (its ubiquitous words weigh ~0)."""
        if file_id not in self._vocab:
            index = self.load_index(file_id)
            names = index_vocabulary(index) if index else []
            stems = [set(stem_terms(n)) for n in names]
            df = Counter(s for group in stems for s in group)
            idf = {s: math.log((1 + len(names)) / (1 + n)) for s, n in df.items()}
            self._vocab[file_id] = [(n, {s: idf[s] for s in group}) for n, group in zip(names, stems) if group]
        return self._vocab[file_id]

    def expand(self, query: str, selected_apis: list[str], stats: RetrievalStats) -> QueryExpansion:
        original = [w for w in normalise(query).split() if stem_terms(w)]
        query_stems = set(stem_terms(query))
        scored: dict[str, float] = {}
        for api in selected_apis:
            for name, weights in self._vocabulary(api):
                matched = sum(w for s, w in weights.items() if s in query_stems)
                total = sum(weights.values())
                if matched and total and matched / total >= MIN_COVERAGE:  # the query covers most of the name
                    words = normalise(name)
                    scored[words] = max(scored.get(words, 0.0), matched / total + 0.01 * matched)
        query_words = set(normalise(query).split())
        added = [w for w, _ in sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
                 if not set(w.split()) <= query_words][: self.max_added]
        expanded = " ".join([query.strip(), *added])
        return QueryExpansion(expanded_query=expanded, original_terms=list(dict.fromkeys(original)), added_terms=added)
