"""``AgenticRetriever``: the retrieval service's agentic mode over one engine.

One request runs as a short list of steps, each recorded in the response's trace:

1. ``decompose`` (effort medium/high): the LLM prompt ``decompose`` splits the question into
   searches in call order; offline, or when the LLM fails, the clause splitter does.
   Effort ``low`` is one pass: the question is retrieved whole.
2. ``retrieve`` per sub-query: the engine's stages (API selection, expansion, hybrid search
   with producer expansion, reference expansion); the first ``top_k_per_step`` operations and
   their references join the context.
3. ``expand_producers`` (medium/high): every operation in the context whose id parameter no
   other context operation produces gets its best producer (one that needs no id first, then the
   strongest edge: :mod:`specrag.stages.producer_policy`); high
   effort repeats this once for the producers added (chains).
4. ``synthesize`` with an LLM: an answer citing ``[Source N]`` (N indexes ``results``).

Budgets are checked before every step: ``max_steps``, ``max_latency_ms``, and ``token_budget``
(the context may use 70% of it; a chunk that does not fit is cut). A step a budget stops, or a
chunk cut, sets ``truncated`` with the budget's name as the reason.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Callable

from specrag.context.knowledge import ContextChunk, KnowledgeContext, output_metadata
from specrag.core.api_models import (
    AgenticRetrievalRequest,
    ReasoningEffort,
    RetrievalResponse,
    RetrievalStep,
    RetrievedItem,
)
from specrag.core.fallbacks import fallback_notice_scope
from specrag.core.tokens import count_tokens
from specrag.engine.agentic.budget import Budget
from specrag.engine.agentic.decompose import (
    Decomposer,
    Decomposition,
    offline_decomposition,
)
from specrag.specs.models import decode_params, decode_producers
from specrag.stages.names import owned_by_asker
from specrag.stages.producer_policy import (
    AGENTIC_LOOKED_AT,
    EDGE_STRENGTH,
    best_producer,
    for_the_asker,
    producer_facts,
)
from specrag.stages.producers import provides_reason, step_label

PRODUCER_ROUNDS = {ReasoningEffort.LOW: 0, ReasoningEffort.MEDIUM: 1, ReasoningEffort.HIGH: 2}


class AgenticRetriever:
    """Runs :class:`AgenticRetrievalRequest` s against ``engine`` (an ``ApiQueryEngine``)."""

    def __init__(self, engine: Any, decomposer: Decomposer | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.engine = engine
        self.decomposer = decomposer if decomposer is not None else getattr(engine, "decomposer", None)
        self.clock = clock

    def run(self, request: AgenticRetrievalRequest) -> RetrievalResponse:
        """Synchronous entry point; inside an event loop, ``await arun(request)`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(request))
        raise RuntimeError("AgenticRetriever.run called inside an event loop: use `await retriever.arun(request)`")

    async def arun(self, request: AgenticRetrievalRequest) -> RetrievalResponse:
        return await _Run(self, request).execute()


class _Run:
    """The state of one request: its budget, its trace and the context being built."""

    def __init__(self, owner: AgenticRetriever, request: AgenticRetrievalRequest):
        self.owner, self.engine, self.request = owner, owner.engine, request
        self.budget = Budget(request, owner.clock)
        self.steps: list[RetrievalStep] = []
        self.items: dict[str, RetrievedItem] = {}
        self.truncated = False
        apis = request.filters.get("api") or request.filters.get("apis")
        self.apis = [apis] if isinstance(apis, str) else list(apis) if apis else None
        self.owned = owned_by_asker(request.query)  # the asker's own things decide some producers

    async def execute(self) -> RetrievalResponse:
        with fallback_notice_scope():  # the LLM stages that failed in any step: told in one line
            return await self._execute()

    async def _execute(self) -> RetrievalResponse:
        queries = [self.request.query]
        if self.request.reasoning_effort is not ReasoningEffort.LOW and self._gate():
            queries = await self._decompose()
        for done, sub_query in enumerate(queries):
            if not self._gate():
                break
            await self._retrieve(sub_query, len(queries) - done)
        for _ in range(PRODUCER_ROUNDS[self.request.reasoning_effort]):
            if not self._gate() or not await self._expand_producers():
                break
        answer = await self._synthesize() if self._synthesizes() and self.items and self._gate() else ""
        return RetrievalResponse(request_id=uuid.uuid4().hex, answer=answer, results=list(self.items.values()),
                                 steps=self.steps, total_tokens_used=self.budget.total_tokens,
                                 total_latency_ms=round(self.budget.elapsed_ms(), 1), truncated=self.truncated,
                                 truncated_reason=self.budget.reason() if self.truncated else None)

    # ---- steps ---------------------------------------------------------------------------
    async def _decompose(self) -> list[str]:
        start = self.owner.clock()
        max_parts = max(1, self.request.max_steps - 1)  # leave a step for retrieval at least
        decomposer = self.owner.decomposer
        result: Decomposition = await decomposer.adecompose(self.request.query, max_parts) \
            if decomposer is not None and decomposer.llm is not None \
            else offline_decomposition(self.request.query, max_parts)
        tokens = sum(c.prompt_tokens + c.completion_tokens for c in result.llm_calls)
        self.budget.llm_tokens += tokens
        fallbacks = ", ".join(f.reason for f in result.fallbacks)
        self._record("decompose", self.request.query, [], tokens, start,
                     f"{result.mode.value}: {len(result.sub_queries)} parts" + (f"; fallback {fallbacks}" if fallbacks else ""))
        return result.sub_queries

    async def _retrieve(self, sub_query: str, remaining: int) -> None:
        """One sub-query; it may fill its share of the context left (left / sub-queries to go)."""
        start = self.owner.clock()
        ctx: KnowledgeContext = await self.engine.aretrieve_context(sub_query, apis=self.apis)
        k = self.request.top_k_per_step
        primary = ctx.primary_chunks[:k]
        extra = await self._ranked_beyond(ctx, k - len(primary))
        kept, refs = {c.id for c in [*primary, *extra]}, []
        for ref in ctx.referenced_chunks:  # breadth-first: a referrer always comes before its references
            if ref.referenced_from in kept:
                kept.add(ref.id)
                refs.append(ref)
        share = self.budget.context_tokens + (self.budget.context_cap - self.budget.context_tokens) // remaining
        added, tokens = self._admit([*primary, *extra, *refs], sub_query, ctx.step_reasons, share)
        self._record("retrieve", sub_query, added, tokens, start,
                     f"apis {', '.join(ctx.retrieval_stats.selected_apis) or '-'}; search {ctx.retrieval_stats.search_mode}")

    async def _ranked_beyond(self, ctx: KnowledgeContext, n: int) -> list[ContextChunk]:
        """Ranked operations after the primaries, when ``top_k_per_step`` asks for more."""
        if n <= 0:
            return []
        have = {c.id for c in ctx.chunks}
        wanted = [i for i in ctx.search.ranking if i not in have][:n]
        chunks = await asyncio.to_thread(self.engine.lookup.get_chunks, wanted)
        return [ContextChunk(id=i, text=chunks[i].text, metadata=chunks[i].metadata(), n_tokens=chunks[i].n_tokens)
                for i in wanted if i in chunks]

    async def _expand_producers(self) -> bool:
        """One round: a producer for every unbound id parameter in the context; False if none was added."""
        start = self.owner.clock()
        wanted: dict[str, str] = {}
        for item in list(self.items.values()):
            for param, edges in self._unbound(item).items():
                choice = await self._best_producer(edges)
                if choice is not None and choice not in self.items and choice not in wanted:
                    wanted[choice] = provides_reason(param, item.chunk_id)
        if not wanted:
            self._record("expand_producers", "", [], 0, start, "every id parameter in the context is bound")
            return False
        chunks = await asyncio.to_thread(self.engine.lookup.get_chunks, list(wanted))
        found = [ContextChunk(id=i, text=c.text, metadata=c.metadata(), n_tokens=c.n_tokens) for i, c in chunks.items()]
        added, tokens = self._admit(found, "", wanted)
        self._record("expand_producers", "", added, tokens, start,
                     "; ".join(f"{step_label(i)}: {wanted[i]}" for i in added) or "no producer fitted the budget")
        return bool(added)

    def _unbound(self, item: RetrievedItem) -> dict[str, list]:
        edges = decode_producers(item.chunk_id, item.metadata.get("producers"))
        present = set(self.items)
        out = {}
        for need in decode_params(item.metadata.get("params")):
            offered = [e for e in edges if e.param == need.name]
            if need.id_like and offered and not any(e.producer in present for e in offered):
                out[need.name] = offered
        return out

    async def _best_producer(self, edges: list) -> str | None:
        """The strongest producer that needs no id itself, else the strongest (for the asker's
        own things, among those :func:`~specrag.stages.producer_policy.for_the_asker` keeps):
        the one producer policy (:mod:`specrag.stages.producer_policy`) as agentic retrieval uses
        it, over the producers of the first ``AGENTIC_LOOKED_AT`` edges the store holds."""
        get_chunks = self.engine.lookup.get_chunks
        if self.owned is not None:  # the asker's own things: a producer's own producers may tell
            chunks = await asyncio.to_thread(get_chunks, [e.producer for e in edges])
            edges = for_the_asker(edges, self.owned, lambda cid: chunks[cid].producers if cid in chunks else [])
        else:
            chunks = await asyncio.to_thread(get_chunks, [e.producer for e in edges[:AGENTIC_LOOKED_AT]])
        facts = {cid: producer_facts(chunk.params) for cid, chunk in chunks.items()}
        pick = best_producer(edges, facts, self_sufficient_first=True, weights=EDGE_STRENGTH,
                             looked_at=AGENTIC_LOOKED_AT)
        return pick.producer if pick is not None else None

    async def _synthesize(self) -> str:
        start = self.owner.clock()
        chunks = [ContextChunk(id=i.chunk_id, text=i.text, metadata=i.metadata, score=i.score) for i in self.items.values()]
        result = await self.engine.synthesizer.asynthesize(KnowledgeContext(query=self.request.query, primary_chunks=chunks))
        tokens = sum(c.prompt_tokens + c.completion_tokens for c in result.llm_calls)
        self.budget.llm_tokens += tokens
        fallbacks = ", ".join(f.reason for f in result.fallbacks)
        self._record("synthesize", self.request.query, [f"[Source {n}]" for n in result.cited_sources], tokens, start,
                     f"cites {len(result.cited_sources)} sources" + (f"; fallback {fallbacks}" if fallbacks else ""))
        return result.answer

    # ---- bookkeeping -----------------------------------------------------------------------
    def _gate(self) -> bool:
        if self.budget.allows_step():
            return True
        self.truncated = True
        return False

    def _admit(self, chunks: list[ContextChunk], sub_query: str, reasons: dict[str, str],
               limit: int | None = None) -> tuple[list[str], int]:
        added, tokens = [], 0
        for chunk in chunks:
            if chunk.id in self.items:
                continue
            n = chunk.n_tokens or count_tokens(chunk.text)
            if not self.budget.admits(n, limit):
                self.truncated = True
                continue
            meta = output_metadata(chunk.metadata) | ({"added_step": reasons[chunk.id]} if chunk.id in reasons else {})
            meta |= {"sub_query": sub_query} if sub_query else {}
            self.items[chunk.id] = RetrievedItem(chunk_id=chunk.id, document_id=chunk.id.split(":", 1)[0],
                                                 text=chunk.text, score=chunk.score, metadata=meta)
            added.append(chunk.id)
            tokens += n
        return added, tokens

    def _record(self, action: str, sub_query: str, ids: list[str], tokens: int, start: float, detail: str) -> None:
        self.budget.steps += 1
        self.steps.append(RetrievalStep(step_number=len(self.steps) + 1, action=action, sub_query=sub_query,
                                        result_ids=ids, tokens=tokens,
                                        latency_ms=round((self.owner.clock() - start) * 1000, 1), detail=detail))

    def _synthesizes(self) -> bool:
        synthesizer = getattr(self.engine, "synthesizer", None)
        return synthesizer is not None and synthesizer.llm is not None
