"""Build the mini fleet into a real persistent Chroma + BM25, then query both sides."""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest
from llama_index.core.schema import NodeWithScore
from specrag.context.nodes import Hit, node_to_chunk
from specrag.index import ChunkStore, IndexBuilder
from specrag.stages.hybrid_retriever import HybridRetriever
from specrag.stages.query import SpecQuery

from .fleet import mini_fleet, row_ids

QUERIES = ["get a user profile", "postal address of a user", "list pets", "weather forecast", "user not found"]


@pytest.fixture
def store(settings, embed_model):
    store = ChunkStore.open(settings, embed_model=embed_model)
    report = IndexBuilder(store, settings).build(mini_fleet(), progress=False)
    assert report.apis_added == ["users", "pets", "weather"] and report.chunks_embedded == 11
    assert report.search_mode == store.search_mode == "hybrid" and report.full_rebuild == "no manifest"
    yield store
    store.close()


def test_both_sides_find_the_obvious_chunk(store):
    for search in (store.vector_search, store.lexical_search):
        assert search("weather forecast for a city", None, None, 3)[0].node.node_id == "weather:paths/~1forecast/get"
        assert search("postal address", None, None, 3)[0].node.node_id == "users:components/schemas/Address"


@pytest.mark.parametrize("selected", [["pets"], ["users", "weather"], ["weather"]])
def test_no_filter_leak(store, selected):
    for search in (store.vector_search, store.lexical_search):
        for query in QUERIES:
            hits = search(query, selected, None, 20)
            assert {h.node.metadata["source_file"] for h in hits} <= set(selected), (search.__name__, query)
    assert len(store.vector_search("anything", selected, None, 20)) == sum(
        len(store.api_chunk_ids(f)) for f in selected)


def test_type_filter(store):
    for search in (store.vector_search, store.lexical_search):
        hits = search("user", None, ["component"], 20)
        assert hits and {h.node.metadata["type"] for h in hits} == {"component"}
        errors = search("user not found", ["users"], ["errors"], 20)
        assert [h.node.node_id for h in errors] == ["users:paths/~1users~1{id}/get:errors"]
        assert search("user", ["pets", "users"], ["endpoint", "errors"], 20)
    assert store.vector_search("user", None, [], 5) == [] and store.vector_search("user", [], None, 5) == []
    assert store.vector_search("user", ["unknown-api"], None, 5) == []


def test_method_filter(store):
    for search in (store.vector_search, store.lexical_search):
        hits = search("create a user", None, None, 20, methods=["post"])
        assert hits[0].node.node_id == "users:paths/~1users/post"
        assert {h.node.metadata["method"] for h in hits} == {"POST"}
        gets = search("user", None, None, 20, methods=["GET"])
        assert gets and {h.node.metadata["method"] for h in gets} == {"GET"}
        assert search("user", None, None, 20, methods=[]) == []


def test_nodes_carry_chunk_text_and_metadata(store):
    hit = store.vector_search("Create a new user account", ["users"], ["endpoint"], 1)[0]
    original = mini_fleet()[0].chunks[1]
    chunk = node_to_chunk(hit.node)
    assert chunk.id == original.id and chunk.text == original.text
    assert chunk.ref_ids == original.ref_ids and chunk.method == "POST"
    lexical = store.lexical_search("createUser", ["users"], None, 1)[0]
    assert node_to_chunk(lexical.node) == chunk


def test_get_chunks_and_api_ids(store):
    ids = ["users:components/schemas/User", "users:components/schemas/Country", "nope:components/schemas/X"]
    chunks = store.get_chunks(ids)
    assert set(chunks) == set(ids[:2])
    assert chunks["users:components/schemas/User"].ref_ids == {"users:components/schemas/Address": ["#/properties/x"]}
    assert store.get_chunks([]) == {}
    assert store.api_chunk_ids("pets") == [c.id for c in mini_fleet()[1].chunks]
    assert store.api_chunk_ids("unknown") == []
    assert store.complete_api_ids() == {"users", "pets", "weather"}


