"""``specrag mcp``: the knowledge bases as an MCP server (official ``mcp`` SDK 2.x, ``MCPServer``).

Tools: search_apis -> search_operations -> get_operation / get_schema, and get_context (the
budgeted $ref closure of the best operations in one call). Resources:
``specrag://{api}/operations/{operation_id}`` and ``specrag://{api}/schemas/{name}``. Each tool
call gets a request id, one JSON event line and the same Prometheus metrics as the HTTP service.

Over stdio the server runs as the local tenant, and answers every request (``run_stdio``): a line
the SDK cannot read (not JSON, a lone surrogate escape, nesting past the parser's limit) gets a
JSON-RPC error reply with the request's id, where the SDK alone would drop it and leave the client
waiting. Over streamable HTTP with API keys configured,
``mcp_http.ApiKeyGate`` answers 401 before MCP sees a request without a known key, and puts the
key's tenant's knowledge bases in the request's ASGI state, where every tool and resource reads
them (``kbs_of``): a tool never reaches another tenant's index.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Annotated, Any, Awaitable, Callable, TypeVar

import anyio
import mcp_types

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, Field, ValidationError

from specrag.api_models import BasicRetrievalRequest, SearchMode
from specrag.errors import SpecragError
from specrag.serve.basic import BasicRetrieval
from specrag.serve.kbs import KnowledgeBases
from specrag.serve.logs import request_id_var
from specrag.serve.mcp_graph_tools import ImpactAnalysis, Planner, add_impact_tool, add_plan_tool
from specrag.serve import lookup
from specrag.context import API_ID
from specrag.serve.mcp_models import (ApiSearchResult, ContextChunkView, ContextResult, KbId, OperationHit,
                                       OperationResult, OperationSearchResult, SchemaResult, TokenBudget, counted)
from specrag.serve.routes.context import within_budget
from specrag.serve.request_ids import new_request_id
from specrag.serve.telemetry import Outcome, Telemetry
from specrag.serve.tenancy import Tenants
from specrag.serve.tracing import install_instrumentation

logger = logging.getLogger(__name__)
T = TypeVar("T")
INSTRUCTIONS = ("specrag answers 'how do I do X with these APIs?' over indexed OpenAPI specs. Start with get_context "
                "for a question (the matching operation plus every schema and error response it references, within "
                "a token budget), or search_apis -> search_operations -> get_operation / get_schema to browse. "
                "Every result carries its token count and whether something was left out (truncated).")
MaxTokens = Annotated[int | None, Field(ge=1, le=1_000_000, description="cut the text to this many tokens")]


STATE_KEY = "specrag_kbs"  # where ApiKeyGate leaves the caller's knowledge bases in the ASGI scope's state


def kbs_of(tenants: Tenants, ctx: Context | None) -> KnowledgeBases:
    """The caller's knowledge bases: from the HTTP request's state (set by ApiKeyGate), else the
    local tenant's (stdio; Unauthorized when keys are configured: fail closed)."""
    request = ctx.request_context.request if ctx is not None and ctx.request_context is not None else None
    found = getattr(request, "scope", {}).get("state", {}).get(STATE_KEY) if request is not None else None
    return found if found is not None else tenants.caller(None)


