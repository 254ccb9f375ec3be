"""Diff two runs: metric deltas (overall and per set) and the queries that moved.

The prompt-iteration loop: run, change a prompt, run again, ``specrag eval compare A B``.
A query is *better* when Recall@10, MRR or completeness rose and none fell, *worse* when one
fell and none rose, and *mixed* otherwise; completeness is compared only where both runs have it.
"""

from __future__ import annotations

from pathlib import Path

from evals.metrics import MetricSummary
from evals.report import SCORE_COLUMNS, EvalRun, QueryResult, load_run

QUERY_METRICS = {"recall_at_10": "R@10", "mrr": "MRR", "completeness": "complete"}
_EPS = 1e-9


def compare_runs(run_a: Path, run_b: Path) -> str:
    """Human-readable deltas from run A (baseline) to run B; paths are run folders or results.json."""
    a, b = load_run(run_a), load_run(run_b)
    lines = [f"A: {run_a} ({_describe(a)})", f"B: {run_b} ({_describe(b)})"]
    if (a.run.mode, a.run.setting) != (b.run.mode, b.run.setting):
        lines.append("note: the runs differ in mode or setting; deltas mix both effects")
    lines.append("")
    summaries_b = dict(b.rows())
    for name, summ_a in a.rows():
        if name in summaries_b:
            lines += _summary_delta(name, summ_a, summaries_b[name])
    lines += _query_moves(a, b)
    return "\n".join(lines) + "\n"


def _describe(run: EvalRun) -> str:
    return f"{run.run.setting}/{run.run.mode}, {len(run.queries)} queries, {run.run.timestamp}"


def _summary_values(s: MetricSummary) -> dict[str, float | None]:
    values = {label: s.scores.get(key) for key, label in SCORE_COLUMNS.items()}
    values.update({"ctx tokens": s.mean_context_tokens, "LLM calls/q": s.llm_calls_per_query,
                   "fallback rate": s.fallback_rate, "errors": float(s.n_errors)})
    if "total" in s.latency_ms:
        values["total ms p50"] = s.latency_ms["total"].p50
    return values


def _summary_delta(name: str, a: MetricSummary, b: MetricSummary) -> list[str]:
    va, vb = _summary_values(a), _summary_values(b)
    lines = [f"== {name} (n {a.n_queries} -> {b.n_queries})", f"  {'metric':<14}{'A':>10}{'B':>10}{'delta':>10}"]
    for label in (label for label in va if label in vb):
        x, y = va[label], vb[label]
        delta = f"{y - x:>+10.3f}" if x is not None and y is not None else f"{'-':>10}"
        lines.append(f"  {label:<14}{_num(x):>10}{_num(y):>10}{delta}")
    return [*lines, ""]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def query_deltas(a: QueryResult, b: QueryResult) -> dict[str, float]:
    """Per-metric change B - A for the query metrics compare tracks (None values skipped)."""
    deltas = {}
    for key in QUERY_METRICS:
        va, vb = getattr(a.metrics, key), getattr(b.metrics, key)
        if va is not None and vb is not None and abs(vb - va) > _EPS:
            deltas[key] = vb - va
    return deltas


def _query_moves(a: EvalRun, b: EvalRun) -> list[str]:
    by_key_b = {(q.set, q.id): q for q in b.queries}
    keys_a = {(q.set, q.id) for q in a.queries}
    groups: dict[str, list[str]] = {"better": [], "worse": [], "mixed": []}
    for qa in a.queries:
        qb = by_key_b.get((qa.set, qa.id))
        deltas = query_deltas(qa, qb) if qb else {}
        if not deltas:
            continue
        rose, fell = any(d > 0 for d in deltas.values()), any(d < 0 for d in deltas.values())
        group = "mixed" if rose and fell else "better" if rose else "worse"
        groups[group].append(f"  {qa.set}/{qa.id}: {_format_deltas(qa, qb, deltas)}  -- {qa.query}")
    lines = []
    for group, entries in groups.items():
        lines += [f"{group} ({len(entries)}):", *entries]
    only_a = sorted(f"{s}/{i}" for s, i in keys_a - set(by_key_b))
    only_b = sorted(f"{s}/{i}" for s, i in set(by_key_b) - keys_a)
    lines += [f"only in A: {', '.join(only_a)}"] if only_a else []
    lines += [f"only in B: {', '.join(only_b)}"] if only_b else []
    return lines


def _format_deltas(a: QueryResult, b: QueryResult, deltas: dict[str, float]) -> str:
    return ", ".join(f"{QUERY_METRICS[k]} {getattr(a.metrics, k):.2f}->{getattr(b.metrics, k):.2f}" for k in deltas)