def test_references_read_the_stored_metadata_the_index_keeps(store):
    """A reference's metadata comes from the index's per-row copy (not encoded again), shared and
    the same as the chunk's; the expansion over the store equals one over a plain lookup."""
    from specrag.stages.ref_expand import ReferenceExpander

    class PlainLookup:
        def get_chunks(self, ids):
            return store.get_chunks(ids)

    ids = store.api_chunk_ids("users")
    chunks = store.get_chunks(ids)
    assert all(store.stored_metadata(i) == chunks[i].metadata() for i in ids)
    assert store.stored_metadata(ids[0]) is store.stored_metadata(ids[0])
    assert store.stored_metadata("users:nowhere") is None and store.stored_metadata("nosuchapi:x") is None
    primaries = store.vector_search("create a user", ["users"], ["endpoint"], 2)
    fast, plain = (ReferenceExpander(lookup=lookup).follow_references(primaries) for lookup in (store, PlainLookup()))
    assert fast.referenced and fast.model_dump(exclude={"ms"}) == plain.model_dump(exclude={"ms"})


def test_reopen_from_disk(store, settings, embed_model):
    store.close()
    again = ChunkStore.open(settings, embed_model=embed_model)
    assert again.search_mode == "hybrid" and again.complete_api_ids() == {"users", "pets", "weather"}
    assert again.lexical_search("forecast", ["weather"], None, 1)[0].node.node_id == "weather:paths/~1forecast/get"
    assert again.vector_search("dog or cat", None, None, 1)[0].node.node_id == "pets:components/schemas/Pet"
    again.close()


def test_local_vector_search_matches_chroma(store):
    """The numpy search over the local copy ranks like Chroma's own query over the vectors of
    record (restricted to the rows of the searched APIs' texts: one row per text, and no two
    chunks of the mini fleet share one), with the same scores: exact for endpoints; within 0.002
    for components and errors, whose blocks are searched whole from int8 codes
    (``QuantizedRows``) when a search covers most of them, as two of three APIs do."""
    for query, file_ids in [("user address", ["users", "pets"]), ("rain tomorrow", ["weather", "users"])]:
        ours = store.vector_search(query, file_ids, None, 4)
        chunk_of = {row_ids([c])[0]: c.id for f in file_ids for c in store.local.api_chunks(f)}
        embedding = store.embed_model.get_query_embedding(query)
        chroma = store.chroma.query(query_embeddings=[embedding], n_results=4, ids=list(chunk_of))
        assert [h.node.node_id for h in ours] == [chunk_of[i] for i in chroma["ids"][0]]
        for hit, distance in zip(ours, chroma["distances"][0]):
            assert hit.score == pytest.approx(math.exp(-distance),  # ChromaVectorStore's score of a cosine distance
                                              abs=1e-4 if hit.node.metadata["type"] == "endpoint" else 2e-3)
        assert {h.node.metadata["type"] for h in ours} != {"endpoint"}  # both kinds of block were compared


def test_stubs_rank_like_full_nodes_and_hydrate_to_them(store):
    for search in (store.vector_search, store.lexical_search):
        full = search("postal address of a user", ["users"], None, 4)
        stubs = search("postal address of a user", ["users"], None, 4, hydrate=False)
        assert [(h.node.node_id, h.score) for h in stubs] == [(h.node.node_id, h.score) for h in full]
        assert all(h.node.text == "" and set(h.node.metadata) == {"source_file", "type", "_stub"} for h in stubs)
        assert {h.node.metadata["source_file"] for h in stubs} == {"users"}
        hydrated = store.hydrate(stubs)
        assert [(h.node.node_id, h.score, h.node.text) for h in hydrated] == [
            (h.node.node_id, h.score, h.node.text) for h in full]
        assert all(isinstance(h, NodeWithScore) for h in full + hydrated)  # only ranking-internal hits are light
        assert all(isinstance(h, Hit) for h in stubs)
    assert store.hydrate(full) == full  # nothing to do for full nodes


def test_a_query_is_embedded_once_and_every_search_scores_its_cached_unit_vector(store, monkeypatch):
    query, calls = "weather forecast for tomorrow", []
    store.forget_query_embeddings()
    embed = store._embed
    monkeypatch.setattr(store, "_embed", lambda q: calls.append(q) or embed(q))
    first = store.vector_search(query, None, None, 5, hydrate=False)
    unit = store._query_vectors(query)[1]
    again = store.vector_search(query, ["weather", "users"], ["endpoint"], 5, hydrate=False)
    assert calls == [query] and first and again
    assert not unit.flags.writeable and np.linalg.norm(unit) == pytest.approx(1.0, abs=1e-6)
    assert unit.tolist() == pytest.approx((np.asarray(store.embed_query(query)) / np.linalg.norm(store.embed_query(query))).tolist(), abs=1e-6)


