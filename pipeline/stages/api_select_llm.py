"""Stage 1 with an LLM: pick the APIs that can answer the query from the compact catalog.

A catalog too big for the prompt budget is first shortlisted by the keyword selector, so the
prompt stays small at 2,000 APIs. Ids the LLM invents are dropped; any failure falls back to the
keyword selector, and the result says why. Never raises to the caller.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from llama_index.core.llms import LLM
from pydantic import BaseModel, Field
from specrag.catalog.models import Catalog, CatalogEntry
from specrag.core.llm import model_name
from specrag.core.prompts import PromptSet
from specrag.core.records import ApiSelection
from specrag.core.settings import Settings
from specrag.core.ttl_cache import TTLCache, cache_key
from specrag.stages.llm_stage import LLMStage, with_fallback
from specrag.stages.timing import elapsed_ms

SHORTLIST_MAX = 200  # keyword candidates considered before the token budget trims them


class SelectionAnswer(BaseModel):
    """What the LLM is asked to return (prompts/select_apis.txt)."""

    selected_apis: list[str] = Field(description="file_ids from the catalog, most relevant first")
    reasoning: str = Field("", description="one or two sentences: why these APIs")


class KeywordSelector(Protocol):
    """The offline stage 1 (``KeywordApiSelector``): the fallback and the shortlister."""

    def shortlist(self, query: str, n: int) -> list[tuple[str, float]]: ...

    def select(self, query: str) -> ApiSelection: ...

    async def aselect(self, query: str) -> ApiSelection: ...


def catalog_line(entry: CatalogEntry) -> str:
    line = f"- {entry.file_id}: {entry.name}"
    if entry.description:
        line += f" — {entry.description}"
    return line + (f" [{', '.join(entry.domains[:8])}]" if entry.domains else "")


class LLMApiSelector(LLMStage):
    """Stage 1 by LLM, with the keyword selector as shortlister and fallback."""

    prompt_key, stage = "select_apis", "select"

    def __init__(self, llm: LLM | None, catalog: Catalog, fallback: KeywordSelector, prompts: PromptSet,
                 settings: Settings, cache: TTLCache | None = None):
        super().__init__(llm, prompts, settings, cache)
        self.catalog, self.fallback = catalog, fallback
        self._by_lower = {e.file_id.lower(): e.file_id for e in catalog.apis}
        self._lines = {e.file_id: catalog_line(e) for e in catalog.apis}
        self._line_tokens = {i: self.count(line) + 1 for i, line in self._lines.items()}  # +1: newline

    def select(self, query: str) -> ApiSelection:
        """At most ``max_selected_apis`` catalog ids; the result says how they were chosen."""
        start, result = time.perf_counter(), self.started(ApiSelection())
        answer = self.ask(SelectionAnswer, self._key(query), result, lambda: self._prompt_vars(query, result))
        return self._finish(result, answer, start) or with_fallback(result, self.fallback.select(query), start)

    async def aselect(self, query: str) -> ApiSelection:
        start, result = time.perf_counter(), self.started(ApiSelection())
        answer = await self.aask(SelectionAnswer, self._key(query), result, lambda: self._prompt_vars(query, result))
        return self._finish(result, answer, start) or with_fallback(result, await self.fallback.aselect(query), start)

    def prompt_vars(self, query: str) -> dict[str, Any]:
        """Exactly the variables ``select_apis`` is formatted with (a test checks the files use these)."""
        return {"query": query, "catalog": self.render_catalog(query), "max_apis": self.settings.selection.max_selected_apis}

    def render_catalog(self, query: str) -> str:
        """All entries when they fit the budget; else the keyword shortlist, best first, trimmed to fit."""
        budget = self.settings.llm.selection_prompt_token_budget - self.count(
            self.prompt.format(query=query, catalog="", max_apis=self.settings.selection.max_selected_apis))
        if sum(self._line_tokens.values()) <= budget:
            return "\n".join(self._lines.values())
        kept: list[str] = []
        for file_id, _score in self.fallback.shortlist(query, min(SHORTLIST_MAX, len(self._lines))):
            if file_id not in self._lines or file_id in kept:
                continue
            budget -= self._line_tokens[file_id]
            if budget < 0:
                break
            kept.append(file_id)
        return "\n".join(self._lines[i] for i in kept)

    def _key(self, query: str) -> tuple:
        return cache_key(self.stage, query, catalog_version=self.catalog.version, prompt_hash=self.prompt_info.hash,
                         model=model_name(self.llm) if self.llm is not None else "")

    def _prompt_vars(self, query: str, result: ApiSelection) -> dict[str, Any] | None:
        template_vars = self.prompt_vars(query)
        if not template_vars["catalog"]:
            result.fall_back("no_candidates", "the keyword shortlist matched no catalog entry")
            return None
        return template_vars

    def _finish(self, result: ApiSelection, answer: SelectionAnswer | None, start: float) -> ApiSelection | None:
        """Catalog ids only (case-insensitive match), deduplicated, capped; None means fall back."""
        if answer is None:
            return None
        if not answer.selected_apis:
            result.fall_back("empty_selection", answer.reasoning)
            return None
        kept: list[str] = []
        for file_id in answer.selected_apis:
            known = self._by_lower.get(str(file_id).strip().lower())
            if known is None:
                result.dropped_ids.append(str(file_id))
            elif known not in kept:
                kept.append(known)
        if not kept:
            result.fall_back("no_valid_ids", ", ".join(map(str, answer.selected_apis)))
            return None
        result.selected_apis, result.reasoning = kept[: self.settings.selection.max_selected_apis], answer.reasoning
        result.ms = elapsed_ms(start)
        return result
