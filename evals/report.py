"""What a run records (``results.json``) and the tables a person reads (``report.md``; the same
run as a page with plots is :mod:`specrag.evals.html_report`'s, and
:func:`specrag.evals.runner.write_run` writes all three).

``results.json`` keeps every query's gold, selection, ranking and context ids, so any tool can
recompute the metrics or diff two runs (:mod:`specrag.evals.compare`) without rerunning anything. Its
``schema_version`` says which shape it has; files from before it existed read as version 1.

Version 2 added the context metrics (``ctx_*`` in each query's and each baseline's scores, the
tokens of each context chunk, the baselines' contexts and the paired p-values of the summaries);
a version 1 file still reads, its context metrics None ("not measured").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from specrag.context.knowledge import Fallback
from specrag.core.errors import SpecragError
from specrag.evals.baselines import BaselineScores
from specrag.evals.metrics import GoldGraph, LLMUsage, MetricSummary, QueryMetrics
from specrag.evals.querysets import GoldEndpoint

RESULTS_SCHEMA_VERSION = 2
CONTEXT_SCHEMA_VERSION = 2  # the first results.json version with context metrics
STAGES = ("select", "expand", "search", "refs", "assemble", "total")
CONTEXT_COLUMNS = {"ctx_recall": "R@ctx", "ctx_all_found": "all@ctx", "ctx_api_precision": "prec API",
                   "ctx_op_precision": "prec op", "context_tokens": "tokens", "ctx_completeness": "complete@ctx"}
SCORE_COLUMNS = {"selection_accuracy": "API acc", "selection_precision": "API prec", "recall_at_5": "R@5",
                 "recall_at_10": "R@10", "all_found_at_10": "all@10", "mrr": "MRR", "ndcg_at_10": "nDCG@10",
                 "completeness": "complete", "closure_complete": "closure ok",
                 "hidden_recovery_at_10": "hidden@10", "plan_pair_accuracy": "plan pairs",
                 "plan_order_accuracy": "plan order"}


class RetrievedChunk(BaseModel):
    id: str
    api: str
    type: str = Field(description="endpoint, component or errors")
    method: str = ""
    path: str = ""


class Gold(BaseModel):
    apis: list[str]
    endpoints: list[GoldEndpoint]


class QueryResult(BaseModel):
    """Everything needed to recompute a query's metrics without rerunning it."""

    id: str
    set: str
    query: str
    gold: Gold
    selected_apis: list[str] = Field(default_factory=list)
    expanded_query: str = ""
    retrieved: list[RetrievedChunk] = Field(default_factory=list, description="primary chunks, rank order")
    context_ids: list[str] = Field(default_factory=list, description="every chunk id in the context, primaries first")
    context_chunk_tokens: list[int] = Field(default_factory=list, description="tokens of each of context_ids "
                                                                              "(they sum to context_tokens)")
    n_primary: int = Field(0, description="how many of context_ids are primary chunks")
    context_tokens: int = 0
    latency_ms: dict[str, float] = Field(default_factory=dict, description="total and per stage")
    fallbacks: list[Fallback] = Field(default_factory=list)
    llm: LLMUsage = Field(default_factory=LLMUsage)
    metrics: QueryMetrics = Field(default_factory=QueryMetrics)
    baselines: dict[str, BaselineScores] = Field(default_factory=dict, description="baseline name -> its scores")
    plan: list[str] = Field(default_factory=list, description="the plan's calls in order ('METHOD path')")
    graph: GoldGraph | None = Field(None, description="the dependency graph on the gold calls")
    error: str | None = None

    def failed(self) -> bool:
        """Errored, missed a gold API, or left a gold endpoint out of the top 10 or of the context."""
        m = self.metrics
        return (self.error is not None or m.selection_accuracy < 1.0 or m.all_found_at_10 < 1.0
                or (m.ctx_all_found is not None and m.ctx_all_found < 1.0))


class RunInfo(BaseModel):
    mode: str
    setting: str
    sets: list[str] = Field(default_factory=list)
    corpus: list[str] = Field(default_factory=list)
    prompts_dir: str | None = None
    prompts: list[str] = Field(default_factory=list, description="'name@hash' of every prompt that ran")
    settings: dict[str, Any] = Field(default_factory=dict, description="settings snapshot, secrets redacted")
    timestamp: str = ""
    versions: dict[str, str] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict, description="run_info keys the header has no field for")


class RunMetrics(BaseModel):
    overall: MetricSummary
    per_set: dict[str, MetricSummary] = Field(default_factory=dict)


class RunFileError(SpecragError):
    """A run folder or results.json that is missing, unreadable, or not a specrag run."""


class EvalRun(BaseModel):
    schema_version: int = Field(RESULTS_SCHEMA_VERSION, description="shape of results.json; bumped when it changes")
    run: RunInfo
    metrics: RunMetrics
    queries: list[QueryResult]

    def rows(self) -> list[tuple[str, MetricSummary]]:
        return [("overall", self.metrics.overall), *self.metrics.per_set.items()]


