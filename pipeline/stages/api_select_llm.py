"""Stage 1 with an LLM: pick the APIs that can answer the query from the compact catalog.

A catalog too big for the prompt budget is first shortlisted by the keyword selector (BM25), so
the prompt stays small at 2,000 APIs. Ids the LLM invents are dropped; any failure falls back to
the keyword selector, recorded in the stats. Never raises to the caller.
"""

from __future__ import annotations

from typing import Any, Protocol

from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.utils import get_tokenizer

from pipeline.cache import TTLCache, cache_key
from pipeline.catalog.models import Catalog, CatalogEntry
from pipeline.context import LLMCall, RetrievalStats
from pipeline.errors import LLMStageError
from pipeline.llm import model_name, structured_call
from pipeline.prompts import FilePromptStage, PromptInfo, PromptSet
from pipeline.settings import Settings
from pipeline.stages.types import ApiSelection

STAGE, PROMPT = "select", "select_apis"
SHORTLIST_MAX = 200  # BM25 candidates considered before the token budget trims them


class KeywordSelector(Protocol):
    """The offline stage 1 (``KeywordApiSelector``): the fallback and the shortlister."""

    def shortlist(self, query: str, n: int) -> list[tuple[str, float]]: ...

    def select(self, query: str, stats: RetrievalStats) -> ApiSelection: ...


def catalog_line(entry: CatalogEntry) -> str:
    line = f"- {entry.file_id}: {entry.name}"
    if entry.description:
        line += f" — {entry.description}"
    return line + (f" [{', '.join(entry.domains[:8])}]" if entry.domains else "")


class LLMApiSelector(FilePromptStage):
    prompt_key, stage = PROMPT, STAGE

    """Stage 1 by LLM, with the keyword selector as shortlister and fallback."""

    def __init__(self, llm: LLM, catalog: Catalog, fallback: KeywordSelector, prompts: PromptSet,
                 settings: Settings, cache: TTLCache | None = None):
        self.llm, self.catalog, self.fallback, self.settings, self.cache = llm, catalog, fallback, settings, cache
        self.prompt: PromptTemplate = prompts.select_apis
        self.prompt_info: PromptInfo = prompts.info(PROMPT)
        self._by_lower = {e.file_id.lower(): e.file_id for e in catalog.apis}
        self._lines = {e.file_id: catalog_line(e) for e in catalog.apis}
        self._line_tokens = {i: self._count(line) + 1 for i, line in self._lines.items()}  # +1: newline

    def select(self, query: str, stats: RetrievalStats) -> ApiSelection:
        """The selection (at most ``max_selected_apis`` catalog ids); the stats say how it was made."""
        stats.mode = "llm"
        stats.prompts[STAGE] = self.prompt_info.label
        raw = self._ask(query, stats)
        result = self._validate(raw, stats) if raw is not None else None
        if result is None:
            result = self.fallback.select(query, stats)
        stats.selected_apis = list(result.selected_apis)
        stats.selection_reasoning = result.reasoning
        return result

    def prompt_vars(self, query: str) -> dict[str, Any]:
        """Exactly the variables ``select_apis`` is formatted with (a test checks the files use these)."""
        return {"query": query, "catalog": self.render_catalog(query), "max_apis": self.settings.max_selected_apis}

    def render_catalog(self, query: str) -> str:
        """All entries when they fit the budget; else the BM25 shortlist, best first, trimmed to fit."""
        budget = self.settings.selection_prompt_token_budget - self._count(
            self.prompt.format(query=query, catalog="", max_apis=self.settings.max_selected_apis))
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

    def _ask(self, query: str, stats: RetrievalStats) -> ApiSelection | None:
        key = cache_key(STAGE, query, catalog_version=self.catalog.version, prompt_hash=self.prompt_info.hash,
                        model=model_name(self.llm))
        def make_vars() -> dict[str, Any] | None:
            template_vars = self.prompt_vars(query)
            if not template_vars["catalog"]:
                stats.add_fallback(STAGE, "no_candidates", "the keyword shortlist matched no catalog entry")
                return None
            return template_vars

        return self._cached_call(ApiSelection, key, stats, make_vars)

    def _validate(self, raw: ApiSelection, stats: RetrievalStats) -> ApiSelection | None:
        """Catalog ids only (case-insensitive match), deduplicated, capped; None means fall back."""
        if not raw.selected_apis:
            stats.add_fallback(STAGE, "empty_selection", raw.reasoning)
            return None
        kept: list[str] = []
        for file_id in raw.selected_apis:
            known = self._by_lower.get(str(file_id).strip().lower())
            if known is None:
                stats.dropped_api_ids.append(str(file_id))
            elif known not in kept:
                kept.append(known)
        if not kept:
            stats.add_fallback(STAGE, "no_valid_ids", ", ".join(map(str, raw.selected_apis)))
            return None
        return ApiSelection(selected_apis=kept[: self.settings.max_selected_apis], reasoning=raw.reasoning)
