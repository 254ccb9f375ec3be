"""The one producer policy on the real dependency graph of the fixture specs (tests/graph/fixtures):
who counts, the ranking key, and the three callers' settings of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.core.ids import operation_chunk_id
from specrag.graph.models import ParamNeed
from specrag.stages.producer_policy import (
    AGENTIC_LOOKED_AT,
    EDGE_STRENGTH,
    NO_STRENGTH,
    ProducerFacts,
    Weights,
    best_producer,
    for_the_asker,
    producer_facts,
    rank_producers,
    strength,
)

FIXTURES = Path(__file__).resolve().parents[1] / "graph" / "fixtures"
SHOP, LIB = "shop_oas3", "library_swagger2"


def op(api: str, path: str, method: str = "get") -> str:
    return operation_chunk_id(api, path, method)


USERS, NEW_USER = op(SHOP, "/users"), op(SHOP, "/users", "post")
USER, ORDERS, ORDER = op(SHOP, "/users/{id}"), op(SHOP, "/users/{id}/orders"), op(SHOP, "/users/{id}/orders/{orderId}")
BOOK, AUTHOR_BOOKS, NEW_LOAN = op(LIB, "/books/{bookId}"), op(LIB, "/authors/{authorId}/books"), op(LIB, "/loans", "post")


@pytest.fixture(scope="module")
def chunks():
    from specrag.specs.ingest import ingest_paths

    ingest = ingest_paths([FIXTURES], 1500, progress=False, workers=1)
    return {c.id: c for api in ingest.apis for c in api.chunks}


def offered(chunks, consumer: str, param: str) -> list:
    return [e for e in chunks[consumer].producers if e.param == param]


def facts_of(chunks, names: bool = False, relevance: dict | None = None) -> dict:
    return {cid: producer_facts(c.params, c.method, names, (relevance or {}).get(cid, 0.0))
            for cid, c in chunks.items() if c.method}


def test_the_fixture_graph_offers_free_and_id_taking_producers(chunks):
    """The cases below rest on these edges (all of score 1.0, the link first)."""
    assert [e.producer for e in offered(chunks, USER, "id")] == [NEW_USER, USERS, ORDER, ORDERS]
    assert {e.score for e in offered(chunks, USER, "id")} == {1.0}
    assert [e.producer for e in offered(chunks, BOOK, "bookId")] == [AUTHOR_BOOKS, NEW_LOAN]


def test_producer_facts():
    text = ParamNeed(name="q", location="query", text=True)
    ident = ParamNeed(name="id", location="path", id_like=True)
    assert producer_facts([]) == ProducerFacts(needs_id=False, fits=True)  # an input-free GET: a list
    assert producer_facts([], "POST") == ProducerFacts(needs_id=False, fits=False)
    assert producer_facts([], None).fits is False  # a method not stated is no GET (as the expander read it)
    assert producer_facts([text], names=True).fits and not producer_facts([text]).fits
    assert producer_facts([ident], relevance=0.5) == ProducerFacts(needs_id=True, fits=False, relevance=0.5)


def test_strength_is_the_expanders_sum_bit_for_bit():
    from specrag.graph.models import DependencyEdge, EdgeSource

    edge = DependencyEdge(consumer="a", param="id", producer="b", field="id", score=0.1, source=EdgeSource.TYPE)
    facts = ProducerFacts(needs_id=False, fits=True, relevance=1.0 - 7 / 30)
    assert strength(edge, facts, Weights()) == 0.1 + 1.0 * True + 1.0 * True + 1.0 * (1.0 - 7 / 30)
    assert strength(edge, facts, EDGE_STRENGTH) == 0.1
    assert strength(edge, facts, NO_STRENGTH) == 0.0


def test_expansion_weighs_every_signal(chunks):
    """Producer expansion: no tier; an input-free list beats a create call when the question
    names nothing, and a well-ranked producer that needs an id can match one that needs none."""
    edges = offered(chunks, USER, "id")
    assert best_producer(edges, facts_of(chunks)).producer == USERS  # 1 + 1 + 1 (a list) > 1 + 1 (POST)
    ranked = rank_producers(edges, facts_of(chunks, relevance={ORDERS: 1.0}))
    assert [e.producer for e in ranked] == [USERS, NEW_USER, ORDERS, ORDER]  # 3, 2, 2 (offered later), 1
    # the book's id: the author's books (needs an id) ranked first ties the loan (needs none): offered first wins
    assert best_producer(offered(chunks, BOOK, "bookId"), facts_of(chunks, relevance={AUTHOR_BOOKS: 1.0})).producer \
        == AUTHOR_BOOKS
    # with the self-sufficient weight raised, the loan wins
    assert best_producer(offered(chunks, BOOK, "bookId"), facts_of(chunks, relevance={AUTHOR_BOOKS: 1.0}),
                         weights=Weights(self_sufficient=2.0)).producer == NEW_LOAN


def test_agentic_takes_the_strongest_edge_among_producers_needing_no_id(chunks):
    edges = offered(chunks, USER, "id")
    how = {"self_sufficient_first": True, "weights": EDGE_STRENGTH, "looked_at": AGENTIC_LOOKED_AT}
    assert best_producer(edges, facts_of(chunks), **how).producer == NEW_USER  # equal scores: offered first
    weak = [edges[0].model_copy(update={"score": 0.5}), *edges[1:]]
    assert best_producer(weak, facts_of(chunks), **how).producer == USERS
    # a stronger edge of a producer that needs an id never beats one that needs none
    strong = [*edges[:2], edges[2].model_copy(update={"score": 5.0}), edges[3]]
    assert best_producer(strong, facts_of(chunks), **how).producer == NEW_USER
    only = {ORDER: facts_of(chunks)[ORDER], ORDERS: facts_of(chunks)[ORDERS]}  # what the store held
    assert best_producer(edges, only, **how).producer == ORDER  # none needing no id known: the strongest known
    assert best_producer(edges, {}, **how) is None


def test_looked_at_counts_the_producers_of_the_first_edges_only(chunks):
    edges = offered(chunks, USER, "id")
    how = {"self_sufficient_first": True, "weights": EDGE_STRENGTH}
    assert [e.producer for e in rank_producers(edges, facts_of(chunks), looked_at=1, **how)] == [NEW_USER]
    assert [e.producer for e in rank_producers(edges[2:], facts_of(chunks), looked_at=1, **how)] == [ORDER]
    # a later edge of a producer among the first ones counts, with its own strength
    again = edges[0].model_copy(update={"field": "[].id", "score": 2.0})
    assert rank_producers([*edges, again], facts_of(chunks), looked_at=1, **how) == [again, edges[0]]


def test_plans_bind_to_a_producer_needing_no_id_then_the_nearest_call_before(chunks):
    edges = offered(chunks, USER, "id")
    how = {"self_sufficient_first": True, "weights": NO_STRENGTH}
    facts = facts_of(chunks)
    assert best_producer(edges, facts, nearness=[USERS, ORDERS], **how).producer == USERS  # needs none, though farther
    assert best_producer(edges, facts, nearness=[NEW_USER, ORDERS, USERS], **how).producer == USERS  # the nearest
    assert best_producer(edges, facts, nearness=[USERS, ORDERS, NEW_USER], **how).producer == NEW_USER
    assert best_producer(edges, facts, nearness=[ORDER, ORDERS], **how).producer == ORDERS
    # a call listed twice (an earlier step that is also ranked above) is where it first comes
    assert best_producer(edges, facts, nearness=[USERS, NEW_USER, USERS], **how).producer == NEW_USER
    # edge strength is not read: one producer's two edges fall to the edge offered first
    other = edges[1].model_copy(update={"field": "id", "score": 9.0})
    assert best_producer([edges[1], other], facts, nearness=[USERS], **how) is edges[1]
    # facts=None (a plan's bindings): nothing known, only nearness decides
    assert best_producer(edges, None, nearness=[USERS, ORDERS], **how).producer == ORDERS


def test_the_callers_use_the_policy(chunks):
    """plan._bound_by is the policy with plan settings (the plan tests cover expansion and agentic
    through their own entry points)."""
    from specrag.engine.plan import _bound_by

    edges = chunks[USER].producers
    assert _bound_by(edges, "id", [USERS, ORDERS], chunks).producer == USERS
    assert _bound_by(edges, "id", [USERS, ORDERS]).producer == ORDERS
    assert _bound_by(edges, "id", [BOOK], chunks) is None


def test_for_the_asker_keeps_all_without_a_possessive(chunks):
    edges = offered(chunks, USER, "id")
    assert for_the_asker(edges, None) == edges
    assert for_the_asker(edges, ["orders"]) == edges  # no call here names the caller
