"""Direct lookups in an index: its APIs, one operation, one schema. Shared by the HTTP routes
(``GET /api/v1/apis...``), the MCP tools and resources (through ``specrag.index.lookup``) and the
CLI's ``specrag apis`` and ``specrag show``, which open an index without an engine (``IndexLookup``).

An operation is named by its ``operationId`` or by ``METHOD /path``; a schema by its name as the
API's detailed index lists it (``components/schemas/X``, ``definitions/X`` or a multi-file
fragment). A chunk split into parts is returned whole; ``max_tokens`` cuts the text and sets
``truncated``.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from typing import Protocol

from pydantic import BaseModel, Field
from specrag.catalog.io import ApiIndexes, load_api_indexes, load_catalog
from specrag.catalog.models import ApiIndex, Catalog, CatalogEntry
from specrag.core.errors import SpecragError
from specrag.core.example_models import ExampleRequest
from specrag.core.ids import ERRORS_SUFFIX, base_chunk_id, errors_chunk_id, operation_chunk_id, parse_operation_id
from specrag.core.tokens import count_tokens, truncate_tokens
from specrag.specs.example_request import example_from_fields
from specrag.specs.models import Chunk

OPERATION_NAMES_CACHE = 64


class NotFound(SpecragError, LookupError):
    """An operation or schema that the API does not have."""


class LookupSource(Protocol):
    """What the lookups read: a served ``KnowledgeBase`` (serve/kbs.py) or an ``IndexLookup``."""

    kb_id: str
    store: object  # ChunkStore: get_chunks, api_chunk_ids, stored_metadata
    catalog: Catalog

    @property
    def api_ids(self) -> frozenset[str]: ...

    def operations(self, file_id: str) -> dict[str, str]: ...

    def api_index(self, file_id: str) -> ApiIndex | None: ...


class ApiSummary(BaseModel):
    kb_id: str
    api: str = Field(description="the API id (spec file id)")
    name: str
    description: str = ""
    domains: list[str] = Field(default_factory=list)


class ApiListing(BaseModel):
    """One row of ``specrag apis``: what a caller needs to pick an API and call it."""

    api: str = Field(description="the API id (spec file id)")
    title: str = Field(description="info.title")
    version: str = Field("", description="info.version, '' when the index does not record it")
    operations: int = Field(description="operations in the API's detailed index")
    base_urls: list[str] = Field(default_factory=list, description="its first operation's servers, preferred first")


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


def operation_names(store, file_id: str) -> dict[str, str]:
    """operationId -> chunk id of the API's operations (one batched read)."""
    ids = [i for i in store.api_chunk_ids(file_id)
           if base_chunk_id(i) == i and not i.endswith(ERRORS_SUFFIX) and parse_operation_id(i)]
    return {c.operation_id: c.id for c in store.get_chunks(ids).values() if c.operation_id}


