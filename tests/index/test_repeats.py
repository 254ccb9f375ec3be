"""Texts a fleet repeats (copies, versions of one API, shared schemas) are stored and scored
once, and every row still scores exactly as if it had its own vector and postings; an
incremental generation scores as a fresh one."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
from specrag.core.analysis import index_tokens
from specrag.index.lexical import query_terms
from specrag.index.local import LocalIndex, unit_vector
from specrag.index.builder import IndexBuilder, digest_chunks
from specrag.index.manifest import ApiEntry, ApiState
from specrag.index.pack import TYPE_ORDER, Pack
from specrag.index.pack_writer import NewApi, write_generation
from specrag.index.vector_reuse import embed_text, text_hash
from specrag.specs.models import ApiChunks

from .fleet import mini_fleet, pets_api, renamed, users_api

DIM = 8


def _vector(text: str) -> np.ndarray:
    """A deterministic vector per embed text, as a model gives (equal texts, equal vectors)."""
    rng = np.random.default_rng(text_hash(text) % (1 << 32))
    return rng.standard_normal(DIM).astype(np.float32)


def new_api(api: ApiChunks) -> NewApi:
    hashes = np.asarray([text_hash(embed_text(c)) for c in api.chunks], dtype=np.uint64)
    vectors = np.stack([_vector(embed_text(c)) for c in api.chunks])
    return NewApi(api.api.file_id, api.api.content_hash, "d", api.chunks, vectors, hashes)


def _fleet_with_copies() -> list[ApiChunks]:
    return mini_fleet() + [renamed(users_api(), "users_v2"), renamed(pets_api(), "pets_copy")]


def _build(folder, apis, old=None, keep=()) -> LocalIndex:
    write_generation(folder, 1, old.pack if old else None, list(keep), [new_api(a) for a in apis],
                     embed_model="test", dim=DIM)
    return LocalIndex.load(folder)


def _by_id(index: LocalIndex, query_vector: np.ndarray, query: str) -> dict[str, tuple[float, float]]:
    """chunk id -> (cosine score, BM25 score) over every row."""
    everything = set(index.header.apis)
    cosine = {h.node.node_id: h.score for h in index.vector_search(query_vector, everything, None, 1000)}
    bm25 = {h.node.node_id: h.score for h in index.search(query, everything, None, 1000)}
    return {cid: (cosine.get(cid, 0.0), bm25.get(cid, 0.0)) for cid in index.pack.ids}


def test_repeated_texts_are_stored_once(tmp_path):
    index = _build(tmp_path / "gen", _fleet_with_copies())
    n_rows = index.header.n_rows
    distinct_texts = len({embed_text(index.chunk(r)) for r in range(n_rows)})
    assert index.header.n_vectors == distinct_texts < n_rows
    assert len(index.pack.arrays["doc_len"]) < n_rows  # postings: one document per distinct token list
    for row in range(n_rows):  # every row reads back its own text's vector
        np.testing.assert_allclose(index.pack.vector_rows(row, row + 1)[0].astype(np.float32),
                                      (_vector(embed_text(index.chunk(row))) /
                                       np.linalg.norm(_vector(embed_text(index.chunk(row))))), atol=1e-3)


@pytest.mark.parametrize("query", ["postal address of a user", "list pets in the store", "user user id"])
def test_bm25_counts_every_row(tmp_path, query):
    """Scores equal bm25s's over all rows, duplicates included (N, df and length count rows)."""
    index = _build(tmp_path / "gen", _fleet_with_copies())
    texts = [index.chunk(row).search_text for row in range(index.header.n_rows)]
    reference = bm25s.BM25()
    reference.index(index_tokens(texts), show_progress=False)
    wanted = [reference.vocab_dict[t] for t in query_terms(query) if t in reference.vocab_dict]
    expected = reference.get_scores_from_ids(wanted)
    ours = index.postings.totals(tuple(index.postings.term_ids(query_terms(query))))
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_copies_score_as_their_originals(tmp_path):
    index = _build(tmp_path / "gen", _fleet_with_copies())
    scores = _by_id(index, unit_vector(_vector("GET /pets: List all pets in the store").tolist()), "pets store user")
    for cid, (cosine, bm25) in scores.items():
        if cid.startswith("pets_copy:"):
            assert (cosine, bm25) == scores[cid.replace("pets_copy:", "pets:", 1)]


