"""``SpecQuery``: a ``QueryBundle`` that carries stage 3's per-query filters.

The filters (APIs, chunk types, depth) travel with the query instead of sitting on the retriever,
so one retriever serves concurrent queries, and a plain ``QueryBundle`` (or string) from any
LlamaIndex pipeline still works: it searches the whole index with the retriever's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

from llama_index.core.schema import QueryBundle
from specrag.core.api_models import SearchMode


def question_of(query: QueryBundle) -> str:
    """The user's own words in any bundle: its embedding text (the question before stage 2
    expanded it), else its query string."""
    return (query.embedding_strs or [query.query_str])[0]


@dataclass
class SpecQuery(QueryBundle):
    """``query_str`` feeds BM25 (the expanded query); ``custom_embedding_strs`` the vector side."""

    file_ids: Optional[list[str]] = None  # None: every API; []: none (nothing comes back)
    prefer_file_ids: Optional[list[str]] = None  # soft: these APIs first, fused with the whole index
    prefer_lead: Optional[float] = None  # stage 1's confidence in that order (ApiSelection.lead); None: trust it
    types: Optional[list[str]] = None  # chunk types: endpoint, component, errors; None: all
    methods: Optional[list[str]] = None  # HTTP methods (GET, POST...) of operation/errors chunks; None: all chunks
    top_k: Optional[int] = None  # None: the retriever's default
    further: int = 0  # hits past top_k also returned (the context's signatures); the fusion reads as deep as for top_k
    hydrate: bool = True  # False: id/API/type stubs, enough to rank (cheap)
    mode: Optional[SearchMode] = None  # keyword (BM25), vector, or None/hybrid (both, fused)

    @property
    def question(self) -> str:
        """The user's own words: the vector side's text, and the whole-index side of a soft search."""
        return question_of(self)

    def narrowed(self, **changes) -> "SpecQuery":
        """A copy with other filters (the original is never changed)."""
        return replace(self, **changes)
