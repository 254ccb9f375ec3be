"""Graph queries over one API, the library behind ``specrag impact`` and ``specrag deps``.

- :meth:`GraphQueries.impact`: the operations that use a schema, directly or through other
  components (``referenced_by``, walked upwards), each with the chain of components between.
- :meth:`GraphQueries.deps`: an operation's parameters and, for each, the operations that can
  produce its value (the dependency graph), plus the operations that consume what it returns.

Both take the API's file_id and a name as a person writes it (``User``, ``GET /users/{id}``,
an operationId, or a chunk id) and return pydantic reports; unknown names raise
:class:`GraphQueryError` with the closest known ones.
"""

from __future__ import annotations

import difflib
from typing import Callable

from pydantic import BaseModel, Field
from specrag.catalog.io import load_api_graph
from specrag.catalog.models import ApiIndex
from specrag.core.errors import SpecragError
from specrag.core.ids import (
    ERRORS_SUFFIX,
    base_chunk_id,
    operation_chunk_id,
    parse_operation_id,
    part_chunk_id,
)
from specrag.graph.models import ApiGraph, DependencyEdge, ParamNeed
from specrag.index.lookup import IndexLookup
from specrag.specs.models import Chunk, ChunkLookup

MAX_IMPACT_DEPTH = 12


class GraphQueryError(SpecragError, ValueError):
    """An unknown API, schema or operation; the message names the closest known ones."""


class ImpactedOperation(BaseModel):
    chunk_id: str
    method: str
    path: str
    operation_id: str = ""
    depth: int = Field(description="1: the operation references the schema itself; n: through n-1 components")
    via: list[str] = Field(default_factory=list, description="component chunk ids between the operation and the schema")


class ImpactReport(BaseModel):
    api: str
    schema_id: str = Field(description="chunk id of the schema")
    schema_name: str
    operations: list[ImpactedOperation] = Field(default_factory=list, description="shallowest first")
    components: list[str] = Field(default_factory=list, description="components that use the schema, transitively")


class DepsReport(BaseModel):
    api: str
    operation: str = Field(description="chunk id of the operation")
    method: str
    path: str
    params: list[ParamNeed] = Field(default_factory=list, description="parameters a caller must fill")
    producers: list[DependencyEdge] = Field(default_factory=list, description="who can fill each id parameter, best first")
    consumers: list[DependencyEdge] = Field(default_factory=list, description="operations that take what it returns")


