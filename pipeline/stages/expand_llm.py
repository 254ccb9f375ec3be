"""Stage 2 with an LLM: add the selected APIs' own vocabulary to the query.

The prompt shows the detailed indexes of the selected APIs only, trimmed to a token budget with
the lines closest to the query kept first. The user's words always lead the expanded query, and
added terms found in no selected index are dropped. Failures fall back to the keyword expander.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable, Protocol

from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.utils import get_tokenizer

from pipeline.cache import TTLCache, cache_key
from pipeline.catalog.models import ApiIndex
from pipeline.context import LLMCall, RetrievalStats
from pipeline.errors import LLMStageError
from pipeline.llm import model_name, structured_call
from pipeline.prompts import FilePromptStage, PromptInfo, PromptSet
from pipeline.settings import Settings
from pipeline.stages.types import QueryExpansion

STAGE, PROMPT = "expand", "expand_query"
MAX_TERMS = 10
IndexLoader = Callable[[str], "ApiIndex | None"]


class KeywordExpander(Protocol):
    """The offline stage 2 (``KeywordQueryExpander``), used as the fallback."""

    def expand(self, query: str, selected_apis: list[str], stats: RetrievalStats) -> QueryExpansion: ...


def words(text: str) -> list[str]:
    """Lowercase word tokens, camelCase split: ``getMovieCredits`` -> get, movie, credits."""
    return re.findall(r"[a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text).lower())


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
    return vocab | set(words(text))


class LLMQueryExpander(FilePromptStage):
    prompt_key, stage = PROMPT, STAGE

    """Stage 2 by LLM, with the keyword expander as fallback."""

    def __init__(self, llm: LLM, index_source: Path | IndexLoader, fallback: KeywordExpander, prompts: PromptSet,
                 settings: Settings, cache: TTLCache | None = None):
        self.llm, self.fallback, self.settings, self.cache = llm, fallback, settings, cache
        self.load_index: IndexLoader = _loader(index_source)
        self.prompt: PromptTemplate = prompts.expand_query
        self.prompt_info: PromptInfo = prompts.info(PROMPT)

    def expand(self, query: str, selected_apis: list[str], stats: RetrievalStats) -> QueryExpansion:
        """The expansion; the stats record the prompt, the call, dropped terms and any fallback."""
        stats.mode = "llm"
        stats.prompts[STAGE] = self.prompt_info.label
        indexes = [ix for ix in map(self.load_index, selected_apis) if ix is not None]
        result = None
        if not indexes:
            stats.add_fallback(STAGE, "no_index", f"no detailed index for {selected_apis}")
        else:
            raw = self._ask(query, indexes, stats)
            result = self._validate(query, raw, indexes, stats) if raw is not None else None
        if result is None:
            result = self.fallback.expand(query, selected_apis, stats)
        stats.expanded_query = result.expanded_query
        stats.original_terms, stats.added_terms = list(result.original_terms), list(result.added_terms)
        return result

    def prompt_vars(self, query: str, indexes: list[ApiIndex]) -> dict[str, Any]:
        """Exactly the variables ``expand_query`` is formatted with (a test checks the files use these)."""
        return {"query": query, "api_indexes": self.render_indexes(query, indexes), "max_terms": MAX_TERMS}

    def render_indexes(self, query: str, indexes: list[ApiIndex]) -> str:
        """Each API gets an equal share of the budget; lines sharing words with the query go first."""
        fixed = self._count(self.prompt.format(query=query, api_indexes="", max_terms=MAX_TERMS))
        share = (self.settings.expansion_prompt_token_budget - fixed) // len(indexes)
        stems = {w.rstrip("s") for w in words(query) if len(w) > 2}
        blocks = []
        for index in indexes:
            lines = sorted(index_lines(index), key=lambda ln: -len(stems & {w.rstrip("s") for w in words(ln)}))
            block = [f"## {index.file_id} — {index.name}"]
            left = share - self._count(block[0]) - 2
            for line in lines:
                left -= self._count(line) + 1
                if left < 0:
                    break
                block.append(line)
            blocks.append("\n".join(block))
        return "\n\n".join(blocks)

    def _ask(self, query: str, indexes: list[ApiIndex], stats: RetrievalStats) -> QueryExpansion | None:
        template_vars = self.prompt_vars(query, indexes)
        # the rendered indexes stand in for the catalog version: same text, same answer
        shown = hashlib.sha256(template_vars["api_indexes"].encode()).hexdigest()[:16]
        key = cache_key(STAGE, query, catalog_version=shown, prompt_hash=self.prompt_info.hash,
                        model=model_name(self.llm))
        return self._cached_call(QueryExpansion, key, stats, lambda: template_vars)

    def _validate(self, query: str, raw: QueryExpansion, indexes: list[ApiIndex],
                  stats: RetrievalStats) -> QueryExpansion | None:
        """User's query first, then the added terms that some selected index holds; None: fall back."""
        vocab = set().union(*map(vocabulary, indexes))
        query_words = set(words(query))
        added: list[str] = []
        dropped: list[str] = []
        for term in (str(t).strip() for t in raw.added_terms):
            term_words = set(words(term))
            if not term_words or term_words <= query_words or term.lower() in {a.lower() for a in added}:
                continue
            if term.lower() in vocab or term_words <= vocab:
                added.append(term)
            else:
                dropped.append(term)
        stats.dropped_terms.extend(dropped)
        if dropped and not added:
            stats.add_fallback(STAGE, "no_valid_terms", ", ".join(dropped))
            return None
        added = added[:MAX_TERMS]
        original = [t for t in raw.original_terms if words(t) and set(words(t)) <= query_words]
        return QueryExpansion(expanded_query=" ".join([query.strip(), *added]),
                              original_terms=original or list(dict.fromkeys(words(query))), added_terms=added)



def _loader(source: Path | IndexLoader) -> IndexLoader:
    if callable(source):
        return source
    from pipeline.catalog.io import load_api_index  # the lead's module; imported late on purpose

    return lambda file_id: load_api_index(Path(source), file_id)
