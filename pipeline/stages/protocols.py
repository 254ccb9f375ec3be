"""The interfaces the engine composes stages 1 and 2 through (keyword or LLM, same shape)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from specrag.stages.results import ApiSelection, QueryExpansion


@runtime_checkable
class ApiSelector(Protocol):
    def select(self, query: str) -> ApiSelection: ...

    async def aselect(self, query: str) -> ApiSelection: ...


@runtime_checkable
class QueryExpander(Protocol):
    def expand(self, query: str, selected_apis: list[str]) -> QueryExpansion: ...

    async def aexpand(self, query: str, selected_apis: list[str]) -> QueryExpansion: ...