def load_run(path: Path) -> EvalRun:
    """A run folder (or its ``results.json``) back as an :class:`EvalRun`."""
    path = Path(path)
    path = path / "results.json" if path.is_dir() else path
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(raw, dict):
            raw.setdefault("schema_version", 1)  # written before the field existed
        run = EvalRun.model_validate(raw)
    except json.JSONDecodeError as exc:
        raise RunFileError(f"{path} is not a specrag results.json (not JSON: {exc.msg})") from None
    except FileNotFoundError:
        raise RunFileError(f"no eval run at {path} (want a run folder holding results.json, or the file)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(f"cannot read {path}: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "the file"
        raise RunFileError(f"{path} is not a specrag results.json ({where}: {first['msg']})") from None
    if run.schema_version > RESULTS_SCHEMA_VERSION:
        raise RunFileError(f"{path} has schema_version {run.schema_version}; this specrag reads up to "
                           f"{RESULTS_SCHEMA_VERSION}: upgrade specrag")
    return run


def render_report(run: EvalRun) -> str:
    info = run.run
    lines = [f"# specrag eval: {info.setting} setting, {info.mode} mode", "",
             f"- time: {info.timestamp}", f"- sets: {', '.join(info.sets) or '-'}",
             f"- corpus: {', '.join(info.corpus) or '-'}", f"- prompts: {', '.join(info.prompts) or '-'}",
             f"- versions: {', '.join(f'{k} {v}' for k, v in info.versions.items())}", ""]
    lines += (_context_tables(run) + _scores_table(run) + _baseline_table(run) + _graph_table(run)
              + _latency_table(run) + _cost_table(run) + _failures(run))
    return "\n".join(lines) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(row) + " |" for row in rows), ""]


def _context_tables(run: EvalRun) -> list[str]:
    """Per set: each context metric for the pipeline and every baseline with a context, with the
    delta and the paired p-value."""
    settings = run.run.settings
    limits = ", ".join(f"{label} {settings[k]}" for k, label in (
        ("max_primary_results", "ranked primaries <="), ("context_full_primaries", "in full <="),
        ("context_signature_depth", "signatures to rank"), ("context_token_limit", "tokens <="),
        ("max_total_chunks", "chunks <=")) if k in settings)
    lines = ["## Context", "",
             "What the user receives: the primary chunks in full with their references, then the rest of the "
             "ranking as signatures" + (f" ({limits})" if limits else "")
             + ". `R@ctx`: gold operations whose own chunk is in the context; `all@ctx`: every one is; `prec API`: "
             "share of the context's tokens of the gold APIs; `prec op`: share in the gold operations, their $ref "
             "closures (depth 3) and errors chunks; `tokens`: the context's total; `complete@ctx`: closure share of "
             "the operations delivered as primaries (over the queries with one). A baseline's context is its top "
             "operations through the engine's own reference expansion (same budgets). p: two-sided paired "
             "randomization test (sign flips, 10,000 rounds, fixed seed) of the engine against the baseline.", ""]
    for name, s in run.rows():
        names = [n for n in sorted(s.baselines) if s.baselines[n].get("ctx_recall") is not None]
        header = ["metric", "engine"]
        for n in names:
            header += [n, "delta", "p"]
        rows = []
        for key, label in CONTEXT_COLUMNS.items():
            ours = s.mean_context_tokens if key == "context_tokens" else s.scores.get(key)
            row = [label, _value(key, ours)]
            for n in names:
                base = s.baselines[n].get(key)
                delta = ours - base if ours is not None and base is not None else None
                row += [_value(key, base), _delta(key, delta), format_p(s.baseline_p.get(n, {}).get(key))]
            rows.append(row)
        lines += [f"### {name} ({s.n_queries} questions, {s.n_errors} errors, delivered n {s.delivered_n})", "",
                  *_table(header, rows)]
    return lines


def _value(key: str, value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}" if key == "context_tokens" else f"{value:.3f}"


def _delta(key: str, value: float | None) -> str:
    return "-" if value is None else f"{value:+.0f}" if key == "context_tokens" else f"{value:+.3f}"


def format_p(value: float | None) -> str:
    return "-" if value is None else "<0.001" if value < 0.001 else f"{value:.3f}"


def _scores_table(run: EvalRun) -> list[str]:
    header = ["set", "n", "errors", *SCORE_COLUMNS.values(), "complete n", "ctx tokens"]
    rows = [[name, str(s.n_queries), str(s.n_errors), *(_num(s.scores.get(k)) for k in SCORE_COLUMNS),
             str(s.completeness_n), f"{s.mean_context_tokens:.0f}"] for name, s in run.rows()]
    note = ("The ranking (second to the context above). "
            "Stage 1: API acc/prec. Stage 3 (primary chunks as endpoints): R@k, all gold in top 10, MRR, nDCG@10. "
            "Context: `complete` = share of each found gold endpoint's $ref closure (depth 3) present, "
            "averaged over the `complete n` queries with a gold endpoint in the context (errors count as 0).")
    return ["## Retrieval", "", note, "", *_table(header, rows)]


