"""`eval --mode llm` end to end: the real engine and the real OpenAI client over HTTP against the
scripted server; LLM calls, tokens and the fallback rate land next to the retrieval metrics."""

from __future__ import annotations

import json
from pathlib import Path

from specrag.evals.querysets import load_query_sets
from specrag.evals.runner import run_eval, write_run

from .openai_server import Reply, answer

DEMO_SET = Path(__file__).resolve().parents[2] / "evals" / "sets" / "demo.jsonl"


def test_llm_mode_reports_calls_tokens_and_no_fallbacks(llm_engine, server, tmp_path):
    queries = load_query_sets([DEMO_SET])
    replies = []
    for q in queries:  # stage 1 then stage 2, per query, in order
        replies.append(answer({"selected_apis": q.apis, "reasoning": "the domain matches"},
                              prompt_tokens=300, completion_tokens=20))
        replies.append(answer({"expanded_query": q.query, "original_terms": [], "added_terms": []},
                              prompt_tokens=200, completion_tokens=10))
    server.script(*replies)
    engine = llm_engine()
    run = run_eval(queries, engine, engine.lookup, mode="llm", setting="fleet", progress=False,
                   run_info={"corpus": ["examples/specs"], "sets": [str(DEMO_SET)]})
    write_run(run, tmp_path)
    overall = run.metrics.overall
    assert len(server.requests) == 2 * len(queries)
    assert overall.scores["selection_accuracy"] == 1.0
    assert overall.fallback_rate == 0.0
    assert overall.llm_calls_per_query == 2.0
    assert overall.prompt_tokens_per_query == 500.0 and overall.completion_tokens_per_query == 30.0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["run"]["mode"] == "llm"
    assert any(p.startswith("select_apis@") for p in results["run"]["prompts"])
    assert all(q["llm"]["calls"] == 2 for q in results["queries"])
    assert "LLM" in (tmp_path / "report.md").read_text()


def test_llm_mode_falls_back_to_keywords_when_the_server_fails(llm_engine, server):
    queries = load_query_sets([DEMO_SET])[:3]
    server.script(default=Reply(status=500, content="down"))
    engine = llm_engine()
    run = run_eval(queries, engine, engine.lookup, mode="llm", setting="fleet", progress=False, run_info={})
    overall = run.metrics.overall
    assert overall.fallback_rate == 1.0
    assert overall.scores["selection_accuracy"] == 1.0  # the keyword fallback still finds the API
    reasons = {(f.stage, f.reason) for q in run.queries for f in q.fallbacks}
    assert reasons == {("select", "server_error"), ("expand", "server_error")}
    assert all(q.error is None for q in run.queries)
