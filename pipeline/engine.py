"""ApiQueryEngine: the three stages and the reference expansion as one LlamaIndex query engine.

``retrieve_context`` returns the KnowledgeContext; ``query`` returns a ``Response`` whose
``source_nodes`` are the primary then the referenced chunks, and whose text is the rendered
context (or, with an LLM and ``synthesize`` on, an answer citing ``[Source N]``).
"""

from __future__ import annotations

import difflib
import logging
import time
from typing import Any

from llama_index.core.base.response.schema import Response
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from pipeline.context import ContextChunk, KnowledgeContext, RetrievalStats
from pipeline.errors import SpecragError
from pipeline.render import assemble_context, render_markdown
from pipeline.settings import Settings
from pipeline.stages.intent import TYPES_FOR_INTENT, classify

logger = logging.getLogger(__name__)
RANKING_DEPTH = 10  # candidates kept in the stats for ranking metrics (Recall@10, nDCG@10)
MAX_QUERY_CHARS = 2000
MIN_TYPED_RESULTS = 3


class QueryError(SpecragError, ValueError):
    """An empty query, or APIs that are not in the index."""


class ApiQueryEngine(CustomQueryEngine):
    selector: Any
    expander: Any
    retriever: Any
    references: Any
    settings: Any
    known_apis: set[str]
    lookups: Any = None
    llm: Any = None
    prompts: Any = None

    def custom_query(self, query_str: str) -> Response:
        ctx = self.retrieve_context(query_str)
        text = render_markdown(ctx)
        if self.llm is not None and self.settings.synthesize:
            from pipeline.stages.synthesize import synthesize_answer

            answer, _ = synthesize_answer(self.llm, self.prompts, ctx, settings=self.settings)
            text = answer or text
        nodes = [NodeWithScore(node=_node(c), score=c.score) for c in ctx.chunks]
        return Response(response=text, source_nodes=nodes, metadata={"knowledge_context": ctx})

    def retrieve_context(self, query: str, apis: list[str] | None = None) -> KnowledgeContext:
        """Run select -> expand -> search -> reference expansion; ``apis`` skips stage 1 (oracle)."""
        start = time.perf_counter()
        query, cut = self._check_query(query)
        stats = RetrievalStats(search_mode=self.retriever.index.search_mode)
        if cut:
            stats.warnings.append(f"query longer than {MAX_QUERY_CHARS} characters: kept the first {MAX_QUERY_CHARS}")
        timings = stats.timings_ms

        t = time.perf_counter()
        if apis is not None:
            selected = self._check_apis(apis)
            stats.selection_reasoning = "given by the caller"
        else:
            if self.llm is None:
                stats.add_fallback("select", "no_llm", "offline: keyword selection")
            selected = self.selector.select(query, stats).selected_apis
        stats.selected_apis = selected
        timings["select"] = _ms(t)

        t = time.perf_counter()
        if self.llm is None:
            stats.add_fallback("expand", "no_llm", "offline: keyword expansion")
        expansion = self.expander.expand(query, selected, stats) if selected else None
        stats.expanded_query = expansion.expanded_query if expansion else query
        if expansion:
            stats.original_terms, stats.added_terms = expansion.original_terms, expansion.added_terms
        timings["expand"] = _ms(t)

        t = time.perf_counter()
        ranked = self._search(query, stats, selected)
        stats.ranking = [n.node.node_id for n in ranked]
        primary = ranked[: self.settings.max_primary_results]
        timings["search"] = _ms(t)

        t = time.perf_counter()
        expansion_result = self.references.expand(primary)
        timings["refs"] = _ms(t)

        t = time.perf_counter()
        ctx = assemble_context(query, expansion_result, stats)
        timings["assemble"] = _ms(t)
        timings["total"] = _ms(start)
        if self.settings.log_retrieval_stats:
            logger.info("retrieval stats: %s", stats.model_dump_json())
        return ctx

    def _search(self, query: str, stats: RetrievalStats, selected: list[str]) -> list[NodeWithScore]:
        if not selected:
            stats.warnings.append("no API selected: searched the whole index")
        file_ids = selected or None
        bundle = QueryBundle(query_str=stats.expanded_query, custom_embedding_strs=[query])
        depth = max(RANKING_DEPTH, self.settings.max_primary_results)
        types = None
        if self.settings.enable_query_analysis:
            intent = classify(query)
            stats.intent = intent.value
            types = TYPES_FOR_INTENT[intent]
        ranked = self.retriever.search(bundle, file_ids, types, depth)
        if types and len(ranked) < MIN_TYPED_RESULTS:
            stats.type_filter_relaxed = True
            ranked = self.retriever.search(bundle, file_ids, None, depth)
        if self.lookups is not None and selected:
            def search_api(api: str) -> list[str]:
                return [n.node.node_id for n in self.retriever.search(bundle, [api], ["endpoint"], 30, hydrate=False)]

            ranked, stats.lookup_steps = self.lookups.add(query, ranked, self.retriever.index.hydrate, depth, search_api)
        return ranked

    @staticmethod
    def _check_query(query: str) -> tuple[str, bool]:
        if not isinstance(query, str) or not query.strip():
            raise QueryError("empty query: ask a question, e.g. 'How do I create a user?'")
        query = " ".join(query.split())
        return query[:MAX_QUERY_CHARS], len(query) > MAX_QUERY_CHARS

    def _check_apis(self, apis: list[str]) -> list[str]:
        unknown = [a for a in apis if a not in self.known_apis]
        if unknown:
            hints = {a: difflib.get_close_matches(a, self.known_apis, n=3) for a in unknown}
            raise QueryError("unknown API id(s): " + "; ".join(
                f"{a!r}" + (f" (did you mean {', '.join(h)}?)" if h else "") for a, h in hints.items()))
        return list(dict.fromkeys(apis))


def _node(chunk: ContextChunk) -> TextNode:
    """A context chunk as a source node; its depth rides along in the metadata."""
    return TextNode(id_=chunk.id, text=chunk.text, metadata=dict(chunk.metadata) | {"depth": chunk.depth},
                    excluded_embed_metadata_keys=list(chunk.metadata) + ["depth"],
                    excluded_llm_metadata_keys=list(chunk.metadata) + ["depth"])


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 3)
