"""What the MCP tools return, beside their markdown. Every result says how many cl100k tokens it
holds and whether anything was left out (``truncated``), so an agent can budget its context.

A tool answers markdown (the text content a model reads, :mod:`specrag.serve.tool_markdown`) and
this model as its structured content. ``tokens`` of a result is one count everywhere: the cl100k
tokens (``specrag.core.tokens``) of that markdown, what ``token_budget`` caps. A chunk's or element's own
``tokens`` inside a result is the count of its ``text``, as the CLI and the HTTP service count it;
``context_tokens`` (get_context) and ``text_tokens`` (get_operation, get_schema) are those sums.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field
from specrag.core.api_models import KB_ID, KB_ID_OPTIONAL
from specrag.core.records import CutRef, ExampleRequest
from specrag.index.lookup import ApiSummary, OperationDetail, SpecElement
from specrag.serve.budget import TOKEN_BUDGET_MAX, TOKEN_BUDGET_MIN

KbId = Annotated[str | None, Field(max_length=200, description=KB_ID + KB_ID_OPTIONAL)]
TokenBudget = Annotated[int | None, Field(ge=TOKEN_BUDGET_MIN, le=TOKEN_BUDGET_MAX,
                                          description="cl100k tokens the answer's text may hold; what does not "
                                                      "fit is left out and named (truncated); default: the "
                                                      "server's context_token_limit")]


class Budgeted(BaseModel):
    tokens: int = Field(0, description="cl100k tokens of the markdown the client receives as text (what "
                                       "token_budget caps)")
    truncated: bool = Field(False, description="something was left out (a cut reference or ranked hit, a timeout, "
                                               "a text cut to the token budget)")


class OperationResult(OperationDetail):
    text_tokens: int = Field(0, description="cl100k tokens of text")


class SchemaResult(SpecElement):
    text_tokens: int = Field(0, description="cl100k tokens of text")


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
    api: str = Field(description="the API id (spec file id) the chunk belongs to")
    depth: int = Field(description="0 for the matching operations, else $ref hops from them")
    referenced_from: str | None = None
    tokens: int = Field(description="cl100k tokens of text")
    text: str
    signature: bool = Field(False, description="a ranked operation shown as its signature: its references are "
                                               "not in the context (get_operation has it in full)")
    example_request: ExampleRequest | None = Field(None, description="primary operations: a ready request (curl, "
                                                                     "raw HTTP)")


class ContextResult(Budgeted):
    query: str
    kb_id: str
    selected_apis: list[str] = Field(default_factory=list)
    chunks: list[ContextChunkView] = Field(default_factory=list, description="primary chunks, the signatures of the "
                                                                         "other ranked operations, then the primaries' references")
    refs_cut: list[CutRef] = Field(default_factory=list, description="references left out, each with the reason")
    refs_missing: list[str] = Field(default_factory=list, description="references the index does not hold")
    primaries_cut: list[str] = Field(default_factory=list, description="ranked operations left out: their "
                                                                      "closure did not fit the budget")
    context_tokens: int = Field(0, description="cl100k tokens of the chunks' texts and the primaries' example "
                                               "requests (the CLI's and the HTTP context's total_tokens)")
    token_budget: int = Field(0, description="the budget the answer's text was held to")
    truncated_reason: str | None = Field(None, description="timeout, else the first limit hit (depth, max_chunks, "
                                                           "token_limit, closure_budget), else token_budget (the "
                                                           "text was cut at a line to fit)")
