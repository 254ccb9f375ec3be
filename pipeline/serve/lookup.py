"""Direct lookups in a knowledge base: its APIs, one operation, one schema. Shared by the HTTP
routes (``GET /api/v1/apis...``) and the MCP tools and resources.

An operation is named by its ``operationId`` or by ``METHOD /path``; a schema by its name as the
API's detailed index lists it (``components/schemas/X``, ``definitions/X`` or a multi-file
fragment). A chunk split into parts is returned whole; ``max_tokens`` cuts the text and sets
``truncated``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from specrag.catalog.models import CatalogEntry
from specrag.errors import SpecragError
from specrag.serve.kbs import KnowledgeBase
from specrag.specs.example_request import ExampleRequest, example_from_fields
from specrag.specs.ids import base_chunk_id, errors_chunk_id, operation_chunk_id
from specrag.specs.models import Chunk
from specrag.tokens import count_tokens, truncate_tokens

class NotFound(SpecragError, LookupError):
    """An operation or schema that the API does not have."""


class ApiSummary(BaseModel):
    kb_id: str
    api: str = Field(description="the API id (spec file id)")
    name: str
    description: str = ""
    domains: list[str] = Field(default_factory=list)


class SpecElement(BaseModel):
    """One operation, error-responses block or component, with what it references."""

    kb_id: str
    api: str
    chunk_id: str
    type: str = Field(description="endpoint, errors or component")
    name: str = ""
    method: str = ""
    path: str = ""
    operation_id: str = ""
    summary: str = ""
    text: str = Field(description="the fragment as YAML; $refs are kept as references")
    tokens: int = Field(description="cl100k tokens of text")
    truncated: bool = Field(False, description="text was cut to max_tokens")
    ref_ids: list[str] = Field(default_factory=list, description="chunks this one references ($ref)")
    referenced_by: list[str] = Field(default_factory=list)


class OperationDetail(SpecElement):
    errors: SpecElement | None = Field(None, description="the operation's 4xx/5xx/default responses")
    base_urls: list[str] = Field(default_factory=list, description="where it is called, preferred first")
    auth: list[str] = Field(default_factory=list, description="the accepted ways to authenticate")
    example_request: ExampleRequest | None = Field(None, description="a ready request: curl and raw HTTP with the base "
                                                                     "URL, auth, required parameters and a minimal "
                                                                     "valid body (null for an index built before them)")


def api_summary(kb: KnowledgeBase, entry: CatalogEntry) -> ApiSummary:
    return ApiSummary(kb_id=kb.kb_id, api=entry.file_id, name=entry.name, description=entry.description,
                      domains=entry.domains)


def list_apis(kb: KnowledgeBase) -> list[ApiSummary]:
    return [api_summary(kb, e) for e in kb.catalog.apis if e.file_id in kb.api_ids]


def get_operation(kb: KnowledgeBase, api: str, operation: str, max_tokens: int | None = None) -> OperationDetail:
    chunk_id = _operation_id(kb, api, operation.strip())
    chunk = _whole(kb, chunk_id)
    errors = kb.store.get_chunks([errors_chunk_id(chunk_id)]).get(errors_chunk_id(chunk_id))
    detail = OperationDetail(**_element(kb, chunk, max_tokens).model_dump())
    detail.errors = _element(kb, errors, max_tokens) if errors else None
    detail.base_urls, detail.auth = list(chunk.base_urls), list(chunk.auth)
    detail.example_request = example_from_fields(
        chunk.method, chunk.path, chunk.base_urls, chunk.auth,
        chunk.request.model_dump() if chunk.request is not None else None, count_tokens)
    return detail


def get_schema(kb: KnowledgeBase, api: str, name: str, max_tokens: int | None = None) -> SpecElement:
    index = kb.api_index(api)
    entry = next((s for s in index.schemas if s.name == name), None) if index else None
    if entry is None:
        names = sorted(s.name for s in index.schemas) if index else []
        raise NotFound(f"API {api!r} has no schema {name!r}" + (f"; it has e.g. {', '.join(names[:5])}" if names else ""))
    return _element(kb, _whole(kb, entry.chunk_id), max_tokens)


def _operation_id(kb: KnowledgeBase, api: str, operation: str) -> str:
    """``METHOD /path`` or an operationId -> the operation's chunk id."""
    method, _, path = operation.partition(" ")
    if path.startswith("/"):
        return operation_chunk_id(api, path.strip(), method)
    if operation in (found := kb.operations(api)):
        return found[operation]
    raise NotFound(f"API {api!r} has no operation {operation!r}: name it by operationId or as 'METHOD /path'")


def _whole(kb: KnowledgeBase, chunk_id: str) -> Chunk:
    """The chunk with the text of its parts (``:partN``) appended."""
    chunk = kb.store.get_chunks([chunk_id]).get(chunk_id)
    if chunk is None:
        raise NotFound(f"no {chunk_id!r} in knowledge base {kb.kb_id}")
    part_ids = [r for r in chunk.ref_ids if r != chunk_id and base_chunk_id(r) == chunk_id]
    parts = kb.store.get_chunks(part_ids) if part_ids else {}
    text = "\n".join([chunk.text, *(parts[p].text for p in part_ids if p in parts)])
    refs = {r: v for c in [chunk, *parts.values()] for r, v in c.ref_ids.items() if base_chunk_id(r) != chunk_id}
    return chunk.model_copy(update={"text": text, "ref_ids": refs})


def _element(kb: KnowledgeBase, chunk: Chunk, max_tokens: int | None) -> SpecElement:
    text, tokens, truncated = truncate_tokens(chunk.text, max_tokens)
    return SpecElement(kb_id=kb.kb_id, api=chunk.file_id, chunk_id=chunk.id, type=chunk.type.value, name=chunk.name,
                       method=chunk.method, path=chunk.path, operation_id=chunk.operation_id, summary=chunk.summary,
                       text=text, tokens=tokens, truncated=truncated, ref_ids=list(chunk.ref_ids),
                       referenced_by=list(chunk.referenced_by))
