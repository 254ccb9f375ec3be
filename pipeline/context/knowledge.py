"""KnowledgeContext: what a query returns, and the stats that explain how it was built.

The stage records (``ContextChunk``, ``Fallback``, ``LLMCall``, ``CutRef``) are defined with the
stage results in ``specrag.core.records`` and re-exported here.

A KnowledgeContext is the output: its chunks' metadata is what a caller reads, not what Chroma
stores. The API id is ``api`` (stored as ``source_file``; old JSON with that name still reads),
and every field stored as JSON text (``tags``, ``ref_ids``, ``referenced_by``, ``base_urls``,
``auth``, ``params``, ``producers``, ``produces``) is a real list or object, never JSON text
inside JSON. ``schema_version`` names the shape of its JSON.

``truncated`` has one meaning on every surface (the CLI, the HTTP context, MCP, logs, metrics):
something the query found was left out of the context: a reference cut by a limit (``refs_cut``),
a ranked hit whose closure did not fit (``primaries_cut``), or the walk stopped by its timeout.
``truncated_reason`` names why: ``timeout``, else the first limit hit. ``RetrievalStats`` sets
both when it is built, so no surface derives its own.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator
from specrag.core.records import (
    ContextChunk,
    CutRef,
    Fallback,
    LLMCall,
    ReferenceExpansion,
    SearchResult,
)
from specrag.specs.models import _json_or, decoded_metadata

__all__ = ["API_ID", "CONTEXT_SCHEMA_VERSION", "ContextChunk", "CutRef", "Fallback", "KnowledgeContext", "LLMCall",
           "RetrievalStats", "output_metadata"]

CONTEXT_SCHEMA_VERSION = 4  # 2: signature_chunks; 3: truncated means any cut, truncated_reason, no JSON text;
# 4: primary operations carry example_request
API_ID = "api"
_STORED_API_ID = "source_file"
# stored as JSON text beside specs.models.JSON_TEXT_FIELDS (tags, ref_ids, referenced_by): Chunk.metadata()
_MORE_JSON_TEXT_FIELDS: dict[str, type] = {"base_urls": list, "auth": list, "params": list, "producers": list,
                                           "produces": list}
_NOT_SHOWN = ("request",)  # the recipe of an operation's example request: shown as ``example_request``


def output_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Chunk metadata as callers read it: ``api`` for the API id, every JSON-text field decoded."""
    out = {k: v for k, v in decoded_metadata(metadata).items() if k not in _NOT_SHOWN}
    for key, kind in _MORE_JSON_TEXT_FIELDS.items():
        if key in out:
            out[key] = _json_or(out[key], kind(), kind)
    stored = out.pop(_STORED_API_ID, None)
    api = out.pop(API_ID, stored)
    return out if api is None else {API_ID: api, **out}


def example_tokens(chunks: list[ContextChunk]) -> int:
    """The tokens the chunks' example requests add to a context."""
    return sum(c.example_request.tokens for c in chunks if c.example_request is not None)


