"""Typed records produced by ingestion and read by every later stage."""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import orjson
from pydantic import BaseModel, Field, field_validator
from specrag.graph.models import ApiGraph, DependencyEdge, ParamNeed
from specrag.specs.example_request import RequestRecipe
from specrag.specs.files import safe_text


class ChunkType(str, Enum):
    ENDPOINT = "endpoint"
    COMPONENT = "component"
    ERRORS = "errors"


class Chunk(BaseModel):
    """One retrievable unit: an operation, a component, or an operation's error responses.

    ``text`` is what an LLM reads (the fragment rendered as YAML, ``$ref``s kept as references);
    ``embed_text`` is a short summary for the embedder (≲64 tokens, embedding cost grows with
    length); ``search_text`` is the lexical (BM25) view: names, summary, description.
    """

    id: str
    file_id: str
    type: ChunkType
    text: str
    embed_text: str
    search_text: str
    kind: str = Field(description="operation, errors, or the component kind: schemas, parameters, ...")
    name: str = ""
    method: str = ""
    path: str = ""
    operation_id: str = ""
    summary: str = ""
    tags: list[str] = Field(default_factory=list)
    n_tokens: int = 0
    ref_ids: dict[str, list[str]] = Field(
        default_factory=dict,
        description="chunk id -> the locations (JSON pointers inside this fragment) that reference it",
    )
    referenced_by: list[str] = Field(default_factory=list)
    base_urls: list[str] = Field(default_factory=list, description="an operation's servers, preferred first")
    auth: list[str] = Field(default_factory=list, description="an operation's accepted security requirements")
    compact_text: str = Field("", description="a component's names and types only, how it is shown as a reference")
    compact_tokens: int = 0
    params: list[ParamNeed] = Field(default_factory=list, description="operations: parameters a caller must fill")
    producers: list[DependencyEdge] = Field(default_factory=list,
                                            description="operations: who can fill each id parameter, best first")
    produces: list[str] = Field(default_factory=list, description="operations: resource types whose ids it returns")
    request: RequestRecipe | None = Field(None, description="operations: what their example request is built from")

    def metadata(self) -> dict[str, str | int | float | bool]:
        """Flat metadata, as Chroma accepts it; ``ref_ids``/``referenced_by``/``tags`` are JSON."""
        return {
            "source_file": self.file_id,
            "type": self.type.value,
            "kind": self.kind,
            "name": self.name,
            "method": self.method,
            "path": self.path,
            "operation_id": self.operation_id,
            "summary": self.summary,
            "tags": json.dumps(self.tags),
            "n_tokens": self.n_tokens,
            "ref_ids": json.dumps(self.ref_ids),  # insertion order = order of appearance in the spec
            "referenced_by": json.dumps(self.referenced_by),
            "base_urls": json.dumps(self.base_urls),
            "auth": json.dumps(self.auth),
            "compact_text": self.compact_text,
            "compact_tokens": self.compact_tokens,
            "params": json.dumps([p.model_dump(mode="json") for p in self.params]),
            "producers": json.dumps([e.model_dump(mode="json", exclude={"consumer"}) for e in self.producers]),
            "produces": json.dumps(self.produces),
            "request": self.request.model_dump_json(exclude_defaults=True) if self.request is not None else "",
        }

    @classmethod
    def from_metadata(cls, chunk_id: str, text: str, metadata: dict[str, Any]) -> "Chunk":
        """Rebuild from stored metadata; malformed JSON fields become empty, never an error."""
        return cls(
            id=chunk_id,
            file_id=str(metadata.get("source_file", "")),
            type=ChunkType(metadata.get("type", "component")),
            text=text,
            embed_text=str(metadata.get("embed_text", "")),
            search_text=str(metadata.get("search_text", "")),
            kind=str(metadata.get("kind", "")),
            name=str(metadata.get("name", "")),
            method=str(metadata.get("method", "")),
            path=str(metadata.get("path", "")),
            operation_id=str(metadata.get("operation_id", "")),
            summary=str(metadata.get("summary", "")),
            tags=_json_or(metadata.get("tags"), [], list),
            n_tokens=int(metadata.get("n_tokens", 0) or 0),
            ref_ids=_json_or(metadata.get("ref_ids"), {}, dict),
            referenced_by=_json_or(metadata.get("referenced_by"), [], list),
            base_urls=_json_or(metadata.get("base_urls"), [], list),
            auth=_json_or(metadata.get("auth"), [], list),
            compact_text=str(metadata.get("compact_text", "") or ""),
            compact_tokens=int(metadata.get("compact_tokens", 0) or 0),
            params=decode_params(metadata.get("params")),
            producers=decode_producers(chunk_id, metadata.get("producers")),
            produces=[str(r) for r in _json_or(metadata.get("produces"), [], list)],
            request=decode_request(metadata.get("request")),
        )


def _json_or(raw: Any, default: Any, expected: type) -> Any:
    """``raw`` decoded if it is JSON text of the ``expected`` type, else ``default``. Read with
    orjson (a query decodes ~100 stored fields: 0.27 ms with ``json``) unless it may differ from
    ``json``: text with 19 digits in a row (orjson reads an integer past 64 bits as a float), or
    text orjson refuses and ``json`` takes (NaN, Infinity, lone surrogates). The same values
    either way."""
    if isinstance(raw, expected):
        return raw
    if not isinstance(raw, str):
        return default
    try:
        value = json.loads(raw) if _LONG_DIGITS.search(raw) else orjson.loads(raw)
    except ValueError:  # orjson's JSONDecodeError is one
        try:
            value = json.loads(raw)
        except ValueError:
            return default
    return value if isinstance(value, expected) else default


_LONG_DIGITS = re.compile(r"\d{19}")


