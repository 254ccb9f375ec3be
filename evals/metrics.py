"""Metrics, one small function each, on plain inputs so they can be checked by hand.

Definitions (binary relevance; a ranking is deduplicated endpoints, best first):

- selection accuracy: share of the gold APIs that are among the selected ones (1.0 when every
  gold API was selected; a query with two gold APIs and one found scores 0.5);
- selection precision: share of the selected APIs that are gold (0.0 when nothing was selected);
- Recall@k: share of gold endpoints in the top k; all-found@k: 1.0 when every one is there;
- MRR: 1 / rank of the first gold endpoint (0.0 when none is ranked);
- nDCG@k: DCG over the top k divided by the DCG of the ideal ranking over *all* gold items
  (``min(len(gold), k)`` hits at the top), so a gold item the run never finds costs score;
- completeness: share of an operation's ``$ref`` closure (depth <= 3, the operation excluded)
  present in the context;

The context metrics read what the user receives (primary plus referenced chunks, each with the
token count the context gives it, whose sum is the context's ``total_tokens``):

- R@ctx: share of the gold operations whose own operation chunk is in the context;
  all@ctx: 1.0 when every one is;
- context precision by API: share of the context's tokens in chunks of the gold APIs;
- context precision by operation: share of the context's tokens in the gold operations'
  footprints (the operation chunk, its ``$ref`` closure of depth <= 3 and its ``errors`` chunk;
  any ``:partN`` of those counts); both are 0.0 for an empty context;
- delivered completeness: mean, over the operations delivered as primary chunks, of the share of
  each one's closure present in the context (``None`` when no operation is a primary);
- paired randomization p: two-sided sign-flip test of the mean per-question difference between
  two systems (see :func:`paired_randomization_p`);
- hidden-step recovery@k: 1.0 when every gold call before the last is in the top k (the calls a
  question hides); None for single-call queries;
- ordered-pair accuracy: over the gold pairs (a called before b, a != b), the share the plan
  holds both of, a first; a pair the plan lacks counts as wrong; None without pairs; pair order
  accuracy: the same over the pairs the plan holds both calls of (order alone);
- edge recall: over the id parameters of the gold calls after the first, the share for which
  the dependency graph names an earlier gold call among the producers.

Every metric is 0.0 for an empty gold set: there is nothing to find, so nothing was found.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field
from specrag.context.knowledge import Fallback
from specrag.core.ids import (
    ERRORS_SUFFIX,
    base_chunk_id,
    errors_chunk_id,
    parse_operation_id,
    split_chunk_id,
)
from specrag.core.latency import Latency
from specrag.evals.querysets import Endpoint, endpoint_key
from specrag.specs.models import Chunk


def selection_accuracy(gold_apis: Iterable[str], selected: Iterable[str]) -> float:
    gold, chosen = set(gold_apis), set(selected)
    return len(gold & chosen) / len(gold) if gold else 0.0


def selection_precision(gold_apis: Iterable[str], selected: Iterable[str]) -> float:
    gold, chosen = set(gold_apis), set(selected)
    return len(gold & chosen) / len(chosen) if chosen else 0.0


def recall_at_k(ranking: Sequence[Hashable], gold: set, k: int) -> float:
    return len(gold & set(ranking[:k])) / len(gold) if gold else 0.0


def all_found_at_k(ranking: Sequence[Hashable], gold: set, k: int) -> float:
    return 1.0 if gold and gold <= set(ranking[:k]) else 0.0


def reciprocal_rank(ranking: Sequence[Hashable], gold: set) -> float:
    return next((1.0 / rank for rank, item in enumerate(ranking, 1) if item in gold), 0.0)


def ndcg_at_k(ranking: Sequence[Hashable], gold: set, k: int) -> float:
    if not gold:
        return 0.0
    dcg = sum(1.0 / math.log2(rank + 1) for rank, item in enumerate(ranking[:k], 1) if item in gold)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(gold), k) + 1))
    return dcg / ideal


def hidden_step_recovery_at_k(ranking: Sequence[Hashable], gold_in_order: Sequence[Hashable], k: int) -> float | None:
    """1.0 when all gold calls before the last are in the top ``k``; None with fewer than two calls."""
    hidden = set(gold_in_order[:-1]) - {gold_in_order[-1]} if len(gold_in_order) > 1 else set()
    if not hidden:
        return None
    return 1.0 if hidden <= set(ranking[:k]) else 0.0


def gold_pairs(gold_in_order: Sequence[Hashable]) -> list[tuple[Hashable, Hashable]]:
    """(a, b) for every gold call a made before a different call b, each pair once."""
    pairs = [(a, b) for i, a in enumerate(gold_in_order) for b in gold_in_order[i + 1:] if a != b]
    return list(dict.fromkeys(pairs))


def ordered_pair_accuracy(plan: Sequence[Hashable], gold_in_order: Sequence[Hashable]) -> float | None:
    """Share of gold pairs the plan has both of, in gold order; None when gold has no pair."""
    pairs = gold_pairs(gold_in_order)
    if not pairs:
        return None
    position = {step: i for i, step in reversed(list(enumerate(plan)))}  # first occurrence
    right = sum(1 for a, b in pairs if a in position and b in position and position[a] < position[b])
    return right / len(pairs)


def pair_order_accuracy(plan: Sequence[Hashable], gold_in_order: Sequence[Hashable]) -> float | None:
    """Order alone: share of the gold pairs whose calls are both in the plan that it orders as
    gold does; None when no gold pair is in the plan."""
    position = {step: i for i, step in reversed(list(enumerate(plan)))}
    present = [(a, b) for a, b in gold_pairs(gold_in_order) if a in position and b in position]
    if not present:
        return None
    return sum(position[a] < position[b] for a, b in present) / len(present)


def edge_hits(steps: Sequence[tuple[Hashable, dict[str, set]]]) -> tuple[int, int]:
    """(id parameters of calls after the first with an earlier gold call among their producers,
    all such parameters); ``steps`` are the gold calls in order, each with param -> producers."""
    hits = total = 0
    for j, (_, producers) in enumerate(steps):
        if j == 0:
            continue
        earlier = {call for call, _ in steps[:j]}
        for found in producers.values():
            total += 1
            hits += bool(found & earlier)
    return hits, total


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def chunk_endpoint(chunk_id: str) -> Endpoint | None:
    """Operation and ``errors`` chunks map to their endpoint; components to nothing."""
    try:
        parsed = parse_operation_id(chunk_id)
    except ValueError:
        return None
    if parsed is None:
        return None
    api, path, method = parsed
    return endpoint_key(api, method, path)


def ranked_endpoints(chunk_ids: Iterable[str]) -> list[Endpoint]:
    """Primary chunks in rank order -> endpoints, deduplicated keeping the first rank."""
    seen: dict[Endpoint, None] = {}
    for chunk_id in chunk_ids:
        endpoint = chunk_endpoint(chunk_id)
        if endpoint is not None:
            seen.setdefault(endpoint, None)
    return list(seen)


def operation_of(chunk_id: str) -> str:
    """The operation chunk id behind an operation, part or ``errors`` chunk id."""
    base = base_chunk_id(chunk_id)
    return base[: -len(ERRORS_SUFFIX)] if base.endswith(ERRORS_SUFFIX) else base


def ref_closure(root_id: str, get_chunks: Callable[[list[str]], dict[str, Chunk]], max_depth: int = 3) -> set[str]:
    """Ids reachable from ``root_id`` over ``ref_ids`` in at most ``max_depth`` hops.

    The root is excluded; cycles stop at ids already seen; ids the corpus lacks (unresolved
    refs) are left out, since no context could contain them. ``:partN`` links are not
    followed: they continue a split chunk's own text, they are no ``$ref`` of the spec.
    """
    seen, frontier, found = {root_id}, [root_id], set()
    for _ in range(max_depth + 1):
        if not frontier:
            break
        chunks = get_chunks(frontier)
        found.update(cid for cid in frontier if cid in chunks)
        next_level = []
        for cid in frontier:
            for ref in chunks[cid].ref_ids if cid in chunks else ():
                if ref not in seen and base_chunk_id(ref) == ref:
                    seen.add(ref)
                    next_level.append(ref)
        frontier = next_level
    found.discard(root_id)
    return found


def closure_share(closure: set[str], context_ids: Iterable[str]) -> float:
    """Share of ``closure`` present in the context (any part of a split chunk counts)."""
    required = {base_chunk_id(cid) for cid in closure}
    if not required:
        return 1.0
    present = {base_chunk_id(cid) for cid in context_ids}
    return len(required & present) / len(required)


def closure_completeness(operations: Iterable[str], context_ids: Sequence[str],
                         get_chunks: Callable[[list[str]], dict[str, Chunk]],
                         max_depth: int = 3) -> tuple[float | None, float | None]:
    """(mean closure share over ``operations``, 1.0 when every share is 1.0); (None, None) without
    operations. The gold completeness and the delivered completeness both read this."""
    shares = [closure_share(ref_closure(op, get_chunks, max_depth), context_ids) for op in dict.fromkeys(operations)]
    if not shares:
        return None, None
    return mean(shares), float(all(s == 1.0 for s in shares))


def is_operation_chunk(chunk_id: str) -> bool:
    """An operation's own chunk (or a ``:partN`` of it); not its ``errors`` chunk, not a component."""
    return chunk_endpoint(chunk_id) is not None and not base_chunk_id(chunk_id).endswith(ERRORS_SUFFIX)


