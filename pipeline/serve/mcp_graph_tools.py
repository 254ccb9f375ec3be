"""The MCP tools over planning and the $ref graph: ``plan`` (an ordered plan of calls for a task)
and ``impact`` (the operations and components that use a schema). They wrap functions built elsewhere
(``async (kb, ...) -> a pydantic model``) and answer as every tool does: markdown
(``tool_markdown.markdown_of``) within ``token_budget``, the model beside it as structured content
with ``tokens`` (of the markdown) and ``truncated``. A planner that takes a ``token_budget``
keyword is asked again with a smaller one while its markdown is over the budget (``budget.afit``);
another's answer, and an impact report, are cut at a line to fit.
``create_mcp_server(kbs, planner=..., impact=...)`` registers them."""

from __future__ import annotations

import inspect
from typing import Annotated, Awaitable, Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import BaseModel, Field, create_model
from specrag.serve.answers import Answer, answered, budget_of
from specrag.serve.budget import CUT_REASON, afit, fixed
from specrag.serve.kbs import KnowledgeBase, KnowledgeBases
from specrag.serve.mcp_models import Budgeted, KbId, TokenBudget
from specrag.serve.telemetry import Outcome
from specrag.serve.tool_markdown import markdown_of

Planner = Callable[[KnowledgeBase, str], Awaitable[BaseModel]]
ImpactAnalysis = Callable[[KnowledgeBase, str, str], Awaitable[BaseModel]]
Tracked = Callable[..., Awaitable[CallToolResult]]  # mcp_server's: the work's Answer as the reply
KbsOf = Callable[[Context | None], KnowledgeBases]  # the caller's knowledge bases


def budgeted(name: str, field: str, model: type[BaseModel], **extra) -> type[Budgeted]:
    """``{<field>: model, tokens, truncated}``: any result with its token count."""
    return create_model(name, __base__=Budgeted, **{field: (model, ...)}, **extra)


def add_plan_tool(server: MCPServer, kbs_of: KbsOf, tracked: Tracked, planner: Planner,
                  plan_model: type[BaseModel]) -> None:
    result_model = budgeted("PlanResult", "plan", plan_model, context_tokens=(
        int | None, Field(None, description="cl100k tokens of the plan's context texts (the CLI's 'total context'; "
                                            "what token_budget caps)")))

    takes_budget = "token_budget" in inspect.signature(planner).parameters

    async def plan(query: Annotated[str, Field(min_length=1, max_length=20_000)], kb_id: KbId = None,
                   token_budget: TokenBudget = None, ctx: Context = None):
        async def work(outcome: Outcome) -> Answer:
            kb = kbs_of(ctx).default(kb_id)
            budget = budget_of(kb, token_budget)
            fitted = (await afit(lambda limit: planner(kb, query, token_budget=limit), markdown_of, budget)
                      if takes_budget else fixed(await planner(kb, query), markdown_of, budget))
            found = fitted.found
            context_tokens = getattr(found, "total_tokens", None)
            result = result_model(plan=found, context_tokens=context_tokens)
            outcome.add_counts(len(getattr(found, "steps", None) or []),
                               fitted.tokens if context_tokens is None else context_tokens)
            return answered(result, fitted)
        return await tracked("plan", work)

    plan.__annotations__["return"] = Annotated[CallToolResult, result_model]
    server.add_tool(plan, name="plan", description="The calls that answer a task, in order, each with what it "
                    "needs from the calls before it (ids, lookups), each with its context, as markdown within "
                    "token_budget tokens.")


def add_impact_tool(server: MCPServer, kbs_of: KbsOf, tracked: Tracked, impact: ImpactAnalysis,
                    impact_model: type[BaseModel]) -> None:
    result_model = budgeted("ImpactResult", "impact", impact_model)

    async def impact_tool(api: str, schema: Annotated[str, Field(description="a schema (component) name, e.g. User")],
                          kb_id: KbId = None, token_budget: TokenBudget = None, ctx: Context = None):
        async def work(outcome: Outcome) -> Answer:
            kb = kbs_of(ctx).with_api(api, kb_id)
            fitted = fixed(await impact(kb, api, schema), markdown_of, budget_of(kb, token_budget))
            outcome.add_counts(1, fitted.tokens, fitted.cut, CUT_REASON)
            return answered(result_model(impact=fitted.found), fitted)
        return await tracked("impact", work)

    impact_tool.__annotations__["return"] = Annotated[CallToolResult, result_model]
    server.add_tool(impact_tool, name="impact", description="What a change to a schema touches: the operations and "
                    "components that use it, directly or through other components, as markdown within token_budget tokens.")
