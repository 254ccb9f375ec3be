"""Stage 3: metadata-filtered hybrid search (vector + BM25, fused by RRF) over the chunk index.

The filter (``source_file IN selected_apis``, optional ``type IN ...``) is applied on both
sides, so no chunk of a non-selected API can come back. The vector side embeds
``query_bundle.embedding_strs`` (the user's words); BM25 reads ``query_str`` (the expanded query).
"""

from __future__ import annotations

from typing import Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from pipeline.settings import Settings
from pipeline.specs.ids import base_chunk_id
from pipeline.stages.fusion import reciprocal_rank_fusion


class SearchIndex(Protocol):
    search_mode: str

    def vector_search(self, query: str, file_ids: list[str] | None, types: list[str] | None, top_k: int,
                      hydrate: bool = True) -> list[NodeWithScore]: ...
    def lexical_search(self, query: str, file_ids: list[str] | None, types: list[str] | None, top_k: int,
                       hydrate: bool = True) -> list[NodeWithScore]: ...
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
    def __init__(self, index: SearchIndex, *, top_k: int = 5, rrf_k: int = 60, vector_weight: float = 0.6,
                 bm25_weight: float = 0.4, candidates: int = 30, file_ids: list[str] | None = None,
                 types: list[str] | None = None):
        super().__init__()
        self.index = index
        self.top_k = top_k
        self.rrf_k = rrf_k
        self.weights = (vector_weight, bm25_weight)
        self.candidates = candidates
        self.file_ids = file_ids
        self.types = types

    @classmethod
    def from_settings(cls, index: SearchIndex, settings: Settings) -> "HybridRetriever":
        return cls(index, top_k=settings.max_primary_results, rrf_k=settings.rrf_k,
                   vector_weight=settings.vector_weight, bm25_weight=settings.bm25_weight)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.search(query_bundle, self.file_ids, self.types, self.top_k)

    def search(self, query_bundle: QueryBundle, file_ids: list[str] | None, types: list[str] | None,
               top_k: int, hydrate: bool = True) -> list[NodeWithScore]:
        """Fused top ``top_k``; ``hydrate=False`` leaves them as id/API/type stubs (cheap)."""
        if file_ids is not None and not file_ids:
            return []
        depth = max(self.candidates, 3 * top_k)
        vector_query = (query_bundle.embedding_strs or [query_bundle.query_str])[0]
        vector_hits = (self.index.vector_search(vector_query, file_ids, types, depth, hydrate=False)
                       if self.index.search_mode == "hybrid" else [])
        lexical_hits = self.index.lexical_search(query_bundle.query_str, file_ids, types, depth, hydrate=False)
        fused = reciprocal_rank_fusion([(collapse_parts(vector_hits), self.weights[0]),
                                        (collapse_parts(lexical_hits), self.weights[1])], self.rrf_k)
        return self.index.hydrate(fused[:top_k]) if hydrate else fused[:top_k]