def test_ranked_rows_fuse_exactly_as_their_hit_lists(store):
    """Searches return their ranked rows (``RankedRows``), fused as arrays: the same hits, scores
    and tie order as the hit lists fused one hit at a time, with another API's hits taken out at
    their ranks as well."""
    from specrag.context.nodes import RankedRows
    from specrag.stages.hybrid_retriever import fuse_hits, without_apis

    def pairs(hits):
        return [(h.node.node_id, h.score) for h in hits]

    query = "postal address of a user"
    vector = store.vector_search(query, None, None, 12, hydrate=False)
    lexical = store.lexical_search(query, None, None, 12, hydrate=False)
    assert isinstance(vector, RankedRows) and isinstance(lexical, RankedRows)
    assert {h.node.metadata["source_file"] for h in vector} > {"users"}
    for sides, k in [([(vector, 0.6), (lexical, 0.4)], 60), ([(vector, 1.0), (lexical, 1.0)], 0)]:  # k=0: ties
        fused = fuse_hits(sides, k)
        assert isinstance(fused, RankedRows)
        assert pairs(fused) == pairs(fuse_hits([(list(hits), weight) for hits, weight in sides], k))
    others = without_apis(vector, {"users"})
    assert others.with_gaps() == without_apis(list(vector), {"users"})
    assert None in others.with_gaps() and all(h.node.metadata["source_file"] != "users" for h in others)
    assert pairs(fuse_hits([(lexical, 1.0), (others, 0.5)], 0)) == pairs(
        fuse_hits([(list(lexical), 1.0), (without_apis(list(vector), {"users"}), 0.5)], 0))
    assert fuse_hits([([], 1.0)], 60) == [] and pairs(vector[2:5]) == pairs(vector)[2:5]


def test_the_retriever_returns_node_with_score_whatever_its_hits_inside(store):
    retriever = HybridRetriever(store, top_k=3)
    for hydrate in (True, False):
        hits = retriever.retrieve(SpecQuery("postal address of a user", hydrate=hydrate))
        assert hits and all(isinstance(h, NodeWithScore) for h in hits)
        assert all(bool(h.node.text) == hydrate for h in hits)


def test_searches_with_one_embedding_share_the_block_product_and_the_stubs(store):
    """Searches of one query over the same blocks (here: all endpoints, then the GET ones) score
    them once: the second reuses the product, ranks exactly as a fresh one, and gets the same
    (read-only) stub nodes; hydrating gives full nodes of the caller's own."""
    local, query = store.local, "postal address of a user"
    first = store.vector_search(query, None, ["endpoint"], 10, hydrate=False)
    products = local._recent_products.cache_info()
    again = store.vector_search(query, None, ["endpoint"], 3, hydrate=False, methods=["GET"])
    assert local._recent_products.cache_info().hits == products.hits + 1
    assert [h.node.node_id for h in again] == [h.node.node_id for h in first if "/get" in h.node.node_id][:3]
    assert all(a.node is f.node for a, f in zip(again, first) if a.node.node_id == f.node.node_id)
    local._recent_products.cache_clear()
    local._rankings.clear()
    fresh = store.vector_search(query, None, ["endpoint"], 10, hydrate=False)
    assert [(h.node.node_id, h.score) for h in fresh] == [(h.node.node_id, h.score) for h in first]
    full = store.hydrate(first)
    assert all(h.node is not f.node and h.node.text for h, f in zip(full, first))


def test_a_search_of_a_recent_scope_is_the_first_rows_of_its_ranking(store):
    """Stage 3's fleet-wide search repeats stage 1's evidence search, and producer expansion ranks
    an API 90 deep after stage 3 ranked it 30 deep: every search ranks at least RANKING_DEPTH deep
    and keeps it, later ones of the same scope are served from it and rank exactly as fresh ones."""
    from specrag.index.local import RANKING_DEPTH

    local, query = store.local, "postal address of a user"
    for search in (store.vector_search, store.lexical_search):
        first = search(query, None, None, 3, hydrate=False)
        hits = local._rankings.hits
        deeper = search(query, None, None, 6, hydrate=False)
        assert local._rankings.hits == hits + 1 and deeper[:3] == first
        local._rankings.clear()
        fresh = search(query, None, None, 6, hydrate=False)
        assert [(h.node.node_id, h.score) for h in fresh] == [(h.node.node_id, h.score) for h in deeper]
        search(query, None, None, RANKING_DEPTH + 1, hydrate=False)  # deeper than kept: ranked again
        search(query, ["users"], None, 3, hydrate=False)  # another scope: its own ranking
        assert local._rankings.hits == 0