def create_mcp_server(served: Tenants | KnowledgeBases, telemetry: Telemetry | None = None,
                      planner: tuple[Planner, type[BaseModel]] | None = None,
                      impact: tuple[ImpactAnalysis, type[BaseModel]] | None = None) -> MCPServer:
    """``planner`` / ``impact``: (function, result model) pairs that add the ``plan`` / ``impact`` tools."""
    install_instrumentation()
    telemetry = telemetry or Telemetry()
    tenants = served if isinstance(served, Tenants) else Tenants.local(served)
    server = MCPServer("specrag", instructions=INSTRUCTIONS)

    async def tracked(tool: str, work: Callable[[Outcome], Awaitable[T]], mode: str = "none") -> T:
        token = request_id_var.set(new_request_id())
        try:
            async with telemetry.track(f"mcp.{tool}", mode=mode, event=f"mcp.{tool}") as outcome:
                return await work(outcome)
        except SpecragError as exc:
            raise ToolError(str(exc)) from exc
        finally:
            request_id_var.reset(token)

    @server.tool()
    async def search_apis(query: Annotated[str, Field(min_length=1, max_length=20_000)],
                          kb_id: KbId = None, ctx: Context = None) -> ApiSearchResult:
        """The APIs most likely to answer a question (stage 1 of the pipeline: LLM or keyword ranking)."""
        async def work(outcome: Outcome) -> ApiSearchResult:
            kb = kbs_of(tenants, ctx).default(kb_id)
            selection = await kb.engine.selector.aselect(query)
            hits = [lookup.api_summary(kb, e) for a in selection.selected_apis if (e := kb.catalog.get(a))]
            result = counted(ApiSearchResult(query=query, kb_id=kb.kb_id, apis=hits, reasoning=selection.reasoning))
            outcome.add_counts(len(hits), result.tokens)
            return result
        return await tracked("search_apis", work)

    @server.tool()
    async def search_operations(query: Annotated[str, Field(min_length=1, max_length=20_000)], kb_id: KbId = None,
                                apis: Annotated[list[str] | None, Field(description="only these API ids")] = None,
                                top_k: Annotated[int, Field(ge=1, le=100)] = 10,
                                mode: SearchMode = SearchMode.HYBRID, ctx: Context = None) -> OperationSearchResult:
        """Operations (method, path, summary) ranked for a query, without their text: cheap to read;
        then get_operation or get_context for the details."""
        async def work(outcome: Outcome) -> OperationSearchResult:
            kbs = kbs_of(tenants, ctx)
            kb = kbs.default(kb_id)
            filters = {"type": ["endpoint"]} | ({"api": apis} if apis else {})
            request = BasicRetrievalRequest(kb_id=kb.kb_id, query=query, top_k=top_k, mode=mode, filters=filters,
                                            similarity_threshold=0.0)
            response = await BasicRetrieval(kbs).arun(request, request_id=request_id_var.get())
            hits = [OperationHit(chunk_id=i.chunk_id, api=i.document_id, method=i.metadata["method"],
                                 path=i.metadata["path"], operation_id=i.metadata["operation_id"],
                                 summary=i.metadata["summary"], score=i.score) for i in response.results]
            result = counted(OperationSearchResult(query=query, kb_id=kb.kb_id, operations=hits))
            outcome.add_counts(len(hits), result.tokens)
            return result
        return await tracked("search_operations", work, mode=mode.value)

    @server.tool()
    async def get_context(query: Annotated[str, Field(min_length=1, max_length=20_000)], kb_id: KbId = None,
                          apis: Annotated[list[str] | None, Field(description="search only these API ids")] = None,
                          token_budget: TokenBudget = None, ctx: Context = None) -> ContextResult:
        """Everything needed to call the API for a question: the best operations and every schema,
        parameter, error response and security scheme they reference ($ref closure), within
        token_budget (default: the server's); what was left out is listed in refs_cut and
        primaries_cut, and truncated says whether anything was."""
        async def work(outcome: Outcome) -> ContextResult:
            kb = kbs_of(tenants, ctx).default(kb_id)
            engine = within_budget(kb.engine, token_budget)
            found = await engine.aretrieve_context(query, apis=apis)
            stats, signature_ids = found.retrieval_stats, {c.id for c in found.signature_chunks}
            result = counted(ContextResult(
                query=found.query, kb_id=kb.kb_id, selected_apis=stats.selected_apis,
                context_tokens=found.total_tokens, token_budget=engine.references.token_limit,
                truncated=stats.truncated, truncated_reason=stats.truncated_reason,
                chunks=[ContextChunkView(id=c.id, api=str(c.metadata.get(API_ID, "")), depth=c.depth,
                                         referenced_from=c.referenced_from, tokens=c.n_tokens, text=c.text,
                                         signature=c.id in signature_ids, example_request=c.example_request)
                        for c in found.chunks],
                refs_cut=stats.refs_cut, refs_missing=stats.refs_missing, primaries_cut=stats.primaries_cut))
            outcome.add_counts(len(result.chunks), result.context_tokens, stats.truncated, stats.truncated_reason,
                               steps=4)
            return result
        return await tracked("get_context", work, mode="context")

    @server.tool()
    async def get_operation(api: str, operation: Annotated[str, Field(description="operationId or 'METHOD /path'")],
                            kb_id: KbId = None, max_tokens: MaxTokens = None, ctx: Context = None) -> OperationResult:
        """One operation's full definition (parameters, request body, responses) and its error responses;
        ref_ids lists the schemas it references (get_schema reads them)."""
        async def work(outcome: Outcome) -> OperationResult:
            kb = kbs_of(tenants, ctx).with_api(api, kb_id)
            detail = await asyncio.to_thread(lookup.get_operation, kb, api, operation, max_tokens)
            result = counted(OperationResult(**detail.model_dump(), text_tokens=detail.tokens))
            outcome.add_counts(1, result.text_tokens, result.truncated, "max_tokens")
            return result
        return await tracked("get_operation", work)

    @server.tool()
    async def get_schema(api: str, name: str, kb_id: KbId = None, max_tokens: MaxTokens = None,
                         ctx: Context = None) -> SchemaResult:
        """One schema (component) by name; ref_ids lists the schemas it references."""
        async def work(outcome: Outcome) -> SchemaResult:
            kb = kbs_of(tenants, ctx).with_api(api, kb_id)
            element = await asyncio.to_thread(lookup.get_schema, kb, api, name, max_tokens)
            result = counted(SchemaResult(**element.model_dump(), text_tokens=element.tokens))
            outcome.add_counts(1, result.text_tokens, result.truncated, "max_tokens")
            return result
        return await tracked("get_schema", work)

    @server.resource("specrag://{api}/operations/{operation_id}", mime_type="application/yaml")
    async def operation_resource(api: str, operation_id: str, ctx: Context) -> str:
        """An operation's definition, by operationId."""
        return (await _resource(lambda: lookup.get_operation(kbs_of(tenants, ctx).with_api(api), api, operation_id))).text

    @server.resource("specrag://{api}/schemas/{name}", mime_type="application/yaml")
    async def schema_resource(api: str, name: str, ctx: Context) -> str:
        """A schema's definition, by name."""
        return (await _resource(lambda: lookup.get_schema(kbs_of(tenants, ctx).with_api(api), api, name))).text

    if planner is not None:
        add_plan_tool(server, lambda ctx: kbs_of(tenants, ctx), tracked, *planner)
    if impact is not None:
        add_impact_tool(server, lambda ctx: kbs_of(tenants, ctx), tracked, *impact)
    return server