class RetrievalStats(BaseModel):
    """Written once per query by the engine, from the stages' typed results."""

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
                                    description="operations added to the ranking because another one needs their output")
    step_reasons: dict[str, str] = Field(default_factory=dict,
                                         description="added operation -> why, e.g. 'provides movie_id for GET /movie/{movie_id}'")
    intent: str | None = Field(None, description="endpoint, schema or errors when query analysis set a type filter")
    type_filter_relaxed: bool = False
    refs_followed: int = 0
    refs_missing: list[str] = Field(default_factory=list)
    refs_cut: list[CutRef] = Field(default_factory=list)
    primaries_cut: list[str] = Field(default_factory=list,
                                     description="ranked chunks left out of the context: their closure did not fit")
    limits_hit: list[str] = Field(default_factory=list)
    truncated: bool = Field(False, description="something found was left out: a cut reference (refs_cut), a "
                                               "ranked hit whose closure did not fit (primaries_cut), or the "
                                               "reference expansion timed out")
    truncated_reason: str | None = Field(None, description="timeout, else the first limit hit (depth, max_chunks, "
                                                           "token_limit, closure_budget); null when not truncated")
    llm_calls: list[LLMCall] = Field(default_factory=list)
    prompts: dict[str, str] = Field(default_factory=dict, description="stage -> 'name@hash' of the prompt that ran")
    cache_hits: int = 0
    warnings: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_truncated(self) -> "RetrievalStats":
        """The one definition of ``truncated`` (see the module docstring); ``truncated`` given True
        (the expansion's timeout flag) stays True."""
        self.truncated = self.truncated or bool(self.refs_cut) or bool(self.primaries_cut)
        if not self.truncated:
            self.truncated_reason = None
        elif self.truncated_reason is None:
            self.truncated_reason = ("timeout" if "timeout" in self.limits_hit else self.limits_hit[0]
                                     if self.limits_hit else self.refs_cut[0].reason if self.refs_cut
                                     else "closure_budget" if self.primaries_cut else "timeout")
        return self


class KnowledgeContext(BaseModel):
    schema_version: int = Field(CONTEXT_SCHEMA_VERSION, description="shape of this JSON; bumped when it changes")
    query: str
    primary_chunks: list[ContextChunk] = Field(default_factory=list)
    signature_chunks: list[ContextChunk] = Field(
        default_factory=list, description="ranked operations that are not primaries, one signature each "
                                          "(method, path, summary, parameters, schema names)")
    referenced_chunks: list[ContextChunk] = Field(default_factory=list)
    total_tokens: int = 0
    retrieval_stats: RetrievalStats = Field(default_factory=RetrievalStats)
    # stage 3's typed result, kept beside the diagnostics for what is built on a context in-process
    # (plans, agentic retrieval); not part of the JSON
    _search: SearchResult | None = PrivateAttr(None)

    @field_validator("primary_chunks", "signature_chunks", "referenced_chunks")
    @classmethod
    def _output_metadata(cls, chunks: list[ContextChunk]) -> list[ContextChunk]:
        return [c.model_copy(update={"metadata": output_metadata(c.metadata)}) for c in chunks]

    @classmethod
    def assemble(cls, query: str, expansion: ReferenceExpansion, signatures: list[ContextChunk] = (),
                 stats: RetrievalStats | None = None) -> "KnowledgeContext":
        """The context of a reference expansion and the signatures added in the budget it left
        (the engine's, and the eval baselines' built the same way). The primaries' example
        requests count in ``total_tokens``."""
        signatures = list(signatures)
        return cls(query=query, primary_chunks=list(expansion.primary), signature_chunks=signatures,
                   referenced_chunks=list(expansion.referenced),
                   total_tokens=expansion.total_tokens + example_tokens(expansion.primary)
                   + sum(c.n_tokens for c in signatures),
                   retrieval_stats=stats or RetrievalStats())

    def __eq__(self, other: object) -> bool:
        """Equal contexts hold the same fields; the search that found one is not part of it."""
        if not isinstance(other, KnowledgeContext):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def with_search(self, search: SearchResult) -> "KnowledgeContext":
        self._search = search
        return self

    @property
    def search(self) -> SearchResult:
        """The search that found the context: its ranking (ids, best first, and the hits past them)
        and the steps it added with their reasons. A context read back from JSON has none."""
        if self._search is None:
            raise ValueError("this KnowledgeContext carries no search result (it was not built by an engine "
                             "in this process)")
        return self._search

    @property
    def step_reasons(self) -> dict[str, str]:
        """Why the search placed each added step in the ranking, by chunk id."""
        return self.search.step_reasons

    @property
    def chunks(self) -> list[ContextChunk]:
        return [*self.primary_chunks, *self.signature_chunks, *self.referenced_chunks]

    def to_json(self, indent: int | None = 2) -> str:
        return self.model_dump_json(indent=indent)
