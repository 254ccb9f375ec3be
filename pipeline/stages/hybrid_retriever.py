"""Stage 3's retriever: metadata-filtered hybrid search (vector + BM25, fused by weighted RRF).

The per-query filters travel in the query bundle (:class:`SpecQuery`): ``file_ids`` and
``types`` are applied on both sides, so no chunk of a non-selected API can come back. The vector
side embeds ``embedding_strs`` (the user's words); BM25 reads ``query_str`` (the expanded query).
A plain ``QueryBundle`` searches the whole index with the retriever's defaults. ``SpecQuery.mode``
picks one side (keyword: BM25 only, vector: vectors only); a single side keeps its own scores
(BM25, or the vector similarity), both sides are fused.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from pipeline.api_models import SearchMode
from pipeline.fusion import DEFAULT_K, weighted_rrf
from pipeline.settings import Settings
from pipeline.specs.ids import base_chunk_id
from pipeline.stages.query import SpecQuery


class SearchIndex(Protocol):
    search_mode: str

    def vector_search(self, query: str, file_ids: list[str] | None, types: list[str] | None, top_k: int,
                      hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]: ...
    def lexical_search(self, query: str, file_ids: list[str] | None, types: list[str] | None, top_k: int,
                       hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]: ...
    def hydrate(self, hits: list[NodeWithScore]) -> list[NodeWithScore]: ...


def collapse_parts(hits: list[NodeWithScore]) -> list[NodeWithScore]:
    """A ``:partN`` hit stands for its whole chunk: rank the base chunk once, at its best place
    (the reference expansion brings the other parts)."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        base = base_chunk_id(hit.node.node_id)
        if base in seen:
            continue
        seen.add(base)
        if base != hit.node.node_id:
            hit = NodeWithScore(node=TextNode(id_=base, text="", metadata=dict(hit.node.metadata)), score=hit.score)
        out.append(hit)
    return out


class HybridRetriever(BaseRetriever):
    """Holds only what is the same for every query: the index, the fusion weights, the depth."""

    def __init__(self, index: SearchIndex, *, top_k: int = 5, rrf_k: int = DEFAULT_K, vector_weight: float = 0.6,
                 bm25_weight: float = 0.4, candidates: int = 30):
        super().__init__()
        self.index = index
        self.top_k = top_k
        self.rrf_k = rrf_k
        self.weights = (vector_weight, bm25_weight)
        self.candidates = candidates

    @property
    def search_mode(self) -> str:
        """hybrid, or lexical when the index has no usable vectors (read per query: a rebuild may change it)."""
        return self.index.search_mode

    @classmethod
    def from_settings(cls, index: SearchIndex, settings: Settings) -> "HybridRetriever":
        return cls(index, top_k=settings.max_primary_results, rrf_k=settings.rrf_k,
                   vector_weight=settings.vector_weight, bm25_weight=settings.bm25_weight)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Fused top k; ``SpecQuery(hydrate=False)`` leaves them as id/API/type stubs (cheap)."""
        query = query_bundle if isinstance(query_bundle, SpecQuery) else SpecQuery(
            query_str=query_bundle.query_str, custom_embedding_strs=query_bundle.custom_embedding_strs)
        if query.file_ids is not None and not query.file_ids:
            return []
        top_k = query.top_k or self.top_k
        depth = max(self.candidates, 3 * top_k)
        vector_query = (query.embedding_strs or [query.query_str])[0]
        filters = dict(file_ids=query.file_ids, types=query.types, top_k=depth, hydrate=False, methods=query.methods)
        sides = []
        if query.mode != SearchMode.KEYWORD and self.index.search_mode == "hybrid":
            sides.append((collapse_parts(self.index.vector_search(vector_query, **filters)), self.weights[0]))
        if query.mode != SearchMode.VECTOR:
            sides.append((collapse_parts(self.index.lexical_search(query.query_str, **filters)), self.weights[1]))
        if query.mode in (SearchMode.KEYWORD, SearchMode.VECTOR):
            top = sides[0][0][:top_k] if sides else []
        else:
            top = self._fuse(sides)[:top_k]
        return self.index.hydrate(top) if query.hydrate else top

    def _fuse(self, sides: list[tuple[list[NodeWithScore], float]]) -> list[NodeWithScore]:
        first: dict[str, NodeWithScore] = {}
        for hits, _ in sides:
            for hit in hits:
                first.setdefault(hit.node.node_id, hit)
        rankings = [([hit.node.node_id for hit in hits], weight) for hits, weight in sides]
        return [NodeWithScore(node=first[i].node, score=score) for i, score in weighted_rrf(rankings, self.rrf_k)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
