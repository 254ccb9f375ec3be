"""One LLM deadline per query: with a server that never answers in time, a whole query (select,
expand, and synthesis) ends within ``llm_deadline_s`` plus a small margin, sync and async; and a
query's deadline never leaks into the next query or a concurrent one."""

from __future__ import annotations

import asyncio
import time

import pytest
from specrag.core.deadline import current_deadline, deadline_scope

from .openai_server import answer

DEADLINE_S, TIMEOUT_S = 1.5, 1.0
MARGIN_S = 1.0  # search, reference expansion and the client's own overhead; well under a second stage's deadline


@pytest.fixture
def silent_engine(llm_engine, server):
    """Every request is answered only after 30 s: each call can only time out."""
    server.script(default=answer({"selected_apis": ["users_api"], "reasoning": "late"}, delay_s=30.0))
    return llm_engine(llm_timeout_s=TIMEOUT_S, llm_max_attempts=3, llm_deadline_s=DEADLINE_S, synthesize=True)


def _fallback_reasons(ctx) -> set[tuple[str, str]]:
    return {(f.stage, f.reason) for f in ctx.retrieval_stats.fallbacks}


def test_retrieval_with_a_silent_server_ends_within_the_deadline(silent_engine, server):
    start = time.monotonic()
    ctx = silent_engine.retrieve_context("How do I create a user?")
    elapsed = time.monotonic() - start
    assert elapsed < DEADLINE_S + MARGIN_S, f"took {elapsed:.1f}s for a {DEADLINE_S}s deadline"
    assert ("select", "timeout") in _fallback_reasons(ctx)
    assert ctx.primary_chunks, "the keyword fallback still answers"
    assert len(server.requests) >= 1


def test_query_with_synthesis_shares_the_one_deadline(silent_engine):
    start = time.monotonic()
    response = silent_engine.query("How do I create a user?")
    elapsed = time.monotonic() - start
    assert elapsed < DEADLINE_S + MARGIN_S, f"took {elapsed:.1f}s for a {DEADLINE_S}s deadline"
    stats = response.metadata["knowledge_context"].retrieval_stats
    assert ("synthesize", "timeout") in {(f.stage, f.reason) for f in stats.fallbacks}


@pytest.mark.anyio
async def test_async_query_shares_the_one_deadline(silent_engine):
    start = time.monotonic()
    response = await silent_engine.aquery("How do I create a user?")
    elapsed = time.monotonic() - start
    assert elapsed < DEADLINE_S + MARGIN_S, f"took {elapsed:.1f}s for a {DEADLINE_S}s deadline"
    assert response.metadata["knowledge_context"].primary_chunks


@pytest.mark.anyio
async def test_concurrent_queries_each_get_their_own_deadline(silent_engine):
    """Two queries started 0.5 s apart: the second keeps its full deadline (it is not cut by the first's)."""

    async def timed(delay: float) -> float:
        await asyncio.sleep(delay)
        start = time.monotonic()
        await silent_engine.aretrieve_context("How do I create a user?")
        return time.monotonic() - start

    first, second = await asyncio.gather(timed(0.0), timed(0.5))
    assert first < DEADLINE_S + MARGIN_S and second < DEADLINE_S + MARGIN_S
    assert second > DEADLINE_S * 0.5, "the second query waited for its own deadline, not the first's"


def test_scopes_nest_to_the_earliest_and_reset():
    assert current_deadline() is None
    with deadline_scope(10.0) as outer:
        with deadline_scope(100.0) as inner:
            assert inner == outer  # an inner scope never extends the query's deadline
        with deadline_scope(1.0) as short:
            assert short < outer
        assert current_deadline() == outer
    assert current_deadline() is None