class GraphQueries:
    """Impact and dependency queries over an index (chunks) and its catalogs (indexes, graphs)."""

    def __init__(self, lookup: ChunkLookup, load_index: Callable[[str], ApiIndex | None],
                 load_graph: Callable[[str], ApiGraph | None], known_apis: set[str] | frozenset[str]):
        self.lookup, self.load_index, self.load_graph, self.known_apis = lookup, load_index, load_graph, known_apis

    def impact(self, api: str, schema: str) -> ImpactReport:
        """Every operation whose request, response or errors use ``schema``, directly or transitively."""
        index = self._index(api)
        schema_id, name = self._schema(api, index, schema)
        report = ImpactReport(api=api, schema_id=schema_id, schema_name=name)
        names = _operation_names(api, index)
        chains: dict[str, list[str]] = {schema_id: []}
        frontier, seen = [schema_id], {schema_id}
        for depth in range(1, MAX_IMPACT_DEPTH + 1):
            if not frontier:
                break
            found = self._chunks(frontier)
            nxt = []
            for cid in frontier:
                for ref in found[cid].referenced_by if cid in found else ():
                    op = _operation(ref)
                    via = chains[cid]
                    if op is not None:
                        if op not in seen:
                            seen.add(op)
                            report.operations.append(_impacted(op, depth, via, names))
                    elif base_chunk_id(ref) not in seen:
                        seen.add(base_chunk_id(ref))
                        chains[base_chunk_id(ref)] = [base_chunk_id(ref), *via]
                        report.components.append(base_chunk_id(ref))
                        nxt.append(base_chunk_id(ref))
            frontier = nxt
        return report

    def deps(self, api: str, operation: str) -> DepsReport:
        """The operation's parameters, their producers, and the operations that consume its output."""
        index = self._index(api)
        op_id = self._operation(api, index, operation)
        chunk = self._chunks([op_id]).get(op_id)
        _, path, method = parse_operation_id(op_id)
        graph = self.load_graph(api)
        consumers = [e for e in graph.edges if e.producer == op_id] if graph is not None else []
        return DepsReport(api=api, operation=op_id, method=method, path=path,
                          params=list(chunk.params) if chunk else [], producers=list(chunk.producers) if chunk else [],
                          consumers=sorted(consumers, key=lambda e: (-e.score, e.consumer)))

    # ---- resolving names ------------------------------------------------------------------
    def _index(self, api: str) -> ApiIndex:
        index = self.load_index(api) if api in self.known_apis else None
        if index is None:
            raise GraphQueryError(f"unknown API {api!r}" + _hint(api, self.known_apis))
        return index

    def _schema(self, api: str, index: ApiIndex, schema: str) -> tuple[str, str]:
        by_name = {s.name.lower(): s for s in index.schemas}
        by_id = {s.chunk_id: s for s in index.schemas}
        entry = by_id.get(schema) or by_name.get(schema.lower())
        if entry is None:
            raise GraphQueryError(f"{api} has no schema {schema!r}" + _hint(schema, [s.name for s in index.schemas]))
        return entry.chunk_id, entry.name

    def _operation(self, api: str, index: ApiIndex, operation: str) -> str:
        routes: dict[str, str] = {}
        for ep in index.endpoints:
            for i, method in enumerate(ep.methods):
                cid = operation_chunk_id(api, ep.path, method.lower())
                routes[f"{method.upper()} {ep.path}"] = routes[cid] = cid
                if i < len(ep.operation_ids) and ep.operation_ids[i]:
                    routes[ep.operation_ids[i]] = cid
            if len(ep.methods) == 1:
                routes[ep.path] = operation_chunk_id(api, ep.path, ep.methods[0].lower())
        text = " ".join(operation.split())
        if text.split(" ", 1)[0].isalpha() and " " in text:
            text = f"{text.split(' ', 1)[0].upper()} {text.split(' ', 1)[1]}"
        if text not in routes:
            raise GraphQueryError(f"{api} has no operation {operation!r}" + _hint(text, [r for r in routes if ":" not in r]))
        return routes[text]

    def _chunks(self, ids: list[str]) -> dict[str, Chunk]:
        """Chunks by id; a chunk split into parts answers for its base id with its first part."""
        found = self.lookup.get_chunks(ids)
        missing = [i for i in ids if i not in found]
        if missing:
            parts = self.lookup.get_chunks([part_chunk_id(i, 1) for i in missing])
            found |= {i: parts[part_chunk_id(i, 1)] for i in missing if part_chunk_id(i, 1) in parts}
        return found


def _operation(chunk_id: str) -> str | None:
    """The operation an operation, part or errors chunk id belongs to; None for components."""
    base = base_chunk_id(chunk_id)
    base = base[: -len(ERRORS_SUFFIX)] if base.endswith(ERRORS_SUFFIX) else base
    try:
        return base if parse_operation_id(base) is not None else None
    except ValueError:
        return None


def _impacted(op: str, depth: int, via: list[str], names: dict[str, str]) -> ImpactedOperation:
    _, path, method = parse_operation_id(op)
    return ImpactedOperation(chunk_id=op, method=method, path=path, operation_id=names.get(op, ""), depth=depth,
                             via=list(via))


def _operation_names(api: str, index: ApiIndex) -> dict[str, str]:
    """operation chunk id -> operationId, from the detailed index."""
    return {operation_chunk_id(api, ep.path, m.lower()): ep.operation_ids[i]
            for ep in index.endpoints for i, m in enumerate(ep.methods) if i < len(ep.operation_ids)}


def _hint(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def graph_queries(index: IndexLookup) -> GraphQueries:
    """Impact and deps over an opened index without an engine (``specrag impact`` / ``deps``), wired
    as the engine wires them."""
    catalogs = index.store.catalog_files
    return GraphQueries(index.store, index.indexes.get, lambda api: load_api_graph(catalogs, api), index.api_ids)
