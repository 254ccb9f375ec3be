"""The full offline pipeline on the demo corpus: real Chroma, real BM25, real model."""

from __future__ import annotations

import pytest
from llama_index.core.base.response.schema import Response
from specrag.context.knowledge import KnowledgeContext
from specrag.engine.query_engine import MAX_QUERY_CHARS, QueryError
from specrag.stages.api_select import KeywordApiSelector

USERS = "users_api"
PETS = "petstore_v2"


def ids(chunks) -> list[str]:
    return [c.id for c in chunks]


def test_create_user_context_has_endpoint_schemas_and_errors(demo_engine):
    ctx = demo_engine.retrieve_context("How do I create a user?")
    assert ctx.primary_chunks[0].id == f"{USERS}:paths/~1users/post"
    context = set(ids(ctx.chunks))
    for name in ("User", "UserCreate", "Address", "Country", "ValidationError", "Error"):
        assert f"{USERS}:components/schemas/{name}" in context, name
    assert f"{USERS}:paths/~1users/post:errors" in context
    depths = {c.id: c.depth for c in ctx.referenced_chunks}
    assert depths[f"{USERS}:components/schemas/Country"] == 3  # User -> Address -> Country
    assert ctx.retrieval_stats.selected_apis[0] == USERS
    example = ctx.primary_chunks[0].example_request
    assert ctx.total_tokens == sum(c.n_tokens for c in ctx.chunks) + example.tokens


def test_the_primary_operation_comes_with_its_example_request(demo_engine):
    ctx = demo_engine.retrieve_context("How do I create a user?")
    example = ctx.primary_chunks[0].example_request
    assert example.curl.startswith("curl -X POST 'https://api.example.com/v1/users' \\\n  -H 'Authorization: Bearer <token>'")
    assert example.http.startswith("POST /v1/users HTTP/1.1\nHost: api.example.com\n")
    assert set(example.body) == {"name", "email", "address"} and example.auth == ["bearerAuth (HTTP bearer)"]
    assert all(c.example_request is None for c in (*ctx.signature_chunks, *ctx.referenced_chunks))
    assert "request" not in ctx.primary_chunks[0].metadata  # the stored recipe is shown as example_request
    text = demo_engine.query("How do I create a user?").response
    assert f"Example request ({example.tokens} tokens; fill the <...> and {{...}} placeholders):" in text
    assert example.curl in text
    off = demo_engine.model_copy(update={"settings": demo_engine.settings.model_copy(
        update={"context_example_requests": False})}).retrieve_context("How do I create a user?")
    assert off.primary_chunks[0].example_request is None
    assert off.total_tokens == sum(c.n_tokens for c in off.chunks)
    tight = demo_engine.model_copy(update={"references": demo_engine.references.model_copy(update={"token_limit": 200})})
    small = tight.retrieve_context("How do I create a user?")  # the operation (154 tokens) alone nearly fills it
    assert small.primary_chunks[0].example_request is None
    assert any("example request" in w and "did not fit" in w for w in small.retrieval_stats.warnings)


def test_offline_stats_name_the_fallbacks_and_every_stage_time(demo_engine):
    stats = demo_engine.retrieve_context("List all pets available in the store").retrieval_stats
    assert stats.mode == "offline"
    assert {(f.stage, f.reason) for f in stats.fallbacks} == {("select", "no_llm"), ("expand", "no_llm")}
    assert set(stats.timings_ms) == {"select", "expand", "search", "refs", "assemble", "total"}
    assert stats.selected_apis[0] == PETS
    assert stats.ranking[: len(stats.ranking)] and stats.ranking[0] == f"{PETS}:paths/~1pets/get"


@pytest.mark.needs_embeddings
def test_oracle_apis_restrict_every_result_no_filter_leak(demo_engine):
    ctx = demo_engine.retrieve_context("How do I create a user?", apis=[PETS])
    assert ctx.primary_chunks, "pets has endpoints, so something comes back"
    assert {c.metadata["api"] for c in ctx.chunks} == {PETS}
    assert all(i.startswith(PETS + ":") for i in ctx.retrieval_stats.ranking)


def test_unknown_api_is_a_clear_error(demo_engine):
    with pytest.raises(QueryError, match="unknown API id.*users_apx.*did you mean users_api"):
        demo_engine.retrieve_context("create a user", apis=["users_apx"])


@pytest.mark.parametrize("query", ["", "   ", None])
def test_empty_query_is_a_clear_error(demo_engine, query):
    with pytest.raises(QueryError, match="empty query"):
        demo_engine.retrieve_context(query)


def test_huge_query_is_cut_and_counted(demo_engine):
    ctx = demo_engine.retrieve_context("create a user " * 2000)
    assert len(ctx.query) == MAX_QUERY_CHARS
    assert any("longer than" in w for w in ctx.retrieval_stats.warnings)
    assert ctx.primary_chunks


def test_no_matching_api_searches_everything_and_says_so(demo_engine):
    catalog_only = KeywordApiSelector(demo_engine.selector.catalog, {}, evidence=None)
    engine = demo_engine.model_copy(update={"selector": catalog_only})
    ctx = engine.retrieve_context("zzqx qqvv")
    assert ctx.retrieval_stats.selected_apis == []
    assert any("no API selected" in w for w in ctx.retrieval_stats.warnings)
    assert ctx.retrieval_stats.expanded_query == "zzqx qqvv"


def test_error_question_prefers_error_chunks(demo_engine):
    ctx = demo_engine.retrieve_context("What errors can creating a user return?")
    assert ctx.retrieval_stats.intent == "errors"
    assert ctx.primary_chunks[0].id == f"{USERS}:paths/~1users/post:errors"
    assert f"{USERS}:components/schemas/ValidationError" in ids(ctx.chunks)


def test_type_filter_is_relaxed_when_it_leaves_too_few_results(demo_engine):
    # petstore has no :errors chunk for GET /store/inventory and few overall; schema intent on pets
    ctx = demo_engine.retrieve_context("What errors can happen?", apis=[PETS])
    stats = ctx.retrieval_stats
    assert stats.intent == "errors"
    errors_in_pets = [i for i in stats.ranking if i.endswith(":errors")]
    assert stats.type_filter_relaxed == (len(errors_in_pets) < 3)


def test_query_returns_response_with_sources_in_context_order(demo_engine):
    response = demo_engine.query("How do I create a user?")
    assert isinstance(response, Response)
    ctx: KnowledgeContext = response.metadata["knowledge_context"]
    assert [n.node.node_id for n in response.source_nodes] == ids(ctx.chunks)
    assert "## Primary" in response.response and "users_api:paths/~1users/post" in response.response


def test_context_round_trips_as_json(demo_engine):
    ctx = demo_engine.retrieve_context("Add a new pet with a category and tags")
    again = KnowledgeContext.model_validate_json(ctx.to_json())
    assert again == ctx
    first = again.primary_chunks[0]
    assert {"api", "type", "method", "path", "name"} <= set(first.metadata)


def test_the_method_prior_runs_before_producer_expansion_and_a_zero_weight_drops_it(demo_index):
    from specrag.engine.factory import build_engine
    from specrag.stages.method_prior import MethodPrior
    from specrag.stages.producers import ProducerExpander

    local, store = demo_index
    steps = build_engine(local, store).steps
    assert [type(s) for s in steps] == [MethodPrior, ProducerExpander] and steps[0].weight == local.retrieval.method_weight
    assert [type(s) for s in build_engine(local.model_copy(update={"method_weight": 0.0}), store).steps] == [
        ProducerExpander]
