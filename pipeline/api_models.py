"""The retrieval service's request and response models, shared by the library (agentic
retrieval), the HTTP service and the MCP server, so all three speak one schema.

Ranges and defaults follow the retrieval service spec; values outside a range are a validation
error (HTTP 422), never silently clamped.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, Field


class SearchMode(str, Enum):
    KEYWORD = "keyword"  # BM25 only
    VECTOR = "vector"  # embeddings only
    HYBRID = "hybrid"  # both, fused by reciprocal rank


class ReasoningEffort(str, Enum):
    LOW = "low"  # one retrieval pass, no decomposition
    MEDIUM = "medium"
    HIGH = "high"


class BasicRetrievalRequest(BaseModel):
    kb_id: str = Field(description="the knowledge base: one indexed corpus")
    query: str = Field(min_length=1, max_length=20_000)
    tenant_id: str = Field("default", description="the caller's tenant")
    top_k: int = Field(10, ge=1, le=100)
    mode: SearchMode = SearchMode.VECTOR
    filters: dict[str, Any] = Field(default_factory=dict, description="metadata filters, e.g. {\"api\": [...], \"type\": [...]}")
    similarity_threshold: float = Field(0.65, ge=0.0, le=1.0)


class AgenticRetrievalRequest(BaseModel):
    query: str = Field(min_length=1, max_length=20_000)
    tenant_id: str = Field("default", description="the caller's tenant")
    kb_ids: list[str] = Field(default_factory=list, description="knowledge bases to search; [] means all")
    max_steps: int = Field(5, ge=1, le=20)
    reasoning_effort: ReasoningEffort = ReasoningEffort.MEDIUM
    top_k_per_step: int = Field(5, ge=1, le=50)
    token_budget: int = Field(8000, ge=100, le=100_000, description="the context is cut at 70% of it")
    max_latency_ms: int = Field(30_000, ge=1_000, le=120_000, description="checked before every step")
    mode: SearchMode = SearchMode.HYBRID
    filters: dict[str, Any] = Field(default_factory=dict)


class RetrievedItem(BaseModel):
    chunk_id: str
    document_id: str = Field(description="the API (spec file id) the chunk belongs to")
    text: str
    score: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RetrievalStep(BaseModel):
    step_number: int
    action: str = Field(description="decompose, retrieve, expand_producers, check_budget, synthesize, ...")
    sub_query: str = ""
    result_ids: list[str] = Field(default_factory=list)
    tokens: int = 0
    latency_ms: float = 0.0
    detail: str = ""


class RetrievalResponse(BaseModel):
    request_id: str
    answer: str = Field("", description="an answer citing [Source N] when an LLM is configured, else ''")
    results: list[RetrievedItem] = Field(default_factory=list)
    steps: list[RetrievalStep] = Field(default_factory=list)
    total_tokens_used: int = 0
    total_latency_ms: float = 0.0
    truncated: bool = False
    truncated_reason: str | None = Field(None, description="max_steps, token_budget, max_latency_ms, ...")