def test_concurrent_searches_share_batches_and_match_serial_ones(store):
    from concurrent.futures import ThreadPoolExecutor

    queries = [f"{q} {i}" for i in range(6) for q in QUERIES]  # distinct: no embedding cache hits
    serial = {q: [(h.node.node_id, h.score) for h in store.vector_search(q, None, None, 5)] for q in queries}
    store._embedding_cache.clear()
    store.local._recent_products.cache_clear()  # each search computes its product again, batched
    store.local._rankings.clear()
    with ThreadPoolExecutor(8) as pool:
        parallel = list(pool.map(lambda q: [(h.node.node_id, h.score)
                                            for h in store.vector_search(q, None, None, 5)], queries))
    for query, hits in zip(queries, parallel):  # same ranking; scores equal up to float rounding of batched math
        assert [i for i, _ in hits] == [i for i, _ in serial[query]]
        assert [s for _, s in hits] == pytest.approx([s for _, s in serial[query]], abs=1e-4)
    batchers = store.local.batchers  # every whole-index search went through one batcher of all three blocks
    assert list(batchers) == [("endpoint", "component", "errors")]
    assert batchers[("endpoint", "component", "errors")].items >= 2 * len(queries)


def test_whole_blocks_keep_endpoints_exact_and_others_as_int8(store):
    """The endpoint block (searched whole by every query's stage 1) keeps float32 rows for exact
    cosines, with int8 estimates to find which rows can rank; the component and error blocks become
    int8 codes with a scale per row: a quarter of the memory, cosines within 0.002."""
    from specrag.index.bounded import BoundedRows, Estimate
    from specrag.index.local import QuantizedRows, quantize

    local = store.local
    assert store.vector_search("user not found", None, None, 3)
    endpoints = local._blocks["endpoint"]
    assert isinstance(endpoints, BoundedRows) and endpoints.product is not None
    assert all(isinstance(local._blocks[k], QuantizedRows) for k in ("component", "errors"))
    queries = np.asarray(local.vectors[:2], dtype=np.float32)
    for kind, block in local._blocks.items():
        start, end = local.header.blocks[kind]
        rows = np.asarray(local.vectors[start:end], dtype=np.float32)
        error = np.abs(block.times(queries, 0, block.n_rows) - queries @ rows.T).max()
        assert error <= (1e-6 if kind == "endpoint" else 2e-3), kind
        assert block.times(queries, 1, end - start).shape == (2, end - start - 1)
    estimates = endpoints.estimates(queries)
    assert all(isinstance(e, Estimate) for e in estimates)
    assert all((np.abs(e.approx - endpoints.times(q[None], 0, endpoints.n_rows)[0]) <= e.bound).all()
               for e, q in zip(estimates, queries))
    assert local._blocks["component"].codes.dtype == np.int8
    codes, scales = quantize(np.zeros((2, 4), dtype=np.float16))  # a zero row stays zero, no division by 0
    assert not codes.any() and not scales.any()


