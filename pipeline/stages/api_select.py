"""Stage 1 without an LLM: rank the catalog's APIs for a query.

Three signals, fused by weighted reciprocal rank:
- catalog BM25: one document per API (name, description, domains, endpoint paths,
  operationIds, summaries, schema names), as the catalog describes it;
- catalog vector (optional): the query's embedding against each API's vector (its catalog
  entry's name, description and domains, blended with its mean endpoint vector:
  :func:`~specrag.index.catalog_vectors.blend_with_centroids`), which hears "report a malicious IP"
  in "AbuseIPDB";
- endpoint evidence (optional): the APIs in the order of their best hit among the fleet-wide
  endpoint search's top ``evidence_depth``, which sees single endpoints a long API document dilutes.
  Its BM25 side reads the question without the names in it (:func:`~specrag.stages.names.without_names`:
  "the network that produced Game of Thrones" must not vote for a games API by spelling); its
  vector side reads the whole question (MiniLM hears a film in "Titanic").
The top ``max_apis`` are kept, fewer when the fused score drops off: one API when its lead is
clear, more only when unsure (``drop_off``, a share of the first API's score). The weights, the
drop-off and the fusion constant are settings, chosen leave-one-set-out on the labeled sets
(docs/evals.md): evidence carries most of the signal, the catalog vector helps, catalog BM25 measured no help (weight 0,
and a signal of weight 0 is not computed).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Callable

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from specrag.catalog.models import ApiIndex, Catalog
from specrag.core.bm25 import Bm25Ranker
from specrag.core.fusion import weighted_rrf
from specrag.core.records import ApiSelection
from specrag.index.blas import one_blas_thread
from specrag.stages.hybrid_retriever import ranking
from specrag.stages.names import without_names
from specrag.stages.query import SpecQuery
from specrag.stages.timing import elapsed_ms

EmbedQuery = Callable[[str], "list[float] | None"]


def api_document(entry_text: str, index: ApiIndex | None) -> str:
    parts = [entry_text]
    if index is not None:
        for ep in index.endpoints:
            parts += [ep.path, *ep.operation_ids, *ep.summaries]
        parts += [s.name for s in index.schemas]
    return " ".join(parts)


def _lead(ranked: list[tuple[str, float]]) -> float | None:
    """The first API's lead over the second (``ranked`` is best first), as a share of its fused
    score (None: one API)."""
    if len(ranked) < 2 or ranked[0][1] <= 0:
        return None
    return (ranked[0][1] - ranked[1][1]) / ranked[0][1]


class KeywordApiSelector:
    """Offline stage 1; also the LLM selector's shortlister and fallback."""

    def __init__(self, catalog: Catalog, indexes: Mapping[str, ApiIndex], evidence: BaseRetriever | None = None,
                 max_apis: int = 3, drop_off: float = 0.9, evidence_depth: int = 50,
                 api_vectors: np.ndarray | None = None, embed_query: EmbedQuery | None = None,
                 weights: tuple[float, float, float] = (0.0, 0.25, 1.0), rrf_k: int = 10):
        self.catalog = catalog
        self.ids = [e.file_id for e in catalog.apis]
        self.evidence = evidence
        self.max_apis = max_apis
        self.drop_off = drop_off
        self.evidence_depth = evidence_depth
        self.api_vectors = api_vectors
        self.embed_query = embed_query
        self.weights = weights  # catalog BM25, catalog vector, endpoint evidence (measured: see README)
        self.rrf_k = rrf_k
        docs = [api_document(f"{e.name} {e.file_id} {e.description} {' '.join(e.domains)}", indexes.get(e.file_id))
                for e in catalog.apis]
        self._ranker = Bm25Ranker(docs)

    def shortlist(self, query: str, n: int) -> list[tuple[str, float]]:
        """(file_id, fused score), best first; at most ``n``."""
        depth = max(n, self.evidence_depth)
        signals = ((lambda: [self.ids[i] for i, _ in self._ranker.top(query, depth)]),
                   (lambda: self._semantic(query, depth)), (lambda: self._evidence(query)))
        rankings = [(signal(), weight) for signal, weight in zip(signals, self.active_weights()) if weight]
        return weighted_rrf(rankings, self.rrf_k)[:n]

    def active_weights(self) -> tuple[float, float, float]:
        """The weights of the signals this selector has; catalog BM25 alone when it has no other
        (no vectors, no evidence retriever), whatever its configured weight."""
        available = (True, self.api_vectors is not None and self.embed_query is not None, self.evidence is not None)
        weights = tuple(w if on else 0.0 for w, on in zip(self.weights, available))
        return weights if any(weights) else (1.0, 0.0, 0.0)

    def _semantic(self, query: str, depth: int) -> list[str]:
        if self.api_vectors is None or self.embed_query is None:
            return []
        embedding = self.embed_query(query)
        if embedding is None:
            return []
        with one_blas_thread():  # a matrix-vector product: BLAS threads only contend (measured under load)
            sims = self.api_vectors @ np.asarray(embedding, dtype=np.float32)
        return [self.ids[i] for i in np.argsort(-sims, kind="stable")[:depth]]

    def _evidence(self, query: str) -> list[str]:
        """APIs in the order of their best endpoint among the fleet-wide top hits. (Summing
        votes per API, or dividing them by API size, measured no better on the labeled sets.)"""
        if self.evidence is None:
            return []
        hits = ranking(self.evidence, SpecQuery(query_str=without_names(query), custom_embedding_strs=[query],
                                                types=["endpoint"], top_k=self.evidence_depth, hydrate=False))
        apis = (str(hit.node.metadata.get("source_file", "")) for hit in hits)
        return [api for api in dict.fromkeys(apis) if api]

    def select(self, query: str) -> ApiSelection:
        start = time.perf_counter()
        ranked = self.shortlist(query, self.max_apis)
        result = ApiSelection(reasoning="no catalog entry shares a term with the query")
        if ranked:
            top = ranked[0][1]
            kept = [(api, score) for api, score in ranked if score >= top * self.drop_off]
            signals = [name for name, weight in zip(("catalog BM25", "catalog vector", "endpoint evidence"),
                                                    self.active_weights()) if weight]
            result = ApiSelection(selected_apis=[api for api, _ in kept], lead=_lead(ranked), reasoning=(
                f"keyword ranking ({' + '.join(signals)}): " + ", ".join(f"{a} {s:.4f}" for a, s in kept)))
        result.fall_back("no_llm", "offline: keyword selection")
        result.ms = elapsed_ms(start)
        return result

    async def aselect(self, query: str) -> ApiSelection:
        return await asyncio.to_thread(self.select, query)
