"""Run query sets through a context source and score every query, errors included.

The engine is a boundary (:class:`ContextSource`), so tests drive the runner with hand-built
contexts and the CLI with the real pipeline. ``fleet`` lets stage 1 pick the APIs; ``oracle``
passes the gold APIs in, which measures stage 3 and the reference expansion alone.
"""

from __future__ import annotations

import platform
import time
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel
from specrag.context.knowledge import KnowledgeContext
from specrag.core.ids import operation_chunk_id, parse_operation_id, split_chunk_id
from specrag.core.settings import Settings
from specrag.core.versions import package_versions
from specrag.engine.plan import plan_operations
from specrag.evals import metrics as m
from specrag.evals.baselines import DEPTH, Baseline, BaselineScores, ContextAssembler
from specrag.evals.html_report import render_run_html
from specrag.evals.querysets import EvalQuery
from specrag.evals.report import EvalRun, Gold, QueryResult, RetrievedChunk, RunInfo, RunMetrics, render_report
from specrag.specs.models import ChunkLookup
from tqdm import tqdm

CLOSURE_DEPTH = 3
_VERSIONED = ("specrag", "llama-index-core", "chromadb", "bm25s", "fastembed", "pydantic")
_SECRET_WORDS = ("api_key", "secret", "password")

__all__ = ["ChunkLookup", "ContextSource", "EvalMode", "EvalRun", "EvalSetting", "QueryResult", "run_eval", "write_run"]


class EvalMode(str, Enum):
    OFFLINE = "offline"
    LLM = "llm"


class EvalSetting(str, Enum):
    FLEET = "fleet"
    ORACLE = "oracle"


class ContextSource(Protocol):
    def retrieve_context(self, query: str, apis: list[str] | None = None) -> KnowledgeContext: ...


def run_eval(queries: list[EvalQuery], engine: ContextSource, lookup: ChunkLookup, *, mode: str,
             setting: str, run_info: dict, progress: bool = True, baselines: list[Baseline] = (),
             contexts: ContextAssembler | None = None) -> EvalRun:
    """Run every query (one at a time, in order) and score it; a failing query scores 0.
    Each baseline ranks every query too, scored the same way, so reports compare like with like;
    with ``contexts`` (the engine's own reference expansion, :meth:`ContextAssembler.from_engine`)
    each baseline's ranking also becomes a context, scored with the engine's context metrics."""
    mode, setting = _choice(EvalMode, mode), _choice(EvalSetting, setting)
    results, prompts = [], set()
    for query in tqdm(queries, desc=f"eval ({setting.value})", unit="query", disable=not progress):
        result, seen = _run_one(query, engine, lookup, setting)
        depth = contexts.depth if contexts is not None else DEPTH
        result.baselines = {b.name: baseline_scores(b.rank(query.query, list(query.apis), depth), query, contexts,
                                                  lookup)
                            for b in baselines}
        results.append(result)
        prompts |= seen
    by_set: dict[str, list[QueryResult]] = {}
    for result in results:
        by_set.setdefault(result.set, []).append(result)
    header = _header(run_info, mode, setting, list(by_set), sorted(prompts))
    summary = RunMetrics(overall=m.summarize(results), per_set={k: m.summarize(v) for k, v in by_set.items()})
    return EvalRun(run=header, metrics=summary, queries=results)


