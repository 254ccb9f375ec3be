"""Ordered plans: the operations a question needs, in call order, each with its budgeted
context and where every parameter's value comes from.

Built on a query's ranking, after producer expansion. The target is the first primary hit
that takes an id which an operation ranked above it produces (the question asks for what the
ids lead to), else the best operation the retriever found itself. The target's parameters are bound to operations ranked above it that
produce them, those that need no id first, then the nearest (recursively); operations placed
to use what a plan step finds are appended after it. Every parameter is bound to an earlier
step's response field (``GET /search/movie -> results[].id -> {movie_id}``) or to the question.
A primary hit that takes an id the plan's last step yields, and that the retriever found with
only a placeholder lookup for that id, comes last when its name answers a word of the question
no step's name does (:func:`_extend`).

A question that asks for several things ("check the IP's reputation; if it is bad, report it")
has steps no id links. It is split into sub-questions (grammar only:
:func:`~specrag.engine.agentic.split.split_question`); each sub-question's best match among the
primary hits joins the plan, in the order asked, each with its producers, in place of the single
target. A match is lexical: the sub-question's terms found in the operation's search text, each
weighted by how few of the primary hits have it.
"""

from __future__ import annotations

import math
from collections import Counter

from pydantic import BaseModel, Field, field_validator
from specrag.context.knowledge import ContextChunk, RetrievalStats, output_metadata
from specrag.context.nodes import chunk_to_node
from specrag.core.analysis import index_tokens, query_terms
from specrag.core.ids import operation_method
from specrag.engine.agentic.split import split_question
from specrag.graph.models import DependencyEdge
from specrag.specs.models import Chunk
from specrag.stages.names import owned_by_asker
from specrag.stages.producer_policy import (
    NO_STRENGTH,
    ProducerFacts,
    best_producer,
    for_the_asker,
    producer_facts,
)
from specrag.stages.producers import FOLLOW_UP, provides_reason, step_label

MIN_STEP_TOKENS = 300
FROM_QUESTION = "from the question"


class ParamBinding(BaseModel):
    param: str
    location: str = ""
    source: str = Field(description="'step' (an earlier step's response) or 'question'")
    from_step: int | None = Field(None, description="the step number whose response provides it")
    field: str = Field("", description="the response field, e.g. 'results[].id'")
    label: str = Field(description="'GET /search/movie -> results[].id -> {movie_id}' or 'from the question'")


class PlanStep(BaseModel):
    step: int
    chunk_id: str
    api: str = Field("", description="the API id (spec file id) the operation belongs to")
    base_url: str = Field("", description="where the operation is called (its preferred server); '' when the spec "
                                          "names none")
    method: str
    path: str
    operation_id: str = ""
    reason: str = Field(description="'answers the question' or why an earlier step was added")
    bindings: list[ParamBinding] = Field(default_factory=list)
    context: list[ContextChunk] = Field(default_factory=list, description="the operation, then its references")
    tokens: int = 0

    @field_validator("context")
    @classmethod
    def _output_metadata(cls, chunks: list[ContextChunk]) -> list[ContextChunk]:
        """As in a KnowledgeContext: ``api`` for the API id, no JSON text inside the JSON."""
        return [c.model_copy(update={"metadata": output_metadata(c.metadata)}) for c in chunks]


class Plan(BaseModel):
    question: str
    steps: list[PlanStep] = Field(default_factory=list, description="in call order")
    total_tokens: int = 0
    token_budget: int = 0
    stats: RetrievalStats = Field(default_factory=RetrievalStats, description="the query that found the steps")

    def call_order(self) -> list[str]:
        return [f"{s.method} {s.path}" for s in self.steps]


def plan_operations(ranking: list[str], chunks: dict[str, Chunk], reasons: dict[str, str],
                    primary: int = 5, question: str = "") -> list[str]:
    """Operation chunk ids of the plan, in call order (see the module docstring)."""
    return [cid for cid, _ in planned_calls(ranking, chunks, reasons, primary, question)]


def planned_calls(ranking: list[str], chunks: dict[str, Chunk], reasons: dict[str, str],
                  primary: int = 5, question: str = "") -> list[tuple[str, str]]:
    """(operation chunk id, the sub-question it answers; "" for the whole question or a
    producer), in call order."""
    ops = [cid for cid in ranking if cid in chunks and operation_method(cid)]
    if not ops:
        return []
    target = _target(ops, chunks, reasons, primary)
    parts = split_question(question) if question else []
    answers = _intents(parts, ops[:primary], chunks, target) if len(parts) > 1 else {target: ""}
    order: list[str] = []
    own = owned_by_asker(question)
    for cid in answers:
        _with_producers(cid, ops, chunks, order, set(), own)
    for cid in ops:  # follow-ups: placed to use what a plan step finds
        if cid not in order and _follows(reasons.get(cid, ""), order):
            _with_producers(cid, ops, chunks, order, set(), own)
    _extend(order, ops[:primary], chunks, reasons, question)
    return [(cid, answers.get(cid, "")) for cid in order]


