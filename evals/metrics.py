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

from pydantic import BaseModel, Field

from specrag.context import Fallback
from specrag.specs.ids import ERRORS_SUFFIX, base_chunk_id, parse_operation_id
from specrag.specs.models import Chunk

from specrag.evals.querysets import Endpoint, endpoint_key


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


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


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


class RankingScores(BaseModel):
    """A ranking's scores on one query: the pipeline's and every baseline's."""

    recall_at_5: float = 0.0
    recall_at_10: float = 0.0
    all_found_at_10: float = 0.0
    mrr: float = 0.0
    ndcg_at_10: float = 0.0


class QueryMetrics(RankingScores):
    """One query's scores; the all-zero default is what an erroring query gets."""

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


class LatencyStats(BaseModel):
    p50: float = 0.0
    p95: float = 0.0
    n: int = 0


BASELINE_METRICS = ("recall_at_5", "recall_at_10", "all_found_at_10", "mrr", "ndcg_at_10")


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
    latency_ms: dict[str, LatencyStats] = Field(default_factory=dict,
                                                description="stage -> p50/p95 over the queries that did not error")
    llm_calls_per_query: float = 0.0
    prompt_tokens_per_query: float = 0.0
    completion_tokens_per_query: float = 0.0
    fallback_rate: float = Field(0.0, description="share of queries with a fallback whose reason is not no_llm")
    fallback_counts: dict[str, int] = Field(default_factory=dict, description="'stage/reason' -> count")
    baselines: dict[str, dict[str, float]] = Field(default_factory=dict,
                                                   description="baseline name -> metric -> mean over the queries")
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
        baselines={name: {k: mean(getattr(r.baselines[name], k) for r in results) for k in BASELINE_METRICS}
                   for name in sorted({n for r in results for n in r.baselines})
                   if all(name in r.baselines for r in results)},
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


def _latency(values: list[float]) -> LatencyStats:
    return LatencyStats(p50=percentile(values, 50), p95=percentile(values, 95), n=len(values))
