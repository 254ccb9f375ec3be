"""The tools' work, one implementation for the MCP server and :class:`~specrag.serve.tool_spec.SpecragToolSpec`.

Each function takes a knowledge base (or the caller's knowledge bases), asks the engine, the
lookups or basic retrieval, and returns an :class:`Answer`: the result model (MCP's structured
content) and its markdown (what a model reads; MCP's text content). A context-sized answer is
held to ``token_budget`` (:mod:`specrag.serve.budget`; default: the knowledge base's
``context_token_limit``) and its ``tokens`` is the markdown's count. The functions block: the
MCP server runs them in a worker thread.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import Field
from specrag.context.knowledge import API_ID
from specrag.core.api_models import BasicRetrievalRequest, SearchMode
from specrag.core.tokens import truncate_tokens
from specrag.index import lookup
from specrag.serve.basic import BasicRetrieval
from specrag.serve.budget import CUT_REASON, Fitted, check_budget, fit, fixed, within_budget
from specrag.serve.kbs import KnowledgeBase, KnowledgeBases
from specrag.serve.mcp_models import (
    ApiSearchResult,
    Budgeted,
    ContextChunkView,
    ContextResult,
    OperationHit,
    OperationResult,
    OperationSearchResult,
    SchemaResult,
)
from specrag.serve.tool_markdown import (
    apis_markdown,
    context_markdown,
    element_markdown,
    markdown_of,
    operations_markdown,
)

B = TypeVar("B", bound=Budgeted)


class Answer(Generic[B]):
    """A tool's result model and its markdown; ``result.tokens`` counts the markdown."""

    def __init__(self, result: B, markdown: str):
        self.result, self.markdown = result, markdown


class ApiListResult(Budgeted):
    kb_id: str
    apis: list[lookup.ApiSummary] = Field(default_factory=list, description="in the catalog's order")
    total: int = Field(0, description="APIs in the knowledge base (the text may list fewer: token_budget)")


def default_budget(kb: KnowledgeBase) -> int:
    """The knowledge base's context budget (``SPECRAG_CONTEXT_TOKEN_LIMIT``)."""
    return kb.engine.references.token_limit


def budget_of(kb: KnowledgeBase, token_budget: int | None) -> int:
    return default_budget(kb) if token_budget is None else check_budget(token_budget)


def answered(result: B, fitted: Fitted) -> Answer[B]:
    """``result`` with the tokens of the fitted markdown, truncated when the text was cut."""
    result.tokens = fitted.tokens
    result.truncated = result.truncated or fitted.cut
    return Answer(result, fitted.markdown)


def list_apis(kb: KnowledgeBase, token_budget: int | None = None) -> Answer[ApiListResult]:
    apis = lookup.list_apis(kb)
    result = ApiListResult(kb_id=kb.kb_id, apis=apis, total=len(apis))
    title = f"APIs in knowledge base `{kb.kb_id}`"
    return answered(result, fixed(result, lambda r: apis_markdown(title, r.apis), budget_of(kb, token_budget)))


def search_apis(kb: KnowledgeBase, query: str) -> Answer[ApiSearchResult]:
    """Stage 1's ranking of the APIs for ``query`` (LLM or keyword)."""
    selection = kb.engine.selector.select(query)
    hits = [lookup.api_summary(kb, e) for a in selection.selected_apis if (e := kb.catalog.get(a))]
    result = ApiSearchResult(query=query, kb_id=kb.kb_id, apis=hits, reasoning=selection.reasoning)
    markdown = apis_markdown(f"APIs for: {query}", hits, selection.reasoning)
    return answered(result, fixed(result, lambda _: markdown, budget_of(kb, None)))


