"""Stage 1 without an LLM: rank the catalog's APIs for a query.

Two lexical signals, fused by reciprocal rank:
- catalog BM25: one document per API (name, description, domains, endpoint paths,
  operationIds, summaries, schema names), as the catalog describes it;
- endpoint evidence (optional): the best fleet-wide chunk hits grouped by API, which sees
  the vocabulary of single endpoints that a long API document dilutes.
The top ``max_apis`` are kept, fewer when the fused score drops off.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable

from llama_index.core.schema import NodeWithScore

from pipeline.catalog.io import load_api_index, load_catalog
from pipeline.catalog.models import ApiIndex, Catalog
from pipeline.context import RetrievalStats
from pipeline.lexical import Bm25Ranker
from pipeline.stages.types import ApiSelection

ChunkSearch = Callable[[str, int], list[NodeWithScore]]
RRF_K = 60
EVIDENCE_K = 10  # steep: the first hits carry most of an API's vote


def api_document(entry_text: str, index: ApiIndex | None) -> str:
    parts = [entry_text]
    if index is not None:
        for ep in index.endpoints:
            parts += [ep.path, *ep.operation_ids, *ep.summaries]
        parts += [s.name for s in index.schemas]
    return " ".join(parts)


class KeywordApiSelector:
    def __init__(self, catalog: Catalog, indexes: dict[str, ApiIndex], chunk_search: ChunkSearch | None = None,
                 max_apis: int = 3, drop_off: float = 0.5, evidence_depth: int = 40, evidence_weight: float = 1.0):
        self.catalog = catalog
        self.ids = [e.file_id for e in catalog.apis]
        self.chunk_search = chunk_search
        self.max_apis = max_apis
        self.drop_off = drop_off
        self.evidence_depth = evidence_depth
        self.evidence_weight = evidence_weight
        docs = [api_document(f"{e.name} {e.file_id} {e.description} {' '.join(e.domains)}", indexes.get(e.file_id))
                for e in catalog.apis]
        self._ranker = Bm25Ranker(docs)

    @classmethod
    def from_catalog_dir(cls, catalog_dir: Path, chunk_search: ChunkSearch | None = None, max_apis: int = 3) -> "KeywordApiSelector":
        catalog = load_catalog(catalog_dir)
        indexes = {e.file_id: idx for e in catalog.apis if (idx := load_api_index(catalog_dir, e.file_id))}
        return cls(catalog, indexes, chunk_search, max_apis)

    def shortlist(self, query: str, n: int) -> list[tuple[str, float]]:
        """(file_id, fused score), best first; at most ``n``."""
        fused: dict[str, float] = defaultdict(float)
        for rank, (i, _) in enumerate(self._ranker.top(query, max(n, self.evidence_depth))):
            fused[self.ids[i]] += 1.0 / (RRF_K + rank + 1)
        if self.chunk_search is not None:
            for rank, api in enumerate(self._evidence(query)):
                fused[api] += self.evidence_weight / (RRF_K + rank + 1)
        ranked = sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:n]

    def _evidence(self, query: str) -> list[str]:
        """APIs ranked by the reciprocal ranks of all their chunks among the fleet-wide top hits,
        so an API with several matching endpoints beats one lucky near-miss."""
        votes: dict[str, float] = defaultdict(float)
        for rank, hit in enumerate(self.chunk_search(query, self.evidence_depth), start=1):
            api = str(hit.node.metadata.get("source_file", ""))
            if api:
                votes[api] += 1.0 / (EVIDENCE_K + rank)
        return sorted(votes, key=lambda a: (-votes[a], a))

    def select(self, query: str, stats: RetrievalStats) -> ApiSelection:
        ranked = self.shortlist(query, self.max_apis)
        if not ranked:
            return ApiSelection(selected_apis=[], reasoning="no catalog entry shares a term with the query")
        top = ranked[0][1]
        kept = [(api, score) for api, score in ranked if score >= top * self.drop_off]
        reasoning = "keyword ranking (catalog BM25" + (" + endpoint evidence" if self.chunk_search else "") + "): " + \
            ", ".join(f"{api} {score:.4f}" for api, score in kept)
        return ApiSelection(selected_apis=[api for api, _ in kept], reasoning=reasoning)