def write_run(run: EvalRun, out_dir: Path) -> None:
    """Write ``results.json``, ``report.md`` and ``report.html`` (the same run as a page to look
    at: plots, and every question with its context) into ``out_dir`` (created if missing)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(run.model_dump_json(indent=2), encoding="utf-8")
    (out_dir / "report.md").write_text(render_report(run), encoding="utf-8")
    (out_dir / "report.html").write_text(render_run_html(run), encoding="utf-8")


def _run_one(query: EvalQuery, engine: ContextSource, lookup: ChunkLookup,
             setting: EvalSetting) -> tuple[QueryResult, set[str]]:
    base = QueryResult(id=query.id, set=query.set_name, query=query.query,
                       gold=Gold(apis=query.apis, endpoints=query.endpoints))
    start = time.perf_counter()
    try:
        apis = list(query.apis) if setting is EvalSetting.ORACLE else None
        ctx = engine.retrieve_context(query.query, apis=apis)
        wall_ms = (time.perf_counter() - start) * 1000
        return _score(base, query, ctx, lookup, wall_ms), _prompts(ctx)
    except Exception as exc:  # noqa: BLE001 -- any failure is recorded and scored 0, never dropped
        base.error = f"{type(exc).__name__}: {exc}"
        multi = 0.0 if len(m.gold_pairs([e.key() for e in query.endpoints])) else None
        base.metrics = m.QueryMetrics(**dict(m.ContextScores.failed()), hidden_recovery_at_10=multi,
                                      plan_pair_accuracy=multi, plan_order_accuracy=multi)
        base.latency_ms = {"total": (time.perf_counter() - start) * 1000}
        return base, set()


def _score(base: QueryResult, query: EvalQuery, ctx: KnowledgeContext, lookup: ChunkLookup,
           wall_ms: float) -> QueryResult:
    stats = ctx.retrieval_stats
    gold = query.gold_keys()
    # the engine's ranked candidates (top 10, primaries first) when it records them; else the primaries
    ranked_ids = list(stats.ranking) or [c.id for c in ctx.primary_chunks]
    ranking = m.ranked_endpoints(ranked_ids)
    context_ids = [c.id for c in ctx.chunks]
    by_id = {c.id: c.metadata for c in ctx.chunks}
    found = _gold_in_context(gold, context_ids)
    completeness, complete = m.closure_completeness(found, context_ids, lookup.get_chunks, CLOSURE_DEPTH)
    gold_seq = [e.key() for e in query.endpoints]
    plan = m.ranked_endpoints(_plan(stats, lookup, query.query))
    calls = [c for c in stats.llm_calls if not c.cached]
    return base.model_copy(update=dict(
        selected_apis=list(stats.selected_apis),
        expanded_query=stats.expanded_query,
        retrieved=[_retrieved(i, by_id.get(i)) for i in ranked_ids],
        context_ids=context_ids,
        # a primary's example request is charged to it, so the chunks' tokens still sum to the total
        context_chunk_tokens=[c.n_tokens + (c.example_request.tokens if c.example_request else 0) for c in ctx.chunks],
        n_primary=len(ctx.primary_chunks),
        context_tokens=ctx.total_tokens,
        latency_ms={"total": wall_ms, **stats.timings_ms},
        fallbacks=list(stats.fallbacks),
        llm=m.LLMUsage(calls=len(calls), prompt_tokens=sum(c.prompt_tokens for c in calls),
                       completion_tokens=sum(c.completion_tokens for c in calls)),
        metrics=m.QueryMetrics(
            **dict(context_scores(query, ctx, lookup)),
            selection_accuracy=m.selection_accuracy(query.apis, stats.selected_apis),
            selection_precision=m.selection_precision(query.apis, stats.selected_apis),
            recall_at_5=m.recall_at_k(ranking, gold, 5),
            recall_at_10=m.recall_at_k(ranking, gold, 10),
            all_found_at_10=m.all_found_at_k(ranking, gold, 10),
            mrr=m.reciprocal_rank(ranking, gold),
            ndcg_at_10=m.ndcg_at_k(ranking, gold, 10),
            completeness=completeness,
            closure_complete=complete,
            hidden_recovery_at_10=m.hidden_step_recovery_at_k(ranking, gold_seq, 10),
            plan_pair_accuracy=m.ordered_pair_accuracy(plan, gold_seq),
            plan_order_accuracy=m.pair_order_accuracy(plan, gold_seq),
        ),
        plan=[f"{e.method} {e.path}" for e in plan],
        graph=_gold_graph(query, lookup),
    ))


def baseline_scores(ranked_ids: list[str], query: EvalQuery, contexts: ContextAssembler | None = None,
                    lookup: ChunkLookup | None = None) -> BaselineScores:
    """A baseline's ranking scores; with ``contexts``, also the scores of the context its ranking
    gives through the engine's reference expansion (closures read through ``lookup``, by default
    the assembler's)."""
    gold, ranking = query.gold_keys(), m.ranked_endpoints(ranked_ids[:DEPTH])
    scores = BaselineScores(recall_at_5=m.recall_at_k(ranking, gold, 5), recall_at_10=m.recall_at_k(ranking, gold, 10),
                            all_found_at_10=m.all_found_at_k(ranking, gold, 10), mrr=m.reciprocal_rank(ranking, gold),
                            ndcg_at_10=m.ndcg_at_k(ranking, gold, 10), ranking=list(ranked_ids[:DEPTH]))
    if contexts is None:
        return scores
    ctx = contexts.assemble(query.query, ranked_ids)
    return scores.model_copy(update={
        **dict(context_scores(query, ctx, lookup or contexts.lookup)), "context_ids": [c.id for c in ctx.chunks],
        "context_chunk_tokens": [c.n_tokens for c in ctx.chunks], "n_primary": len(ctx.primary_chunks),
        "context_tokens": ctx.total_tokens})


def context_scores(query: EvalQuery, ctx: KnowledgeContext, lookup: ChunkLookup) -> m.ContextScores:
    """The context metrics of one context, the engine's or a baseline's (the same code for both)."""
    gold = query.gold_keys()
    chunks = [(c.id, c.n_tokens) for c in ctx.chunks]
    context_ids = [cid for cid, _ in chunks]
    delivered = m.delivered_endpoints(context_ids)
    footprint: set[str] = set()
    for op in _gold_operations(query, context_ids, lookup):
        footprint |= m.operation_footprint(op, lookup.get_chunks, CLOSURE_DEPTH)
    primaries = m.primary_operations(c.id for c in ctx.primary_chunks)
    completeness, _ = m.closure_completeness(primaries, context_ids, lookup.get_chunks, CLOSURE_DEPTH)
    return m.ContextScores(ctx_recall=m.context_recall(gold, delivered),
                           ctx_all_found=m.context_all_found(gold, delivered),
                           ctx_api_precision=m.api_precision(chunks, query.apis),
                           ctx_op_precision=m.operation_precision(chunks, footprint), ctx_completeness=completeness)


