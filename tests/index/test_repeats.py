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
import specrag.index.pack_writer as pack_writer
from specrag.index.pack import RECORDS, TYPE_ORDER, VECTORS, Pack
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


def _changed_pets_copy() -> ApiChunks:
    changed = renamed(pets_api("2"), "pets_copy")
    changed.chunks[0] = changed.chunks[0].model_copy(update={"search_text": "listPets every animal kept",
                                                             "embed_text": "GET /pets: every animal kept"})
    return changed


def _assert_scores_as_fresh(incremental: LocalIndex, fresh: LocalIndex) -> None:
    query = unit_vector(_vector("GET /pets: every animal kept").tolist())
    for words in ("every animal", "user address", "forecast city pets"):
        assert _by_id(incremental, query, words) == _by_id(fresh, query, words)
    n = fresh.header.n_rows
    assert [incremental.pack.record(r) for r in range(n)] == [fresh.pack.record(r) for r in range(n)]
    np.testing.assert_array_equal(incremental.pack.vector_rows(0, n), fresh.pack.vector_rows(0, n))


KEPT = ["users", "pets", "weather"]  # users_v2 removed, pets_copy changed


def test_an_incremental_generation_written_compact_is_a_fresh_ones_files(tmp_path, monkeypatch):
    """Rewritten compact (garbage past its share), the kept rows' records and vectors are copied in
    row order, new ids placed among the kept ones: the same files as a fresh build's."""
    monkeypatch.setattr(pack_writer, "GARBAGE_SHARE", -1.0)  # always compact
    first = _build(tmp_path / "gen-1", _fleet_with_copies())
    incremental = _build(tmp_path / "gen-2", [_changed_pets_copy()], old=first, keep=KEPT)
    fresh = _build(tmp_path / "fresh", mini_fleet() + [_changed_pets_copy()])
    assert incremental.header.n_vectors == fresh.header.n_vectors
    _assert_scores_as_fresh(incremental, fresh)
    for name in ("ids.bin", RECORDS, VECTORS, "id_offsets.npy", "id_hash.npy", "id_rank.npy", "ordinal.npy",
                 "chunk_start.npy", "chunk_end.npy", "embed_hash.npy", "vector_of.npy"):
        assert (tmp_path / "gen-2" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


def test_an_incremental_generation_appends_to_the_previous_files(tmp_path, monkeypatch):
    """Shared: the previous generation's records and vectors files, linked and appended to (kept
    rows' bytes neither copied nor read), score as a fresh build; the previous generation still
    opens and checks (its prefix of the files is unchanged)."""
    monkeypatch.setattr(pack_writer, "GARBAGE_SHARE", 1.0)
    first = _build(tmp_path / "gen-1", _fleet_with_copies())
    copied = []
    copy_bytes = Pack.copy_bytes
    monkeypatch.setattr(Pack, "copy_bytes", lambda self, *a: copied.append(a) or copy_bytes(self, *a))
    incremental = _build(tmp_path / "gen-2", [_changed_pets_copy()], old=first, keep=KEPT)
    fresh = _build(tmp_path / "fresh", mini_fleet() + [_changed_pets_copy()])
    assert copied == []
    for name in (RECORDS, VECTORS):
        old, now = tmp_path / "gen-1" / name, tmp_path / "gen-2" / name
        assert now.stat().st_ino == old.stat().st_ino
        assert incremental.header.files[name].size == now.stat().st_size > first.header.files[name].size
    assert incremental.header.n_vectors == first.header.n_vectors + 1  # the one new text's, appended
    _assert_scores_as_fresh(incremental, fresh)
    kept = first.header.apis["users"].spans["endpoint"]
    moved = incremental.header.apis["users"].spans["endpoint"]
    for name in ("chunk_start", "chunk_end", "vector_of"):
        np.testing.assert_array_equal(incremental.pack.arrays[name][slice(*moved)], first.pack.arrays[name][slice(*kept)])
    Pack.open(tmp_path / "gen-1", verify=True)
    Pack.open(tmp_path / "gen-2", verify=True)


def test_a_run_killed_while_appending_leaves_a_tail_the_next_run_cuts(tmp_path, monkeypatch):
    monkeypatch.setattr(pack_writer, "GARBAGE_SHARE", 1.0)
    first = _build(tmp_path / "gen-1", _fleet_with_copies())
    records = tmp_path / "gen-1" / RECORDS
    with open(records, "ab") as tail:
        tail.write(b"half a record of a killed run")
    Pack.open(tmp_path / "gen-1", verify=True)  # beyond its prefix: not its bytes
    incremental = _build(tmp_path / "gen-2", [_changed_pets_copy()], old=first, keep=KEPT)
    _assert_scores_as_fresh(incremental, _build(tmp_path / "fresh", mini_fleet() + [_changed_pets_copy()]))
    assert b"half a record" not in records.read_bytes()


def test_files_are_rewritten_compact_once_garbage_passes_its_share(tmp_path):
    """Replacing most of a small fleet's rows leaves more garbage than ``GARBAGE_SHARE`` in its
    records: the next generation's records file is new (not linked), holds only live rows, and
    equals a fresh build's. Its vectors file, where every text is still in use, stays shared."""
    first = _build(tmp_path / "gen-1", _fleet_with_copies())
    changed = [_changed_pets_copy(), renamed(users_api("2"), "users")]
    incremental = _build(tmp_path / "gen-2", changed, old=first, keep=["pets", "weather"])
    fresh = _build(tmp_path / "fresh", [a for a in mini_fleet() if a.api.file_id != "users"] + changed)
    assert (tmp_path / "gen-2" / RECORDS).stat().st_ino != (tmp_path / "gen-1" / RECORDS).stat().st_ino
    assert (tmp_path / "gen-2" / RECORDS).read_bytes() == (tmp_path / "fresh" / RECORDS).read_bytes()
    assert (tmp_path / "gen-2" / VECTORS).stat().st_ino == (tmp_path / "gen-1" / VECTORS).stat().st_ino
    _assert_scores_as_fresh(incremental, fresh)


def test_a_change_of_one_api_copies_the_others_in_a_few_runs(tmp_path, monkeypatch):
    """Written compact, the kept APIs' records are copied in runs that merge across APIs and types:
    their number depends on where the changed API lies, not on how many APIs the fleet has."""
    monkeypatch.setattr(pack_writer, "GARBAGE_SHARE", -1.0)  # always compact
    first = _build(tmp_path / "gen-1", _fleet_with_copies())
    copied = []
    copy_bytes = Pack.copy_bytes
    monkeypatch.setattr(Pack, "copy_bytes", lambda self, *a: copied.append(a) or copy_bytes(self, *a))
    changed = renamed(pets_api("2"), "pets_copy")
    _build(tmp_path / "gen-2", [changed], old=first, keep=["pets", "users", "users_v2", "weather"])
    assert all(name == RECORDS for name, *_ in copied)
    assert len(copied) <= len(TYPE_ORDER) + 1  # before the changed API's rows of each type, and after the last
    rows = [r for fid in ("pets", "users", "users_v2", "weather") for s, e in first.header.apis[fid].spans.values()
            for r in range(s, e)]
    sizes = first.pack.arrays["chunk_end"] - first.pack.arrays["chunk_start"]
    assert sum(e - s for _, s, e, _ in copied) == int(sizes[rows].sum())  # each kept record once


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
    for name in (RECORDS, "chunk_start.npy", "chunk_end.npy"):
        assert (tmp_path / "dumped" / name).read_bytes() == (tmp_path / "recorded" / name).read_bytes(), name
    entries = {a.api.file_id: ApiEntry(content_hash=a.api.content_hash, state=ApiState.COMPLETE,
                                       chunks_digest=digests[a.api.file_id])
               for a in apis[:2]}
    assert set(IndexBuilder._digests(entries, apis, rebuild_all=False)[1]) == set(digests) - set(entries)
    assert set(IndexBuilder._digests(entries, apis, rebuild_all=True)[1]) == set(digests)
