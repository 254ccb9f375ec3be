"""HybridRetriever over a small in-memory SearchIndex: per-query filters (SpecQuery) passed to both
sides, weighted RRF, lexical-only mode, hydration of the top k only."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from specrag.core.api_models import SearchMode
from specrag.stages.hybrid_retriever import HybridRetriever
from specrag.stages.query import SpecQuery


class ListIndex:
    def __init__(self, vector_ids, lexical_ids, mode="hybrid"):
        self.search_mode = mode
        self.vector_ids, self.lexical_ids = vector_ids, lexical_ids
        self.calls: list[tuple] = []

    def _hits(self, ids, score=1.0):
        return [NodeWithScore(node=TextNode(id_=i, text="", metadata={"source_file": i.split(":")[0]}), score=score)
                for i in ids]

    def vector_search(self, query, file_ids, types, top_k, hydrate=True, methods=None):
        self.calls.append(("vector", query, file_ids, types, hydrate) + ((methods,) if methods else ()))
        return self._hits(self.vector_ids, score=0.9)[:top_k]

    def lexical_search(self, query, file_ids, types, top_k, hydrate=True, methods=None):
        self.calls.append(("lexical", query, file_ids, types, hydrate) + ((methods,) if methods else ()))
        return self._hits(self.lexical_ids, score=7.5)[:top_k]

    def hydrate(self, hits):
        self.calls.append(("hydrate", [h.node.node_id for h in hits]))
        return [NodeWithScore(node=TextNode(id_=h.node.node_id, text="full " + h.node.node_id,
                                            metadata=h.node.metadata), score=h.score) for h in hits]


def test_both_sides_get_the_filters_and_their_own_query():
    index = ListIndex(["a:1", "a:2"], ["a:2", "a:3"])
    retriever = HybridRetriever(index, top_k=5)
    query = SpecQuery(query_str="expanded words", custom_embedding_strs=["user words"], file_ids=["a"],
                      types=["endpoint"], top_k=2)
    hits = retriever.retrieve(query)
    assert index.calls[0] == ("vector", "user words", ["a"], ["endpoint"], False)
    assert index.calls[1] == ("lexical", "expanded words", ["a"], ["endpoint"], False)
    assert index.calls[2] == ("hydrate", ["a:2", "a:1"])  # a:2 is in both lists, so first
    assert [h.node.get_content() for h in hits] == ["full a:2", "full a:1"]


def test_lexical_mode_never_asks_for_vectors_and_empty_selection_returns_nothing():
    index = ListIndex(["a:1"], ["a:3"], mode="lexical")
    retriever = HybridRetriever(index, top_k=5)
    assert [h.node.node_id for h in retriever.retrieve("q")] == ["a:3"]
    assert [c[0] for c in index.calls] == ["lexical", "hydrate"]
    assert retriever.retrieve(SpecQuery("q", file_ids=[])) == []


def test_a_plain_query_bundle_searches_everything_with_the_defaults():
    index = ListIndex(["a:1", "b:1"], ["b:1"])
    retriever = HybridRetriever(index, top_k=1)
    hits = retriever.retrieve(QueryBundle(query_str="expanded", custom_embedding_strs=["user"]))
    assert [h.node.node_id for h in hits] == ["b:1"]
    assert index.calls[:2] == [("vector", "user", None, None, False), ("lexical", "expanded", None, None, False)]


def test_filters_travel_with_the_query_not_the_retriever():
    index = ListIndex(["a:1"], ["a:1"])
    retriever = HybridRetriever(index)
    retriever.retrieve(SpecQuery("q", file_ids=["a"], types=["errors"]))
    retriever.retrieve(SpecQuery("q"))
    assert [c[2:4] for c in index.calls if c[0] == "lexical"] == [(["a"], ["errors"]), (None, None)]


def test_a_mode_searches_one_side_and_keeps_its_scores():
    index = ListIndex(["a:1", "a:2"], ["a:2", "a:3"])
    retriever = HybridRetriever(index, top_k=5)
    keyword = retriever.retrieve(SpecQuery("q", mode=SearchMode.KEYWORD, hydrate=False))
    assert [(h.node.node_id, h.score) for h in keyword] == [("a:2", 7.5), ("a:3", 7.5)]
    vector = retriever.retrieve(SpecQuery("q", mode=SearchMode.VECTOR, hydrate=False))
    assert [(h.node.node_id, h.score) for h in vector] == [("a:1", 0.9), ("a:2", 0.9)]
    assert [c[0] for c in index.calls] == ["lexical", "vector"]
    hybrid = retriever.retrieve(SpecQuery("q", mode=SearchMode.HYBRID, hydrate=False))
    assert hybrid[0].node.node_id == "a:2" and hybrid[0].score < 0.1  # fused (RRF) scores


def test_vector_mode_on_a_lexical_index_finds_nothing_and_methods_reach_both_sides():
    assert HybridRetriever(ListIndex(["a:1"], ["a:1"], mode="lexical")).retrieve(
        SpecQuery("q", mode=SearchMode.VECTOR)) == []
    index = ListIndex(["a:1"], ["a:1"])
    HybridRetriever(index).retrieve(SpecQuery("q", methods=["POST"], hydrate=False))
    assert [c[-1] for c in index.calls] == [["POST"], ["POST"]]


class ScopedIndex(ListIndex):
    """Both sides rank one fixed order, filtered to the APIs asked for (as the real index filters)."""

    def __init__(self, order):
        super().__init__(order, order)

    def _scoped(self, file_ids, top_k):
        return [h for h in self._hits(self.vector_ids) if file_ids is None or h.node.metadata["source_file"] in file_ids][:top_k]

    def vector_search(self, query, file_ids, types, top_k, hydrate=True, methods=None):
        return self._scoped(file_ids, top_k)

    def lexical_search(self, query, file_ids, types, top_k, hydrate=True, methods=None):
        return self._scoped(file_ids, top_k)


def test_an_unsure_api_order_lets_the_api_with_the_stronger_hits_lead():
    # stage 1 put the small API first; as one scope, the big API's three hits outrank it
    index = ScopedIndex(["big:1", "big:2", "big:3", "small:1", "small:2"])
    retriever = HybridRetriever(index, top_k=5, fleet_weight=0.0, api_decay=0.7, order_margin=0.07)

    def ranking(lead):
        query = SpecQuery("q", prefer_file_ids=["small", "big"], prefer_lead=lead, hydrate=False)
        return [h.node.node_id for h in retriever.retrieve(query)]

    per_api = ["small:1", "big:1", "small:2", "big:2", "big:3"]  # decay: the first API's best hit leads
    assert ranking(None) == per_api  # an order without scores (an LLM's) is trusted
    assert ranking(0.07) == per_api  # a lead at the margin is trusted
    assert ranking(0.02) == ["big:1", "small:1", "big:2", "big:3", "small:2"]  # fused with the one-scope ranking
    assert HybridRetriever(index, top_k=5, fleet_weight=0.0, order_margin=0.0).retrieve(
        SpecQuery("q", prefer_file_ids=["small", "big"], prefer_lead=0.0, hydrate=False))[0].node.node_id == "small:1"


def test_the_fleet_side_of_a_soft_search_reads_the_question_as_stage_1s_evidence_does():
    """Names blanked for BM25, the whole question for the vector: the evidence search's ranking
    serves again, and "Game of Thrones" votes for no games API here either."""
    index = ListIndex(["a:1", "b:1"], ["b:1", "a:2"])
    question = "give me the homepage of the network that produced Game of Thrones"
    HybridRetriever(index, top_k=2).retrieve(SpecQuery(query_str=question + " expanded", custom_embedding_strs=[question],
                                                       prefer_file_ids=["a"]))
    searched = [call[:3] for call in index.calls if call[0] != "hydrate"]
    assert searched == [("vector", question, ["a"]), ("lexical", question + " expanded", ["a"]),
                        ("vector", question, None),
                        ("lexical", "give me the homepage of the network that produced  ", None)]


def test_rank_orders_as_retrieve_does_without_nodes_or_retrieval_events(record_events):
    """A stage that reads only ids (stage 1's evidence, producer expansion) gets the same order
    through ``rank()``: stub hits, no hydration, no retrieval events; any other retriever is read
    through ``retrieve()``."""
    from specrag.stages.hybrid_retriever import ranking

    index = ListIndex(["a:1", "b:1", "a:2"], ["a:2", "c:1"])
    retriever = HybridRetriever(index, top_k=3)
    query = SpecQuery(query_str="words", custom_embedding_strs=["question"], prefer_file_ids=["a"], hydrate=False)
    with record_events() as recorder:
        ranked = retriever.rank(query)
        assert recorder.events == []
        retrieved = retriever.retrieve(query)
        assert "RetrievalEndEvent" in [type(e).__name__ for e in recorder.events]
    assert [h.node.node_id for h in ranked] == [n.node.node_id for n in retrieved] == ["a:2", "a:1", "b:1"]
    assert [h.score for h in ranked] == [n.score for n in retrieved]
    assert not any(call[0] == "hydrate" for call in index.calls)
    assert ranking(retriever, query) == ranked
