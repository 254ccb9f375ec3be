"""The MCP tools over planning and the $ref graph: ``plan`` (an ordered plan of calls for a task)
and ``impact`` (the operations and components that use a schema). They wrap functions built elsewhere
(``async (kb, ...) -> a pydantic model``) and add what every tool result carries: ``tokens``
and ``truncated``. ``create_mcp_server(kbs, planner=..., impact=...)`` registers them."""

from __future__ import annotations

from typing import Annotated, Awaitable, Callable

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field, create_model

from specrag.serve.kbs import KnowledgeBase, KnowledgeBases
from specrag.serve.mcp_models import Budgeted, KbId
from specrag.serve.telemetry import Outcome
from specrag.tokens import count_tokens

Planner = Callable[[KnowledgeBase, str], Awaitable[BaseModel]]
ImpactAnalysis = Callable[[KnowledgeBase, str, str], Awaitable[BaseModel]]
Tracked = Callable[..., Awaitable[BaseModel]]
KbsOf = Callable[[Context | None], KnowledgeBases]  # the caller's knowledge bases


def budgeted(name: str, field: str, model: type[BaseModel]) -> type[Budgeted]:
    """``{<field>: model, tokens, truncated}``: any result with its token count."""
    return create_model(name, __base__=Budgeted, **{field: (model, ...)})


def add_plan_tool(server: MCPServer, kbs_of: KbsOf, tracked: Tracked, planner: Planner,
                  plan_model: type[BaseModel]) -> None:
    result_model = budgeted("PlanResult", "plan", plan_model)

    async def plan(query: Annotated[str, Field(min_length=1, max_length=20_000)], kb_id: KbId = None,
                   ctx: Context = None):
        async def work(outcome: Outcome) -> Budgeted:
            found = await planner(kbs_of(ctx).default(kb_id), query)
            tokens = count_tokens(found.model_dump_json())
            outcome.add_counts(len(getattr(found, "steps", None) or []), tokens)
            return result_model(plan=found, tokens=tokens)
        return await tracked("plan", work)

    plan.__annotations__["return"] = result_model
    server.add_tool(plan, name="plan", description="The calls that answer a task, in order, each with what it "
                    "needs from the calls before it (ids, lookups).")


def add_impact_tool(server: MCPServer, kbs_of: KbsOf, tracked: Tracked, impact: ImpactAnalysis,
                    impact_model: type[BaseModel]) -> None:
    result_model = budgeted("ImpactResult", "impact", impact_model)

    async def impact_tool(api: str, schema: Annotated[str, Field(description="a schema (component) name, e.g. User")],
                          kb_id: KbId = None, ctx: Context = None):
        async def work(outcome: Outcome) -> Budgeted:
            found = await impact(kbs_of(ctx).with_api(api, kb_id), api, schema)
            tokens = count_tokens(found.model_dump_json())
            outcome.add_counts(1, tokens)
            return result_model(impact=found, tokens=tokens)
        return await tracked("impact", work)

    impact_tool.__annotations__["return"] = result_model
    server.add_tool(impact_tool, name="impact", description="What a change to a schema touches: the operations and "
                    "components that use it, directly or through other components.")
