"""compare_runs: metric deltas overall and per set, and the queries that got better or worse."""

import pytest
from evalfakes import demo_queries, engine_a, engine_b, users_lookup
from specrag.evals.compare import compare_runs, query_deltas
from specrag.evals.runner import run_eval, write_run


@pytest.fixture
def run_dirs(tmp_path):
    for name, engine in (("a", engine_a()), ("b", engine_b())):
        run = run_eval(demo_queries(), engine, users_lookup(), mode="offline", setting="fleet", run_info={},
                       progress=False)
        write_run(run, tmp_path / name)
    return tmp_path / "a", tmp_path / "b"


def _line(text: str, section: str, label: str) -> list[str]:
    block = text.split(f"== {section} ")[1].split("\n\n")[0]
    return next(line.split() for line in block.splitlines() if line.strip().startswith(label + " "))


def test_metric_deltas_overall_and_per_set(run_dirs):
    text = compare_runs(*run_dirs)
    # the last column is the paired p-value: per-question MRR changes (+0.5, 0, -1) give |mean| 1/6, and
    # every sign flip of them has |mean| >= 1/6 (0.5/3 or 1.5/3), so p = 1
    assert _line(text, "overall", "MRR")[1:] == ["0.500", "0.333", "-0.167", "1.000"]
    assert _line(text, "overall", "R@10")[1:] == ["0.667", "0.333", "-0.333", "1.000"]
    assert _line(text, "demo", "MRR")[1:] == ["0.250", "0.500", "+0.250", "1.000"]
    assert _line(text, "more", "R@10")[1:] == ["1.000", "0.000", "-1.000", "1.000"]
    assert _line(text, "overall", "errors")[1:] == ["1.000", "1.000", "+0.000", "-"]  # no per-question test
    # B found no gold endpoint for the one 'more' query: completeness has no value there, so no delta and no pair
    assert _line(text, "more", "complete")[1:] == ["1.000", "-", "-", "-"]


def test_context_metrics_come_first_with_p_values(run_dirs):
    text = compare_runs(*run_dirs)
    # R@ctx per question: A (1, 0, 1), B (1, 0, 0); prec op: A (5/6, 0, 1), B (5/6, 0, 0)
    assert _line(text, "overall", "R@ctx")[1:] == ["0.667", "0.333", "-0.333", "1.000"]
    assert _line(text, "overall", "prec")[1:] == ["API", "0.667", "0.667", "+0.000", "1.000"]
    assert _line(text, "overall", "tokens")[1:] == ["33.333", "26.667", "-6.667", "1.000"]  # (60, 0, 40) -> (60, 0, 20)
    block = text.split("== overall ")[1].split("\n\n")[0]
    labels = [line.split()[0] for line in block.splitlines()[2:]]
    assert labels[:6] == ["R@ctx", "all@ctx", "prec", "prec", "tokens", "complete@ctx"]
    assert labels.index("complete@ctx") < labels.index("R@10")
    assert "paired randomization" in text and "schema_version" not in text  # both runs have context metrics


def test_compare_json_carries_p_values(run_dirs):
    from specrag.evals.compare import compare

    c = compare(*run_dirs)
    overall = {m.metric: m for m in c.sets[0].metrics}
    assert (overall["R@ctx"].p, overall["R@ctx"].n_pairs) == (1.0, 3)
    assert overall["errors"].p is None
    assert overall["complete"].n_pairs == 2  # q1, and q2 that errors (0 in both); q3 has no completeness in B
    assert c.notes == [] and (c.a.schema_version, c.b.schema_version) == (2, 2)


def test_compare_reads_a_results_file_from_before_the_context_metrics(tmp_path, run_dirs):
    """A schema 1 file (no schema_version field, no context metrics) still reads; compare says what it lacks."""
    import json

    a_dir, b_dir = run_dirs
    old = json.loads((a_dir / "results.json").read_text())
    del old["schema_version"]
    context = ("ctx_recall", "ctx_all_found", "ctx_api_precision", "ctx_op_precision", "ctx_completeness")
    for summary in [old["metrics"]["overall"], *old["metrics"]["per_set"].values()]:
        for key in context:
            summary["scores"].pop(key)
        for key in ("delivered_n", "baseline_p"):
            summary.pop(key)
    for q in old["queries"]:
        for key in context:
            q["metrics"].pop(key)
        q.pop("context_chunk_tokens"), q.pop("n_primary")
    (tmp_path / "old.json").write_text(json.dumps(old))
    text = compare_runs(tmp_path / "old.json", b_dir)
    assert "note: A (" in text and "schema_version 1 run, from before the context metrics" in text
    assert _line(text, "overall", "R@ctx")[1:] == ["-", "0.333", "-", "-"]
    assert _line(text, "overall", "MRR")[1:] == ["0.500", "0.333", "-0.167", "1.000"]  # the ranking still compares
    assert _line(text, "overall", "tokens")[1:] == ["33.333", "26.667", "-6.667", "1.000"]


def test_compare_refuses_a_newer_results_file(tmp_path, run_dirs):
    import json

    from specrag.evals.report import RunFileError

    a_dir, b_dir = run_dirs
    newer = json.loads((a_dir / "results.json").read_text()) | {"schema_version": 99}
    (tmp_path / "new.json").write_text(json.dumps(newer))
    with pytest.raises(RunFileError, match="schema_version 99; this specrag reads up to 2"):
        compare_runs(tmp_path / "new.json", b_dir)


def test_better_and_worse_queries(run_dirs):
    text = compare_runs(*run_dirs)
    better = text.split("better (")[1].split("worse (")[0]
    worse = text.split("worse (")[1].split("mixed (")[0]
    assert better.startswith("1):") and "demo/q1: MRR 0.50->1.00, complete 0.75->1.00" in better
    assert worse.startswith("1):") and "more/q3: R@ctx 1.00->0.00, R@10 1.00->0.00, MRR 1.00->0.00" in worse
    assert "q2" not in better + worse  # errored in both runs: nothing moved
    assert "mixed (0):" in text


def test_results_json_path_works_and_queries_only_in_one_run(tmp_path, run_dirs):
    a_dir, _ = run_dirs
    run = run_eval(demo_queries()[:1], engine_b(), users_lookup(), mode="llm", setting="oracle", run_info={},
                   progress=False)
    write_run(run, tmp_path / "c")
    text = compare_runs(a_dir / "results.json", tmp_path / "c" / "results.json")
    assert "only in A: demo/q2, more/q3" in text
    assert "differ in mode or setting" in text
    assert "== more" not in text


def test_query_deltas_skip_missing_completeness(run_dirs):
    from specrag.evals.report import load_run

    a, b = (load_run(d) for d in run_dirs)
    q3a, q3b = a.queries[2], b.queries[2]
    assert q3b.metrics.completeness is None  # no gold endpoint in B's context
    assert query_deltas(q3a, q3b) == {"ctx_recall": -1.0, "recall_at_10": -1.0, "mrr": -1.0}
