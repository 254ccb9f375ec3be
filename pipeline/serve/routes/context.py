"""``POST /api/v1/context``: the KnowledgeContext (the engine's three stages and the budgeted $ref closure)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from specrag.context.knowledge import KnowledgeContext
from specrag.core.api_models import KB_ID, KB_ID_OPTIONAL
from specrag.serve.budget import TOKEN_BUDGET_MAX, TOKEN_BUDGET_MIN, within_budget
from specrag.serve.kbs import KnowledgeBases
from specrag.serve.routes.common import ERRORS, Caller, state

router = APIRouter(tags=["context"])

class ContextRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=20_000, description="a question, e.g. 'How do I create a user?'")
    kb_id: str | None = Field(None, max_length=200, description=KB_ID + KB_ID_OPTIONAL)
    apis: list[str] | None = Field(None, max_length=50, description="API ids to search (skips API selection)")
    token_budget: int | None = Field(None, ge=TOKEN_BUDGET_MIN, le=TOKEN_BUDGET_MAX,
                                     description="cl100k tokens the context may hold (the first operation is always "
                                                 "kept); default: the server's context_token_limit")


@router.post("/api/v1/context", response_model=KnowledgeContext, responses=ERRORS)
async def context(body: ContextRequest, request: Request, kbs: KnowledgeBases = Caller) -> KnowledgeContext:
    """The endpoint that answers the question plus every schema, parameter, error response and security
    scheme it references, within the token budget; cut references are named in retrieval_stats.refs_cut
    and retrieval_stats.truncated says whether anything was left out."""
    app = state(request)
    async with app.telemetry.track("context", mode="context", kb_id=body.kb_id) as outcome:
        kb = kbs.default(body.kb_id)
        ctx = await within_budget(kb.engine, body.token_budget).aretrieve_context(body.query, apis=body.apis)
        stats = ctx.retrieval_stats
        outcome.add_counts(len(ctx.chunks), ctx.total_tokens, truncated=stats.truncated,
                           reason=stats.truncated_reason, steps=4)
    return ctx
