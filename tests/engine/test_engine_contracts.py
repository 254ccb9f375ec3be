"""The engine's LlamaIndex contracts on the demo corpus: instrumentation sees every stage, queries
run concurrently (threads and asyncio) with the same answers as serial calls."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from llama_index.core.instrumentation.events.retrieval import (
    RetrievalEndEvent,
    RetrievalStartEvent,
)
from specrag.stages.events import (
    ReferenceExpansionEndEvent,
    ReferenceExpansionStartEvent,
    StageEndEvent,
)
from specrag.stages.query import SpecQuery

QUERIES = ["How do I create a user?", "List all pets available in the store", "What errors can creating a user return?",
           "Add a new pet with a category and tags", "find pets by status", "delete a user account"]


@pytest.fixture
def recorder(record_events):
    with record_events() as handler:
        yield handler


def test_instrumentation_sees_retrieval_and_postprocessing_of_one_query(demo_engine, recorder):
    response = demo_engine.query("How do I create a user?")
    names = [type(e).__name__ for e in recorder.events]
    starts = [e for e in recorder.events if isinstance(e, RetrievalStartEvent)]
    assert {"RetrievalStartEvent", "RetrievalEndEvent", "ReferenceExpansionStartEvent",
            "ReferenceExpansionEndEvent"} <= set(names)
    searched = [e.str_or_query_bundle for e in starts]
    # stage 3's search is the retrieval; stage 1's endpoint evidence and producer expansion's per-API
    # rankings read ids through HybridRetriever.rank() (no nodes, no events): stage 1 shows as its result
    assert searched and all(isinstance(q, SpecQuery) and "users_api" in q.prefer_file_ids for q in searched)
    selection = next(e.result for e in recorder.events if isinstance(e, StageEndEvent) and e.stage == "select")
    assert selection.selected_apis[0] == "users_api"
    end = next(e for e in recorder.events if isinstance(e, ReferenceExpansionEndEvent))
    ctx = response.metadata["knowledge_context"]
    # the expansion's nodes are the context's primaries and references; the signature tier adds the rest
    assert [n.node.node_id for n in end.nodes] == [c.id for c in (*ctx.primary_chunks, *ctx.referenced_chunks)]
    assert {c.id for c in ctx.signature_chunks}.isdisjoint(n.node.node_id for n in end.nodes)
    assert end.expansion.refs_followed == ctx.retrieval_stats.refs_followed
    assert names.index("RetrievalEndEvent") < names.index("ReferenceExpansionStartEvent")
    stages = [e.stage for e in recorder.events if isinstance(e, StageEndEvent)]
    assert stages == ["select", "expand", "search", "refs"]
    assert any(isinstance(e, RetrievalEndEvent) and e.nodes for e in recorder.events)
    assert sum(isinstance(e, ReferenceExpansionStartEvent) for e in recorder.events) == 1


def _signature(ctx) -> tuple:
    stats = ctx.retrieval_stats
    return (ctx.query, tuple(c.id for c in ctx.chunks), ctx.total_tokens, tuple(stats.ranking),
            tuple(stats.selected_apis), stats.expanded_query)


def test_two_threads_on_one_engine_get_the_serial_answers(demo_engine):
    serial = {q: _signature(demo_engine.retrieve_context(q)) for q in QUERIES}
    results: dict[str, list[tuple]] = {q: [] for q in QUERIES}
    errors: list[BaseException] = []

    def worker(order: list[str]) -> None:
        try:
            for _ in range(3):
                for q in order:
                    results[q].append(_signature(demo_engine.retrieve_context(q)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(QUERIES,)), threading.Thread(target=worker, args=(QUERIES[::-1],))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    for q in QUERIES:
        assert results[q] == [serial[q]] * 6, q


@pytest.mark.anyio
async def test_concurrent_aquery_never_blocks_the_event_loop(demo_engine, monkeypatch):
    """The CPU work of stage 3 and of the reference expansion never runs on the loop's thread (a
    structural check that holds on a loaded machine), and the loop keeps ticking meanwhile: no
    gap between ticks near the whole run, which a blocking implementation would show."""
    from specrag.stages.hybrid_retriever import HybridRetriever
    from specrag.stages.ref_expand import ReferenceExpander

    serial = {q: _signature(demo_engine.retrieve_context(q)) for q in QUERIES}
    threads: list[int] = []
    for cls, name in ((HybridRetriever, "_retrieve"), (ReferenceExpander, "follow_references")):
        original = getattr(cls, name)

        def spy(self, *args, _original=original, **kwargs):
            threads.append(threading.get_ident())
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(cls, name, spy)
    loop_thread = threading.get_ident()
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not stop.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    queries = [QUERIES[i % len(QUERIES)] for i in range(48)]  # a run long enough that a scheduling hiccup under load is not half of it
    responses = await asyncio.gather(*(demo_engine.aquery(q) for q in queries))
    elapsed = time.perf_counter() - start
    stop.set()
    await tick
    for q, response in zip(queries, responses):
        assert _signature(response.metadata["knowledge_context"]) == serial[q]
    assert threads and loop_thread not in threads, "stage 3 or the reference expansion ran on the event loop"
    assert len(gaps) > 2, "the ticker must have run while the queries did"
    print(f"longest gap between ticks: {max(gaps) * 1000:.1f} ms over {len(gaps)} ticks, run {elapsed * 1000:.0f} ms")
    assert max(gaps) < 0.5 * elapsed, f"the event loop was blocked for {max(gaps) * 1000:.0f} ms of {elapsed * 1000:.0f}"


def test_stage_one_lead_reaches_every_stage_three_query(demo_engine, recorder):
    demo_engine.retrieve_context("create a user who orders a pet in the store")  # both demo APIs in play
    selection = next(e.result for e in recorder.events if isinstance(e, StageEndEvent) and e.stage == "select")
    stage3 = [e.str_or_query_bundle for e in recorder.events if isinstance(e, RetrievalStartEvent)
              and isinstance(e.str_or_query_bundle, SpecQuery) and e.str_or_query_bundle.prefer_file_ids]
    assert selection.lead is not None and stage3  # how sure stage 1 is of its order
    assert all(q.prefer_lead == selection.lead for q in stage3)


@pytest.mark.needs_embeddings  # a lexical demo index ranks fewer than 10 hits: nothing lies past them
def test_a_deeper_signature_tier_reads_past_the_ranking_without_changing_it(demo_index):
    from specrag.engine.factory import build_engine

    local, store = demo_index
    shallow = build_engine(local.model_copy(update={"context_signature_depth": 3}), store)
    deep = build_engine(local.model_copy(update={"context_signature_depth": 20}), store)
    question = "How do I create a user?"
    a, b = shallow.retrieve_context(question), deep.retrieve_context(question)
    assert a.retrieval_stats.ranking == b.retrieval_stats.ranking  # the steps and the metrics see the same top 10
    assert len(a.retrieval_stats.ranking) == 10
    deeper = [c.id for c in b.signature_chunks if c.id not in a.retrieval_stats.ranking]
    assert deeper, "the search's hits past the ranking reach the context as signatures"
    assert len(b.signature_chunks) > len(a.signature_chunks)
