"""The method prior: operations whose HTTP method the question's verb asks for move up, softly."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode
from specrag.core.ids import operation_chunk_id
from specrag.stages.method_prior import MethodPrior
from specrag.stages.query import SpecQuery


def ranking(*calls: str) -> list[NodeWithScore]:
    """'POST /playlists' -> an operation hit; 'schema X' -> a component hit; scores fall with rank."""
    nodes = []
    for rank, call in enumerate(calls):
        kind, name = call.split(" ", 1)
        cid = f"music:components/schemas/{name}" if kind == "schema" else operation_chunk_id("music", name, kind)
        nodes.append(NodeWithScore(node=TextNode(id_=cid, text=call), score=1.0 / (rank + 1)))
    return nodes


def order(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.get_content() for n in nodes]


def ask(question: str, nodes: list[NodeWithScore], weight: float = 0.25) -> list[NodeWithScore]:
    """At weight 0.25 (k 10): a match at rank r passes another method's call at r' when 10 + r < 1.25 (10 + r')."""
    return MethodPrior(weight=weight).postprocess_nodes(nodes, query_bundle=SpecQuery(
        query_str=question + " expanded words", custom_embedding_strs=[question]))


def test_the_call_the_verb_asks_for_moves_above_its_close_neighbours():
    nodes = ranking("GET /browse/featured-playlists", "GET /playlists/{id}/tracks", "POST /users/{user_id}/playlists",
                    "schema Playlist")
    moved = ask("Create a new playlist called 'Road Trip' for me", nodes)  # 1.25 / (10 + 3) > 1 / (10 + 1)
    assert order(moved) == ["POST /users/{user_id}/playlists", "GET /browse/featured-playlists",
                            "GET /playlists/{id}/tracks", "schema Playlist"]
    assert [n.score for n in moved] == [1 / 3, 1.0, 1 / 2, 1 / 4]  # hits keep their retrieval scores
    weak = ask("Create a new playlist", nodes, weight=0.1)  # 1.1 / 13 < 1 / 11, but 1.1 / 13 > 1 / 12
    assert order(weak)[:3] == ["GET /browse/featured-playlists", "POST /users/{user_id}/playlists",
                               "GET /playlists/{id}/tracks"]


def test_never_over_a_far_better_hit():
    """Rank 11 passes the calls ranked 7 to 10 (1.25 / 21 > 1 / 17), never the first six (1 / 16)."""
    nodes = ranking(*[f"GET /list{i}" for i in range(10)], "DELETE /playlists/{id}")
    moved = order(ask("Remove the playlist Old Mix", nodes))
    assert moved[:7] == [*[f"GET /list{i}" for i in range(6)], "DELETE /playlists/{id}"]


def test_no_verb_no_match_or_no_weight_keep_the_ranking():
    nodes = ranking("GET /a", "POST /b", "schema C")
    for question, weight in [("Who directed it?", 0.25), ("Delete the thing", 0.25), ("Create a b", 0.0)]:
        assert ask(question, nodes, weight) == nodes
    assert MethodPrior().postprocess_nodes(nodes, query_bundle=None) == nodes
    assert ask("Create a b", []) == []
