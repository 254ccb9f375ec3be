"""Stage 3's retriever: metadata-filtered hybrid search (vector + BM25, fused by weighted RRF).

The per-query filters travel in the query bundle (:class:`SpecQuery`): ``file_ids`` and
``types`` are applied on both sides, so no chunk of another API can come back.
``prefer_file_ids`` is the soft form: the search over those APIs is fused with a search over
the whole index (``fleet_weight``), so preferred APIs rank first but a strong hit elsewhere still
gets in; ``prefer_lead`` says how sure stage 1 is of that order (an unsure order is also ranked
as one scope, :meth:`HybridRetriever._preferred`). The vector side embeds ``embedding_strs``
(the user's words); BM25 reads ``query_str`` (the expanded query). A plain ``QueryBundle``
searches the whole index with the defaults. ``SpecQuery.mode`` picks one side (keyword: BM25
only, vector: vectors only); a single side keeps its own scores (BM25, or the vector
similarity), both sides are fused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from specrag.context.nodes import Hit, RankedRows, as_node_with_score
from specrag.core.api_models import SearchMode
from specrag.core.fusion import DEFAULT_K, fused_order, weighted_rrf
from specrag.core.settings import Settings
from specrag.stages.names import without_names
from specrag.stages.query import SpecQuery


class SearchIndex(Protocol):
    """Both searches rank chunks: a split chunk's ``:partN`` rows come back as the chunk, once, at
    its best place (``ChunkStore`` does so; the reference expansion brings the other parts). A
    ranking may be any sequence of hits; ``ChunkStore``'s are :class:`RankedRows`, fused as arrays."""

    search_mode: str

    def vector_search(self, query: str, file_ids: list[str] | None, types: list[str] | None, top_k: int,
                      hydrate: bool = True, methods: list[str] | None = None) -> Sequence[Hit]: ...
    def lexical_search(self, query: str, file_ids: list[str] | None, types: list[str] | None, top_k: int,
                       hydrate: bool = True, methods: list[str] | None = None) -> Sequence[Hit]: ...
    def hydrate(self, hits: Sequence[Hit]) -> list[NodeWithScore]: ...


def fuse_hits(sides: list[tuple[Sequence[Hit | None], float]], k: int) -> Sequence[Hit]:
    """Hit lists fused by weighted reciprocal rank, as hits. A ``None`` entry holds a rank
    without a hit (a list with some hits taken out keeps its ranks). Rankings of one index
    generation's rows (:class:`RankedRows`) are fused as arrays, ties by chunk id; any other hit
    lists through :func:`weighted_rrf` (the same order)."""
    ranked = [(hits, weight) for hits, weight in sides if len(hits)]
    if not ranked:
        return []
    source = getattr(ranked[0][0], "source", None)
    if all(isinstance(hits, RankedRows) and hits.source is source for hits, _ in ranked):
        rows, scores = fused_order([(hits.rows, hits.rank_array(), weight) for hits, weight in ranked], k,
                                   source.id_order)
        return RankedRows(source, rows, scores)
    first: dict[str, Hit] = {}
    rankings = []
    for hits, weight in ranked:
        ids = []
        for hit in (hits.with_gaps() if isinstance(hits, RankedRows) else hits):
            node_id = None if hit is None else hit.node.id_
            if node_id is not None and node_id not in first:
                first[node_id] = hit
            ids.append(node_id)
        rankings.append((ids, weight))
    return [Hit(first[i].node, score) for i, score in weighted_rrf(rankings, k)]


def ranking(retriever: BaseRetriever, query: QueryBundle) -> Sequence[Hit | NodeWithScore]:
    """A ranking a stage reads for ids alone: the retriever's :meth:`HybridRetriever.rank` when
    it has one, else its ``retrieve()`` (any LlamaIndex retriever serves)."""
    rank = getattr(retriever, "rank", None)
    return rank(query) if callable(rank) else retriever.retrieve(query)


def _spec_query(query: QueryBundle) -> SpecQuery:
    return query if isinstance(query, SpecQuery) else SpecQuery(
        query_str=query.query_str, custom_embedding_strs=query.custom_embedding_strs)


def without_apis(hits: Sequence[Hit], file_ids: set[str]) -> Sequence[Hit | None]:
    """The hits of other APIs at their ranks (the ranks of ``file_ids``' hits left empty)."""
    if isinstance(hits, RankedRows):
        return hits.without_apis(file_ids)
    return [None if h.node.metadata.get("source_file") in file_ids else h for h in hits]


