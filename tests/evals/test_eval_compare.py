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
    # MRR: A = (0.5 + 0 + 1) / 3, B = (1 + 0 + 0) / 3
    assert _line(text, "overall", "MRR")[1:] == ["0.500", "0.333", "-0.167"]
    assert _line(text, "overall", "R@10")[1:] == ["0.667", "0.333", "-0.333"]
    assert _line(text, "demo", "MRR")[1:] == ["0.250", "0.500", "+0.250"]
    assert _line(text, "more", "R@10")[1:] == ["1.000", "0.000", "-1.000"]
    assert _line(text, "overall", "errors")[1:] == ["1.000", "1.000", "+0.000"]
    # B found no gold endpoint for the one 'more' query: completeness has no value there, so no delta
    assert _line(text, "more", "complete")[1:] == ["1.000", "-", "-"]


def test_better_and_worse_queries(run_dirs):
    text = compare_runs(*run_dirs)
    better = text.split("better (")[1].split("worse (")[0]
    worse = text.split("worse (")[1].split("mixed (")[0]
    assert better.startswith("1):") and "demo/q1: MRR 0.50->1.00, complete 0.75->1.00" in better
    assert worse.startswith("1):") and "more/q3: R@10 1.00->0.00, MRR 1.00->0.00" in worse
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
    assert query_deltas(q3a, q3b) == {"recall_at_10": -1.0, "mrr": -1.0}
