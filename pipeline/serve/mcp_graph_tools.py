"""The MCP tools over planning and the $ref graph: ``plan`` (an ordered plan of calls for a task)
and ``impact`` (the operations and components that use a schema). They wrap functions built elsewhere
(``async (kb, ...) -> a pydantic model``) and add what every tool result carries: ``tokens`` (of
the whole result's text, ``mcp_models.counted``) and ``truncated``. A planner that takes a
``token_budget`` keyword gets the tool's ``token_budget`` (given only when the caller sets one).
``create_mcp_server(kbs, planner=..., impact=...)`` registers them."""

from __future__ import annotations

from typing import Annotated, Awaitable, Callable

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field, create_model
from specrag.serve.kbs import KnowledgeBase, KnowledgeBases
from specrag.serve.mcp_models import Budgeted, KbId, TokenBudget, counted
from specrag.serve.telemetry import Outcome

Planner = Callable[[KnowledgeBase, str], Awaitable[BaseModel]]
ImpactAnalysis = Callable[[KnowledgeBase, str, str], Awaitable[BaseModel]]
Tracked = Callable[..., Awaitable[BaseModel]]
KbsOf = Callable[[Context | None], KnowledgeBases]  # the caller's knowledge bases


def budgeted(name: str, field: str, model: type[BaseModel], **extra) -> type[Budgeted]:
    """``{<field>: model, tokens, truncated}``: any result with its token count."""
    return create_model(name, __base__=Budgeted, **{field: (model, ...)}, **extra)


def add_plan_tool(server: MCPServer, kbs_of: KbsOf, tracked: Tracked, planner: Planner,
                  plan_model: type[BaseModel]) -> None:
    result_model = budgeted("PlanResult", "plan", plan_model, context_tokens=(
        int | None, Field(None, description="cl100k tokens of the plan's context texts (the CLI's 'total context'; "
                                            "what token_budget caps)")))

    async def plan(query: Annotated[str, Field(min_length=1, max_length=20_000)], kb_id: KbId = None,
                   token_budget: TokenBudget = None, ctx: Context = None):
        async def work(outcome: Outcome) -> Budgeted:
            kb = kbs_of(ctx).default(kb_id)
            found = await (planner(kb, query) if token_budget is None else planner(kb, query, token_budget=token_budget))
            context_tokens = getattr(found, "total_tokens", None)
            result = counted(result_model(plan=found, context_tokens=context_tokens))
            outcome.add_counts(len(getattr(found, "steps", None) or []),
                               result.tokens if context_tokens is None else context_tokens)
            return result
        return await tracked("plan", work)

    plan.__annotations__["return"] = result_model
    server.add_tool(plan, name="plan", description="The calls that answer a task, in order, each with what it "
                    "needs from the calls before it (ids, lookups), each with its context, all within token_budget.")


def add_impact_tool(server: MCPServer, kbs_of: KbsOf, tracked: Tracked, impact: ImpactAnalysis,
                    impact_model: type[BaseModel]) -> None:
    result_model = budgeted("ImpactResult", "impact", impact_model)

    async def impact_tool(api: str, schema: Annotated[str, Field(description="a schema (component) name, e.g. User")],
                          kb_id: KbId = None, ctx: Context = None):
        async def work(outcome: Outcome) -> Budgeted:
            found = await impact(kbs_of(ctx).with_api(api, kb_id), api, schema)
            result = counted(result_model(impact=found))
            outcome.add_counts(1, result.tokens)
            return result
        return await tracked("impact", work)

    impact_tool.__annotations__["return"] = result_model
    server.add_tool(impact_tool, name="impact", description="What a change to a schema touches: the operations and "
                    "components that use it, directly or through other components.")
