"""``POST /api/v1/retrieve/basic``: one retrieval pass over one knowledge base."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from specrag.core.api_models import BasicRetrievalRequest, RetrievalResponse
from specrag.serve.basic import BasicRetrieval
from specrag.serve.kbs import KnowledgeBases
from specrag.serve.logs import request_id_var
from specrag.serve.routes.common import ERRORS, Caller, state
from specrag.serve.tenancy import check_tenant_id

router = APIRouter(tags=["retrieval"])


@router.post("/api/v1/retrieve/basic", response_model=RetrievalResponse, responses=ERRORS)
async def retrieve_basic(body: BasicRetrievalRequest, request: Request,
                         kbs: KnowledgeBases = Caller) -> Response:
    """Top-k chunks (operations, schemas, error responses) for a query: keyword, vector or hybrid search,
    with metadata filters and a similarity threshold."""
    app = state(request)
    async with app.telemetry.track("retrieve.basic", mode=body.mode.value, kb_id=body.kb_id) as outcome:
        check_tenant_id(kbs, body)
        if body.kb_id is None:  # optional, as on every route: the one knowledge base served
            body = body.model_copy(update={"kb_id": kbs.default(None).kb_id})
        response, encoded = await BasicRetrieval(kbs).arun_encoded(body, request_id=request_id_var.get())
        outcome.add_response(response)
    return Response(encoded, media_type="application/json")  # built as a RetrievalResponse: nothing to re-validate
