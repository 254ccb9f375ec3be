"""The compact catalog (stage 1 input) and the detailed per-API index (stage 2 input)."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field
from specrag.graph.models import ResourceEntry


class CatalogEntry(BaseModel):
    file_id: str
    name: str = Field(description="info.title")
    description: str = Field("", description="<= 200 chars, markdown stripped")
    domains: list[str] = Field(default_factory=list, description="from tags, path segments, x-apisguru-categories")


class Catalog(BaseModel):
    version: str = Field("", description="hash over the entries; changes whenever any entry changes")
    apis: list[CatalogEntry] = Field(default_factory=list)

    def ids(self) -> set[str]:
        return {entry.file_id for entry in self.apis}

    def get(self, file_id: str) -> CatalogEntry | None:
        return next((e for e in self.apis if e.file_id == file_id), None)


class EndpointEntry(BaseModel):
    path: str
    methods: list[str]
    operation_ids: list[str] = Field(default_factory=list)
    summaries: list[str] = Field(default_factory=list)


class SchemaUse(str, Enum):
    REQUEST = "request"
    RESPONSE = "response"
    SHARED = "shared"


class SchemaEntry(BaseModel):
    name: str
    chunk_id: str
    type: SchemaUse = SchemaUse.SHARED
    used_by: list[str] = Field(default_factory=list, description="operationIds (or 'METHOD path') that use it")


class DomainGroup(BaseModel):
    name: str
    endpoints: list[str] = Field(default_factory=list, description="'METHOD path'")
    schemas: list[str] = Field(default_factory=list)


class ApiIndex(BaseModel):
    file_id: str
    name: str
    endpoints: list[EndpointEntry] = Field(default_factory=list)
    schemas: list[SchemaEntry] = Field(default_factory=list)
    domains: list[DomainGroup] = Field(default_factory=list)
    resources: list[ResourceEntry] = Field(default_factory=list,
                                           description="resource types of the dependency graph: lookups, consumers")