def _gold_operations(query: EvalQuery, context_ids: list[str], lookup: ChunkLookup) -> list[str]:
    """The gold operations' chunk ids: as the labels spell them when the corpus has them, and any
    context operation whose endpoint matches a gold one (a label may name a parameter otherwise)."""
    spelled = [operation_chunk_id(e.api, e.path, e.method.lower()) for e in query.endpoints]
    known = lookup.get_chunks(list(dict.fromkeys(spelled)))
    gold = query.gold_keys()
    matched = [cid for cid in context_ids if m.is_operation_chunk(cid) and m.chunk_endpoint(cid) in gold]
    return list(dict.fromkeys([*(i for i in spelled if i in known), *(m.operation_of(c) for c in matched)]))


def _plan(stats, lookup: ChunkLookup, question: str) -> list[str]:
    """The plan's operations, built from the query's own ranking (no second query)."""
    chunks = lookup.get_chunks([i for i in stats.ranking if parse_operation_id(i)])
    return plan_operations(list(stats.ranking), chunks, dict(stats.step_reasons), question=question)


def _gold_graph(query: EvalQuery, lookup: ChunkLookup) -> m.GoldGraph:
    """The dependency graph on the gold calls: edge hits and producers per id parameter."""
    ids = [operation_chunk_id(e.api, e.path, e.method.lower()) for e in query.endpoints]
    chunks = lookup.get_chunks(ids)
    steps, counts = [], []
    for cid, gold in zip(ids, query.endpoints):
        chunk = chunks.get(cid)
        producers: dict[str, set] = {}
        for need in chunk.params if chunk is not None else []:
            if need.id_like:
                edges = [e for e in chunk.producers if e.param == need.name]
                producers[need.name] = {m.chunk_endpoint(e.producer) for e in edges}
                counts.append(len(edges))
        steps.append((gold.key(), producers))
    hits, total = m.edge_hits(steps)
    return m.GoldGraph(edge_hits=hits, edge_total=total, producers_per_param=counts)


def _gold_in_context(gold: set, context_ids: list[str]) -> list[str]:
    """The operation of each gold endpoint found anywhere in the context (its chunk, a part or its
    errors chunk), first occurrence first: what the gold completeness reads."""
    operations: dict[Any, str] = {}
    for chunk_id in context_ids:
        endpoint = m.chunk_endpoint(chunk_id)
        if endpoint in gold:
            operations.setdefault(endpoint, m.operation_of(chunk_id))
    return list(operations.values())


def _retrieved(chunk_id: str, meta: dict | None) -> RetrievedChunk:
    meta = meta or {}
    api = str(meta.get("source_file") or split_chunk_id(chunk_id)[0])
    op = parse_operation_id(chunk_id)
    method, path = (op[2], op[1]) if op else (str(meta.get("method", "")), str(meta.get("path", "")))
    kind = str(meta.get("type", "")) or ("errors" if chunk_id.endswith(":errors") else "endpoint" if op else "component")
    return RetrievedChunk(id=chunk_id, api=api, type=kind, method=method, path=path)


def _prompts(ctx: KnowledgeContext) -> set[str]:
    stats = ctx.retrieval_stats
    return set(stats.prompts.values()) | {f"{c.prompt_name}@{c.prompt_hash}" for c in stats.llm_calls}


def _choice(enum: type[Enum], value: str | Enum) -> Any:
    try:
        return enum(value)
    except ValueError:
        valid = ", ".join(e.value for e in enum)
        raise ValueError(f"unknown {enum.__name__} {value!r}; use one of: {valid}") from None


def _header(run_info: dict, mode: EvalMode, setting: EvalSetting, sets: list[str], prompts: list[str]) -> RunInfo:
    info = dict(run_info)
    settings = info.pop("settings", {}) or {}
    if isinstance(settings, Settings):  # the run record keeps one flat map, as reports read it
        settings = settings.flat_dump(mode="json")
    elif isinstance(settings, BaseModel):
        settings = settings.model_dump(mode="json")
    corpus = [str(p) for p in info.pop("corpus", [])]
    given_sets = [str(p) for p in info.pop("sets", [])]
    prompts_dir = info.pop("prompts_dir", None) or info.pop("prompts", None)
    for key in ("mode", "setting", "prompts", "timestamp", "versions", "extra"):
        info.pop(key, None)
    return RunInfo(
        mode=mode.value, setting=setting.value, sets=given_sets or sets, corpus=corpus,
        prompts_dir=str(prompts_dir) if prompts_dir is not None else None, prompts=prompts,
        settings=_redact(settings), timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        versions=_versions(), extra={k: v if _jsonable(v) else str(v) for k, v in info.items()},
    )


def _redact(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: ("***" if v and any(w in k.lower() for w in _SECRET_WORDS) else v if _jsonable(v) else str(v))
            for k, v in settings.items()}


def _jsonable(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))


def _versions() -> dict[str, str]:
    return {"python": platform.python_version(), **package_versions(_VERSIONED)}