def _baseline_table(run: EvalRun) -> list[str]:
    names = sorted({n for _, summ in run.rows() for n in summ.baselines})
    if not names:
        return []
    lines = ["## Against the baselines", "",
             "Same index, same run. `flat`: per-operation BM25 + MiniLM over the whole fleet, RRF k=60, no stage 1 "
             "or 2 (what a user builds instead). `oracle-bm25`: plain BM25 within the gold APIs. `missed`: the "
             "queries whose gold API stage 1 did not select, and R@10 on them. Rankings (top 10); p: paired "
             "randomization test of each delta.", ""]
    for name in names:
        header = ["set", "R@10", f"{name} R@10", "delta", "p", "all@10", f"{name} all@10", "delta", "p", "MRR",
                  f"{name} MRR", "delta", "p", "missed n", "missed R@10", f"missed {name} R@10"]
        rows = []
        for set_name, summ in run.rows():
            base = summ.baselines.get(name)
            if base is None:
                continue
            p = summ.baseline_p.get(name, {})
            row = [set_name]
            for k in ("recall_at_10", "all_found_at_10", "mrr"):
                ours = summ.scores.get(k) or 0.0
                row += [_num(ours), _num(base[k]), f"{ours - (base[k] or 0.0):+.3f}", format_p(p.get(k))]
            missed = summ.selection_missed
            rows.append([*row, str(missed.n), _num(missed.recall_at_10) if missed.n else "-",
                         _num(missed.baselines.get(name)) if missed.n else "-"])
        lines += _table(header, rows)
    return lines
def _graph_table(run: EvalRun) -> list[str]:
    rows = [[name, _num(s.edge_recall), str(s.edge_total), _num(s.producers_per_param)] for name, s in run.rows()]
    note = ("`hidden@10`: every gold call before the last in the top 10 (multi-call queries). `plan pairs`: gold call "
            "pairs in the plan in gold order (a missing call counts wrong); `plan order`: the same over the pairs the plan "
            "holds (order alone). Edge recall: id parameters of gold calls "
            "after the first whose producers include an earlier gold call.")
    return ["## Multi-step", "", note, "", *_table(["set", "edge recall", "id params", "producers/param"], rows)]


def _latency_table(run: EvalRun) -> list[str]:
    stages = [s for s in STAGES if any(s in summ.latency_ms for _, summ in run.rows())]
    rows = [[name, *(f"{summ.latency_ms[s].p50:.0f} / {summ.latency_ms[s].p95:.0f}" if s in summ.latency_ms
                     else "-" for s in stages)] for name, summ in run.rows()]
    return ["## Latency (ms, p50 / p95)", "", "Queries that errored are left out.", "", *_table(["set", *stages], rows)]


def _cost_table(run: EvalRun) -> list[str]:
    header = ["set", "LLM calls/q", "prompt tok/q", "completion tok/q", "fallback rate", "fallbacks (stage/reason)"]
    rows = [[name, f"{s.llm_calls_per_query:.2f}", f"{s.prompt_tokens_per_query:.0f}",
             f"{s.completion_tokens_per_query:.0f}", f"{s.fallback_rate:.3f}",
             ", ".join(f"{k}: {v}" for k, v in s.fallback_counts.items()) or "-"] for name, s in run.rows()]
    return ["## LLM cost and fallbacks", "", "Fallback rate leaves out `no_llm` (offline mode by design).", "",
            *_table(header, rows)]


def _failures(run: EvalRun) -> list[str]:
    failed = [q for q in run.queries if q.failed()]
    lines = [f"## Failed queries ({len(failed)} of {len(run.queries)})", "",
             "Failed: errored, missed a gold API, or a gold endpoint not in the top 10 or not in the context.", ""]
    for q in failed:
        gold = ", ".join(f"{e.api} {e.method.upper()} {e.path}" for e in q.gold.endpoints)
        top = ", ".join(_describe(r) for r in q.retrieved[:5]) or "-"
        lines += [f"- **{q.set}/{q.id}**: {q.query}",
                  f"  - gold: {', '.join(q.gold.apis)}; {gold}",
                  f"  - selected: {', '.join(q.selected_apis) or '-'}; R@ctx {_num(q.metrics.ctx_recall)}, "
                  f"R@10 {q.metrics.recall_at_10:.2f}, MRR {q.metrics.mrr:.2f}",
                  f"  - top 5: {top}"]
        lines += [f"  - error: {q.error}"] if q.error else []
    return lines


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _describe(chunk: RetrievedChunk) -> str:
    if chunk.method:
        suffix = " (errors)" if chunk.type == "errors" else ""
        return f"{chunk.api} {chunk.method} {chunk.path}{suffix}"
    return chunk.id
