"""Stage 2 with an LLM: add the selected APIs' own vocabulary to the query.

The prompt shows the detailed indexes of the selected APIs only, trimmed to a token budget with
the lines closest to the query kept first. The user's words always lead the expanded query, and
added terms found in no selected index are dropped. Failures fall back to the keyword expander.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, Protocol

from llama_index.core.llms import LLM
from pydantic import BaseModel, Field
from specrag.catalog.models import ApiIndex
from specrag.core.analysis import identifier_words
from specrag.core.llm import model_name
from specrag.core.prompts import PromptSet
from specrag.core.records import QueryExpansion
from specrag.core.settings import Settings
from specrag.core.ttl_cache import TTLCache, cache_key
from specrag.stages.llm_stage import LLMStage, with_fallback
from specrag.stages.timing import elapsed_ms

MAX_TERMS = 10
IndexLoader = Callable[[str], "ApiIndex | None"]


class ExpansionAnswer(BaseModel):
    """What the LLM is asked to return (prompts/expand_query.txt)."""

    expanded_query: str = Field("", description="the task, then the added terms")
    original_terms: list[str] = Field(default_factory=list, description="key words of the task")
    added_terms: list[str] = Field(default_factory=list, description="terms copied from the indexes")


class KeywordExpander(Protocol):
    """The offline stage 2 (``KeywordQueryExpander``), used as the fallback."""

    def expand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion: ...

    async def aexpand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion: ...


def index_lines(index: ApiIndex) -> list[str]:
    """One line per operation, then schema names ten to a line."""
    lines = []
    for ep in index.endpoints:
        for i, method in enumerate(ep.methods):
            op = ep.operation_ids[i] if i < len(ep.operation_ids) else ""
            summary = ep.summaries[i] if i < len(ep.summaries) else ""
            lines.append(" ".join(filter(None, [method.upper(), ep.path, op, f"— {summary}" if summary else ""])))
    names = [s.name for s in index.schemas]
    lines += ["schemas: " + ", ".join(names[i : i + 10]) for i in range(0, len(names), 10)]
    return lines


def vocabulary(index: ApiIndex) -> set[str]:
    """Every word (and whole identifier) the index holds: what an added term may be built from."""
    vocab = {s.name.lower() for s in index.schemas} | {g.name.lower() for g in index.domains}
    for ep in index.endpoints:
        vocab |= {op.lower() for op in ep.operation_ids}
    text = " ".join([*index_lines(index), *(g.name for g in index.domains)])
    return vocab | set(identifier_words(text))


class LLMQueryExpander(LLMStage):
    """Stage 2 by LLM, with the keyword expander as fallback."""

    prompt_key, stage = "expand_query", "expand"

    def __init__(self, llm: LLM | None, load_index: IndexLoader, fallback: KeywordExpander, prompts: PromptSet,
                 settings: Settings, cache: TTLCache | None = None):
        super().__init__(llm, prompts, settings, cache)
        self.load_index, self.fallback = load_index, fallback

    def expand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion:
        """The expansion; the result records the prompt, the call, dropped terms and any fallback."""
        start, result = time.perf_counter(), self.started(QueryExpansion(expanded_query=query))
        indexes, template_vars = self._indexes(selected_apis, result), None
        if indexes and self.llm is not None:
            template_vars = self.prompt_vars(query, indexes)
        answer = self.ask(ExpansionAnswer, self._key(query, template_vars), result, lambda: template_vars) \
            if template_vars else None
        return self._finish(query, answer, indexes, result, start) or \
            with_fallback(result, self.fallback.expand_query(query, selected_apis), start)

    async def aexpand_query(self, query: str, selected_apis: list[str]) -> QueryExpansion:
        start, result = time.perf_counter(), self.started(QueryExpansion(expanded_query=query))
        indexes, template_vars = self._indexes(selected_apis, result), None
        if indexes and self.llm is not None:
            template_vars = self.prompt_vars(query, indexes)
        answer = await self.aask(ExpansionAnswer, self._key(query, template_vars), result, lambda: template_vars) \
            if template_vars else None
        return self._finish(query, answer, indexes, result, start) or \
            with_fallback(result, await self.fallback.aexpand_query(query, selected_apis), start)

    def prompt_vars(self, query: str, indexes: list[ApiIndex]) -> dict[str, Any]:
        """Exactly the variables ``expand_query`` is formatted with (a test checks the files use these)."""
        return {"query": query, "api_indexes": self.render_indexes(query, indexes), "max_terms": MAX_TERMS}

    def render_indexes(self, query: str, indexes: list[ApiIndex]) -> str:
        """Each API gets an equal share of the budget; when its lines do not all fit, those sharing
        words with the query are kept first. Kept lines stay in index order, so an index that fits
        renders the same for every question (a prompt prefix the server can cache)."""
        fixed = self.count(self.prompt.format(query=query, api_indexes="", max_terms=MAX_TERMS))
        share = (self.settings.llm.expansion_prompt_token_budget - fixed) // len(indexes)
        stems = {w.rstrip("s") for w in identifier_words(query) if len(w) > 2}
        blocks = []
        for index in indexes:
            lines = index_lines(index)
            header = f"## {index.file_id} — {index.name}"
            left = share - self.count(header) - 2
            order = sorted(range(len(lines)),
                           key=lambda i: -len(stems & {w.rstrip("s") for w in identifier_words(lines[i])}))
            kept = set()
            for i in order:
                left -= self.count(lines[i]) + 1
                if left < 0:
                    break
                kept.add(i)
            blocks.append("\n".join([header, *(lines[i] for i in sorted(kept))]))
        return "\n\n".join(blocks)

    def _indexes(self, selected_apis: list[str], result: QueryExpansion) -> list[ApiIndex]:
        indexes = [ix for ix in map(self.load_index, selected_apis) if ix is not None]
        if not indexes and self.llm is not None:
            result.fall_back("no_index", f"no detailed index for {selected_apis}")
        return indexes

    def _key(self, query: str, template_vars: dict[str, Any] | None) -> tuple:
        # the rendered indexes stand in for the catalog version: same text, same answer
        shown = hashlib.sha256(str((template_vars or {}).get("api_indexes", "")).encode()).hexdigest()[:16]
        return cache_key(self.stage, query, catalog_version=shown, prompt_hash=self.prompt_info.hash,
                         model=model_name(self.llm) if self.llm is not None else "")

    def _finish(self, query: str, answer: ExpansionAnswer | None, indexes: list[ApiIndex],
                result: QueryExpansion, start: float) -> QueryExpansion | None:
        """User's query first, then the added terms that some selected index holds; None: fall back."""
        if answer is None:
            return None
        vocab = set().union(*map(vocabulary, indexes))
        query_words = set(identifier_words(query))
        added: list[str] = []
        for term in (str(t).strip() for t in answer.added_terms):
            term_words = set(identifier_words(term))
            if not term_words or term_words <= query_words or term.lower() in {a.lower() for a in added}:
                continue
            if term.lower() in vocab or term_words <= vocab:
                added.append(term)
            else:
                result.dropped_terms.append(term)
        if result.dropped_terms and not added:
            result.fall_back("no_valid_terms", ", ".join(result.dropped_terms))
            return None
        added = added[:MAX_TERMS]
        original = [t for t in answer.original_terms
                    if identifier_words(t) and set(identifier_words(t)) <= query_words]
        result.expanded_query = " ".join([query.strip(), *added])
        result.original_terms = original or list(dict.fromkeys(identifier_words(query)))
        result.added_terms, result.ms = added, elapsed_ms(start)
        return result
