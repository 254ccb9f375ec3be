"""The baselines the eval runs beside the pipeline, on the real demo index: the flat per-operation
hybrid baseline (its vectors cached once), the chunk baseline and the oracle BM25."""

from __future__ import annotations

import pytest

from specrag.evals.baselines import ChunkFlatBaseline, FlatBaseline, OracleBm25Baseline, operation_document
from specrag.evals.querysets import EvalQuery
from specrag.evals.runner import baseline_scores

CREATE_USER = "users_api:paths/~1users/post"


@pytest.mark.needs_embeddings
def test_flat_baseline_ranks_operations_fleet_wide_and_caches_its_vectors(demo_index, tmp_path):
    _, store = demo_index
    flat = FlatBaseline.build(store, tmp_path)
    ranking = flat.rank("How do I create a user?", ["petstore_v2"])  # the gold APIs are not used
    assert ranking[0] == CREATE_USER
    assert all(":paths/" in i and not i.endswith(":errors") for i in ranking)
    assert {i.split(":")[0] for i in ranking} == {"users_api", "petstore_v2"}
    cached = list(tmp_path.glob("flat-*.npy"))
    assert len(cached) == 1
    assert FlatBaseline.build(store, tmp_path).rank("How do I create a user?", []) == ranking


def test_operation_document_has_method_path_summary_and_parameter_names(demo_index):
    _, store = demo_index
    chunk = store.get_chunks(["users_api:paths/~1users~1{userId}/get"])["users_api:paths/~1users~1{userId}/get"]
    doc = operation_document(chunk)
    assert doc.startswith("GET /users/{userId}") and "userId" in doc and "getUser" in doc


def test_oracle_bm25_stays_in_the_gold_api_and_scores_like_the_pipeline(demo_index):
    _, store = demo_index
    ranking = OracleBm25Baseline(store).rank("create a user", ["users_api"])
    assert ranking and {i.split(":")[0] for i in ranking} == {"users_api"}
    query = EvalQuery(id="q", query="create a user", apis=["users_api"],
                      endpoints=[{"api": "users_api", "method": "POST", "path": "/users"}])
    scores = baseline_scores(ranking, query)
    assert scores.recall_at_10 == 1.0 and scores.mrr == 1.0
    chunk_flat = ChunkFlatBaseline(store).rank("create a user", [])
    assert CREATE_USER in chunk_flat[:3]
