"""ApiQueryEngine: the stages composed into one LlamaIndex query engine.

select (stage 1) -> expand (stage 2) -> search (stage 3: ``BaseRetriever.retrieve`` plus the
ranking's postprocessors) -> reference expansion (``postprocess_nodes``) -> KnowledgeContext.
Each stage returns a typed result; the engine alone turns them into ``RetrievalStats``, once
per query. ``query`` returns a ``Response`` whose ``source_nodes`` are the primary then the
referenced chunks, and whose text is the rendered context (or, with a synthesizer, an answer
citing ``[Source N]``). Every entry point has an async twin that never blocks the event loop.
All the LLM calls of one query share one ``llm_deadline_s`` deadline (:mod:`specrag.core.deadline`).
"""

from __future__ import annotations

import difflib
import logging
import time
from typing import TYPE_CHECKING, Any, Optional

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptMixinType
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle
from specrag.context.knowledge import KnowledgeContext, RetrievalStats, example_tokens
from specrag.context.nodes import context_node
from specrag.core.deadline import deadline_scope
from specrag.core.errors import SpecragError
from specrag.core.fallbacks import fallback_notice_scope
from specrag.core.records import (
    ApiSelection,
    QueryExpansion,
    ReferenceExpansion,
    SearchResult,
    StageMode,
    StageResult,
    SynthesisResult,
)
from specrag.core.settings import Settings
from specrag.core.tokens import count_tokens
from specrag.engine.agentic.decompose import Decomposer
from specrag.engine.graph_queries import DepsReport, GraphQueries, ImpactReport
from specrag.engine.markdown import render_markdown
from specrag.engine.plan import build_plan
from specrag.specs.example_request import example_from_metadata
from specrag.specs.models import ChunkLookup
from specrag.stages.events import StageEndEvent, dispatcher, emit
from specrag.stages.protocols import ApiSelector, QueryExpander
from specrag.stages.ref_expand import ExpandedNodes, ReferenceExpander
from specrag.stages.search import RANKING_DEPTH, SearchStage
from specrag.stages.signatures import SignatureTier
from specrag.stages.synthesize import Synthesizer
from specrag.stages.timing import elapsed_ms

if TYPE_CHECKING:
    from specrag.engine.plan import Plan

logger = logging.getLogger(__name__)
MAX_QUERY_CHARS = 2000


class QueryError(SpecragError, ValueError):
    """An empty query, or APIs that are not in the index."""