def _extend(order: list[str], primaries: list[str], chunks: dict[str, Chunk], reasons: dict[str, str],
            question: str) -> None:
    """"Cover images of movies directed by Christopher Nolan": the plan ends at the person's movie
    credits, and the retriever also found ``GET /movie/{movie_id}/images``, whose movie id only a
    lookup placed for it provides, with nothing named to look up. A primary hit whose id the plan's
    last step yields, whose id had producers placed for it (none of them in the plan), and whose
    name (method, path, summary, operationId) has a word of the question no step's name has, comes
    last: it uses the ids that step finds."""
    if not order or not question:
        return
    last, asked = order[-1], set(query_terms(question))
    answered = set().union(*(_name_terms(chunks[cid]) for cid in order))
    for hit in primaries:
        if hit in order or hit in reasons:  # placed hits already serve the step they were placed for
            continue
        needs = {p.name for p in chunks[hit].params if p.id_like}
        fed = {e.param for e in chunks[hit].producers if e.producer == last and e.param in needs}
        placed = {cid for cid, why in reasons.items() if any(why == provides_reason(p, hit) for p in fed)}
        if placed and not placed & set(order) and (_name_terms(chunks[hit]) & asked) - answered:
            order.append(hit)
            return


def _name_terms(chunk: Chunk) -> set[str]:
    """What a call is called, as terms (not what it returns: its content lists response fields)."""
    return set(query_terms(f"{chunk.method} {chunk.path} {chunk.summary} {chunk.operation_id}"))


def _intents(parts: list[str], candidates: list[str], chunks: dict[str, Chunk], target: str) -> dict[str, str]:
    """Each sub-question's best-matching candidate (none without a shared term), in the order
    asked -> that sub-question. A sub-question whose best match an earlier one took adds nothing
    (it restates a request); the ranking's target stands in only when nothing matches."""
    terms = {cid: set(words) for cid, words in zip(candidates, index_tokens(
        [chunks[cid].search_text for cid in candidates], return_ids=False))}
    share = Counter(word for words in terms.values() for word in words)

    def match(part: str, cid: str) -> float:
        # rounded: equal weights summed in another order must tie (and fall to the better rank)
        # rather than differ in the last bit, as they did with the hash seed's order of a set
        return round(sum(math.log(1 + len(terms) / share[w]) for w in sorted(set(query_terms(part)))
                         if w in terms[cid]), 9)

    placed: dict[str, int] = {}
    for i, part in enumerate(parts):
        scored = [(match(part, cid), -rank, cid) for rank, cid in enumerate(candidates)]
        score, _, best = max(scored, default=(0.0, 0, ""))
        if score > 0:
            placed.setdefault(best, i)
    if not placed:
        placed[target] = 0
    ranked = {cid: rank for rank, cid in enumerate(candidates)}
    return {cid: parts[i] for cid, i in sorted(placed.items(), key=lambda kv: (kv[1], ranked.get(kv[0], 0)))}


def _target(ops: list[str], chunks: dict[str, Chunk], reasons: dict[str, str], primary: int) -> str:
    """The first primary hit that takes an id an operation above it produces (found by the
    retriever or placed to use a lookup's result), else the first one the retriever found."""
    for i, cid in enumerate(ops[:primary]):
        if cid in reasons and not reasons[cid].startswith(FOLLOW_UP):
            continue
        above = set(ops[:i])
        needs = {p.name for p in chunks[cid].params if p.id_like}
        if any(e.param in needs and e.producer in above for e in chunks[cid].producers):
            return cid
    return next((cid for cid in ops if cid not in reasons), ops[0])


def _follows(reason: str, order: list[str]) -> bool:
    return reason.startswith(FOLLOW_UP) and any(step_label(o) in reason for o in order)


def bindings(chunk: Chunk, earlier: list[str], own: list[str] | None = None) -> list[ParamBinding]:
    """Each parameter's source: the latest earlier step that produces it (``own``: the words of
    the asker's own things, :func:`~specrag.stages.producer_policy.for_the_asker`), else the question."""
    out = []
    for need in chunk.params:
        edge = _bound_by(chunk.producers, need.name, earlier, own=own)
        if edge is None:
            out.append(ParamBinding(param=need.name, location=need.location, source="question", label=FROM_QUESTION))
        else:
            out.append(ParamBinding(param=need.name, location=need.location, source="step",
                                    from_step=earlier.index(edge.producer) + 1, field=edge.field, label=edge.label()))
    return out


