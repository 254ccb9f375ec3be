"""The runner end to end against a fake engine: scores, the error rule, results.json, report.md."""

import json

import pytest
from evalfakes import (
    ADDRESS,
    COUNTRY,
    GET_USER,
    LIST_USERS,
    POST_USERS,
    USER,
    USER_CREATE,
    demo_queries,
    engine_a,
    users_lookup,
)
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
        "plan_order_accuracy": None,  # one gold call
        # context: 6 chunks of 10 tokens, all users_api; POST /users's footprint holds 5 of them (not GET /users);
        # primaries GET /users (2 of its 3 closure chunks present) and POST /users (3 of 4): (2/3 + 3/4) / 2
        "ctx_recall": 1.0, "ctx_all_found": 1.0, "ctx_api_precision": 1.0, "ctx_op_precision": 50 / 60,
        "ctx_completeness": 17 / 24})
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


def test_settings_in_the_run_header_stay_one_flat_map_with_the_key_hidden():
    from specrag.core.settings import Settings

    settings = Settings(_env_file=None, openai_api_key="sk-x", max_depth=2)
    header = run_eval([], engine_a(), users_lookup(), mode="offline", setting="fleet",
                      run_info={"settings": settings}, progress=False).run.settings
    assert sorted(header) == sorted(Settings.flat_fields())  # the report reads flat names (max_primary_results...)
    assert header["openai_api_key"] == "***" and header["max_depth"] == 2 and header["data_dir"] == ".specrag"


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


# ---- the context: the engine's and the baselines', through the engine's reference expansion ---------------


class FixedBaseline:
    name = "fixed"

    def __init__(self, rankings: dict[str, list[str]]):
        self.rankings = rankings

    def rank(self, query: str, gold_apis: list[str], depth: int = 10) -> list[str]:
        return self.rankings[query][:depth]


def _ten_token_lookup():
    """The users API with 10 tokens a chunk and no compact forms: contexts whose shares are worked out by hand."""
    from evalfakes import DictLookup

    return DictLookup([c.model_copy(update={"n_tokens": 10}) for c in users_lookup().chunks.values()])


def _assembler(lookup, max_primary=2):
    from specrag.evals.baselines import ContextAssembler
    from specrag.stages.ref_expand import ReferenceExpander

    return ContextAssembler(ReferenceExpander(lookup, max_depth=3, max_total_chunks=15, token_limit=4000), max_primary)


BASELINE = FixedBaseline({"create user": [LIST_USERS, POST_USERS, GET_USER], "broken": [POST_USERS],
                          "get user": [LIST_USERS]})


@pytest.fixture
def run_with_baseline() -> EvalRun:
    lookup = _ten_token_lookup()
    return run_eval(demo_queries(), engine_a(), lookup, mode="offline", setting="fleet", run_info={}, progress=False,
                    baselines=[BASELINE], contexts=_assembler(lookup))


def test_engine_context_scores_and_token_shares(run):
    q1, q2, q3 = run.queries
    assert sum(q1.context_chunk_tokens) == q1.context_tokens == 60 and q1.n_primary == 4
    # q3: gold /users/{id} is GET /users/{userId}; the context is it and its whole closure, all its footprint
    assert (q3.metrics.ctx_recall, q3.metrics.ctx_op_precision, q3.metrics.ctx_completeness) == (1.0, 1.0, 1.0)
    assert all(getattr(q2.metrics, k) == 0.0 for k in
                                         ("ctx_recall", "ctx_all_found", "ctx_api_precision", "ctx_op_precision",
                                          "ctx_completeness"))  # an erroring query scores 0 on the context too
    overall = run.metrics.overall
    assert overall.scores["ctx_recall"] == pytest.approx(2 / 3)
    assert overall.scores["ctx_op_precision"] == pytest.approx((50 / 60 + 0 + 1) / 3)
    assert overall.scores["ctx_completeness"] == pytest.approx((17 / 24 + 0 + 1) / 3) and overall.delivered_n == 3


