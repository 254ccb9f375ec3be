"""The interfaces the engine composes stages 1 and 2 through (keyword or LLM, same shape)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from specrag.core.records import ApiSelection, QueryExpansion


@runtime_checkable
class ApiSelector(Protocol):
    def select(self, query: str) -> ApiSelection: ...

    async def aselect(self, query: str) -> ApiSelection: ...


@runtime_checkable
class QueryExpander(Protocol):
    def expand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion: ...

    async def aexpand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion: ...
