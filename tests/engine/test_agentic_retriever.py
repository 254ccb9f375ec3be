"""Agentic retrieval on the demo corpus, offline: every budget, the effort levels, the steps
trace, and ``truncated`` with its reason."""

from __future__ import annotations

import asyncio

import pytest
from specrag.core.api_models import AgenticRetrievalRequest, RetrievalResponse
from specrag.engine.agentic.budget import CONTEXT_SHARE
from specrag.engine.agentic.retriever import AgenticRetriever

TWO_PARTS = "List all pets in the store and then delete the user whose account is closed"
PUT_USER = "Update the address of a user"


class SlowEngine:
    """The demo engine, each retrieval taking ``seconds`` on a clock the test controls."""

    def __init__(self, engine, clock: "Clock", seconds: float):
        self.engine, self.clock, self.seconds = engine, clock, seconds

    async def aretrieve_context(self, query, apis=None):
        self.clock.now += self.seconds
        return await self.engine.aretrieve_context(query, apis=apis)

    def __getattr__(self, name):
        return getattr(self.engine, name)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ask(engine, **kw) -> RetrievalResponse:
    return AgenticRetriever(engine).run(AgenticRetrievalRequest(**kw))


def actions(response: RetrievalResponse) -> list[str]:
    return [s.action for s in response.steps]


def test_low_effort_is_one_pass_without_decomposition(demo_engine):
    response = ask(demo_engine, query=TWO_PARTS, reasoning_effort="low")
    assert actions(response) == ["retrieve"]
    assert response.steps[0].sub_query == TWO_PARTS
    assert not response.truncated and response.truncated_reason is None and response.answer == ""


def test_medium_effort_decomposes_retrieves_each_part_and_binds_producers(demo_engine):
    response = ask(demo_engine, query=TWO_PARTS, reasoning_effort="medium")
    assert actions(response) == ["decompose", "retrieve", "retrieve", "expand_producers"]
    assert [s.sub_query for s in response.steps[1:3]] == [
        "List all pets in the store", "delete the user whose account is closed"]
    assert response.steps[0].detail == "offline: 2 parts; fallback no_llm"
    assert [s.step_number for s in response.steps] == [1, 2, 3, 4]
    retrieved = {i.document_id for i in response.results}
    assert retrieved >= {"petstore_v2", "users_api"}
    ids = [i.chunk_id for i in response.results]
    assert len(ids) == len(set(ids)) and set(response.steps[1].result_ids) <= set(ids)


def test_expand_producers_adds_the_call_that_provides_an_unbound_id(demo_engine):
    bare = demo_engine.model_copy(update={"steps": []})  # no producer expansion inside stage 3
    bare.model_post_init(None)
    response = ask(bare, query=PUT_USER, reasoning_effort="high", top_k_per_step=1, filters={"api": ["users_api"]})
    assert actions(response)[:2] == ["decompose", "retrieve"]
    put = "users_api:paths/~1users~1{userId}/put"
    assert response.steps[1].result_ids[0] == put
    expand = response.steps[2]
    assert expand.action == "expand_producers" and len(expand.result_ids) == 1
    added = next(i for i in response.results if i.chunk_id == expand.result_ids[0])
    assert added.metadata["added_step"] == "provides userId for PUT /users/{userId}"
    assert added.chunk_id in {"users_api:paths/~1users/get", "users_api:paths/~1users/post"}
    assert actions(response)[-1] == "expand_producers"  # high effort: a second round found nothing more
    assert response.steps[-1].detail == "every id parameter in the context is bound"


def test_max_steps_stops_before_the_next_step(demo_engine):
    response = ask(demo_engine, query=TWO_PARTS, reasoning_effort="medium", max_steps=2)
    assert actions(response) == ["decompose", "retrieve"]
    assert response.truncated and response.truncated_reason == "max_steps"


def test_the_context_is_cut_at_70_percent_of_the_token_budget(demo_engine):
    response = ask(demo_engine, query=PUT_USER, reasoning_effort="low", token_budget=500)
    context = sum(s.tokens for s in response.steps if s.action == "retrieve")
    assert 0 < context <= int(500 * CONTEXT_SHARE)
    assert response.truncated and response.truncated_reason == "token_budget"
    assert response.total_tokens_used == context
    full = ask(demo_engine, query=PUT_USER, reasoning_effort="low", token_budget=100_000)
    assert not full.truncated and sum(s.tokens for s in full.steps) > context


