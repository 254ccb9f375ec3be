"""Stage 3 as one step: query analysis, the filtered hybrid retriever, and the ranking's
postprocessors (steps other operations need), returning a typed :class:`SearchResult`.

Query analysis turns the question's intent into a chunk-type filter (errors questions search
``errors`` chunks), dropped again when it leaves fewer than ``min_typed_results`` hits. The
search goes through ``BaseRetriever.retrieve`` and every reordering through
``postprocess_nodes``, so LlamaIndex instrumentation sees each of them (a step's own ranking of
ids inside its reordering, as producer expansion's per API, goes through ``HybridRetriever.rank``).
"""

from __future__ import annotations

import asyncio
import time

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from specrag.core.records import (
    ADDED_STEP,
    AddedStep,
    ApiSelection,
    QueryExpansion,
    SearchResult,
    StageMode,
)
from specrag.stages.intent import TYPES_FOR_INTENT, classify
from specrag.stages.query import SpecQuery
from specrag.stages.timing import elapsed_ms

RANKING_DEPTH = 10  # candidates ranked per query (the ranking metrics read the top 10)
MIN_TYPED_RESULTS = 3


class SearchStage:
    def __init__(self, retriever: BaseRetriever, steps: list[BaseNodePostprocessor] = (), *,
                 depth: int = RANKING_DEPTH, further_depth: int = 0, query_analysis: bool = True,
                 min_typed_results: int = MIN_TYPED_RESULTS):
        self.retriever = retriever
        self.steps = list(steps)
        self.depth = depth
        self.further_depth = further_depth  # the search's hits past ``depth`` kept as ``further`` (for signatures)
        self.query_analysis = query_analysis
        self.min_typed_results = min_typed_results

    def search(self, query: str, expansion: QueryExpansion, selection: ApiSelection) -> SearchResult:
        """Rank chunks for the user's ``query`` and its expansion: the selected APIs first (fused
        with the whole index, as firmly as stage 1 is sure of its order), or only those APIs when
        the caller named them. The steps reorder the first ``depth`` hits; the search's hits past
        them, to ``further_depth``, are kept aside as ``further``, so a deeper context never
        changes the ranking."""
        start = time.perf_counter()
        apis, only = selection.selected_apis, selection.mode is StageMode.GIVEN
        result = SearchResult(search_mode=getattr(self.retriever, "search_mode", "hybrid"))
        if not apis:
            result.warnings.append("no API selected: searched the whole index")
        spec_query = SpecQuery(query_str=expansion.expanded_query, custom_embedding_strs=[query],
                               file_ids=list(apis) if only and apis else None,
                               prefer_file_ids=list(apis) if apis and not only else None,
                               prefer_lead=selection.lead, top_k=self.depth,
                               further=max(0, self.further_depth - self.depth))
        if self.query_analysis:
            intent = classify(query)
            result.intent = intent.value
            spec_query = spec_query.narrowed(types=TYPES_FOR_INTENT[intent])
        nodes = self.retriever.retrieve(spec_query)
        if spec_query.types and len(nodes) < self.min_typed_results:
            result.type_filter_relaxed = True
            spec_query = spec_query.narrowed(types=None)
            nodes = self.retriever.retrieve(spec_query)
        nodes, further = nodes[: self.depth], nodes[self.depth:]
        if apis:  # steps complete a selected API's calls; a fleet-wide hit list has no one API
            ranked_query = spec_query.narrowed(further=0)
            for step in self.steps:
                nodes = step.postprocess_nodes(nodes, query_bundle=ranked_query)
        result.nodes, result.ranking = nodes, [n.node.node_id for n in nodes]
        ranked = set(result.ranking)
        result.further = [i for i in dict.fromkeys(n.node.node_id for n in further) if i not in ranked]
        result.added_steps = [AddedStep(chunk_id=n.node.node_id, reason=str(n.node.metadata[ADDED_STEP]))
                              for n in nodes if ADDED_STEP in n.node.metadata]
        result.ms = elapsed_ms(start)
        return result

    async def asearch(self, query: str, expansion: QueryExpansion, selection: ApiSelection) -> SearchResult:
        """CPU-bound: runs in a worker thread, off the event loop."""
        return await asyncio.to_thread(self.search, query, expansion, selection)
