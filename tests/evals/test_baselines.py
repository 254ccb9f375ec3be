"""The baselines the eval runs beside the pipeline, on the real demo index: the flat per-operation
hybrid baseline (its vectors cached once), the chunk baseline and the oracle BM25."""

from __future__ import annotations

import pytest
from specrag.evals.baselines import (
    ChunkFlatBaseline,
    FlatBaseline,
    OracleBm25Baseline,
    operation_document,
)
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


@pytest.mark.needs_embeddings
def test_flat_baseline_context_is_its_top_operations_through_the_engines_expansion(demo_index, demo_engine, tmp_path):
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from specrag.evals.baselines import ContextAssembler

    _, store = demo_index
    question = "How do I create a user?"
    ranking = FlatBaseline.build(store, tmp_path).rank(question, [])
    assembler = ContextAssembler.from_engine(demo_engine)
    cap = demo_engine.settings.context_primaries
    assert assembler.expander is demo_engine.references and assembler.max_primary == cap
    ctx = assembler.assemble(question, ranking)
    primaries = [c.id for c in ctx.primary_chunks]
    # the first hit is always kept; the others in rank order, within the cap (closure-first may leave some out)
    assert primaries[0] == CREATE_USER and primaries == [i for i in ranking[:cap] if i in primaries]
    assert ctx.referenced_chunks and all(c.depth >= 1 for c in ctx.referenced_chunks)
    assert ctx.total_tokens == sum(c.n_tokens for c in ctx.chunks)
    # the rest of its ranked operations as signatures, in rank order (the demo's budget fits them all)
    shown = {c.id for c in (*ctx.primary_chunks, *ctx.referenced_chunks)}
    assert [c.id for c in ctx.signature_chunks] == [i for i in ranking[:10] if i not in shown and ":paths/" in i
                                                     and not i.endswith(":errors")]
    # what the engine's own path makes of the same hits: stubs hydrated by the store, then its postprocess_nodes
    stubs = [NodeWithScore(node=TextNode(id_=i, text=""), score=None) for i in ranking[:cap]]
    nodes = demo_engine.references.postprocess_nodes(store.hydrate(stubs), query_bundle=QueryBundle(question))
    direct = nodes.expansion
    assert [c.id for c in direct.primary] == primaries
    assert [c.id for c in direct.referenced] == [c.id for c in ctx.referenced_chunks]
    assert direct.total_tokens == ctx.total_tokens - sum(c.n_tokens for c in ctx.signature_chunks)

    query = EvalQuery(id="q", query=question, apis=["users_api"],
                      endpoints=[{"api": "users_api", "method": "POST", "path": "/users"}])
    scores = baseline_scores(ranking, query, assembler)
    assert scores.context_ids == [c.id for c in ctx.chunks] and scores.n_primary == len(primaries)
    assert sum(scores.context_chunk_tokens) == scores.context_tokens == ctx.total_tokens
    assert (scores.ctx_recall, scores.ctx_all_found) == (1.0, 1.0)
    # the gold operation's footprint lies in its own API: its share can be no larger than the API's
    assert 0 < scores.ctx_op_precision <= scores.ctx_api_precision <= 1
    assert scores.ctx_completeness is not None and 0 < scores.ctx_completeness <= 1


@pytest.mark.needs_embeddings
def test_demo_set_run_reports_the_flat_context_beside_the_engines(demo_index, demo_engine, tmp_path):
    from pathlib import Path

    from specrag.evals.baselines import ContextAssembler
    from specrag.evals.querysets import load_query_sets
    from specrag.evals.runner import run_eval, write_run

    _, store = demo_index
    queries = load_query_sets([Path(__file__).resolve().parents[2] / "evals" / "sets" / "demo.jsonl"])
    run = run_eval(queries, demo_engine, store, mode="offline", setting="fleet", run_info={}, progress=False,
                   baselines=[FlatBaseline.build(store, tmp_path / "b")],
                   contexts=ContextAssembler.from_engine(demo_engine))
    overall = run.metrics.overall
    for key in ("ctx_recall", "ctx_all_found", "ctx_api_precision", "ctx_op_precision", "context_tokens"):
        assert overall.scores.get(key, overall.mean_context_tokens) is not None
        assert overall.baselines["flat"][key] is not None and 0 < overall.baseline_p["flat"][key] <= 1
    for q in run.queries:
        flat = q.baselines["flat"]
        assert flat.context_tokens == sum(flat.context_chunk_tokens) and q.context_tokens == sum(q.context_chunk_tokens)
        assert flat.n_primary <= demo_engine.settings.retrieval.max_primary_results
    write_run(run, tmp_path / "run")
    assert "| metric | engine | flat | delta | p |" in (tmp_path / "run" / "report.md").read_text()