def test_a_split_chunk_ranks_once_as_the_chunk_whichever_of_its_parts_matched(settings, embed_model):
    """Parts 2..N of a chunk too big for the token limit carry its search and embed texts, so they
    match as well as the chunk: every search gives the chunk once, at its best place."""
    from specrag.specs.split import split_chunk

    from .fleet import api, endpoint

    report = endpoint("docs", "get", "/reports/{id}", "Download a quarterly sales report", "getReport")
    report = report.model_copy(update={"text": report.text + "".join(f"\nfield{i}: string" for i in range(300)),
                                       "n_tokens": 2000})
    parts = split_chunk(report, 400, lambda text: len(text) // 4 + 1)
    assert len(parts) >= 3 and parts[0].id == report.id and {p.search_text for p in parts} == {report.search_text}
    other = endpoint("docs", "get", "/invoices", "List invoices", "listInvoices")
    store = ChunkStore.open(settings, embed_model=embed_model)
    IndexBuilder(store, settings).build(mini_fleet() + [api("docs", parts + [other])], progress=False)
    try:
        assert set(store.get_chunks([p.id for p in parts])) == {p.id for p in parts}  # the parts are stored
        for search in (store.vector_search, store.lexical_search):
            for hydrate in (False, True):
                hits = search("quarterly sales report", ["docs"], None, 10, hydrate=hydrate)
                assert [h.node.node_id for h in hits][:1] == [report.id]
                assert report.id not in [h.node.node_id for h in hits[1:]] and all(":part" not in h.node.node_id for h in hits)
                assert not hydrate or hits[0].node.text == parts[0].text
        ranked = HybridRetriever(store, top_k=5).retrieve(SpecQuery("quarterly sales report", hydrate=False))
        assert [h.node.node_id for h in ranked].count(report.id) == 1
    finally:
        store.close()


def test_span_candidates_keep_every_row_that_can_reach_the_top_k():
    from specrag.index.bounded import best_rows

    rng = np.random.default_rng(7)
    sims = rng.choice(np.linspace(-1, 1, 9), size=500).astype(np.float32)  # many exact ties
    keep = rng.random(500) < 0.5
    for k, mask in [(1, None), (5, None), (5, keep), (600, keep)]:
        picked = best_rows(sims, k, mask)
        allowed = np.flatnonzero(mask) if mask is not None else np.arange(500)
        assert set(picked) <= set(allowed)
        kth = np.sort(sims[allowed])[::-1][min(k, len(allowed)) - 1]
        assert set(picked) == {int(i) for i in allowed if sims[i] >= kth}  # all ties at the k-th score


def test_vector_products_run_on_one_blas_thread_and_the_callers_setting_is_restored(store, monkeypatch):
    """OpenBLAS threads would fight the embedding model's spinning ONNX threads on the same cores."""
    from threadpoolctl import threadpool_info

    def blas_threads() -> set[int]:
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    local = store.local
    seen = []
    real = type(local)._span_similarities
    monkeypatch.setattr(type(local), "_span_similarities",
                        lambda self, spans, query: seen.append(blas_threads()) or real(self, spans, query))
    before = blas_threads()
    assert store.vector_search("get a user profile", None, None, 3)
    assert seen and all(threads <= {1} for threads in seen)
    assert blas_threads() == before


def test_a_dropped_index_is_freed_without_the_garbage_collector(store, settings, embed_model):
    """Its caches hold it weakly, so its arrays and open files go when the last reader lets go,
    not when the cyclic collector next runs (a test run held over a thousand files that way)."""
    import gc
    import weakref

    from specrag.index.store import ChunkStore

    reopened = ChunkStore.open(settings, embed_model=embed_model)
    local = weakref.ref(reopened.local)
    reopened.vector_search("postal address of a user", None, ["endpoint"], 5)  # fills every cache a query uses
    reopened.get_chunks(reopened.api_chunk_ids("users")[:3])
    gc.disable()
    try:
        reopened.close()
        del reopened
        assert local() is None
    finally:
        gc.enable()


def test_opening_loads_the_model_while_another_thread_reads_the_index(store, settings, embed_model, monkeypatch):
    """The model named in settings ("auto") loads beside the reading and checking of the local
    index; the store is the one a sequential open gives."""
    store.close()
    import specrag.index.store as store_module

    seen = []

    def loading(_settings, deferred=False):
        seen.append(sorted(t.name.split("_")[0] for t in threading.enumerate() if t.name.startswith("specrag-open")))
        return embed_model

    monkeypatch.setattr(store_module, "build_embedder", loading)
    real_reload = ChunkStore.reload

    def slow_reload(self, *args, **kwargs):
        time.sleep(0.3)  # still reading when the model starts to load
        return real_reload(self, *args, **kwargs)

    monkeypatch.setattr(ChunkStore, "reload", slow_reload)
    auto = ChunkStore.open(settings, repair=True)
    given = ChunkStore.open(settings, embed_model=embed_model, repair=True)
    assert seen == [["specrag-open"]]
    assert auto.search_mode == given.search_mode == "hybrid" and auto.embedder is given.embedder is not None
    assert auto.complete_api_ids() == given.complete_api_ids() == {"users", "pets", "weather"}
    assert not auto.damage and not auto.chroma_lost
    assert [h.node.node_id for h in auto.vector_search("list pets", None, None, 3)] == \
        [h.node.node_id for h in given.vector_search("list pets", None, None, 3)]
    auto.close()
    given.close()