def delivered_endpoints(context_ids: Iterable[str]) -> set[Endpoint]:
    """The endpoints whose own operation chunk (its base id, not a part or ``errors``) is in the context."""
    return {chunk_endpoint(cid) for cid in context_ids if is_operation_chunk(cid) and base_chunk_id(cid) == cid}


def primary_operations(primary_ids: Iterable[str]) -> list[str]:
    """The operations delivered as primary chunks, as operation chunk ids, first occurrence first."""
    return list(dict.fromkeys(operation_of(cid) for cid in primary_ids if is_operation_chunk(cid)))


def context_recall(gold: set, delivered: set) -> float:
    """R@ctx: share of the gold operations delivered in the context."""
    return len(gold & delivered) / len(gold) if gold else 0.0


def context_all_found(gold: set, delivered: set) -> float:
    """all@ctx: 1.0 when every gold operation is delivered in the context."""
    return 1.0 if gold and gold <= delivered else 0.0


def token_share(chunks: Sequence[tuple[str, int]], relevant: Callable[[str], bool]) -> float:
    """Share of the tokens of ``chunks`` ((id, tokens) pairs) in the chunks ``relevant`` accepts;
    0.0 for an empty context."""
    total = sum(n for _, n in chunks)
    return sum(n for cid, n in chunks if relevant(cid)) / total if total > 0 else 0.0


