"""Browsing: the served knowledge bases, their APIs, one operation, one schema."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Query
from specrag.core.api_models import KB_ID, KB_ID_OPTIONAL
from specrag.index.lookup import (
    ApiSummary,
    OperationDetail,
    SpecElement,
    get_operation,
    get_schema,
    list_apis,
)
from specrag.serve.kbs import KnowledgeBaseInfo, KnowledgeBases
from specrag.serve.routes.common import ERRORS, Caller

router = APIRouter(tags=["browse"])
KB_QUERY = Query(None, max_length=200, description=KB_ID + KB_ID_OPTIONAL + " (here: the one holding the API, "
                 "and on /api/v1/apis, all of them)")
MAX_TOKENS = Query(None, ge=1, le=1_000_000, description="cut the text to this many cl100k tokens (sets truncated)")


@router.get("/api/v1/kbs", response_model=list[KnowledgeBaseInfo], responses=ERRORS)
async def kbs(served: KnowledgeBases = Caller) -> list[KnowledgeBaseInfo]:
    """The knowledge bases this server answers from (your API key's tenant's)."""
    return [kb.info() for kb in served.all()]


@router.get("/api/v1/apis", response_model=list[ApiSummary], responses=ERRORS)
async def apis(kb_id: str | None = KB_QUERY, served: KnowledgeBases = Caller) -> list[ApiSummary]:
    """The APIs of one knowledge base, or of all of them."""
    return [a for kb in ([served.get(kb_id)] if kb_id else served.all()) for a in list_apis(kb)]


@router.get("/api/v1/apis/{api}/operations/{operation:path}", response_model=OperationDetail, responses=ERRORS)
async def operation(api: str, operation: str, kb_id: str | None = KB_QUERY,
                    max_tokens: int | None = MAX_TOKENS, served: KnowledgeBases = Caller) -> OperationDetail:
    """One operation, by operationId or as 'METHOD /path' (URL-encoded), with its error responses."""
    kb = served.with_api(api, kb_id)
    return await asyncio.to_thread(get_operation, kb, api, operation, max_tokens)


@router.get("/api/v1/apis/{api}/schemas/{name}", response_model=SpecElement, responses=ERRORS)
async def schema(api: str, name: str, kb_id: str | None = KB_QUERY,
                 max_tokens: int | None = MAX_TOKENS, served: KnowledgeBases = Caller) -> SpecElement:
    """One schema (component) by name, as the API's index lists it."""
    kb = served.with_api(api, kb_id)
    return await asyncio.to_thread(get_schema, kb, api, name, max_tokens)