class HybridRetriever(BaseRetriever):
    """Holds only what is the same for every query: the index, the fusion weights, the depth."""

    def __init__(self, index: SearchIndex, *, top_k: int = 5, rrf_k: int = DEFAULT_K, vector_weight: float = 0.6,
                 bm25_weight: float = 0.4, candidates: int = 30, fleet_weight: float = 0.5,
                 api_decay: float | None = 0.6, order_margin: float = 0.07):
        super().__init__()
        self.index = index
        self.top_k = top_k
        self.rrf_k = rrf_k
        self.weights = (vector_weight, bm25_weight)
        self.candidates = candidates
        self.fleet_weight = fleet_weight  # weight of the whole-index rankings against the preferred APIs' (1.0)
        self.api_decay = api_decay  # weight of the i-th preferred API's own ranking: decay ** i (None: one scope)
        self.order_margin = order_margin  # a stage-1 lead below this: the order is a guess (see _preferred)

    @property
    def search_mode(self) -> str:
        """hybrid, or lexical when the index has no usable vectors (read per query: a rebuild may change it)."""
        return self.index.search_mode

    @classmethod
    def from_settings(cls, index: SearchIndex, settings: Settings) -> "HybridRetriever":
        return cls(index, top_k=settings.retrieval.max_primary_results, rrf_k=settings.retrieval.rrf_k,
                   vector_weight=settings.retrieval.vector_weight, bm25_weight=settings.retrieval.bm25_weight,
                   fleet_weight=settings.retrieval.fleet_weight, api_decay=settings.retrieval.api_decay,
                   order_margin=settings.retrieval.api_order_margin)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """Fused top k; ``SpecQuery(hydrate=False)`` leaves them as id/API/type stubs (cheap)."""
        query = _spec_query(query_bundle)
        ranked = self.rank(query)
        return self.index.hydrate(ranked) if query.hydrate else [as_node_with_score(h) for h in ranked]

    def rank(self, query_bundle: QueryBundle) -> Sequence[Hit]:
        """The fused top k as stub hits (id, API, type), ``_retrieve``'s order: for a stage that
        only orders chunk ids inside its own step (stage 1's endpoint evidence, producer
        expansion's per-API ranking). It skips what ``retrieve()`` adds per call: two
        instrumentation spans, start and end events with every hit, and a ``NodeWithScore`` per hit
        (~0.7 ms of a query's ~8 ms after its embedding, over 150-200 ranked hits)."""
        query = _spec_query(query_bundle)
        if query.file_ids is not None and not query.file_ids:
            return []
        top_k = query.top_k or self.top_k
        depth = max(self.candidates, 3 * top_k)  # not widened by ``further``: the first top_k stay as they are
        if query.prefer_file_ids and query.file_ids is None:
            return self._soft(query, depth)[:top_k + query.further]
        return self._hybrid(query, query.query_str, query.file_ids, depth)[:top_k + query.further]

    def _soft(self, query: SpecQuery, depth: int) -> Sequence[Hit]:
        """The preferred APIs' ranking merged with the whole index's, whose hits of preferred APIs are
        taken out but keep their ranks. Merged by weighted reciprocal rank without smoothing
        (k = 0): another API's hit at rank r lands near the preferred ranking's rank
        r / ``fleet_weight``, so the weight moves it smoothly (RRF's k = 60 would make it a
        threshold: below ~0.9 nothing from elsewhere could ever enter the top 10)."""
        preferred = self._preferred(query, depth)
        if not self.fleet_weight:
            return preferred
        # the user's words alone, like a plain search, read as stage 1's evidence reads them (names
        # blanked for BM25, the whole question for the vector): that search's ranking serves again
        fleet = self._hybrid(query, without_names(query.question), None, depth)
        return fuse_hits([(preferred, 1.0), (without_apis(fleet, set(query.prefer_file_ids)), self.fleet_weight)], k=0)

    def _preferred(self, query: SpecQuery, depth: int) -> Sequence[Hit]:
        """Each preferred API ranked on its own, merged by reciprocal rank weighted by the API's place
        in the preference (``api_decay ** i``): the first API's best hits lead, and a big API's many
        near-matches cannot bury a small API's one good operation.

        When stage 1 barely prefers its first API (``prefer_lead`` under ``order_margin``), that
        order is close to a guess: the per-API merge is fused (equal weights) with the preferred
        APIs' ranking as one scope, where the API with more strong hits gets more places."""
        apis = list(dict.fromkeys(query.prefer_file_ids))
        if self.api_decay is None or len(apis) == 1:
            return self._hybrid(query, query.query_str, apis, depth)
        by_api = fuse_hits([(self._hybrid(query, query.query_str, [api], depth), self.api_decay ** i)
                            for i, api in enumerate(apis)], k=0)
        if query.prefer_lead is not None and query.prefer_lead < self.order_margin:
            by_api = fuse_hits([(by_api, 1.0), (self._hybrid(query, query.query_str, apis, depth), 1.0)], k=0)
        return by_api

    def _hybrid(self, query: SpecQuery, lexical_query: str, file_ids: list[str] | None,
                depth: int) -> Sequence[Hit]:
        """One scope's vector and BM25 rankings, fused by weighted RRF; a single
        side (``SpecQuery.mode`` keyword or vector) keeps its own order and scores."""
        filters = dict(file_ids=file_ids, types=query.types, top_k=depth, hydrate=False, methods=query.methods)
        sides = []
        if query.mode != SearchMode.KEYWORD and self.index.search_mode == "hybrid":
            sides.append((self.index.vector_search(query.question, **filters), self.weights[0]))
        if query.mode != SearchMode.VECTOR:
            sides.append((self.index.lexical_search(lexical_query, **filters), self.weights[1]))
        if query.mode in (SearchMode.KEYWORD, SearchMode.VECTOR):
            return sides[0][0] if sides else []
        return fuse_hits(sides, self.rrf_k)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