async def _resource(read: Callable[[], T]) -> T:
    try:
        return await asyncio.to_thread(read)
    except SpecragError as exc:
        raise ResourceError(str(exc)) from exc


async def run_stdio(server: MCPServer) -> None:
    """``server.run("stdio")``, but a line the SDK's reader rejects is answered (``unreadable_reply``)
    instead of dropped: the SDK hands such a line to the session as an exception, which only logs it."""
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def sift() -> None:
            async with send:
                async for item in read_stream:
                    if not isinstance(item, Exception):
                        await send.send(item)
                        continue
                    reply = unreadable_reply(item)
                    logger.warning("mcp: unreadable message%s", "" if reply is None else
                                   f" (id {reply.id!r}): {reply.error.message}")
                    if reply is not None:
                        try:
                            await write_stream.send(SessionMessage(reply))
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return

        async with anyio.create_task_group() as tg:
            tg.start_soon(sift)
            await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
            tg.cancel_scope.cancel()


def unreadable_reply(exc: Exception) -> mcp_types.JSONRPCError | None:
    """The error reply to a message the SDK could not read: its id when one can be found at the top
    level of the line (id null for a line that is not JSON at all, as JSON-RPC says); None for a
    notification (an object without an id)."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    raw = errors[0].get("input") if errors else None
    not_json = any(e.get("type") == "json_invalid" for e in errors)
    found, request_id = (("id" in raw), raw.get("id")) if isinstance(raw, dict) else \
        top_level_id(raw) if isinstance(raw, str) else (False, None)
    if not found and not not_json:
        return None
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        request_id = None
    code, what = ((mcp_types.PARSE_ERROR, "parse error") if not_json else (mcp_types.INVALID_REQUEST, "invalid request"))
    detail = errors[0].get("msg", "") if errors else str(exc)
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id,
                                  error=mcp_types.ErrorData(code=code, message=f"{what}: {detail}"[:300]))


def top_level_id(line: str) -> tuple[bool, Any]:
    """(found, value) of the ``"id"`` member of the JSON object ``line``, read without parsing the
    rest: one pass that skips nested values by depth and strings by their quotes, so neither depth
    nor a bad escape elsewhere in the line stops it."""
    depth, i, n, decoder = 0, 0, len(line), json.JSONDecoder()
    while i < n:
        c = line[i]
        if c == '"':
            end = i + 1
            while end < n and line[end] != '"':
                end += 2 if line[end] == "\\" else 1
            if depth == 1 and line[i + 1:end] == "id":
                rest = line[end + 1:].lstrip()
                if rest.startswith(":"):
                    try:
                        return True, decoder.raw_decode(rest[1:].lstrip())[0]
                    except (ValueError, RecursionError):
                        return True, None
            i = end + 1
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        i += 1
    return False, None
