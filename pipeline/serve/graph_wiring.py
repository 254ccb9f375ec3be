"""The multi-step work's capabilities in the service and the MCP server: ``POST /api/v1/plan``,
``POST /api/v1/retrieve/agentic`` and the MCP ``plan`` / ``impact`` tools, over each knowledge
base's engine (``ApiQueryEngine.plan`` / ``.impact``, ``AgenticRetriever``). ``specrag serve`` / ``mcp``
mount them by default."""

from __future__ import annotations

import asyncio
import weakref

from fastapi import APIRouter
from specrag.core.api_models import AgenticRetrievalRequest, RetrievalResponse
from specrag.engine.agentic.retriever import AgenticRetriever
from specrag.engine.graph_queries import ImpactReport
from specrag.engine.plan import Plan
from specrag.serve.kbs import AmbiguousKnowledgeBase, KnowledgeBase, KnowledgeBases
from specrag.serve.routes.agentic import agentic_router
from specrag.serve.routes.plan import plan_router


async def plan(kb: KnowledgeBase, query: str, token_budget: int | None = None) -> Plan:
    """The engine's planning is synchronous (one query, then graph work): a worker thread runs it."""
    return await asyncio.to_thread(kb.engine.plan, query, token_budget=token_budget)


async def impact(kb: KnowledgeBase, api: str, schema: str) -> ImpactReport:
    return await asyncio.to_thread(kb.engine.impact, api, schema)


class KbAgentic:
    """Agentic retrieval over one of the caller's knowledge bases: ``kb_id`` names it (none: the only
    one served; with several served, pass one; the deprecated ``kb_ids`` list may hold one). One retriever per knowledge base object, made on
    first use: keyed by the object, not its kb_id, since two tenants may hold the same kb_id and a
    re-indexed knowledge base is a new object (the old one's retriever goes with it)."""

    def __init__(self):
        self._retrievers: weakref.WeakKeyDictionary[KnowledgeBase, AgenticRetriever] = weakref.WeakKeyDictionary()

    async def arun(self, request: AgenticRetrievalRequest, kbs: KnowledgeBases) -> RetrievalResponse:
        named = list(dict.fromkeys([*([request.kb_id] if request.kb_id else []), *request.kb_ids]))
        if len(request.kb_ids) > 1 or len(named) > 1:
            raise AmbiguousKnowledgeBase("agentic retrieval runs over one knowledge base: pass one kb_id")
        kb = kbs.default(named[0] if named else None)
        retriever = self._retrievers.get(kb)
        if retriever is None:
            retriever = self._retrievers[kb] = AgenticRetriever(kb.engine)
        return await retriever.arun(request)


def routers() -> list[APIRouter]:
    """``create_app(kbs, extra_routers=routers())``."""
    return [agentic_router(KbAgentic()), plan_router(plan, Plan)]


def mcp_tools() -> dict:
    """``create_mcp_server(kbs, **mcp_tools())``."""
    return {"planner": (plan, Plan), "impact": (impact, ImpactReport)}
