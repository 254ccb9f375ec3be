"""Diff two runs: metric deltas (overall and per set) and the queries that moved.

The prompt-iteration loop: run, change a prompt, run again, ``specrag eval compare A B``.
The context metrics come first, then the ranking's. Every per-question metric carries the p-value
of a two-sided paired randomization test (:func:`specrag.evals.metrics.paired_randomization_p`)
over the questions both runs hold (in that set), pairs where either side has no value left out.
A query is *better* when R@ctx, Recall@10, MRR or completeness rose and none fell, *worse* when one
fell and none rose, and *mixed* otherwise; a metric is compared only where both runs have it.
Results files of either schema version read; a run from before the context metrics (version 1)
has none, and the comparison says so (its context metrics show ``-``).
:func:`compare` returns the typed comparison (``eval compare --json``), :func:`compare_runs`
its text.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field
from specrag.evals.metrics import (
    MetricSummary,
    paired_randomization_p,
    paired_values,
    query_value,
)
from specrag.evals.report import (
    CONTEXT_COLUMNS,
    CONTEXT_SCHEMA_VERSION,
    RESULTS_SCHEMA_VERSION,
    SCORE_COLUMNS,
    EvalRun,
    QueryResult,
    format_p,
    load_run,
)

QUERY_METRICS = {"ctx_recall": "R@ctx", "recall_at_10": "R@10", "mrr": "MRR", "completeness": "complete"}
PAIRED_COLUMNS = {**CONTEXT_COLUMNS, **SCORE_COLUMNS}  # label -> per-question values, so a p-value
MOVES = ("better", "worse", "mixed")
_EPS = 1e-9


class RunSide(BaseModel):
    path: str
    setting: str
    mode: str
    queries: int
    timestamp: str
    schema_version: int = 1


class MetricDelta(BaseModel):
    metric: str
    a: float | None
    b: float | None
    delta: float | None = Field(description="b - a; None when either side has no value")
    p: float | None = Field(None, description="two-sided paired randomization p over the questions both runs "
                                              "hold; None for a metric with no per-question values or no pairs")
    n_pairs: int = Field(0, description="questions the p-value pairs")


class SetDelta(BaseModel):
    name: str = Field(description="'overall' or a query set's name")
    n_a: int
    n_b: int
    metrics: list[MetricDelta]


class QueryMove(BaseModel):
    set: str
    id: str
    query: str
    move: str = Field(description="better, worse or mixed")
    deltas: dict[str, tuple[float, float]] = Field(description="metric -> (a, b), for the metrics that changed")


class RunComparison(BaseModel):
    schema_version: int = RESULTS_SCHEMA_VERSION
    a: RunSide
    b: RunSide
    same_mode_and_setting: bool
    sets: list[SetDelta]
    moves: list[QueryMove]
    only_in_a: list[str]
    only_in_b: list[str]
    notes: list[str] = Field(default_factory=list, description="what the comparison cannot say, and why")


def compare(run_a: Path, run_b: Path) -> RunComparison:
    """Run A (the baseline) against run B; paths are run folders or their results.json."""
    return compare_loaded(run_a, load_run(run_a), run_b, load_run(run_b))


def compare_loaded(run_a: Path, a: EvalRun, run_b: Path, b: EvalRun) -> RunComparison:
    """:func:`compare` of two runs already read (from ``run_a`` and ``run_b``)."""
    summaries_b = dict(b.rows())
    keys_a, by_key_b = {(q.set, q.id) for q in a.queries}, {(q.set, q.id): q for q in b.queries}
    pairs = [(qa, by_key_b[(qa.set, qa.id)]) for qa in a.queries if (qa.set, qa.id) in by_key_b]
    return RunComparison(
        a=_side(run_a, a), b=_side(run_b, b),
        same_mode_and_setting=(a.run.mode, a.run.setting) == (b.run.mode, b.run.setting),
        sets=[_set_delta(name, summ, summaries_b[name], [(x, y) for x, y in pairs if name in ("overall", x.set)])
              for name, summ in a.rows() if name in summaries_b],
        notes=[_old_schema_note(label, path, run) for label, path, run in (("A", run_a, a), ("B", run_b, b))
               if run.schema_version < CONTEXT_SCHEMA_VERSION],
        moves=[move for qa in a.queries if (move := _move(qa, by_key_b.get((qa.set, qa.id)))) is not None],
        only_in_a=sorted(f"{s}/{i}" for s, i in keys_a - set(by_key_b)),
        only_in_b=sorted(f"{s}/{i}" for s, i in set(by_key_b) - keys_a))


def compare_runs(run_a: Path, run_b: Path) -> str:
    """Human-readable deltas from run A (baseline) to run B; paths are run folders or results.json."""
    return format_comparison(compare(run_a, run_b))


def format_comparison(c: RunComparison) -> str:
    lines = [f"A: {c.a.path} ({_describe(c.a)})", f"B: {c.b.path} ({_describe(c.b)})"]
    if not c.same_mode_and_setting:
        lines.append("note: the runs differ in mode or setting; deltas mix both effects")
    lines += [f"note: {note}" for note in c.notes]
    lines.append("")
    for s in c.sets:
        lines += [f"== {s.name} (n {s.n_a} -> {s.n_b})",
                  f"  {'metric':<14}{'A':>10}{'B':>10}{'delta':>10}{'p':>8}"]
        for m in s.metrics:
            delta = f"{m.delta:>+10.3f}" if m.delta is not None else f"{'-':>10}"
            lines.append(f"  {m.metric:<14}{_num(m.a):>10}{_num(m.b):>10}{delta}{format_p(m.p):>8}")
        lines.append("")
    lines.append("p: two-sided paired randomization test (sign flips, 10,000 rounds, fixed seed) over the "
                 "questions both runs hold; '-' where a metric has no per-question values.")
    lines.append("")
    for group in MOVES:
        entries = [m for m in c.moves if m.move == group]
        lines += [f"{group} ({len(entries)}):", *(f"  {m.set}/{m.id}: {_format_deltas(m)}  -- {m.query}" for m in entries)]
    lines += [f"only in A: {', '.join(c.only_in_a)}"] if c.only_in_a else []
    lines += [f"only in B: {', '.join(c.only_in_b)}"] if c.only_in_b else []
    return "\n".join(lines) + "\n"


def _old_schema_note(label: str, path: Path, run: EvalRun) -> str:
    lacking = ", ".join(v for k, v in CONTEXT_COLUMNS.items() if k != "context_tokens")
    return (f"{label} ({path}) is a schema_version {run.schema_version} run, from before the context metrics: it has "
            f"no {lacking} (shown as '-'); tokens and the ranking metrics compare")


def _side(path: Path, run: EvalRun) -> RunSide:
    return RunSide(path=str(path), setting=run.run.setting, mode=run.run.mode, queries=len(run.queries),
                   timestamp=run.run.timestamp, schema_version=run.schema_version)


def _describe(side: RunSide) -> str:
    return f"{side.setting}/{side.mode}, {side.queries} queries, {side.timestamp}"


def _summary_values(s: MetricSummary) -> dict[str, float | None]:
    """label -> the set's value: the context metrics, the ranking's, then cost and errors."""
    values = {label: s.mean_context_tokens if key == "context_tokens" else s.scores.get(key)
              for key, label in PAIRED_COLUMNS.items()}
    values.update({"LLM calls/q": s.llm_calls_per_query, "fallback rate": s.fallback_rate,
                   "errors": float(s.n_errors)})
    if "total" in s.latency_ms:
        values["total ms p50"] = s.latency_ms["total"].p50
    return values


def _set_delta(name: str, a: MetricSummary, b: MetricSummary,
               pairs: list[tuple[QueryResult, QueryResult]]) -> SetDelta:
    va, vb = _summary_values(a), _summary_values(b)
    keys = {label: key for key, label in PAIRED_COLUMNS.items()}
    metrics = []
    for label in (label for label in va if label in vb):
        p, n = None, 0
        if label in keys:
            xs, ys = paired_values((query_value(qa, keys[label]), query_value(qb, keys[label])) for qa, qb in pairs)
            p, n = paired_randomization_p(xs, ys), len(xs)
        delta = vb[label] - va[label] if va[label] is not None and vb[label] is not None else None
        metrics.append(MetricDelta(metric=label, a=va[label], b=vb[label], delta=delta, p=p, n_pairs=n))
    return SetDelta(name=name, n_a=a.n_queries, n_b=b.n_queries, metrics=metrics)


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


def _move(qa: QueryResult, qb: QueryResult | None) -> QueryMove | None:
    deltas = query_deltas(qa, qb) if qb else {}
    if not deltas:
        return None
    rose, fell = any(d > 0 for d in deltas.values()), any(d < 0 for d in deltas.values())
    return QueryMove(set=qa.set, id=qa.id, query=qa.query, move="mixed" if rose and fell else "better" if rose else "worse",
                     deltas={k: (getattr(qa.metrics, k), getattr(qb.metrics, k)) for k in deltas})


def _format_deltas(move: QueryMove) -> str:
    return ", ".join(f"{QUERY_METRICS[k]} {a:.2f}->{b:.2f}" for k, (a, b) in move.deltas.items())
