"""Offline stages 1 and 2, query analysis and RRF, on the demo catalog in the repo."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, TextNode
from specrag.catalog.io import load_api_index, load_catalog
from specrag.core.fusion import fused_order, weighted_rrf
from specrag.core.records import StageMode
from specrag.stages.api_select import KeywordApiSelector
from specrag.stages.intent import Intent, classify, expected_methods
from specrag.stages.query import SpecQuery
from specrag.stages.query_expand import KeywordQueryExpander

CATALOGS = Path(__file__).resolve().parents[2] / "catalogs"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(CATALOGS)


@pytest.fixture(scope="module")
def indexes(catalog):
    return {e.file_id: load_api_index(CATALOGS, e.file_id) for e in catalog.apis}


def hits(*pairs: tuple[str, str]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=i, text="", metadata={"source_file": api}), score=1.0) for i, api in pairs]


class FixedRetriever(BaseRetriever):
    """Answers every query with the same hits; records the queries it got."""

    def __init__(self, answer: list[NodeWithScore]):
        super().__init__()
        self.answer, self.queries = answer, []

    def _retrieve(self, query_bundle):
        self.queries.append(query_bundle)
        return self.answer


def test_catalog_bm25_selects_the_api_of_the_domain(catalog, indexes):
    selector = KeywordApiSelector(catalog, indexes)
    assert selector.select("How do I create a user?").selected_apis[0] == "users_api"
    assert selector.select("place an order for a pet").selected_apis[0] == "petstore_v2"


def test_drop_off_keeps_only_apis_close_to_the_best(catalog, indexes):
    selection = KeywordApiSelector(catalog, indexes, drop_off=0.99).select("list pets")
    assert selection.selected_apis == ["petstore_v2"]
    assert "petstore_v2" in selection.reasoning


def test_no_shared_term_selects_nothing(catalog, indexes):
    selection = KeywordApiSelector(catalog, indexes).select("zzqx qqvv")
    assert selection.selected_apis == [] and selection.reasoning


def test_endpoint_evidence_can_outvote_the_catalog(catalog, indexes):
    evidence = FixedRetriever(hits(("petstore_v2:a", "petstore_v2"), ("petstore_v2:b", "petstore_v2")))
    plain = KeywordApiSelector(catalog, indexes).shortlist("user", 2)
    voted = KeywordApiSelector(catalog, indexes, evidence=evidence, weights=(1.0, 1.0, 3.0)).shortlist("user", 2)
    assert plain[0][0] == "users_api"
    assert voted[0][0] == "petstore_v2"
    asked = evidence.queries[0]  # a fleet-wide endpoint search, through the retriever's public contract
    assert isinstance(asked, SpecQuery) and asked.types == ["endpoint"] and asked.file_ids is None
    assert asked.top_k == 50 and asked.hydrate is False


def test_endpoint_evidence_matches_what_is_asked_by_words_and_the_whole_question_by_meaning(catalog, indexes):
    """A name's words are a value, not a topic: "Game of Thrones" must not vote for a games API
    by spelling, while the embedding still hears the whole question."""
    evidence = FixedRetriever(hits(("petstore_v2:a", "petstore_v2")))
    question = "give me the homepage of the network that produced Game of Thrones"
    KeywordApiSelector(catalog, indexes, evidence=evidence).shortlist(question, 2)
    asked = evidence.queries[0]
    assert "Game" not in asked.query_str and "homepage of the network" in asked.query_str
    assert asked.question == question and asked.embedding_strs == [question]


def test_keyword_stages_say_they_ran_offline(catalog, indexes):
    selection = KeywordApiSelector(catalog, indexes).select("list pets")
    expansion = KeywordQueryExpander(indexes.get).expand_query("list pets", ["petstore_v2"])
    for result, stage in ((selection, "select"), (expansion, "expand")):
        assert result.mode is StageMode.OFFLINE and result.stage == stage and result.ms >= 0
        assert [(f.stage, f.reason) for f in result.fallbacks] == [(stage, "no_llm")]
        assert result.llm_calls == [] and result.prompt == ""


def test_shortlist_is_bounded_and_sorted(catalog, indexes):
    ranked = KeywordApiSelector(catalog, indexes).shortlist("user pet store order", 5)
    assert 1 <= len(ranked) <= 2
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


def test_expansion_keeps_user_words_first_and_adds_api_names(indexes):
    expander = KeywordQueryExpander(indexes.get)
    out = expander.expand_query("How many pets are in the inventory?", ["petstore_v2"])
    assert out.expanded_query == "How many pets are in the inventory? " + " ".join(out.added_terms)
    assert "get inventory" in out.added_terms
    assert "inventory" not in out.added_terms  # already the user's word
    assert out.original_terms == ["many", "pets", "inventory"]


def test_expansion_adds_nothing_for_unknown_or_empty_selection(indexes):
    expander = KeywordQueryExpander(indexes.get)
    assert expander.expand_query("create a user", []).added_terms == []
    assert expander.expand_query("create a user", ["nope"]).expanded_query == "create a user"


@pytest.mark.parametrize("query,intent", [
    ("What errors can creating a user return?", Intent.ERRORS),
    ("which status codes does delete return", Intent.ERRORS),
    ("What fields does the Address schema have?", Intent.SCHEMA),
    ("How do I create a user?", Intent.ENDPOINT),
    ("get the fields of a pet", Intent.ENDPOINT),  # an action wins over 'fields'
    ("Why do I get a 404 from GET /pets/{petId}?", Intent.ERRORS),  # a registered status code
    ("the call returned 499, what now", Intent.ERRORS),  # an unregistered code next to an HTTP word
    ("What happens when the 5xx retries run out", Intent.ERRORS),
    ('Why does "createUser" fail?', Intent.ERRORS),  # quotes hide only the quoted words
    ("Standardize this address: 456 Elm Street, Suite 789, CA 90012", Intent.ENDPOINT),  # a house number
    ('Report 192.168.1.100 with the comment "Multiple failed login attempts"', Intent.ENDPOINT),  # quoted data
    ("Report the IP address \u201cfailed attempts from 10.0.0.1\u201d", Intent.ENDPOINT),
])
def test_intent(query, intent):
    assert classify(query) is intent


def test_rrf_weights_and_ties_are_deterministic():
    fused = weighted_rrf([(["x", "y"], 0.6), (["y", "z"], 0.4)], k=60)
    assert [i for i, _ in fused] == ["y", "x", "z"]
    assert fused[0][1] == pytest.approx(0.6 / 62 + 0.4 / 61)
    assert fused[1][1] == pytest.approx(0.6 / 61)
    assert [i for i, _ in weighted_rrf([(["b", "a"], 1.0), (["a", "b"], 1.0)])] == ["a", "b"]  # tie: by id
    assert weighted_rrf([(["a", "a", "b"], 1.0)], k=0) == [("a", 1.0), ("b", pytest.approx(1 / 3))]  # a repeat counts once
    assert weighted_rrf([]) == []
    with pytest.raises(ValueError, match="k must be"):
        weighted_rrf([(["a"], 1.0)], k=-1)


def test_fused_order_adds_each_code_in_side_order_and_breaks_ties_by_the_given_rank():
    """The array form the chunk rankings use: the same sums, term by term, as a running total."""
    sides = [(np.array([7, 3, 9]), np.array([1, 2, 4]), 0.6), (np.array([3, 7]), np.array([1, 3]), 0.4)]
    codes, scores = fused_order(sides, k=60, tie_rank=lambda c: c)
    assert codes.tolist() == [3, 7, 9]
    assert scores.tolist() == [0.6 / 62 + 0.4 / 61, 0.6 / 61 + 0.4 / 63, 0.6 / 64]  # exactly, not approx
    tied = [(np.array([4, 2]), np.array([1, 2]), 1.0), (np.array([2, 4]), np.array([1, 2]), 1.0)]
    assert fused_order(tied, k=0, tie_rank=lambda c: -c)[0].tolist() == [4, 2]  # equal scores: tie_rank decides
    assert fused_order(tied, k=0, tie_rank=lambda c: c)[0].tolist() == [2, 4]
    assert [len(a) for a in fused_order([], k=60, tie_rank=lambda c: c)] == [0, 0]


def test_selection_says_how_far_its_first_api_leads(catalog, indexes):
    selector = KeywordApiSelector(catalog, indexes, drop_off=0.0)
    ranked = selector.shortlist("user pet store order", 2)
    selection = selector.select("user pet store order")
    assert len(ranked) == 2 and selection.lead == pytest.approx((ranked[0][1] - ranked[1][1]) / ranked[0][1])
    assert 0 <= selection.lead <= 1
    assert KeywordApiSelector(catalog, indexes, max_apis=1).select("list pets").lead is None  # nothing to lead


def test_expansion_is_the_same_under_every_hash_seed(under_hash_seeds):
    """Names that score the same must tie the same way in every process: their weights are summed
    in one order (set order follows PYTHONHASHSEED, and a last-bit difference broke ties)."""
    script = ("from pathlib import Path; from specrag.catalog.io import load_api_index;"
              "from specrag.stages.query_expand import KeywordQueryExpander as K;"
              f"c = Path({str(CATALOGS)!r});"
              "e = K(lambda f: load_api_index(c, f));"
              "print(e.expand_query('update the user and the order of a pet', ['users_api', 'petstore_v2']).added_terms);"
              "print(all(list(w) == sorted(w) for _, w, _ in e._vocabulary('petstore_v2').names))")
    outputs = under_hash_seeds(script)
    assert len(outputs) == 1 and outputs.pop().endswith("True\n")


@pytest.mark.parametrize("question,methods", [
    ("Create a new playlist called 'Road Trip' for me", {"POST", "PUT"}),
    ("How do I create a user?", {"POST", "PUT"}),  # a verb that changes something decides
    ("What errors can creating a user return?", {"POST", "PUT"}),  # in any of its forms
    ("Which songs were removed from my saved tracks?", None),  # -ed forms tell a state
    ("List the posts and changes in my settings", None),  # plural nouns, not verbs
    ("Please rename my playlist 'Old Mix' to 'New Mix'", {"PUT", "PATCH", "POST"}),
    ("Remove the song Hello from my playlist", {"DELETE"}),
    ("Who directed the top-1 rated movie?", None),  # asking or reading says nothing: APIs answer with POST too
    ('Show the dashboard "Delete Old Posts"', None),  # a quoted value asks for nothing
    ("Show the report Create Once", None),  # nor a name
    ("", None),
])
def test_the_http_methods_a_questions_verb_asks_for(question, methods):
    assert expected_methods(question) == (frozenset(methods) if methods is not None else None)
