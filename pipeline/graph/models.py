"""Typed records of the dependency graph, stored with the chunks and in the detailed index."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field
from specrag.core.ids import parse_operation_id


class EdgeSource(str, Enum):
    LINK = "link"  # an OpenAPI ``links`` entry states it
    NAME = "name"  # the response has a field named like the parameter (``movie_id``, ``username``)
    TYPE = "type"  # an ``id`` inside an object of the parameter's resource type


class ParamNeed(BaseModel):
    """A parameter an operation takes that a caller must fill."""

    name: str
    location: str = Field(description="path, query, header, cookie")
    required: bool = False
    id_like: bool = Field(False, description="names an identifier (``id``, ``movie_id``, ``petId``, ``uuid``)")
    text: bool = Field(False, description="free text (a string without enum or format, not an id): a name to look up")
    resources: list[str] = Field(default_factory=list,
                                 description="resource types it identifies, most specific first ('movie')")


class ProducedField(BaseModel):
    """A field in an operation's success response that may carry an identifier."""

    path: str = Field(description="where it is in the body: 'results[].id', 'id', 'owner.user_id'")
    name: str = Field(description="the field's own name")
    types: list[tuple[str, float]] = Field(default_factory=list,
                                           description="(resource type, weight) of the object holding it")


class OperationDeps(BaseModel):
    """What one operation consumes and produces (inferred from its spec fragment)."""

    chunk_id: str
    method: str
    path: str
    params: list[ParamNeed] = Field(default_factory=list)
    fields: list[ProducedField] = Field(default_factory=list)


class DependencyEdge(BaseModel):
    """``producer``'s response field ``field`` can fill ``consumer``'s parameter ``param``."""

    consumer: str = Field(description="chunk id of the operation that needs the value")
    param: str
    producer: str = Field(description="chunk id of the operation whose response holds it")
    field: str = Field(description="the response field, e.g. 'results[].id'")
    resource: str = Field("", description="the resource type matched, e.g. 'movie'")
    score: float = Field(description="strength of the inference, 0..1 (links are 1)")
    source: EdgeSource

    def label(self) -> str:
        """``GET /search/movie -> results[].id -> {movie_id}``."""
        producer = parse_operation_id(self.producer)
        what = f"{producer[2]} {producer[1]}" if producer else self.producer
        return f"{what} -> {self.field} -> {{{self.param}}}"


class ResourceEntry(BaseModel):
    """One resource type of an API: who looks it up by name and who needs its id."""

    name: str = Field(description="the resource type, e.g. 'movie', 'production_company'")
    lookups: list[str] = Field(default_factory=list, description="operations that find it from free text and "
                                                                 "need no id (chunk ids, best first)")
    producers: int = Field(0, description="operations that can produce its id")
    consumers: list[str] = Field(default_factory=list, description="operations with an id parameter of this type")


class ApiGraph(BaseModel):
    """One API's operations with their needs, and every inferred producer -> consumer edge."""

    file_id: str
    operations: list[OperationDeps] = Field(default_factory=list)
    edges: list[DependencyEdge] = Field(default_factory=list)
    resources: list[ResourceEntry] = Field(default_factory=list)

    def producers_of(self, consumer: str, param: str | None = None) -> list[DependencyEdge]:
        return [e for e in self.edges if e.consumer == consumer and (param is None or e.param == param)]

    def produced(self) -> dict[str, list[str]]:
        """producer chunk id -> the resource types whose ids it returns, strongest first."""
        best: dict[str, dict[str, float]] = {}
        for e in self.edges:
            if e.resource:
                mine = best.setdefault(e.producer, {})
                mine[e.resource] = max(mine.get(e.resource, 0.0), e.score)
        return {p: sorted(rs, key=lambda r: (-rs[r], r)) for p, rs in best.items()}
