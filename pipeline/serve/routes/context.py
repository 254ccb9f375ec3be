"""``POST /api/v1/context``: the KnowledgeContext (the engine's three stages and the budgeted $ref closure)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from specrag.api_models import KB_ID
from specrag.context import KnowledgeContext
from specrag.serve.kbs import KnowledgeBases
from specrag.serve.routes.common import ERRORS, Caller, state

router = APIRouter(tags=["context"])


class ContextRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=20_000, description="a question, e.g. 'How do I create a user?'")
    kb_id: str | None = Field(None, max_length=200, description=KB_ID + "; optional when one is served")
    apis: list[str] | None = Field(None, max_length=50, description="API ids to search (skips API selection)")


@router.post("/api/v1/context", response_model=KnowledgeContext, responses=ERRORS)
async def context(body: ContextRequest, request: Request, kbs: KnowledgeBases = Caller) -> KnowledgeContext:
    """The endpoint that answers the question plus every schema, parameter, error response and security
    scheme it references, within the token budget; cut references are named in retrieval_stats.refs_cut."""
    app = state(request)
    async with app.telemetry.track("context", mode="context", kb_id=body.kb_id) as outcome:
        kb = kbs.default(body.kb_id)
        ctx = await kb.engine.aretrieve_context(body.query, apis=body.apis)
        stats = ctx.retrieval_stats
        outcome.add_counts(len(ctx.chunks), ctx.total_tokens, truncated=stats.truncated or bool(stats.refs_cut),
                           reason="timeout" if stats.truncated else (stats.limits_hit or [None])[0], steps=4)
    return ctx
