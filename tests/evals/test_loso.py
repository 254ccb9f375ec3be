"""Leave-one-set-out: the grid runs on the real demo index, and the table reports each set's
choice on the other sets."""

from __future__ import annotations

from pathlib import Path

from specrag.evals.loso import GridPoint, PointResult, loso_table, run_grid

DEMO_SET = Path(__file__).resolve().parents[2] / "evals" / "sets" / "demo.jsonl"


def test_each_sets_best_point_is_reported_on_the_other_set():
    results = [PointResult(name="a", settings={"x": 1}, scores={"overall": {"recall_at_10": 0.5},
                                                              "s1": {"recall_at_10": 0.9}, "s2": {"recall_at_10": 0.2}}),
               PointResult(name="b", settings={"x": 2}, scores={"overall": {"recall_at_10": 0.6},
                                                              "s1": {"recall_at_10": 0.4}, "s2": {"recall_at_10": 0.8}})]
    table = loso_table(results).splitlines()
    assert table[2] == "| s1 | a | 0.900 (chosen here) | 0.200 (held out) |"
    assert table[3] == "| s2 | b | 0.400 (held out) | 0.800 (chosen here) |"


def test_grid_points_override_settings_on_one_index(demo_index):
    settings, store = demo_index
    grid = [GridPoint(name="soft", settings={"fleet_weight": 0.5}),
            GridPoint(name="no query analysis", settings={"enable_query_analysis": False})]
    results = run_grid(grid, [DEMO_SET], settings, store)
    assert [r.name for r in results] == ["soft", "no query analysis"]
    assert all(0.0 <= r.scores["overall"]["recall_at_10"] <= 1.0 for r in results)
    assert results[0].scores["overall"]["recall_at_10"] > 0.5