JSON_TEXT_FIELDS: dict[str, type] = {"tags": list, "ref_ids": dict, "referenced_by": list}


def decoded_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """Stored metadata with its JSON-text fields (``JSON_TEXT_FIELDS``) as real lists and objects;
    a malformed one becomes empty, as in :meth:`Chunk.from_metadata`."""
    return {key: _json_or(value, JSON_TEXT_FIELDS[key](), JSON_TEXT_FIELDS[key]) if key in JSON_TEXT_FIELDS else value
            for key, value in metadata.items()}


def decode_ref_ids(raw: Any) -> list[str]:
    """Chunk ids from a stored ``ref_ids`` value; malformed metadata means no refs."""
    value = _json_or(raw, {}, dict) if not isinstance(raw, list) else {str(x): [] for x in raw}
    return [k for k in value if isinstance(k, str)]


def decode_params(raw: Any) -> list[ParamNeed]:
    """Stored ``params`` metadata; malformed entries are dropped, never an error."""
    return [p for item in _json_or(raw, [], list) if (p := _valid(ParamNeed, item)) is not None]


def decode_producers(consumer: str, raw: Any) -> list[DependencyEdge]:
    """Stored ``producers`` metadata of operation ``consumer``; malformed entries are dropped."""
    items = [{**item, "consumer": consumer} for item in _json_or(raw, [], list) if isinstance(item, dict)]
    return [e for item in items if (e := _valid(DependencyEdge, item)) is not None]


def decode_request(raw: Any) -> RequestRecipe | None:
    """Stored ``request`` metadata; missing (an index built before it) or malformed is None."""
    value = _json_or(raw, None, dict)
    return _valid(RequestRecipe, value) if value is not None else None


def _valid(model: type[BaseModel], item: Any) -> Any:
    try:
        return model.model_validate(item)
    except ValueError:
        return None


class ApiInfo(BaseModel):
    """One API (one spec entry file)."""

    file_id: str
    source: str = Field(description="entry file path as given/found")
    title: str = ""
    version: str = ""
    description: str = ""
    spec_format: str = Field(description="swagger-2.0, openapi-3.0, openapi-3.1")
    content_hash: str = Field(description="sha256 over the entry file and every file it references")
    files: list[str] = Field(default_factory=list, description="other files read for $refs")
    tags: list[str] = Field(default_factory=list)
    categories: list[str] = Field(default_factory=list, description="x-apisguru-categories")
    tag_descriptions: dict[str, str] = Field(default_factory=dict)

    _safe_source = field_validator("source")(safe_text)


class SkippedSpec(BaseModel):
    """A file that was not ingested. Both texts are made safe for UTF-8 output (a file name's
    undecodable bytes become ``\\xNN``), so a report always serialises."""

    file: str
    reason: str

    _safe_texts = field_validator("file", "reason")(safe_text)


class RefStats(BaseModel):
    """``$ref`` counts. ``total`` counts refs that point inside their spec (same file or a file in
    the spec's folder tree); ``unresolved`` of those found no chunk. External ones are by kind."""

    total: int = 0
    resolved: int = 0
    unresolved: int = 0
    external: dict[str, int] = Field(default_factory=dict, description="url, escapes_root, ...")
    unresolved_by_kind: dict[str, int] = Field(default_factory=dict)

    def add(self, other: "RefStats") -> None:
        self.total += other.total
        self.resolved += other.resolved
        self.unresolved += other.unresolved
        for mine, theirs in ((self.external, other.external), (self.unresolved_by_kind, other.unresolved_by_kind)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v


class ApiChunks(BaseModel):
    """Everything ingestion knows about one API."""

    api: ApiInfo
    chunks: list[Chunk]
    refs: RefStats
    graph: ApiGraph | None = Field(None, description="the call-dependency graph of the API's operations")
    unresolved_samples: list[str] = Field(default_factory=list, description="a few unresolved refs, for the report")
    dropped: dict[str, int] = Field(default_factory=dict, description="elements left out, by reason (duplicate_id)")


class ClosureFit(BaseModel):
    """Computed by ``specrag.specs.closure``: how many operations' closures fit the budget."""

    operations: int = 0
    token_limit: int = 4000
    max_chunks: int = 15
    fit: float = Field(0.0, description="share of operations whose compact closure fits token_limit")
    fit_with_slots: float = Field(0.0, description="... and also max_chunks chunks in all")
    fit_full_text: float = Field(0.0, description="share that fits token_limit with references in full text")
    tokens_p50: float = 0.0
    tokens_p90: float = 0.0
    tokens_p99: float = 0.0


class IngestReport(BaseModel):
    specs_read: int = 0
    specs_skipped: list[SkippedSpec] = Field(default_factory=list)
    chunks: dict[str, int] = Field(default_factory=dict)
    refs: RefStats = Field(default_factory=RefStats)
    dropped: dict[str, int] = Field(default_factory=dict, description="elements left out of read specs, by reason")
    closure: ClosureFit = Field(default_factory=ClosureFit, description="operations whose closure fits the budget")
    fetched: dict[str, int] = Field(default_factory=dict, description="spec URLs by outcome: downloaded, not_modified "
                                    "(the server answered 304: the kept copy was read), failed (in specs_skipped)")
    seconds: float = 0.0


@runtime_checkable
class ChunkLookup(Protocol):
    """Where chunks are read from by id: the store, or a dict in tests."""

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        """Chunks by id, in one batch; ids that do not exist are absent from the result.
        A lookup with a true ``in_memory`` attribute promises a call that never waits on a server;
        one with ``stored_metadata(chunk_id)`` hands over a fetched chunk's metadata as stored
        (``Chunk.metadata()``, read-only), so a reference is not encoded again."""
        ...
