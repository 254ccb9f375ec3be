"""Offline stages 1 and 2, query analysis and RRF, on the demo catalog in the repo."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from pipeline.catalog.io import load_api_index, load_catalog
from pipeline.context import RetrievalStats
from pipeline.stages.api_select import KeywordApiSelector
from pipeline.stages.fusion import reciprocal_rank_fusion
from pipeline.stages.intent import Intent, classify
from pipeline.stages.query_expand import KeywordQueryExpander

CATALOGS = Path(__file__).resolve().parents[2] / "catalogs"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(CATALOGS)


@pytest.fixture(scope="module")
def indexes(catalog):
    return {e.file_id: load_api_index(CATALOGS, e.file_id) for e in catalog.apis}


def hits(*pairs: tuple[str, str]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=i, text="", metadata={"source_file": api}), score=1.0) for i, api in pairs]


def test_catalog_bm25_selects_the_api_of_the_domain(catalog, indexes):
    selector = KeywordApiSelector(catalog, indexes)
    assert selector.select("How do I create a user?", RetrievalStats()).selected_apis[0] == "users_api"
    assert selector.select("place an order for a pet", RetrievalStats()).selected_apis[0] == "petstore_v2"


def test_drop_off_keeps_only_apis_close_to_the_best(catalog, indexes):
    selection = KeywordApiSelector(catalog, indexes, drop_off=0.99).select("list pets", RetrievalStats())
    assert selection.selected_apis == ["petstore_v2"]
    assert "petstore_v2" in selection.reasoning


def test_no_shared_term_selects_nothing(catalog, indexes):
    selection = KeywordApiSelector(catalog, indexes).select("zzqx qqvv", RetrievalStats())
    assert selection.selected_apis == [] and selection.reasoning


def test_endpoint_evidence_can_outvote_the_catalog(catalog, indexes):
    def search(query, k):  # every fleet-wide hit is a pet store endpoint
        return hits(("petstore_v2:a", "petstore_v2"), ("petstore_v2:b", "petstore_v2"))

    plain = KeywordApiSelector(catalog, indexes).shortlist("user", 2)
    voted = KeywordApiSelector(catalog, indexes, chunk_search=search, weights=(1.0, 1.0, 3.0)).shortlist("user", 2)
    assert plain[0][0] == "users_api"
    assert voted[0][0] == "petstore_v2"


def test_shortlist_is_bounded_and_sorted(catalog, indexes):
    ranked = KeywordApiSelector(catalog, indexes).shortlist("user pet store order", 5)
    assert 1 <= len(ranked) <= 2
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


def test_expansion_keeps_user_words_first_and_adds_api_names(indexes):
    expander = KeywordQueryExpander(indexes.get)
    out = expander.expand("How many pets are in the inventory?", ["petstore_v2"], RetrievalStats())
    assert out.expanded_query == "How many pets are in the inventory? " + " ".join(out.added_terms)
    assert "get inventory" in out.added_terms
    assert "inventory" not in out.added_terms  # already the user's word
    assert out.original_terms == ["many", "pets", "inventory"]


def test_expansion_adds_nothing_for_unknown_or_empty_selection(indexes):
    expander = KeywordQueryExpander(indexes.get)
    assert expander.expand("create a user", [], RetrievalStats()).added_terms == []
    assert expander.expand("create a user", ["nope"], RetrievalStats()).expanded_query == "create a user"


@pytest.mark.parametrize("query,intent", [
    ("What errors can creating a user return?", Intent.ERRORS),
    ("which status codes does delete return", Intent.ERRORS),
    ("What fields does the Address schema have?", Intent.SCHEMA),
    ("How do I create a user?", Intent.ENDPOINT),
    ("get the fields of a pet", Intent.ENDPOINT),  # an action wins over 'fields'
])
def test_intent(query, intent):
    assert classify(query) is intent


def test_rrf_weights_and_ties_are_deterministic():
    a = hits(("x", "api"), ("y", "api"))
    b = hits(("y", "api"), ("z", "api"))
    fused = reciprocal_rank_fusion([(a, 0.6), (b, 0.4)], k=60)
    assert [n.node.node_id for n in fused] == ["y", "x", "z"]
    assert fused[0].score == pytest.approx(0.6 / 62 + 0.4 / 61)
    assert fused[1].score == pytest.approx(0.6 / 61)
    assert [n.node.node_id for n in reciprocal_rank_fusion([(hits(("b", "api"), ("a", "api")), 1.0), (hits(("a", "api"), ("b", "api")), 1.0)])] == ["a", "b"]
