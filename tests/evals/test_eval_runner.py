"""The runner end to end against a fake engine: scores, the error rule, results.json, report.md."""

import json

import pytest
from evalfakes import ADDRESS, GET_USER, POST_USERS, USER, demo_queries, engine_a, users_lookup

from specrag.evals.runner import EvalRun, run_eval, write_run

REQUIRED_QUERY_FIELDS = {"id", "set", "query", "gold", "selected_apis", "retrieved", "context_ids", "context_tokens",
                         "latency_ms", "fallbacks", "llm", "metrics", "error"}


@pytest.fixture
def run() -> EvalRun:
    return run_eval(demo_queries(), engine_a(), users_lookup(), mode="offline", setting="fleet",
                    run_info={"corpus": ["examples/specs"], "settings": {"openai_api_key": "sk-x", "max_depth": 3},
                              "prompts_dir": "prompts", "label": "baseline"}, progress=False)


def test_per_query_scores(run):
    q1, q2, q3 = run.queries
    # q1: endpoint ranking [GET /users, POST /users]; closure of POST /users = UserCreate, User, Address, Country
    assert q1.metrics.model_dump() == pytest.approx({
        "selection_accuracy": 1.0, "selection_precision": 0.5, "recall_at_5": 1.0, "recall_at_10": 1.0,
        "all_found_at_10": 1.0, "mrr": 0.5, "ndcg_at_10": 0.6309297535714575, "completeness": 0.75,
        "closure_complete": 0.0, "hidden_recovery_at_10": None, "plan_pair_accuracy": None,
        "plan_order_accuracy": None})  # one gold call
    # q3: gold written as /users/{id} matches GET /users/{userId}; its closure (User, Address, Country) is complete
    assert (q3.metrics.mrr, q3.metrics.completeness, q3.metrics.closure_complete) == (1.0, 1.0, 1.0)
    assert q3.llm.model_dump() == {"calls": 1, "prompt_tokens": 100, "completion_tokens": 20}  # cached call free
    assert q1.retrieved[0].model_dump() == {"id": q1.retrieved[0].id, "api": "users_api", "type": "endpoint",
                                            "method": "GET", "path": "/users"}
    assert [r.type for r in q1.retrieved] == ["endpoint", "component", "endpoint", "errors"]
    assert q1.context_ids[-2:] == [USER, ADDRESS] and q3.context_ids[0] == GET_USER
    assert q1.latency_ms["search"] == 10 and q1.latency_ms["total"] == 17


def test_erroring_query_is_kept_and_scores_zero(run):
    q2 = run.queries[1]
    assert q2.error == "RuntimeError: index gone"
    single_call = {"hidden_recovery_at_10", "plan_pair_accuracy", "plan_order_accuracy"}  # undefined for one gold call, not 0
    assert all(v == 0.0 for k, v in q2.metrics.model_dump().items() if k not in single_call)
    assert all(getattr(q2.metrics, k) is None for k in single_call)
    assert q2.retrieved == [] and q2.context_tokens == 0 and "total" in q2.latency_ms


def test_summary_overall_and_per_set(run):
    overall = run.metrics.overall
    assert (overall.n_queries, overall.n_errors) == (3, 1)
    assert overall.scores["recall_at_10"] == pytest.approx(2 / 3)
    assert overall.scores["mrr"] == pytest.approx(0.5)
    assert overall.scores["completeness"] == pytest.approx((0.75 + 0 + 1) / 3)
    assert overall.mean_context_tokens == pytest.approx((60 + 0 + 40) / 3)
    assert overall.fallback_rate == pytest.approx(1 / 3)  # no_llm does not count
    assert overall.fallback_counts == {"expand/no_llm": 1, "expand/timeout": 1, "select/no_llm": 1}
    assert overall.latency_ms["search"].p50 == 15 and overall.latency_ms["search"].n == 2
    assert overall.latency_ms["total"].p50 == 23.5 and overall.latency_ms["total"].n == 2  # error left out
    assert overall.llm_calls_per_query == pytest.approx(1 / 3)
    assert {k: v.n_queries for k, v in run.metrics.per_set.items()} == {"demo": 2, "more": 1}
    assert run.metrics.per_set["demo"].scores["recall_at_10"] == 0.5


def test_oracle_passes_gold_apis_and_fleet_does_not():
    queries = demo_queries()[:1]
    for setting, expected in (("oracle", ["users_api"]), ("fleet", None)):
        engine = engine_a()
        run_eval(queries, engine, users_lookup(), mode="llm", setting=setting, run_info={}, progress=False)
        assert engine.calls == [("create user", expected)]


def test_unknown_mode_or_setting_is_a_clear_error():
    with pytest.raises(ValueError, match="use one of: fleet, oracle"):
        run_eval([], engine_a(), users_lookup(), mode="offline", setting="everything", run_info={})
    with pytest.raises(ValueError, match="use one of: offline, llm"):
        run_eval([], engine_a(), users_lookup(), mode="fast", setting="fleet", run_info={})


def test_write_run_results_json_and_report(run, tmp_path):
    write_run(run, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert {"run", "metrics", "queries"} <= set(data)
    header = data["run"]
    assert (header["mode"], header["setting"], header["sets"]) == ("offline", "fleet", ["demo", "more"])
    assert header["corpus"] == ["examples/specs"] and header["prompts"] == ["expand@def", "select@abc"]
    assert header["settings"] == {"openai_api_key": "***", "max_depth": 3}
    assert header["extra"] == {"label": "baseline"} and "llama-index-core" in header["versions"]
    assert header["timestamp"]
    for q in data["queries"]:
        assert REQUIRED_QUERY_FIELDS <= set(q)
        assert set(q["gold"]) == {"apis", "endpoints"}
        assert all(set(r) == {"id", "api", "type", "method", "path"} for r in q["retrieved"])
    assert data["queries"][1]["error"] == "RuntimeError: index gone"
    assert EvalRun.model_validate(data) == run  # round-trips for compare and other tools

    report = (tmp_path / "out" / "report.md").read_text()
    assert "| overall | 3 | 1 | 0.667 | 0.500 | 0.667 | 0.667 | 0.667 | 0.500 |" in report and "| demo | 2 | 1 |" in report
    assert "## Failed queries (1 of 3)" in report
    assert "demo/q2" in report and "error: RuntimeError: index gone" in report
    assert "expand/timeout: 1" in report
    assert POST_USERS not in report.split("## Failed")[1] and USER not in report.split("## Failed")[1]