class ApiQueryEngine(CustomQueryEngine):
    selector: ApiSelector = Field(description="stage 1: keyword or LLM API selection")
    expander: QueryExpander = Field(description="stage 2: keyword or LLM query expansion")
    retriever: BaseRetriever = Field(description="stage 3: filtered hybrid search (reads SpecQuery filters)")
    steps: list[BaseNodePostprocessor] = Field(default_factory=list,
                                               description="stage 3: postprocessors that reorder the ranking")
    references: ReferenceExpander = Field(description="the $ref closure of the primary chunks, within budgets")
    signatures: Optional[SignatureTier] = Field(None, description="signatures of the ranked operations that are "
                                                                  "not primaries, in the budget left")
    synthesizer: Optional[Synthesizer] = Field(None, description="answers with [Source N] when set")
    decomposer: Optional[Decomposer] = Field(None, description="splits a question into searches (agentic retrieval)")
    settings: Settings
    known_apis: frozenset[str] = Field(description="API ids a caller may name (complete in the index)")
    graph: Optional[GraphQueries] = Field(None, exclude=True, description="impact and deps over the index")
    _search: SearchStage = PrivateAttr()

    def model_post_init(self, __context: Any) -> None:
        depth = max(RANKING_DEPTH, self.settings.retrieval.max_primary_results)
        self._search = SearchStage(self.retriever, self.steps, depth=depth,
                                   further_depth=self.settings.context.context_signature_depth,
                                   query_analysis=self.settings.retrieval.enable_query_analysis)

    @property
    def lookup(self) -> ChunkLookup:
        """The store's chunk lookup: the one handle plans, agentic retrieval and the eval read chunks through."""
        return self.references.lookup

    def _get_prompt_modules(self) -> PromptMixinType:
        """Every LLM stage's prompts, namespaced ``selector:``, ``expander:``, ``synthesizer:``, ``decomposer:``."""
        modules = {"selector": self.selector, "expander": self.expander, "synthesizer": self.synthesizer,
                   "decomposer": self.decomposer}
        return {name: module for name, module in modules.items() if hasattr(module, "get_prompts")}

    # ---- queries --------------------------------------------------------------------------
    def custom_query(self, query_str: str) -> Response:
        # one LLM deadline for retrieval and synthesis, one line telling the LLM stages that failed
        with deadline_scope(self.settings.llm.llm_deadline_s), fallback_notice_scope():
            ctx = self.retrieve_context(query_str)
            answer = self.synthesizer.synthesize(ctx) if self._synthesizes else None
        return self._response(ctx, answer)

    async def acustom_query(self, query_str: str) -> Response:
        with deadline_scope(self.settings.llm.llm_deadline_s), fallback_notice_scope():
            ctx = await self.aretrieve_context(query_str)
            answer = await self.synthesizer.asynthesize(ctx) if self._synthesizes else None
        return self._response(ctx, answer)

    @dispatcher.span
    def retrieve_context(self, query: str, apis: list[str] | None = None) -> KnowledgeContext:
        """select -> expand -> search -> reference expansion; ``apis`` skips stage 1 (oracle)."""
        start = time.perf_counter()
        query, warnings = self._check_query(query)
        with deadline_scope(self.settings.llm.llm_deadline_s), fallback_notice_scope():  # every LLM call within it
            selection = self._given(apis) if apis is not None else self._done(self.selector.select(query))
            expansion = self._done(self.expander.expand_query(query, selection.selected_apis)
                                   if selection.selected_apis else _unexpanded(query))
            search = self._done(self._search.search(query, expansion, selection))
            nodes = self.references.postprocess_nodes(search.nodes[: self.settings.context_primaries],
                                                      query_bundle=QueryBundle(query))
        return self._assemble(query, start, warnings, selection, expansion, search, nodes)

    @dispatcher.span
    async def aretrieve_context(self, query: str, apis: list[str] | None = None) -> KnowledgeContext:
        """:meth:`retrieve_context` for an event loop: LLM calls awaited, CPU work in threads."""
        start = time.perf_counter()
        query, warnings = self._check_query(query)
        with deadline_scope(self.settings.llm.llm_deadline_s), fallback_notice_scope():
            selection = self._given(apis) if apis is not None else self._done(await self.selector.aselect(query))
            expansion = self._done(await self.expander.aexpand_query(query, selection.selected_apis)
                                   if selection.selected_apis else _unexpanded(query))
            search = self._done(await self._search.asearch(query, expansion, selection))
            nodes = await self.references.apostprocess_nodes(search.nodes[: self.settings.context_primaries],
                                                             query_bundle=QueryBundle(query))
        return self._assemble(query, start, warnings, selection, expansion, search, nodes)

    # ---- plans and graph queries ----------------------------------------------------------
    def plan(self, question: str, apis: list[str] | None = None, token_budget: int | None = None) -> "Plan":
        """The operations the question needs in call order, each with its context and bindings."""
        return build_plan(self, question, apis=apis, token_budget=token_budget)

    def impact(self, api: str, schema: str) -> "ImpactReport":
        """The operations that use ``schema`` of ``api``, directly or transitively."""
        return self._graph_queries().impact(api, schema)

    def deps(self, api: str, operation: str) -> "DepsReport":
        """``operation``'s parameters, their producers, and the operations that consume its output."""
        return self._graph_queries().deps(api, operation)

    def _graph_queries(self):
        if self.graph is None:
            raise QueryError("this engine has no dependency graph (build it with specrag.engine.factory.build_engine)")
        return self.graph

    # ---- helpers --------------------------------------------------------------------------
    @property
    def _synthesizes(self) -> bool:
        return self.synthesizer is not None and self.synthesizer.llm is not None and self.settings.llm.synthesize

    def _assemble(self, query: str, start: float, warnings: list[str], selection: ApiSelection,
                  expansion: QueryExpansion, search: SearchResult, nodes: list[NodeWithScore]) -> KnowledgeContext:
        if not isinstance(nodes, ExpandedNodes):
            raise TypeError(f"{type(self.references).__name__}.postprocess_nodes must return ExpandedNodes")
        refs = self._done(nodes.expansion, "refs")
        t = time.perf_counter()
        stats = retrieval_stats(warnings, selection, expansion, search, refs)
        if self.settings.context.context_example_requests:
            _add_examples(refs, self.references.token_limit, stats)
        ranked = [n.node.node_id for n in search.nodes] + search.further
        signatures = (self.signatures.signatures(ranked, refs, selection.selected_apis, example_tokens(refs.primary))
                      if self.signatures is not None else [])
        ctx = KnowledgeContext.assemble(query, refs, signatures, stats).with_search(search)
        stats.timings_ms["assemble"] = elapsed_ms(t)
        stats.timings_ms["total"] = elapsed_ms(start)
        if self.settings.retrieval.log_retrieval_stats:
            logger.info("retrieval stats: %s", stats.model_dump_json())
        return ctx

    def _response(self, ctx: KnowledgeContext, synthesis: SynthesisResult | None) -> Response:
        text = render_markdown(ctx)
        if synthesis is not None:
            _record_synthesis(ctx.retrieval_stats, self._done(synthesis))
            text = synthesis.answer or text
        return Response(response=text, source_nodes=[context_node(c) for c in ctx.chunks],
                        metadata={"knowledge_context": ctx})

    @staticmethod
    def _done(result: Any, stage: str = "") -> Any:
        emit(lambda: StageEndEvent(stage=stage or getattr(result, "stage", ""), result=result))
        return result

    def check_apis(self, apis: list[str]) -> None:
        """QueryError naming every id in ``apis`` that is not in the index, with close matches."""
        unknown = [a for a in apis if a not in self.known_apis]
        if unknown:
            hints = {a: difflib.get_close_matches(a, self.known_apis, n=3) for a in unknown}
            raise QueryError("unknown API id(s): " + "; ".join(
                f"{a!r}" + (f" (did you mean {', '.join(h)}?)" if h else "") for a, h in hints.items()))

    def _given(self, apis: list[str]) -> ApiSelection:
        self.check_apis(apis)
        return self._done(ApiSelection(mode=StageMode.GIVEN, selected_apis=list(dict.fromkeys(apis)),
                                       reasoning="given by the caller"))

    @staticmethod
    def _check_query(query: str) -> tuple[str, list[str]]:
        if not isinstance(query, str) or not query.strip():
            raise QueryError("empty query: ask a question, e.g. 'How do I create a user?'")
        query = " ".join(query.split())
        if len(query) <= MAX_QUERY_CHARS:
            return query, []
        return query[:MAX_QUERY_CHARS], [f"query longer than {MAX_QUERY_CHARS} characters: kept the first {MAX_QUERY_CHARS}"]