def search_operations(kbs: KnowledgeBases, query: str, kb_id: str | None = None, apis: list[str] | None = None,
                      top_k: int = 10, mode: SearchMode = SearchMode.HYBRID,
                      request_id: str | None = None) -> Answer[OperationSearchResult]:
    """Operations ranked for ``query`` by one pass of the hybrid retriever, without their text."""
    kb = kbs.default(kb_id)
    filters = {"type": ["endpoint"]} | ({"api": apis} if apis else {})
    request = BasicRetrievalRequest(kb_id=kb.kb_id, query=query, top_k=top_k, mode=mode, filters=filters,
                                    similarity_threshold=0.0)
    response = BasicRetrieval(kbs).run(request, request_id=request_id)
    hits = [OperationHit(chunk_id=i.chunk_id, api=i.document_id, method=i.metadata["method"], path=i.metadata["path"],
                         operation_id=i.metadata["operation_id"], summary=i.metadata["summary"], score=i.score)
            for i in response.results]
    result = OperationSearchResult(query=query, kb_id=kb.kb_id, operations=hits)
    markdown = operations_markdown(query, hits, response.degraded or "")
    return answered(result, fixed(result, lambda _: markdown, budget_of(kb, None)))


def get_context(kb: KnowledgeBase, query: str, apis: list[str] | None = None,
                token_budget: int | None = None) -> Answer[ContextResult]:
    """The engine's context for ``query``, built so that its markdown fits the budget."""
    budget = budget_of(kb, token_budget)
    fitted = fit(lambda limit: within_budget(kb.engine, limit).retrieve_context(query, apis=apis), context_markdown,
                 budget)
    found = fitted.found
    stats, signature_ids = found.retrieval_stats, {c.id for c in found.signature_chunks}
    result = ContextResult(
        query=found.query, kb_id=kb.kb_id, selected_apis=stats.selected_apis, context_tokens=found.total_tokens,
        token_budget=budget, truncated=stats.truncated,
        truncated_reason=stats.truncated_reason or (CUT_REASON if fitted.cut else None),
        chunks=[ContextChunkView(id=c.id, api=str(c.metadata.get(API_ID, "")), depth=c.depth,
                                 referenced_from=c.referenced_from, tokens=c.n_tokens, text=c.text,
                                 signature=c.id in signature_ids, example_request=c.example_request)
                for c in found.chunks],
        refs_cut=stats.refs_cut, refs_missing=stats.refs_missing, primaries_cut=stats.primaries_cut)
    return answered(result, fitted)


def get_operation(kb: KnowledgeBase, api: str, operation: str,
                  token_budget: int | None = None) -> Answer[OperationResult]:
    names = schema_names(kb, api)
    fitted = fit(lambda limit: _operation(kb, api, operation, limit), lambda d: element_markdown(d, names),
                 budget_of(kb, token_budget))
    detail = fitted.found
    result = OperationResult(**detail.model_dump(), text_tokens=detail.tokens)
    result.truncated = detail.truncated or (detail.errors is not None and detail.errors.truncated)
    return answered(result, fitted)


def _operation(kb: KnowledgeBase, api: str, operation: str, limit: int) -> lookup.OperationDetail:
    """The operation with its text within ``limit`` tokens, and its error responses in what is left."""
    detail = lookup.get_operation(kb, api, operation, limit)
    errors = detail.errors
    if errors is not None and detail.tokens + errors.tokens > limit:
        text, tokens, _ = truncate_tokens(errors.text, max(0, limit - detail.tokens))
        detail.errors = errors.model_copy(update={"text": text, "tokens": tokens, "truncated": True})
    return detail


def get_schema(kb: KnowledgeBase, api: str, name: str, token_budget: int | None = None) -> Answer[SchemaResult]:
    names = schema_names(kb, api)
    fitted = fit(lambda limit: lookup.get_schema(kb, api, name, limit),
                 lambda e: element_markdown(e, names), budget_of(kb, token_budget))
    element = fitted.found
    return answered(SchemaResult(**element.model_dump(), text_tokens=element.tokens), fitted)


def plan(kb: KnowledgeBase, query: str, token_budget: int | None = None) -> Fitted:
    """The engine's plan (``ApiQueryEngine.plan``), its step contexts fitted so that the markdown
    fits the budget; ``.found`` is the ``Plan``."""
    return fit(lambda limit: kb.engine.plan(query, token_budget=limit), markdown_of, budget_of(kb, token_budget))


def schema_names(kb: KnowledgeBase, api: str) -> dict[str, str]:
    """Chunk id -> the name ``get_schema`` takes, for the API's schemas."""
    index = kb.api_index(api)
    return {s.chunk_id: s.name for s in index.schemas} if index else {}