class IndexLookup:
    """An opened ``ChunkStore`` and its generation's catalogs, without an engine: no model, no
    LlamaIndex. What ``specrag apis``, ``show``, ``impact`` and ``deps`` read."""

    def __init__(self, kb_id: str, store):
        self.kb_id = kb_id
        self.store = store
        self.catalog: Catalog = load_catalog(store.catalog_files)
        self.indexes: ApiIndexes = load_api_indexes(store.catalog_files, self.catalog)
        self.api_ids = frozenset(store.complete_api_ids() & self.catalog.ids())  # as the engine's known_apis
        self.operations = lru_cache(maxsize=OPERATION_NAMES_CACHE)(lambda file_id: operation_names(store, file_id))

    def api_index(self, file_id: str) -> ApiIndex | None:
        return self.indexes.get(file_id) if file_id in self.api_ids else None

    def require_api(self, api: str) -> None:
        if api not in self.api_ids:
            close = difflib.get_close_matches(api, sorted(self.api_ids), n=3, cutoff=0.5)
            raise NotFound(f"unknown API {api!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))

    def operation_hint(self, api: str, operation: str) -> str:
        """`` (did you mean ...?)`` naming the API's operations closest to ``operation``, or ''."""
        index = self.api_index(api)
        names = [f"{m} {ep.path}" for ep in index.endpoints for m in ep.methods] if index else []
        names += [o for ep in index.endpoints for o in ep.operation_ids] if index else []
        close = difflib.get_close_matches(" ".join(operation.split()), names, n=3, cutoff=0.5)
        return f" (did you mean {', '.join(close)}?)" if close else ""

    def close(self) -> None:
        self.store.close()


def api_summary(kb: LookupSource, entry: CatalogEntry) -> ApiSummary:
    return ApiSummary(kb_id=kb.kb_id, api=entry.file_id, name=entry.name, description=entry.description,
                      domains=entry.domains)


def list_apis(kb: LookupSource) -> list[ApiSummary]:
    return [api_summary(kb, e) for e in kb.catalog.apis if e.file_id in kb.api_ids]


def api_listing(kb: LookupSource, versions: dict[str, str]) -> list[ApiListing]:
    """Every served API of the catalog with its operation count (its detailed index) and base URLs
    (its first operation's, as stored); ``versions``: file_id -> info.version, where known."""
    rows = []
    for entry in kb.catalog.apis:
        if entry.file_id not in kb.api_ids:
            continue
        index = kb.api_index(entry.file_id)
        endpoints = index.endpoints if index else []
        first = next(((ep.path, ep.methods[0]) for ep in endpoints if ep.methods), None)
        stored = kb.store.stored_metadata(operation_chunk_id(entry.file_id, first[0], first[1].lower())) if first else None
        urls = _json_list(stored.get("base_urls")) if stored else []
        rows.append(ApiListing(api=entry.file_id, title=entry.name, version=versions.get(entry.file_id, ""),
                               operations=sum(len(ep.methods) for ep in endpoints), base_urls=urls))
    return rows


def _json_list(text) -> list[str]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def get_operation(kb: LookupSource, api: str, operation: str, max_tokens: int | None = None) -> OperationDetail:
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


def get_schema(kb: LookupSource, api: str, name: str, max_tokens: int | None = None) -> SpecElement:
    index = kb.api_index(api)
    entry = next((s for s in index.schemas if s.name == name), None) if index else None
    if entry is None:
        names = sorted(s.name for s in index.schemas) if index else []
        raise NotFound(f"API {api!r} has no schema {name!r}" + (f"; it has e.g. {', '.join(names[:5])}" if names else ""))
    return _element(kb, _whole(kb, entry.chunk_id), max_tokens)


def _operation_id(kb: LookupSource, api: str, operation: str) -> str:
    """``METHOD /path`` or an operationId -> the operation's chunk id."""
    method, _, path = operation.partition(" ")
    if (path := path.strip()).startswith("/"):
        return operation_chunk_id(api, path, method)
    if operation in (found := kb.operations(api)):
        return found[operation]
    raise NotFound(f"API {api!r} has no operation {operation!r}: name it by operationId or as 'METHOD /path'")


def _whole(kb: LookupSource, chunk_id: str) -> Chunk:
    """The chunk with the text of its parts (``:partN``) appended."""
    chunk = kb.store.get_chunks([chunk_id]).get(chunk_id)
    if chunk is None:
        raise NotFound(f"no {chunk_id!r} in knowledge base {kb.kb_id}")
    part_ids = [r for r in chunk.ref_ids if r != chunk_id and base_chunk_id(r) == chunk_id]
    parts = kb.store.get_chunks(part_ids) if part_ids else {}
    text = "\n".join([chunk.text, *(parts[p].text for p in part_ids if p in parts)])
    refs = {r: v for c in [chunk, *parts.values()] for r, v in c.ref_ids.items() if base_chunk_id(r) != chunk_id}
    return chunk.model_copy(update={"text": text, "ref_ids": refs})


def _element(kb: LookupSource, chunk: Chunk, max_tokens: int | None) -> SpecElement:
    text, tokens, truncated = truncate_tokens(chunk.text, max_tokens)
    return SpecElement(kb_id=kb.kb_id, api=chunk.file_id, chunk_id=chunk.id, type=chunk.type.value, name=chunk.name,
                       method=chunk.method, path=chunk.path, operation_id=chunk.operation_id, summary=chunk.summary,
                       text=text, tokens=tokens, truncated=truncated, ref_ids=list(chunk.ref_ids),
                       referenced_by=list(chunk.referenced_by))