def test_an_incremental_generation_scores_as_a_fresh_one(tmp_path):
    """Kept APIs' rows are copied with their shared vectors and documents renumbered; a changed
    API brings new ones; a removed one takes only what no other row uses."""
    first = _build(tmp_path / "gen-1", _fleet_with_copies())
    changed = renamed(pets_api("2"), "pets_copy")
    changed.chunks[0] = changed.chunks[0].model_copy(update={"search_text": "listPets every animal kept",
                                                             "embed_text": "GET /pets: every animal kept"})
    kept = ["users", "pets", "weather"]  # users_v2 removed, pets_copy changed
    incremental = _build(tmp_path / "gen-2", [changed], old=first, keep=kept)
    fresh = _build(tmp_path / "fresh", mini_fleet() + [changed])
    assert incremental.header.n_vectors == fresh.header.n_vectors
    query = unit_vector(_vector("GET /pets: every animal kept").tolist())
    for words in ("every animal", "user address", "forecast city pets"):
        assert _by_id(incremental, query, words) == _by_id(fresh, query, words)
    # kept rows' ids, hashes and records are copied as bytes, new ids placed among them: the
    # same files as a fresh build's
    for name in ("ids.bin", "chunks.bin", "id_offsets.npy", "id_hash.npy", "id_rank.npy", "ordinal.npy",
                 "chunk_offsets.npy", "embed_hash.npy"):
        assert (tmp_path / "gen-2" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


def test_a_change_of_one_api_copies_the_others_in_a_few_runs(tmp_path, monkeypatch):
    """The kept APIs' rows are copied in runs that merge across APIs and types: their number
    depends on where the changed API lies, not on how many APIs the fleet has."""
    first = _build(tmp_path / "gen-1", _fleet_with_copies())
    copied = []
    copy_records = Pack.copy_records
    monkeypatch.setattr(Pack, "copy_records", lambda self, s, e, out: copied.append((s, e)) or copy_records(self, s, e, out))
    changed = renamed(pets_api("2"), "pets_copy")
    _build(tmp_path / "gen-2", [changed], old=first, keep=["pets", "users", "users_v2", "weather"])
    assert len(copied) <= len(TYPE_ORDER) + 1  # before the changed API's rows of each type, and after the last
    assert sum(e - s for s, e in copied) == first.header.n_rows - first.header.apis["pets_copy"].n_chunks


def test_records_made_beside_the_digest_are_the_ones_the_writer_makes(tmp_path):
    """A build dumps each chunk once, for its API's digest and its stored record; an API that
    looks unchanged gets no records (the writer dumps it itself if it is written after all)."""
    apis = _fleet_with_copies()
    digests, records = IndexBuilder._digests({}, apis, rebuild_all=False)
    assert digests == {a.api.file_id: digest_chunks(a.chunks) for a in apis} and set(records) == set(digests)
    write_generation(tmp_path / "dumped", 1, None, [], [new_api(a) for a in apis], embed_model="test", dim=DIM)
    with_records = [new_api(a) for a in apis]
    for api in with_records:
        api.records = records[api.file_id]
    write_generation(tmp_path / "recorded", 1, None, [], with_records, embed_model="test", dim=DIM)
    for name in ("chunks.bin", "chunk_offsets.npy"):
        assert (tmp_path / "dumped" / name).read_bytes() == (tmp_path / "recorded" / name).read_bytes(), name
    entries = {a.api.file_id: ApiEntry(content_hash=a.api.content_hash, state=ApiState.COMPLETE,
                                       chunks_digest=digests[a.api.file_id])
               for a in apis[:2]}
    assert set(IndexBuilder._digests(entries, apis, rebuild_all=False)[1]) == set(digests) - set(entries)
    assert set(IndexBuilder._digests(entries, apis, rebuild_all=True)[1]) == set(digests)