def _add_examples(refs: ReferenceExpansion, token_limit: int, stats: RetrievalStats) -> None:
    """Each primary operation's example request, from the recipe its chunk stores (none for an
    index built before recipes), in the budget the reference expansion left: its tokens count in
    the context, before the signatures' share. One that does not fit is left out, with a warning;
    the expansion itself is never changed for it."""
    left = token_limit - refs.total_tokens
    for chunk in refs.primary:
        example = example_from_metadata(chunk.metadata, count_tokens) if chunk.example_request is None else None
        if example is None:
            continue
        if example.tokens > left:
            stats.warnings.append(f"the example request of {chunk.id} ({example.tokens} tokens) did not fit the "
                                  f"token budget")
            continue
        chunk.example_request, left = example, left - example.tokens


def _unexpanded(query: str) -> QueryExpansion:
    return QueryExpansion(expanded_query=query, original_terms=[], added_terms=[])


def retrieval_stats(warnings: list[str], selection: ApiSelection, expansion: QueryExpansion, search: SearchResult,
           refs: ReferenceExpansion) -> RetrievalStats:
    """The one place a query's RetrievalStats are written: from each stage's typed result."""
    stages: list[StageResult] = [selection, expansion, search]
    return RetrievalStats(
        mode="llm" if any(s.mode is StageMode.LLM for s in stages) else "offline",
        search_mode=search.search_mode,
        timings_ms={"select": selection.ms, "expand": expansion.ms, "search": search.ms, "refs": refs.ms},
        selected_apis=list(selection.selected_apis), selection_reasoning=selection.reasoning,
        dropped_api_ids=list(selection.dropped_ids),
        expanded_query=expansion.expanded_query, original_terms=list(expansion.original_terms),
        added_terms=list(expansion.added_terms), dropped_terms=list(expansion.dropped_terms),
        ranking=list(search.ranking), lookup_steps=[s.chunk_id for s in search.added_steps],
        step_reasons=search.step_reasons,
        intent=search.intent, type_filter_relaxed=search.type_filter_relaxed,
        refs_followed=refs.refs_followed, refs_missing=list(refs.refs_missing), refs_cut=list(refs.refs_cut),
        primaries_cut=list(refs.primaries_cut),
        limits_hit=list(refs.limits_hit), truncated=refs.truncated,
        fallbacks=[f for s in stages for f in s.fallbacks],
        llm_calls=[c for s in stages for c in s.llm_calls],
        prompts={s.stage: s.prompt for s in stages if s.prompt},
        cache_hits=sum(s.cache_hits for s in stages),
        warnings=[*warnings, *(w for s in stages for w in s.warnings)],
    )


def _record_synthesis(stats: RetrievalStats, synthesis: SynthesisResult) -> None:
    """The optional last stage, added to the stats of the context it answered from."""
    stats.mode = "llm"
    stats.prompts[synthesis.stage] = synthesis.prompt
    stats.llm_calls += synthesis.llm_calls
    stats.fallbacks += synthesis.fallbacks
    stats.warnings += synthesis.warnings
    stats.timings_ms[synthesis.stage] = synthesis.ms
