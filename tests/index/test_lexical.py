"""BM25 over search_text: masks by API and type, no zero-score hits, and
scores equal to bm25s's own over the same documents."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
from specrag.core.analysis import index_tokens
from specrag.index.lexical import document_terms, query_terms
from specrag.index.local import LocalIndex
from specrag.index.pack_writer import NewApi, write_generation
from specrag.index.vector_reuse import embed_text, text_hash
from specrag.specs.models import ApiChunks

from .fleet import mini_fleet, pets_api


def new_api(api: ApiChunks) -> NewApi:
    hashes = np.asarray([text_hash(embed_text(c)) for c in api.chunks], dtype=np.uint64)
    return NewApi(api.api.file_id, api.api.content_hash, "d", api.chunks, None, hashes)


def _index(tmp_path) -> LocalIndex:
    write_generation(tmp_path / "gen-1", 1, None, [], [new_api(a) for a in mini_fleet()], embed_model="none", dim=0)
    return LocalIndex.load(tmp_path / "gen-1")


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


@pytest.mark.parametrize("query", ["postal address of a user", "list pets in the store", "user user id", "forecast"])
def test_scores_equal_bm25s(tmp_path, query):
    """The same numbers bm25s computes over the whole corpus (Lucene idf, k1 1.5, b 0.75)."""
    index = _index(tmp_path)
    ids = index.pack.ids
    texts = [index.chunk(row).search_text for row in range(len(ids))]
    reference = bm25s.BM25()
    reference.index(index_tokens(texts), show_progress=False)
    wanted = [reference.vocab_dict[t] for t in query_terms(query) if t in reference.vocab_dict]
    expected = reference.get_scores_from_ids(wanted) if wanted else np.zeros(len(ids))
    ours = {h.node.node_id: h.score for h in index.search(query, {"users", "pets", "weather"}, None, 100)}
    assert ours == pytest.approx({ids[i]: float(s) for i, s in enumerate(expected) if s > 0}, rel=1e-5)


def test_every_scope_of_a_query_shares_one_scoring_and_ranks_as_if_alone(tmp_path):
    """Stage 3 searches each selected API, their union and the fleet with the same words: one
    whole-index scoring serves them all, and each scope gets what a fresh index gives it alone."""
    scopes = [{"users"}, {"pets"}, {"users", "pets"}, {"users", "pets", "weather"}]
    query = "user address of a pet owner"
    alone = [[(h.node.node_id, h.score) for h in _index(tmp_path / f"alone{i}").search(query, scope, None, 100)]
             for i, scope in enumerate(scopes)]
    shared = _index(tmp_path / "shared")
    together = [[(h.node.node_id, h.score) for h in shared.search(query, scope, None, 100)] for scope in scopes]
    assert together == alone
    assert shared._bm25_totals.cache_info().misses == 1 and shared._bm25_totals.cache_info().hits == 3
    fleet = dict(together[-1])
    for scope, hits in zip(scopes, together):  # a scope's ranking is the fleet's, filtered
        assert hits == [(i, s) for i, s in together[-1] if i.split(":")[0] in scope]
        assert all(fleet[i] == s for i, s in hits)
    with pytest.raises(ValueError):  # the shared scores cannot be edited by one search
        shared._bm25_totals(tuple(shared.postings.term_ids(query_terms(query))))[0] = 1.0


def test_generation_reloads_and_copies_rows(tmp_path):
    """A new generation that keeps two APIs and replaces one holds exactly what a fresh build holds."""
    first = _index(tmp_path)
    replaced = pets_api("2")
    replaced.chunks = replaced.chunks[:2]
    write_generation(tmp_path / "gen-2", 2, first.pack, ["users", "weather"], [new_api(replaced)],
                     embed_model="none", dim=0)
    updated = LocalIndex.load(tmp_path / "gen-2")
    fleet = [a if a.api.file_id != "pets" else replaced for a in mini_fleet()]
    write_generation(tmp_path / "fresh", 2, None, [], [new_api(a) for a in fleet], embed_model="none", dim=0)
    fresh = LocalIndex.load(tmp_path / "fresh")
    assert updated.pack.ids == fresh.pack.ids and updated.header.apis == fresh.header.apis
    for query in ("user", "pets store", "forecast for a city"):
        assert [(h.node.node_id, h.score) for h in updated.search(query, set(fresh.header.apis), None, 20)] == \
            [(h.node.node_id, h.score) for h in fresh.search(query, set(fresh.header.apis), None, 20)]
    assert updated.chunk_ids("weather") == ["weather:paths/~1forecast/get", "weather:components/schemas/Forecast"]
    node = updated.get_nodes(["pets:components/schemas/Pet", "users:components/schemas/User", "missing:x"])
    assert list(node) == ["users:components/schemas/User"]  # Pet is no longer in pets v2
    assert node["users:components/schemas/User"].text.startswith("User:")
    assert not list(tmp_path.glob("*.tmp-*"))


def test_document_terms_split_and_stem():
    assert document_terms(["getUserById", "Running users"]) == [["getuserbyid", "get", "user", "id"], ["run", "user"]]
