"""What each stage did, as typed records. Stages return these; only the engine turns them into
the ``RetrievalStats`` of a ``KnowledgeContext``, so a stage can be used, and tested, alone."""

from __future__ import annotations

from enum import Enum
from typing import Any

from llama_index.core.schema import NodeWithScore
from pydantic import BaseModel, ConfigDict, Field
from specrag.core.example_models import ExampleRequest


class ContextChunk(BaseModel):
    id: str
    text: str
    metadata: dict[str, Any] = Field(description="source_file, type, kind, method, path, name, ...")
    n_tokens: int = 0
    score: float | None = Field(None, description="fused retrieval score (primary chunks)")
    depth: int = Field(0, description="0 for primary chunks, else the ref hops from the nearest primary")
    referenced_from: str | None = Field(None, description="the chunk whose ref_ids brought this one in")
    compact: bool = Field(False, description="shown in compact form: names and types, no examples or long prose")
    example_request: ExampleRequest | None = Field(None, description="primary operations: a ready request (curl, raw "
                                                                     "HTTP) with the spec's examples or placeholders")


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


class StageMode(str, Enum):
    OFFLINE = "offline"  # keyword methods, no LLM involved
    LLM = "llm"  # an LLM was asked (its answer may still have been replaced by the keyword fallback)
    GIVEN = "given"  # the caller supplied the answer (oracle APIs)


class StageResult(BaseModel):
    """What every stage reports besides its answer: how it ran, what it cost, what went wrong."""

    stage: str = ""
    mode: StageMode = StageMode.OFFLINE
    fallbacks: list[Fallback] = Field(default_factory=list)
    llm_calls: list[LLMCall] = Field(default_factory=list)
    prompt: str = Field("", description="'name@hash' of the prompt that ran, '' without an LLM")
    cache_hits: int = 0
    warnings: list[str] = Field(default_factory=list)
    ms: float = Field(0.0, description="wall time of the stage")

    def fall_back(self, reason: str, detail: str = "") -> None:
        self.fallbacks.append(Fallback(stage=self.stage, reason=reason, detail=detail[:300]))


class ApiSelection(StageResult):
    """Stage 1: which APIs can answer the query. An empty list means 'none fits'."""

    stage: str = "select"
    selected_apis: list[str] = Field(default_factory=list, description="catalog file_ids, most relevant first")
    reasoning: str = ""
    dropped_ids: list[str] = Field(default_factory=list, description="LLM-selected ids not in the catalog")
    lead: float | None = Field(None, ge=0, le=1, description=(
        "how far the first API's score leads the second's, as a share of the first's (the keyword "
        "ranking's fused scores); None when the order has no scores (an LLM's or the caller's)"))


class QueryExpansion(StageResult):
    """Stage 2: the query with API vocabulary added; the user's words always come first."""

    stage: str = "expand"
    expanded_query: str
    original_terms: list[str] = Field(default_factory=list, description="the user's own terms")
    added_terms: list[str] = Field(default_factory=list, description="operationIds, schema names, path words")
    dropped_terms: list[str] = Field(default_factory=list, description="LLM-added terms in no selected index")


ADDED_STEP = "added_step"  # node metadata: why a postprocessor placed this node in a ranking


class AddedStep(BaseModel):
    """An operation the search placed in the ranking because another one needs what it returns."""

    chunk_id: str
    reason: str = Field(description="why it was added, e.g. 'provides movie_id for GET /movie/{movie_id}'")


class SearchResult(StageResult):
    """Stage 3: the ranked candidates; the first ``max_primary_results`` become primary chunks."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    stage: str = "search"
    search_mode: str = Field("hybrid", description="hybrid, or lexical when no embedding model is loaded")
    nodes: list[NodeWithScore] = Field(default_factory=list, exclude=True, description="ranked, hydrated")
    ranking: list[str] = Field(default_factory=list, description="chunk ids of ``nodes``, best first")
    further: list[str] = Field(default_factory=list, description="chunk ids ranked past ``nodes`` (the search's "
                                                                  "next hits, for the context's signatures), best first")
    intent: str | None = Field(None, description="endpoint, schema or errors when query analysis set a type filter")
    type_filter_relaxed: bool = False
    added_steps: list[AddedStep] = Field(default_factory=list)

    @property
    def step_reasons(self) -> dict[str, str]:
        """Why the search placed each added step in the ranking, by chunk id."""
        return {s.chunk_id: s.reason for s in self.added_steps}


class ReferenceExpansion(BaseModel):
    """The reference expansion: primaries plus every dependency admitted, and every cut named."""

    primary: list[ContextChunk] = Field(default_factory=list, description="the retriever's chunks, rank order")
    referenced: list[ContextChunk] = Field(default_factory=list, description="dependencies, BFS order")
    total_tokens: int = Field(0, description="tokens of primary plus referenced chunks")
    refs_followed: int = Field(0, description="references added to the context")
    refs_missing: list[str] = Field(default_factory=list, description="ref ids the lookup did not know")
    refs_cut: list[CutRef] = Field(default_factory=list, description="refs left out by a limit, with the reason")
    primaries_cut: list[str] = Field(default_factory=list,
                                     description="retrieved chunks left out: their closure did not fit after the better hits'")
    limits_hit: list[str] = Field(default_factory=list,
                                  description="depth, max_chunks, token_limit, timeout, closure_budget")
    truncated: bool = Field(False, description="the timeout stopped the walk; the context is partial")
    ms: float = 0.0

    def cut(self, candidates: list[Any], reason: str) -> None:
        """Name every candidate (id, referenced_from, depth) left out for ``reason``."""
        self.refs_cut += [CutRef(id=c.id, referenced_from=c.referenced_from, depth=c.depth, reason=reason)
                          for c in candidates]
        if candidates:
            self.hit(reason)

    def hit(self, reason: str) -> None:
        if reason not in self.limits_hit:
            self.limits_hit.append(reason)


class SynthesisResult(StageResult):
    """Optional answer from the context, citing ``[Source N]``; '' when none could be made."""

    stage: str = "synthesize"
    answer: str = ""
    cited_sources: list[int] = Field(default_factory=list)
