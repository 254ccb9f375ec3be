"""KnowledgeContext: what a query returns, and the stats that explain how it was built."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ContextChunk(BaseModel):
    id: str
    text: str
    metadata: dict[str, Any] = Field(description="source_file, type, kind, method, path, name, ...")
    n_tokens: int = 0
    score: float | None = Field(None, description="fused retrieval score (primary chunks)")
    depth: int = Field(0, description="0 for primary chunks, else the ref hops from the nearest primary")
    referenced_from: str | None = Field(None, description="the chunk whose ref_ids brought this one in")


class Fallback(BaseModel):
    stage: str = Field(description="select, expand, search, synthesize")
    reason: str = Field(description="no_llm, timeout, rate_limit, server_error, invalid_output, no_valid_ids, ...")
    detail: str = ""


class LLMCall(BaseModel):
    stage: str
    model: str
    prompt_name: str
    prompt_hash: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1
    ms: float = 0.0
    cached: bool = False
    ok: bool = True


class CutRef(BaseModel):
    id: str
    referenced_from: str
    depth: int
    reason: str = Field(description="depth, max_chunks, token_limit, timeout")


class RetrievalStats(BaseModel):
    mode: str = Field("offline", description="offline (keyword stages) or llm")
    search_mode: str = Field("hybrid", description="hybrid, or lexical when no embedding model loaded")
    timings_ms: dict[str, float] = Field(default_factory=dict, description="select, expand, search, refs, assemble, total")
    selected_apis: list[str] = Field(default_factory=list)
    selection_reasoning: str = ""
    expanded_query: str = ""
    original_terms: list[str] = Field(default_factory=list)
    added_terms: list[str] = Field(default_factory=list)
    dropped_api_ids: list[str] = Field(default_factory=list, description="LLM-selected ids not in the catalog")
    dropped_terms: list[str] = Field(default_factory=list, description="LLM-added terms in no selected index")
    fallbacks: list[Fallback] = Field(default_factory=list)
    ranking: list[str] = Field(default_factory=list,
                               description="the retriever's ranked candidates (up to 10); the first max_primary_results are the primary chunks")
    lookup_steps: list[str] = Field(default_factory=list,
                                    description="search endpoints added because the query names an entity")
    intent: str | None = Field(None, description="endpoint, schema or errors when query analysis set a type filter")
    type_filter_relaxed: bool = False
    refs_followed: int = 0
    refs_missing: list[str] = Field(default_factory=list)
    refs_cut: list[CutRef] = Field(default_factory=list)
    limits_hit: list[str] = Field(default_factory=list)
    truncated: bool = Field(False, description="the reference expansion timed out; context is partial")
    llm_calls: list[LLMCall] = Field(default_factory=list)
    prompts: dict[str, str] = Field(default_factory=dict, description="stage -> 'name@hash' of the prompt that ran")
    cache_hits: int = 0
    warnings: list[str] = Field(default_factory=list)

    def add_fallback(self, stage: str, reason: str, detail: str = "") -> None:
        self.fallbacks.append(Fallback(stage=stage, reason=reason, detail=detail[:300]))


class KnowledgeContext(BaseModel):
    query: str
    primary_chunks: list[ContextChunk] = Field(default_factory=list)
    referenced_chunks: list[ContextChunk] = Field(default_factory=list)
    total_tokens: int = 0
    retrieval_stats: RetrievalStats = Field(default_factory=RetrievalStats)

    @property
    def chunks(self) -> list[ContextChunk]:
        return [*self.primary_chunks, *self.referenced_chunks]

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)