def step_budget(total: int, n_steps: int) -> int:
    return max(MIN_STEP_TOKENS, total // max(1, n_steps))


def _with_producers(cid: str, ops: list[str], chunks: dict[str, Chunk], order: list[str], visiting: set[str],
                    own: list[str] | None = None) -> None:
    if cid in order or cid in visiting:
        return
    visiting.add(cid)
    chunk = chunks[cid]
    above = ops[: ops.index(cid)] if cid in ops else ops
    for need in chunk.params:
        edge = _bound_by(chunk.producers, need.name, [*order, *above], chunks, own)
        if edge is not None and edge.producer in chunks:
            _with_producers(edge.producer, ops, chunks, order, visiting, own)
    order.append(cid)


def _bound_by(edges: list[DependencyEdge], param: str, candidates: list[str],
              chunks: dict[str, Chunk] | None = None, own: list[str] | None = None) -> DependencyEdge | None:
    """The producer of ``param`` among ``candidates`` (for the asker's own things, those
    :func:`~specrag.stages.producer_policy.for_the_asker` keeps), by the one producer policy
    (:mod:`specrag.stages.producer_policy`) as plans use it: one that needs no id itself first
    (when ``chunks`` tells; a producer they do not hold counts as needing none), then the one that
    comes last (the nearest call before); the edge's strength is not weighed."""
    edges_of = (lambda cid: chunks[cid].producers if cid in chunks else []) if chunks is not None else None
    offered = for_the_asker([e for e in edges if e.param == param and e.producer in candidates], own, edges_of)
    facts = None if chunks is None else {
        e.producer: producer_facts(chunks[e.producer].params) if e.producer in chunks else ProducerFacts()
        for e in offered}
    return best_producer(offered, facts, self_sufficient_first=True, nearness=candidates, weights=NO_STRENGTH)


def build_plan(engine, question: str, apis: list[str] | None = None, token_budget: int | None = None) -> Plan:
    """``engine.plan``: one query, then the plan's steps with their contexts within ``token_budget``."""
    from llama_index.core.schema import NodeWithScore
    ctx = engine.retrieve_context(question, apis=apis)
    stats, ranking = ctx.retrieval_stats, ctx.search.ranking
    chunks = engine.lookup.get_chunks(list(ranking))
    calls = planned_calls(ranking, chunks, ctx.step_reasons, engine.settings.retrieval.max_primary_results, question)
    order = [cid for cid, _ in calls]
    budget = token_budget or engine.settings.context.context_token_limit
    per_step = step_budget(budget, len(order))
    expander = engine.references.model_copy(update={
        "token_limit": per_step, "max_total_chunks": max(3, engine.settings.retrieval.max_total_chunks // max(1, len(order)))})
    plan = Plan(question=ctx.query, token_budget=budget, stats=stats)
    own = owned_by_asker(question)
    for number, (cid, part) in enumerate(calls, 1):
        chunk = chunks[cid]
        expansion = expander.follow_references([NodeWithScore(node=chunk_to_node(chunk), score=None)])
        plan.steps.append(PlanStep(step=number, chunk_id=cid, api=chunk.file_id,
                                   base_url=chunk.base_urls[0] if chunk.base_urls else "",
                                   method=chunk.method, path=chunk.path,
                                   operation_id=chunk.operation_id,
                                   reason=f"answers: {part}" if part else "answers the question",
                                   bindings=bindings(chunk, order[: number - 1], own),
                                   context=[*expansion.primary, *expansion.referenced], tokens=expansion.total_tokens))
    _explain(plan)
    plan.total_tokens = sum(s.tokens for s in plan.steps)
    return plan


def _explain(plan: Plan) -> None:
    """Each step before the last says which later step uses it, and for what."""
    for step in plan.steps:
        uses = [(later, b.param) for later in plan.steps for b in later.bindings if b.from_step == step.step]
        if uses:
            step.reason = "; ".join(f"provides {param} for {later.method} {later.path}" for later, param in uses)


def render_plan(plan: Plan) -> str:
    """The plan for a person: numbered calls, each parameter's source, the context size."""
    if not plan.steps:
        return f"No operation found for: {plan.question}"
    lines = [f"Plan for: {plan.question}", ""]
    for step in plan.steps:
        lines.append(f"{step.step}. {step.method} {step.path}" + (f"  ({step.operation_id})" if step.operation_id else ""))
        if step.api:
            lines.append(f"   api: {step.api}" + (f" at {step.base_url}" if step.base_url else ""))
        lines.append(f"   why: {step.reason}")
        for b in step.bindings:
            lines.append(f"   {b.param} ({b.location}) <- " + (f"step {b.from_step}: {b.label}" if b.from_step else b.label))
        lines.append(f"   context: {len(step.context)} chunks, {step.tokens} tokens")
    lines.append(f"\ntotal context: {plan.total_tokens} tokens (budget {plan.token_budget}, split across the steps)")
    return "\n".join(lines)
