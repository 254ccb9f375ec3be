"""What stages 1 and 2 return, with or without an LLM (the same shape either way)."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, Field

from pipeline.context import RetrievalStats


class ApiSelection(BaseModel):
    """Stage 1: which APIs can answer the query. An empty list means 'none fits'."""

    selected_apis: list[str] = Field(description="file_ids from the catalog, most relevant first (at most 3)")
    reasoning: str = Field("", description="one or two sentences: why these APIs")


class QueryExpansion(BaseModel):
    """Stage 2: the query with API vocabulary added; the user's words always come first."""

    expanded_query: str = Field(description="the original query followed by the added terms")
    original_terms: list[str] = Field(default_factory=list, description="the user's own terms")
    added_terms: list[str] = Field(default_factory=list, description="operationIds, schema names, path words from the selected APIs")


class ApiSelector(Protocol):
    def select(self, query: str, stats: RetrievalStats) -> ApiSelection: ...


class QueryExpander(Protocol):
    def expand(self, query: str, selected_apis: list[str], stats: RetrievalStats) -> QueryExpansion: ...