def api_precision(chunks: Sequence[tuple[str, int]], gold_apis: Iterable[str]) -> float:
    """Context precision by API: share of the context's tokens in chunks of the gold APIs."""
    apis = set(gold_apis)
    return token_share(chunks, lambda cid: split_chunk_id(cid)[0] in apis)


def operation_footprint(op_id: str, get_chunks: Callable[[list[str]], dict[str, Chunk]],
                        max_depth: int = 3) -> set[str]:
    """An operation chunk, its ``$ref`` closure (:func:`ref_closure`) and its ``errors`` chunk."""
    return {op_id, errors_chunk_id(op_id)} | ref_closure(op_id, get_chunks, max_depth)


def operation_precision(chunks: Sequence[tuple[str, int]], footprint: set[str]) -> float:
    """Context precision by operation: share of the context's tokens in ``footprint`` (the union of
    the gold operations' footprints); a ``:partN`` counts as its chunk."""
    return token_share(chunks, lambda cid: base_chunk_id(cid) in footprint)


def paired_randomization_p(a: Sequence[float], b: Sequence[float], rounds: int = 10_000, seed: int = 0) -> float | None:
    """Two-sided paired randomization (sign-flip) test of the mean of ``b - a`` over paired values.

    Each round flips the sign of every per-question difference with probability 1/2 (as swapping
    the two systems' values would); p = (1 + rounds whose |mean| is at least the observed |mean|)
    / (1 + rounds), so it is never 0. A fixed ``seed`` makes it reproducible. Identical runs give
    1.0; None without pairs. (ranx's ``compare`` runs the same Fisher randomization test.)
    """
    if len(a) != len(b):
        raise ValueError(f"paired values differ in length: {len(a)} and {len(b)}")
    diffs = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if diffs.size == 0:
        return None
    if not diffs.any():
        return 1.0
    observed = abs(float(diffs.mean())) - 1e-12  # float ties count as at least as extreme
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < rounds:  # blocks bound the memory: rounds x questions signs at most 1,000 rows at a time
        n = min(1000, rounds - done)
        signs = rng.integers(0, 2, size=(n, diffs.size), dtype=np.int8) * 2 - 1
        hits += int(np.count_nonzero(np.abs(signs @ diffs) / diffs.size >= observed))
        done += n
    return (hits + 1) / (rounds + 1)


