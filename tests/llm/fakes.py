"""Keyword fallbacks with the lead's interfaces (shortlist/select, expand): word overlap only."""

from __future__ import annotations

import re

from specrag.catalog.models import Catalog
from specrag.core.records import ApiSelection, QueryExpansion


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class FakeKeywordSelector:
    """Word overlap over catalog entries: the shape of the lead's KeywordApiSelector."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.calls = 0

    def shortlist(self, query: str, n: int) -> list[tuple[str, float]]:
        q = _words(query)
        scored = [(e.file_id, float(len(q & _words(f"{e.name} {e.description} {' '.join(e.domains)}"))))
                  for e in self.catalog.apis]
        return sorted((s for s in scored if s[1] > 0), key=lambda s: -s[1])[:n]

    def select(self, query: str) -> ApiSelection:
        self.calls += 1
        return ApiSelection(selected_apis=[i for i, _ in self.shortlist(query, 1)], reasoning="keyword")

    async def aselect(self, query: str) -> ApiSelection:
        return self.select(query)


class FakeKeywordExpander:
    def __init__(self):
        self.calls = 0

    def expand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion:
        self.calls += 1
        return QueryExpansion(expanded_query=query, original_terms=sorted(_words(query)), added_terms=[])

    async def aexpand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion:
        return self.expand_query(query, selected_apis)
