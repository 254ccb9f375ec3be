"""What the MCP tools return. Every result says how many cl100k tokens it holds and whether
anything was left out (``truncated``), so an agent can budget its context."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from specrag.serve.lookup import ApiSummary
from specrag.stages.results import CutRef

KbId = Annotated[str | None, Field(description="knowledge base id or alias; optional when one is served")]


class Budgeted(BaseModel):
    tokens: int = Field(0, description="cl100k tokens of the text this result carries")
    truncated: bool = Field(False, description="something was left out (a cut reference, a text cut to max_tokens)")


class ApiSearchResult(Budgeted):
    query: str
    kb_id: str
    apis: list[ApiSummary] = Field(default_factory=list, description="most relevant first")
    reasoning: str = ""


class OperationHit(BaseModel):
    chunk_id: str
    api: str
    method: str
    path: str
    operation_id: str = ""
    summary: str = ""
    score: float | None = None


class OperationSearchResult(Budgeted):
    query: str
    kb_id: str
    operations: list[OperationHit] = Field(default_factory=list, description="best first")


class ContextChunkView(BaseModel):
    id: str
    api: str
    depth: int = Field(description="0 for the matching operations, else $ref hops from them")
    referenced_from: str | None = None
    tokens: int
    text: str
    signature: bool = Field(False, description="a ranked operation shown as its signature: its references are "
                                               "not in the context (get_operation has it in full)")


class ContextResult(Budgeted):
    query: str
    kb_id: str
    selected_apis: list[str] = Field(default_factory=list)
    chunks: list[ContextChunkView] = Field(default_factory=list, description="primary chunks, the signatures of the "
                                                                         "other ranked operations, then the primaries' references")
    refs_cut: list[CutRef] = Field(default_factory=list, description="references left out, each with the reason")
    refs_missing: list[str] = Field(default_factory=list, description="references the index does not hold")
    truncated_reason: str | None = None