def paired_values(pairs: Iterable[tuple[float | None, float | None]]) -> tuple[list[float], list[float]]:
    """The pairs where both sides have a value, split into the two sides."""
    kept = [(x, y) for x, y in pairs if x is not None and y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


class RankingScores(BaseModel):
    """A ranking's scores on one query: the pipeline's and every baseline's."""

    recall_at_5: float = 0.0
    recall_at_10: float = 0.0
    all_found_at_10: float = 0.0
    mrr: float = 0.0
    ndcg_at_10: float = 0.0


class ContextScores(BaseModel):
    """The context's scores on one query (the engine's or a baseline's). None: not measured (a run
    from before they existed, or a baseline without a context); an erroring query gets zeros."""

    ctx_recall: float | None = Field(None, description="R@ctx: gold operations whose own chunk is in the context")
    ctx_all_found: float | None = Field(None, description="all@ctx: 1.0 when every gold operation is")
    ctx_api_precision: float | None = Field(None, description="share of the context's tokens of the gold APIs")
    ctx_op_precision: float | None = Field(None, description="share of the context's tokens in the gold "
                                                             "operations, their closures and errors chunks")
    ctx_completeness: float | None = Field(None, description="mean closure share of the operations delivered as "
                                                             "primaries; None when none is")

    @classmethod
    def failed(cls) -> "ContextScores":
        return cls(ctx_recall=0.0, ctx_all_found=0.0, ctx_api_precision=0.0, ctx_op_precision=0.0,
                   ctx_completeness=0.0)


CONTEXT_METRICS = (*ContextScores.model_fields, "context_tokens")  # context_tokens: the context's total_tokens


class QueryMetrics(ContextScores, RankingScores):
    """One query's scores; the all-zero default (with :meth:`ContextScores.failed`) is what an
    erroring query gets."""

    selection_accuracy: float = 0.0
    selection_precision: float = 0.0
    completeness: float | None = Field(0.0, description="mean closure share over the gold endpoints found in "
                                                        "the context; None when none was found (not averaged)")
    closure_complete: float | None = Field(0.0, description="1.0 when every found gold endpoint's closure is complete")
    hidden_recovery_at_10: float | None = Field(None, description="every gold call before the last in the top 10; "
                                                                  "None for single-call queries")
    plan_pair_accuracy: float | None = Field(None, description="gold call pairs in the plan in gold order; None "
                                                               "without pairs")
    plan_order_accuracy: float | None = Field(None, description="the same over the pairs the plan holds both "
                                                                "calls of; None when it holds none")


class GoldGraph(BaseModel):
    """The dependency graph on one query's gold calls (see :func:`edge_hits`)."""

    edge_hits: int = 0
    edge_total: int = 0
    producers_per_param: list[int] = Field(default_factory=list, description="producers of each id parameter")


class LLMUsage(BaseModel):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ScoredQuery(Protocol):
    """What :func:`summarize` reads from a per-query result."""

    metrics: QueryMetrics
    context_tokens: int
    latency_ms: dict[str, float]
    fallbacks: list[Fallback]
    llm: LLMUsage
    error: str | None
    baselines: dict  # baseline name -> BaselineScores


RANKING_METRICS = ("recall_at_5", "recall_at_10", "all_found_at_10", "mrr", "ndcg_at_10")
BASELINE_METRICS = (*CONTEXT_METRICS, *RANKING_METRICS)


def query_value(result: ScoredQuery, metric: str) -> float | None:
    """The pipeline's value of ``metric`` on one query: a QueryMetrics field or ``context_tokens``."""
    return float(result.context_tokens) if metric == "context_tokens" else getattr(result.metrics, metric)


def baseline_value(scores: BaseModel, metric: str) -> float | None:
    value = getattr(scores, metric, None)
    return None if value is None else float(value)


class SubsetRecall(BaseModel):
    """R@10 of the pipeline and of each baseline on a subset of the queries."""

    n: int = 0
    recall_at_10: float = 0.0
    baselines: dict[str, float] = Field(default_factory=dict, description="baseline name -> R@10 on the subset")


class MetricSummary(BaseModel):
    """Means over queries (micro average); errors count as 0, never dropped."""

    n_queries: int = 0
    n_errors: int = 0
    scores: dict[str, float | None] = Field(default_factory=dict,
                                           description="QueryMetrics field -> mean; None when no query has a value")
    completeness_n: int = Field(0, description="queries with a gold endpoint in the context (or an error)")
    mean_context_tokens: float = 0.0
    latency_ms: dict[str, Latency] = Field(default_factory=dict,
                                                description="stage -> p50/p95 over the queries that did not error")
    llm_calls_per_query: float = 0.0
    prompt_tokens_per_query: float = 0.0
    completion_tokens_per_query: float = 0.0
    fallback_rate: float = Field(0.0, description="share of queries with a fallback whose reason is not no_llm")
    fallback_counts: dict[str, int] = Field(default_factory=dict, description="'stage/reason' -> count")
    delivered_n: int = Field(0, description="queries with an operation among the context's primaries (or an error)")
    baselines: dict[str, dict[str, float | None]] = Field(
        default_factory=dict, description="baseline name -> metric -> mean over the queries (None: not measured)")
    baseline_p: dict[str, dict[str, float | None]] = Field(
        default_factory=dict, description="baseline name -> metric -> paired randomization p of the pipeline "
                                          "against the baseline over the queries (None: no pairs)")
    selection_missed: SubsetRecall = Field(default_factory=SubsetRecall,
                                           description="queries whose gold API stage 1 missed (selection accuracy < 1)")
    edge_recall: float | None = Field(None, description="micro average over the gold calls' id parameters")
    edge_total: int = 0
    producers_per_param: float | None = Field(None, description="mean producers of a gold call's id parameter")


def summarize(results: Sequence[ScoredQuery]) -> MetricSummary:
    """Aggregate per-query results; ``None`` completeness (no gold endpoint in context) is skipped."""
    values = {name: [v for r in results if (v := getattr(r.metrics, name)) is not None]
              for name in QueryMetrics.model_fields}
    scores = {name: mean(vs) if vs else None for name, vs in values.items()}
    ran = [r for r in results if r.error is None]  # a failed call's time says nothing about the stages
    stages = sorted({stage for r in ran for stage in r.latency_ms})
    latency = {s: _latency([r.latency_ms[s] for r in ran if s in r.latency_ms]) for s in stages}
    counts = Counter(f"{fb.stage}/{fb.reason}" for r in results for fb in r.fallbacks)
    names = [n for n in sorted({n for r in results for n in r.baselines}) if all(n in r.baselines for r in results)]
    return MetricSummary(
        n_queries=len(results),
        n_errors=sum(r.error is not None for r in results),
        scores=scores,
        completeness_n=sum(r.metrics.completeness is not None for r in results),
        mean_context_tokens=mean(r.context_tokens for r in results),
        latency_ms=latency,
        llm_calls_per_query=mean(r.llm.calls for r in results),
        prompt_tokens_per_query=mean(r.llm.prompt_tokens for r in results),
        completion_tokens_per_query=mean(r.llm.completion_tokens for r in results),
        fallback_rate=mean(float(any(fb.reason != "no_llm" for fb in r.fallbacks)) for r in results),
        fallback_counts=dict(sorted(counts.items())),
        delivered_n=sum(r.metrics.ctx_completeness is not None for r in results),
        baselines={name: {k: _mean_or_none(baseline_value(r.baselines[name], k) for r in results)
                          for k in BASELINE_METRICS} for name in names},
        baseline_p={name: {k: paired_randomization_p(*paired_values(
                              (query_value(r, k), baseline_value(r.baselines[name], k)) for r in results))
                          for k in BASELINE_METRICS} for name in names},
        selection_missed=_subset_recall([r for r in results if r.metrics.selection_accuracy < 1.0]),
        **_edges([g for r in results if (g := getattr(r, "graph", None)) is not None]),
    )


def _subset_recall(results: Sequence[ScoredQuery]) -> SubsetRecall:
    names = {n for r in results for n in r.baselines}
    return SubsetRecall(n=len(results), recall_at_10=mean(r.metrics.recall_at_10 for r in results),
                        baselines={n: mean(r.baselines[n].recall_at_10 for r in results if n in r.baselines)
                                   for n in sorted(names)})


def _edges(graphs: list[GoldGraph]) -> dict:
    hits, total = sum(g.edge_hits for g in graphs), sum(g.edge_total for g in graphs)
    counts = [n for g in graphs for n in g.producers_per_param]
    return {"edge_recall": hits / total if total else None, "edge_total": total,
            "producers_per_param": mean(counts) if counts else None}


def _mean_or_none(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return mean(present) if present else None


def _latency(values: list[float]) -> Latency:
    return Latency.of(values)
