"""Soft stage 1 on the demo fleet (real index): when stage 1 picks the wrong API, the gold
endpoint of the API it missed still reaches the context; a fleet weight of 0 (the old hard
filter) loses it."""

from __future__ import annotations

import pytest
from specrag.core.records import ApiSelection
from specrag.engine.query_engine import ApiQueryEngine
from specrag.stages.hybrid_retriever import HybridRetriever

CREATE_USER = "users_api:paths/~1users/post"


class WrongSelector:
    """Stage 1 that always picks the pet store: the API the question is not about."""

    def select(self, query: str) -> ApiSelection:
        return ApiSelection(selected_apis=["petstore_v2"], reasoning="always the pet store")

    async def aselect(self, query: str) -> ApiSelection:
        return self.select(query)


def engine_with(demo_engine, fleet_weight: float) -> ApiQueryEngine:
    retriever = HybridRetriever(demo_engine.retriever.index, top_k=demo_engine.settings.retrieval.max_primary_results,
                                fleet_weight=fleet_weight)
    return ApiQueryEngine(selector=WrongSelector(), expander=demo_engine.expander, retriever=retriever,
                          steps=demo_engine.steps, references=demo_engine.references,
                          signatures=demo_engine.signatures, settings=demo_engine.settings,
                          known_apis=demo_engine.known_apis)


@pytest.mark.needs_embeddings
def test_a_missed_api_gold_endpoint_is_still_found(demo_engine):
    ctx = engine_with(demo_engine, fleet_weight=0.5).retrieve_context("How do I create a user?")
    assert ctx.retrieval_stats.selected_apis == ["petstore_v2"]
    assert CREATE_USER in [c.id for c in ctx.chunks]  # in full or as a signature
    assert CREATE_USER in ctx.retrieval_stats.ranking[:10]
    # the selected API still leads: its best hit ranks first
    assert ctx.primary_chunks[0].metadata["api"] == "petstore_v2"


@pytest.mark.needs_embeddings
def test_fleet_weight_zero_is_the_hard_filter_and_loses_it(demo_engine):
    ctx = engine_with(demo_engine, fleet_weight=0.0).retrieve_context("How do I create a user?")
    assert CREATE_USER not in ctx.retrieval_stats.ranking
    assert {c.metadata["api"] for c in ctx.primary_chunks} == {"petstore_v2"}


@pytest.mark.needs_embeddings
def test_apis_named_by_the_caller_stay_a_hard_filter(demo_engine):
    ctx = demo_engine.retrieve_context("How do I create a user?", apis=["petstore_v2"])
    assert {c.metadata["api"] for c in ctx.primary_chunks} == {"petstore_v2"}
