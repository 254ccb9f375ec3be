"""BM25 over search_text: masks by API and type, no zero-score hits."""

from __future__ import annotations

from llama_index.retrievers.bm25 import BM25Retriever

from pipeline.index.lexical import LexicalIndex

from .fleet import mini_fleet


def _index(tmp_path) -> LexicalIndex:
    fleet = mini_fleet()
    chunks = [c for a in fleet for c in a.chunks]
    return LexicalIndex.build(chunks, {a.api.file_id: a.api.content_hash for a in fleet}, tmp_path / "gen-1")


def test_search_filters_by_api_and_type(tmp_path):
    index = _index(tmp_path)
    everything = {"users", "pets", "weather"}
    hits = index.search("postal address", everything, None, 10)
    assert hits[0].node.node_id == "users:components/schemas/Address"
    assert {h.node.metadata["source_file"] for h in hits} == {"users"}
    pets = index.search("user", {"pets"}, None, 10)
    assert [h.node.node_id for h in pets] == ["pets:components/schemas/Pet"]  # 'owner user id'
    only_errors = index.search("user", everything, ["errors"], 10)
    assert [h.node.node_id for h in only_errors] == ["users:paths/~1users~1{id}/get:errors"]
    assert all(h.score > 0 for h in index.search("forecast", everything, None, 100))
    assert index.search("forecast", {"pets"}, None, 10) == []
    assert index.search("forecast", set(), None, 10) == []
    assert index.search("zzzz unknownword", everything, None, 10) == []


def test_camel_case_parts_match(tmp_path):
    hits = _index(tmp_path).search("by id", {"users"}, ["endpoint"], 3)
    assert hits[0].node.node_id == "users:paths/~1users~1{id}/get"


def test_persisted_folder_is_a_bm25_retriever(tmp_path):
    index = _index(tmp_path)
    reloaded = LexicalIndex.load(tmp_path / "gen-1")
    assert reloaded.docs == index.docs
    assert reloaded.chunk_ids("weather") == ["weather:paths/~1forecast/get", "weather:components/schemas/Forecast"]
    node = reloaded.get_nodes(["pets:components/schemas/Pet", "missing:x"])
    assert list(node) == ["pets:components/schemas/Pet"]
    assert node["pets:components/schemas/Pet"].text.startswith("Pet:")
    plain = BM25Retriever.from_persist_dir(str(tmp_path / "gen-1"))
    assert plain.retrieve("forecast")[0].node.node_id.startswith("weather:")
    assert not (tmp_path / "gen-1.tmp").exists()