def test_latency_is_checked_before_each_step(demo_engine):
    clock = Clock()
    slow = SlowEngine(demo_engine, clock, seconds=1.5)
    response = AgenticRetriever(slow, clock=clock).run(AgenticRetrievalRequest(
        query=TWO_PARTS, reasoning_effort="medium", max_latency_ms=1000))
    assert actions(response) == ["decompose", "retrieve"]  # the first retrieval ran; the second never started
    assert response.truncated and response.truncated_reason == "max_latency_ms"
    assert response.total_latency_ms == 1500.0 and response.steps[1].latency_ms == 1500.0


def test_requests_outside_the_service_ranges_are_rejected():
    with pytest.raises(ValueError):
        AgenticRetrievalRequest(query="q", max_steps=21)
    with pytest.raises(ValueError):
        AgenticRetrievalRequest(query="q", token_budget=99)
    with pytest.raises(ValueError):
        AgenticRetrievalRequest(query="q", max_latency_ms=999)


@pytest.mark.anyio
async def test_arun_in_an_event_loop_and_run_refuses_to_nest(demo_engine):
    retriever = AgenticRetriever(demo_engine)
    request = AgenticRetrievalRequest(query=PUT_USER, reasoning_effort="low")
    response = await retriever.arun(request)
    assert actions(response) == ["retrieve"] and response.results
    with pytest.raises(RuntimeError, match="await retriever.arun"):
        retriever.run(request)
    assert asyncio.get_running_loop().is_running()


def test_a_producer_for_the_askers_own_things_is_the_call_that_names_the_caller():
    """"My playlists": of the user id's producers (here 9 lists whose items carry some user's id,
    then ``GET /me``, past the 8 the expansion reads), the call that names the caller; without
    "my", the strongest that needs no id."""
    from types import SimpleNamespace

    from specrag.engine.agentic.retriever import _Run
    from specrag.graph.models import DependencyEdge, EdgeSource
    from specrag.specs.models import Chunk, ChunkType

    def op(path: str) -> str:
        return f"music:paths/{path.replace('/', '~1')}/get"

    lists = [f"/browse/list{i}" for i in range(9)]
    edges = [DependencyEdge(consumer=op("/users/{user_id}/playlists"), param="user_id", producer=op(p), field=f,
                            score=s, source=EdgeSource.TYPE)
             for p, f, s in [(p, "items[].owner.id", 0.75) for p in lists] + [("/me", "id", 0.5)]]
    chunks = {op(p): Chunk(id=op(p), file_id="music", type=ChunkType.ENDPOINT, text=p, embed_text="", search_text="",
                           kind="operation", method="GET", path=p) for p in [*lists, "/me"]}
    lookup = SimpleNamespace(get_chunks=lambda ids: {i: chunks[i] for i in ids if i in chunks})
    owner = SimpleNamespace(engine=SimpleNamespace(lookup=lookup), clock=Clock())

    def best(query: str) -> str | None:
        return asyncio.run(_Run(owner, AgenticRetrievalRequest(query=query))._best_producer(edges))

    assert best("Add a song to my playlist") == op("/me")
    assert best("Add a song to the playlist of a featured user") == op("/browse/list0")

    # no caller's own list of playlists: the user's playlists, whose user id GET /me gives, two calls away
    users_lists = "/users/{user_id}/playlists"
    chunks[op(users_lists)] = Chunk(id=op(users_lists), file_id="music", type=ChunkType.ENDPOINT, text=users_lists,
                                    embed_text="", search_text="", kind="operation", method="GET", path=users_lists,
                                    producers=[edges[-1]])  # GET /me -> id -> {user_id}
    edges = [DependencyEdge(consumer=op("/playlists/{playlist_id}"), param="playlist_id", producer=op(p), field=f,
                            score=0.75, resource="playlist", source=EdgeSource.TYPE)
             for p, f in [("/browse/list0", "playlists.items[].id"), (users_lists, "items[].id")]]
    assert best("What is on my playlist Rock?") == op(users_lists)
    assert best("What is on the playlist Rock?") == op("/browse/list0")  # needs no id
