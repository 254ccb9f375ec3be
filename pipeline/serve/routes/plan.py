"""``POST /api/v1/plan``: an ordered plan of calls for a question, from a planner (``async (kb, query)
-> a pydantic plan``), mounted by passing ``plan_router(planner, PlanModel)`` to
``create_app(..., extra_routers=[...])``."""

from __future__ import annotations

from typing import Awaitable, Callable

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from specrag.core.api_models import KB_ID, KB_ID_OPTIONAL
from specrag.core.tokens import count_tokens
from specrag.serve.budget import TOKEN_BUDGET_MAX, TOKEN_BUDGET_MIN
from specrag.serve.kbs import KnowledgeBase, KnowledgeBases
from specrag.serve.routes.common import ERRORS, Caller, state

Planner = Callable[[KnowledgeBase, str], Awaitable[BaseModel]]


class PlanRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=20_000, description="a task, e.g. 'who directed the top rated movie?'")
    kb_id: str | None = Field(None, max_length=200, description=KB_ID + KB_ID_OPTIONAL)
    token_budget: int | None = Field(None, ge=TOKEN_BUDGET_MIN, le=TOKEN_BUDGET_MAX,
                                     description="cl100k tokens for the whole plan's context, split across the "
                                                 "steps; default: the server's context_token_limit")


def plan_router(planner: Planner, plan_model: type[BaseModel]) -> APIRouter:
    router = APIRouter(tags=["plan"])

    @router.post("/api/v1/plan", response_model=plan_model, responses=ERRORS)
    async def plan(body: PlanRequest, request: Request, kbs: KnowledgeBases = Caller):
        """The calls that answer the question, in order (each with what it needs from the ones before)."""
        app = state(request)
        async with app.telemetry.track("plan", mode="plan", kb_id=body.kb_id) as outcome:
            kb = kbs.default(body.kb_id)
            result = await (planner(kb, body.query) if body.token_budget is None
                            else planner(kb, body.query, token_budget=body.token_budget))
            context_tokens = getattr(result, "total_tokens", None)  # the plan's context, as MCP's plan logs it
            outcome.add_counts(len(getattr(result, "steps", None) or []),
                               count_tokens(result.model_dump_json()) if context_tokens is None else context_tokens)
        return result

    return router
