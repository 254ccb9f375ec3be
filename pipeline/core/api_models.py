"""The retrieval service's request and response models, shared by the library (agentic
retrieval), the HTTP service and the MCP server, so all three speak one schema.

Ranges and defaults follow the retrieval service spec; values outside a range are a validation
error (HTTP 422), never silently clamped.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict

KB_ID = ("the knowledge base: one indexed corpus, named by its index folder under <data_dir>/corpora/ "
         "(e.g. 'corpus-5a5406f483') or by that folder's alias (the part before the hash, e.g. 'corpus', "
         "when no other served corpus shares it); GET /api/v1/kbs lists them")
KB_ID_OPTIONAL = ("; optional: without it, the one knowledge base served (an error names them when "
                  "several are). The same on every route and MCP tool")
THRESHOLD = ("results scoring below it are dropped. Scores are in [0, 1]: vector mode, the cosine similarity of "
             "query and chunk mapped from [-1, 1] to [0, 1], (1 + cosine) / 2, so 0.65 keeps cosines from 0.3; "
             "keyword and hybrid modes, the BM25 or fused (RRF) score divided by the query's best one, so the top "
             "hit always scores 1")


class SearchMode(str, Enum):
    KEYWORD = "keyword"  # BM25 only
    VECTOR = "vector"  # embeddings only
    HYBRID = "hybrid"  # both, fused by reciprocal rank


class ReasoningEffort(str, Enum):
    LOW = "low"  # one retrieval pass, no decomposition
    MEDIUM = "medium"
    HIGH = "high"


class RetrievalFilters(TypedDict, total=False):
    """Metadata filters; a chunk must match every filter given (and one of the values of each).
    An unknown key is a validation error. A plain dict at run time."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    api: list[str]  # API ids (spec file ids), as GET /api/v1/apis lists them
    type: list[Literal["endpoint", "component", "errors"]]  # chunk types
    method: list[Literal["GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"]]  # operations only


class BasicRetrievalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kb_id: str | None = Field(None, min_length=1, max_length=200, description=KB_ID + KB_ID_OPTIONAL)
    query: str = Field(min_length=1, max_length=20_000)
    tenant_id: str = Field("default", max_length=200, description="the caller's tenant")
    top_k: int = Field(10, ge=1, le=100)
    mode: SearchMode = SearchMode.VECTOR
    filters: RetrievalFilters = Field(default_factory=dict, description="metadata filters: api, type, method")
    similarity_threshold: float = Field(0.65, ge=0.0, le=1.0, description=THRESHOLD)


class AgenticRetrievalRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=20_000)
    tenant_id: str = Field("default", max_length=200, description="the caller's tenant")
    kb_id: str | None = Field(None, min_length=1, max_length=200, description=KB_ID + KB_ID_OPTIONAL)
    kb_ids: list[str] = Field(default_factory=list, max_length=50, json_schema_extra={"deprecated": True},
                              description="deprecated: use kb_id. One id at most (agentic retrieval runs over one "
                                          "knowledge base); [] means kb_id's")
    max_steps: int = Field(5, ge=1, le=20)
    reasoning_effort: ReasoningEffort = ReasoningEffort.MEDIUM
    top_k_per_step: int = Field(5, ge=1, le=50)
    token_budget: int = Field(8000, ge=100, le=100_000, description="the context is cut at 70% of it")
    max_latency_ms: int = Field(30_000, ge=1_000, le=120_000, description="checked before every step")
    mode: SearchMode = SearchMode.HYBRID
    filters: RetrievalFilters = Field(default_factory=dict, description="metadata filters: api, type, method")


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
    degraded: str | None = Field(None, description="why the answer came a lesser way (e.g. keyword search "
                                 "because the index has no usable vectors); null when it did not")