def test_baseline_context_is_its_top_hits_through_the_reference_expansion(run_with_baseline):
    q1, q2, q3 = (q.baselines["fixed"] for q in run_with_baseline.queries)
    # create user: the first 2 hits, GET /users (closure User, Address, Country) then POST /users (UserCreate: the
    # rest of its closure came with the first hit); GET /users/{userId}, third, is past the primary cap
    assert q1.context_ids == [LIST_USERS, POST_USERS, USER, ADDRESS, COUNTRY, USER_CREATE] and q1.n_primary == 2
    assert q1.context_tokens == sum(q1.context_chunk_tokens) == 60
    assert q1.model_dump(include={"ctx_recall", "ctx_all_found", "ctx_api_precision", "ctx_op_precision",
                                  "ctx_completeness"}) == pytest.approx(
        {"ctx_recall": 1.0, "ctx_all_found": 1.0, "ctx_api_precision": 1.0, "ctx_op_precision": 50 / 60,
         "ctx_completeness": 1.0})
    assert (q1.recall_at_10, q1.mrr) == (1.0, 0.5)  # its ranking is scored as before
    # the engine failed on 'broken'; the baseline did not: POST /users and its closure, all footprint
    assert (q2.ctx_recall, q2.ctx_op_precision, q2.context_tokens) == (1.0, 1.0, 50)
    # get user: GET /users is not the gold operation; its tokens are all of the gold API but none of the gold op
    assert (q3.ctx_recall, q3.ctx_api_precision, q3.ctx_op_precision, q3.ctx_completeness) == (0.0, 1.0, 0.0, 1.0)


def test_summary_has_baseline_context_means_and_p_values(run_with_baseline):
    overall = run_with_baseline.metrics.overall
    fixed = overall.baselines["fixed"]
    assert fixed["ctx_recall"] == pytest.approx(2 / 3) and fixed["context_tokens"] == pytest.approx(50)
    assert fixed["ctx_op_precision"] == pytest.approx((50 / 60 + 1 + 0) / 3)
    p = overall.baseline_p["fixed"]
    assert set(p) == set(fixed)
    # R@ctx per question: engine (1, 0, 1), baseline (1, 1, 0): changes (0, -1, +1), mean 0: p = 1
    assert p["ctx_recall"] == 1.0
    assert 0 < p["context_tokens"] <= 1


def test_report_puts_the_context_first_with_the_baseline_delta_and_p(run_with_baseline, tmp_path):
    write_run(run_with_baseline, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert report.index("## Context") < report.index("## Retrieval") < report.index("## Against the baselines")
    overall = report.split("### overall")[1].split("###")[0]
    assert "| metric | engine | fixed | delta | p |" in overall
    assert "| R@ctx | 0.667 | 0.667 | +0.000 | 1.000 |" in overall
    assert "| tokens | 33 | 50 | -17 |" in overall  # engine (60, 0, 40), baseline (60, 50, 40)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema_version"] == 2
    assert data["metrics"]["overall"]["baseline_p"]["fixed"]["ctx_recall"] == 1.0
    assert data["queries"][0]["baselines"]["fixed"]["context_ids"][:2] == [LIST_USERS, POST_USERS]
    assert EvalRun.model_validate(data) == run_with_baseline


def test_without_an_assembler_baselines_have_no_context(tmp_path):
    run = run_eval(demo_queries(), engine_a(), users_lookup(), mode="offline", setting="fleet", run_info={},
                   progress=False, baselines=[BASELINE])
    scores = run.queries[0].baselines["fixed"]
    assert scores.ctx_recall is None and scores.context_tokens is None and scores.context_ids == []
    assert run.metrics.overall.baselines["fixed"]["ctx_recall"] is None
    assert run.metrics.overall.baseline_p["fixed"]["ctx_recall"] is None  # no pairs
    assert run.metrics.overall.baselines["fixed"]["recall_at_10"] is not None
    write_run(run, tmp_path)
    assert "| metric | engine |" in (tmp_path / "report.md").read_text()  # the engine's context alone
