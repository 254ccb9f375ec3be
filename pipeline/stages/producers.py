"""Producer expansion (stage 3): an operation whose id parameter nothing above it in the ranking
can fill gets its best producer placed right before it, so the calls come in call order.

"Who directed the top-rated movie?" retrieves ``GET /movie/{movie_id}/credits``; its
``movie_id`` comes from ``GET /movie/top_rated`` (``results[].id``) or ``GET /search/movie``.
The candidates are the operation's producers from the dependency graph (``specrag.graph``,
stored on the chunk at ingest). Each is scored from general signals, no word of any domain:

- the edge's own strength (a stated link or an exact field name beats a type guess);
- it needs no id itself (a list or a lookup ends the chain; RESTler's producers first);
- the question names something (a quoted title, a capitalised name) and the producer takes
  free text: a lookup turns that name into the id; when it names nothing, a ``GET`` that takes
  no input (a list) fits better than a call that changes something;
- how high the retriever ranks it within the API for the question.

When the question asks for the asker's own things ("my playlists") and the id has a producer
that names the caller (``GET /me``, ``GET /me/playlists``), only such producers count; without
one, a list of the resource keyed by the id ``GET /me`` gives (``GET /users/{user_id}/playlists``)
(:func:`~specrag.stages.producer_policy.for_the_asker`). Which producer is best is the one
policy of :mod:`specrag.stages.producer_policy`, with every signal weighed.

The chosen producer is itself checked (chains: ``/search/collection`` -> ``/collection/{id}``
-> ``/movie/{movie_id}/credits``), up to ``max_chain`` links.

Then each name in the question ("the collection Star Wars", a capitalised name) gets the
free-text lookup of its resource (see :mod:`specrag.stages.names` for what the words around a
name say). A name the grammar says owns or made another resource ("X's movies", "movies directed
by X") is of a resource with a call that yields that one's ids (``/person/{id}/movie_credits``).
The lookup is placed before the first hit that needs the resource's id, or after the top hit
together with an operation that consumes it: the one that yields an id a top hit needs (the
graph's bridge: ``/collection/{id}``, whose ``parts[].id`` fill ``{movie_id}``), else the
best-ranked.

Last, the other direction: a top hit that needs no id (a list, a lookup) and leaves words of
the question unanswered ("the cast of a show on the air": ``/tv/on_the_air`` says nothing of a
cast) is followed by the best-ranked operation of its API that takes the id it yields and has
one of those words (``/tv/{tv_id}/credits``), unless the ranking holds such a call already. And
when no ranked hit has some word of the question, the best-ranked call that has it and takes
only ids the ranked hits yield comes right after the last of them ("the headquarters of the
company that made X": ``/company/{company_id}`` after ``/tv/{tv_id}``).

Each placed node carries ``metadata[ADDED_STEP]``, e.g. "provides movie_id for
GET /movie/{movie_id}/credits".
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Optional

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from specrag.context.nodes import Hit
from specrag.core import caches
from specrag.core.analysis import query_terms
from specrag.core.ids import parse_operation_id
from specrag.core.records import ADDED_STEP
from specrag.specs.models import decode_params, decode_producers
from specrag.stages.hybrid_retriever import ranking
from specrag.stages.names import named_spans, names_something, owned_by_asker
from specrag.stages.producer_policy import (
    Weights,
    best_producer,
    for_the_asker,
    producer_facts,
)
from specrag.stages.query import SpecQuery, question_of

API_RANKING_DEPTH = 30
FOLLOW_UP = "uses the "  # the reason of a call placed to use what an earlier one finds


def _names(resource, words: list[str]) -> bool:
    """``words`` name the resource: every stem of its type is among theirs."""
    stems = set(query_terms(resource.name.replace("_", " ")))
    return bool(stems) and stems <= set(query_terms(" ".join(words)))


@caches.register
@lru_cache(maxsize=1024)  # keys are the texts the index's node cache already holds
def _content_terms(text: str) -> frozenset[str]:
    """A chunk text's terms (the same texts recur across queries: stemming them was 5 % of a query)."""
    return frozenset(query_terms(text))


def _edges(hit: NodeWithScore) -> tuple:
    """The hit's producer edges (the dependency graph stored on its chunk)."""
    raw = hit.node.metadata.get("producers")
    return _decoded_edges(hit.node.node_id, raw) if isinstance(raw, str) else tuple(decode_producers(hit.node.node_id, raw))


def _params(hit: NodeWithScore) -> tuple:
    raw = hit.node.metadata.get("params")
    return _decoded_params(raw) if isinstance(raw, str) else tuple(decode_params(raw))


@caches.register
@lru_cache(maxsize=1024)  # operations recur across queries: decoding was 5 % of a query; ~9 KB an entry
def _decoded_edges(consumer: str, raw: str) -> tuple:
    return tuple(decode_producers(consumer, raw))


@caches.register
@lru_cache(maxsize=1024)
def _decoded_params(raw: str) -> tuple:
    return tuple(decode_params(raw))


def step_label(chunk_id: str) -> str:
    op = parse_operation_id(chunk_id)
    return f"{op[2]} {op[1]}" if op else chunk_id


def provides_reason(param: str, consumer_id: str) -> str:
    """The reason of a producer placed for a consumer's unbound id: "provides movie_id for GET /movie/{movie_id}"."""
    return f"provides {param} for {step_label(consumer_id)}"


class ProducerExpander(BaseNodePostprocessor):
    """Places each top hit's missing producers right before it; no per-query state is kept."""

    hydrate: Any = Field(None, exclude=True, description="stub hits -> full nodes (the store's hydrate)")
    load_index: Any = Field(None, exclude=True, description="file_id -> ApiIndex | None (its resource types)")
    retriever: Any = Field(None, exclude=True, description="ranks one API's endpoints for the question")
    consumers: int = Field(3, description="top hits whose id parameters are checked")
    max_added: int = Field(4, description="producers placed per query at most")
    max_chain: int = Field(2, description="producer-of-a-producer links followed")
    self_sufficient_weight: float = Field(1.0, description="bonus for a producer that needs no id itself")
    lookup_weight: float = Field(1.0, description="bonus for a free-text lookup when the question names "
                                                  "something (for an input-free list when it names nothing)")
    relevance_weight: float = Field(1.0, description="weight of the producer's rank in the API for the question")
    follow_depth: int = Field(10, description="a top hit that needs no id and leaves words of the question "
                                              "unanswered is followed by the best-ranked call that uses its id and "
                                              "has those words, among the API's best this many (0: never)")

    _resources: dict = PrivateAttr(default_factory=dict)  # api -> its lookup resources

    @classmethod
    def class_name(cls) -> str:
        return "ProducerExpander"

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: Optional[QueryBundle] = None) -> list[NodeWithScore]:
        if query_bundle is None or not nodes:
            return nodes
        question = question_of(query_bundle)
        depth = (query_bundle.top_k if isinstance(query_bundle, SpecQuery) else None) or len(nodes)
        rank_api = (lambda api: self._api_ranking(query_bundle, question, api)) if self.retriever is not None else None
        preferred = (query_bundle.prefer_file_ids or query_bundle.file_ids or []) if isinstance(query_bundle, SpecQuery) else []
        return _Placement(self, question, list(nodes), rank_api, preferred).run()[:depth]

    def _api_ranking(self, query: QueryBundle, question: str, api: str) -> list[str]:
        narrowed = SpecQuery(query_str=query.query_str, custom_embedding_strs=[question], file_ids=[api],
                             types=["endpoint"], top_k=API_RANKING_DEPTH, hydrate=False)
        return [hit.node.node_id for hit in ranking(self.retriever, narrowed)]

    def resources(self, api: str) -> tuple:
        """The API's resource types that have a free-text lookup, kept per API (a question's names
        are typed in up to four APIs, and only a few parsed detailed indexes stay cached)."""
        found = self._resources.get(api)
        if found is None:
            index = self.load_index(api) if self.load_index else None
            found = self._resources[api] = tuple(r for r in (index.resources if index is not None else [])
                                                 if r.lookups)
        return found

    def fetch(self, ids: list[str]) -> dict[str, NodeWithScore]:
        stubs = [Hit(TextNode(id_=i, text=""), 0.0) for i in ids]
        full = self.hydrate(stubs) if self.hydrate is not None else []
        return {n.node.node_id: n for n in full if n.node.get_content()}


class _Placement:
    """One query's placement: the ranking being rebuilt and what it has added so far."""

    def __init__(self, cfg: ProducerExpander, question: str, ranked: list[NodeWithScore],
                 rank_api: Callable[[str], list[str]] | None, preferred: list[str] = ()):
        self.cfg, self.question, self.out = cfg, question, ranked
        self.preferred = list(preferred)
        self.rank_api, self._api_ranks = rank_api, {}
        self.names = names_something(question)
        self.own = owned_by_asker(question)
        self.added = 0

    def run(self) -> list[NodeWithScore]:
        for consumer in [n.node.node_id for n in self.out[: self.cfg.consumers]]:
            self._bind(consumer, self.cfg.max_chain)
        if self.names:
            self._named_lookups()
        if self.cfg.follow_depth and self.rank_api is not None:
            for follow in (self._follow_top, self._answer_unanswered):
                if self.added < self.cfg.max_added:
                    follow()
        return self.out

    def _follow_top(self) -> None:
        """"The cast of a show on the air": the top hit lists the shows and leaves "cast"
        unanswered; the best-ranked operation of its API that takes the id it lists and has the
        missing words (``/tv/{tv_id}/credits``, whose response holds ``cast``) comes right after it."""
        top = self.out[0]
        top_id = top.node.node_id
        if any(p.id_like for p in _params(top)) or \
                any(str(n.node.metadata.get(ADDED_STEP, "")).startswith(FOLLOW_UP) for n in self.out):
            return
        missing = set(query_terms(self.question)) - _content_terms(top.node.get_content())
        if not missing:
            return

        def uses_top(hit: NodeWithScore):
            """The edge by which ``hit`` uses the top hit's id."""
            return next((e for e in _edges(hit) if e.producer == top_id), None)

        if any(uses_top(n) and missing & _content_terms(n.node.get_content()) for n in self.out[1:]):
            return  # the ranking already holds such a call
        self._place_first(missing, uses_top)

    def _answer_unanswered(self) -> None:
        """"The headquarters of the company that made the most popular show": when no hit ranked
        has some word of the question, the best-ranked call of the top hit's API, among its top
        ``follow_depth``, that has one of those words and takes only ids the ranked hits yield
        (``GET /company/{company_id}``, whose response holds ``headquarters``, taking the
        ``production_companies[].id`` of ``GET /tv/{tv_id}``) comes right after the last of them."""
        ranked_ids = self._ids()
        missing = set(query_terms(self.question)).difference(
            *(_content_terms(n.node.get_content()) for n in self.out))

        def last_producer(hit: NodeWithScore):
            needs = {p.name for p in _params(hit) if p.id_like}
            edges = [e for e in _edges(hit) if e.param in needs and e.producer in ranked_ids]
            if not needs or needs != {e.param for e in edges}:
                return None
            return max(edges, key=lambda e: ranked_ids.index(e.producer))

        if missing:
            self._place_first(missing, last_producer)

    def _place_first(self, missing: set[str], edge_of: Callable[[NodeWithScore], Any]) -> None:
        """The best-ranked call of the top hit's API, among its best ``follow_depth`` not ranked
        yet, that has a ``missing`` word and an edge ``edge_of`` picks: placed right after that
        edge's producer (both follow-ups above)."""
        present = set(self._ids())
        ranked = [c for c in self._ranked(self.out[0].node.node_id.split(":", 1)[0])
                  if c not in present][: self.cfg.follow_depth]
        fetched = self.cfg.fetch(ranked)
        for cid in ranked:
            hit = fetched.get(cid)
            edge = edge_of(hit) if hit is not None and missing & _content_terms(hit.node.get_content()) else None
            if edge is not None:
                self._place_after(hit, edge.producer, f"{FOLLOW_UP}{edge.param} that {step_label(edge.producer)} finds")
                return

    def _named_lookups(self) -> None:
        """Each name in the question, looked up before whatever needs its id: by the resource
        the words before it name (in the top hit's API, else in the API stage 1 preferred most
        among the others: another API's list can top the ranking; never a third API's, whose
        lookup would answer for another API's thing), else by the resource whose
        consumers the retriever ranks best for the question, never one the grammar says it is
        not (a possessive, a passive agent) and, when it says so, one with a call that yields
        what the name owns or made."""
        top_api = self.out[0].node.node_id.split(":", 1)[0]
        resources = self.cfg.resources(top_api)
        for span in named_spans(self.question):
            typed = next((found for api in [top_api, *[a for a in self.preferred if a != top_api][:1]]
                          if (found := [r for r in self.cfg.resources(api) if _names(r, span.before)])), [])
            owned = [r for r in resources if _names(r, span.owned) or _names(r, span.acted_on)]
            others = [r for r in resources if r not in owned]
            if owned and not typed:  # X's movies, movies by X: X is of a type with a call that yields them
                makers = self._makers(owned)
                others = [r for r in others if makers & set(r.consumers)] or others
            resource = typed[0] if typed else self._most_relevant(others)
            if resource is not None and self.added < self.cfg.max_added:
                self._use_lookup(resource, span.text)

    def _makers(self, resources: list) -> set[str]:
        """Operations that yield ids of ``resources`` (read from the producer edges of a few of
        their consumers)."""
        sample = [c for r in resources for c in r.consumers[:3]]
        found = self.cfg.fetch(sample)
        return {e.producer for cid in sample if cid in found
                for e in _edges(found[cid])
                if e.resource in {r.name for r in resources}}

    def _most_relevant(self, resources: list) -> Any:
        ranks = self._ranks(resources[0].lookups[0].split(":", 1)[0]) if resources and self.rank_api else {}
        scored = [(min((ranks[c] for c in r.consumers if c in ranks), default=None), i, r) for i, r in enumerate(resources)]
        scored = [s for s in scored if s[0] is not None]
        return min(scored, key=lambda s: s[:2])[2] if scored else None

    def _use_lookup(self, resource, name: str) -> None:
        ids = self._ids()
        needers = [i for i in ids if i in set(resource.consumers)]
        lookup = resource.lookups[0]
        if needers and lookup in ids[: ids.index(needers[0])]:
            return
        found = self.cfg.fetch([lookup]) if lookup not in ids else {lookup: self.out[ids.index(lookup)]}
        if lookup not in found:
            return
        reason = f"looks up the {resource.name} '{name}'"
        if needers:
            self._place(found[lookup], needers[0], f"{reason} for {step_label(needers[0])}")
            return
        self._place(found[lookup], ids[1] if len(ids) > 1 else None, reason)  # right after the top hit
        self._follow_up(lookup, resource)

    def _follow_up(self, lookup: str, resource) -> None:
        """The operation that takes the looked-up id, right after the lookup: one that yields an
        id a top hit needs (the bridge from the named resource to the hit), else the best-ranked."""
        api, consumers, ids = lookup.split(":", 1)[0], set(resource.consumers), set(self._ids())
        best = self._bridge(api, consumers, ids) or \
            next((c for c in self._ranked(api) if c in consumers and c not in ids), None) or \
            next((c for c in resource.consumers if c not in ids), None)
        found = self.cfg.fetch([best]) if best else {}
        if best in found:
            self._place_after(found[best], lookup, f"{FOLLOW_UP}{resource.name} id that {step_label(lookup)} finds")

    def _bridge(self, api: str, consumers: set[str], present: set[str]) -> str | None:
        """A consumer of the named resource that produces an id parameter of a top hit (by the
        edge's strength, then the API's ranking), unless the ranking holds one already."""
        ranks = self._ranks(api)
        offered = []
        for hit in self.out[: self.cfg.consumers]:
            needs = {p.name for p in _params(hit) if p.id_like}
            for e in _edges(hit):
                if e.param in needs and e.producer in consumers:
                    if e.producer in present:
                        return None
                    offered.append((-e.score, ranks.get(e.producer, len(ranks)), e.producer))
        return min(offered)[2] if offered else None

    def _place_after(self, hit: NodeWithScore, anchor_id: str, reason: str) -> None:
        """Insert ``hit`` right after ``anchor_id``, at its score: a call that uses what it finds."""
        at = self._ids().index(anchor_id) + 1
        self.out.insert(at, _marked(hit, reason, self.out[at - 1].score))
        self.added += 1

    def _ids(self) -> list[str]:
        return [n.node.node_id for n in self.out]

    def _bind(self, consumer_id: str, chain: int) -> None:
        ids = self._ids()
        if consumer_id not in ids or chain < 0:
            return
        hit = self.out[ids.index(consumer_id)]
        edges = _edges(hit)
        for need in _params(hit):
            if not need.id_like or self.added >= self.cfg.max_added:
                continue
            ids = self._ids()
            above = set(ids[: ids.index(consumer_id)])
            offered = for_the_asker([e for e in edges if e.param == need.name], self.own, self._edges_of)
            if not offered or any(e.producer in above for e in offered):
                continue  # nothing to offer, or already bound by a call ranked before it
            choice = self._choose(offered)
            if choice is not None:
                self._place(choice, consumer_id, provides_reason(need.name, consumer_id))
                self._bind(choice.node.node_id, chain - 1)

    def _edges_of(self, chunk_id: str) -> list:
        """A producer's own producer edges (read only for the asker's own things)."""
        hit = self._hits([chunk_id]).get(chunk_id)
        return _edges(hit) if hit is not None else []

    def _hits(self, ids: list[str]) -> dict[str, NodeWithScore]:
        """The full hits of ``ids``: from the ranking when there, the rest fetched at once."""
        present = {n.node.node_id: n for n in self.out}
        return {**self.cfg.fetch([i for i in ids if i not in present]), **{i: present[i] for i in ids if i in present}}

    def _choose(self, offered) -> NodeWithScore | None:
        """The best producer by the one policy (:mod:`specrag.stages.producer_policy`), among those
        with a hit: every signal weighed (the expander's weights), none of them first."""
        hits = self._hits([e.producer for e in offered])
        facts = {cid: producer_facts(_params(hit), hit.node.metadata.get("method", "GET"), self.names,
                                     self._relevance(cid)) for cid, hit in hits.items()}
        weights = Weights(edge=1.0, self_sufficient=self.cfg.self_sufficient_weight, fit=self.cfg.lookup_weight,
                          relevance=self.cfg.relevance_weight)
        edge = best_producer(offered, facts, weights=weights)
        return hits[edge.producer] if edge is not None else None

    def _relevance(self, chunk_id: str) -> float:
        rank = self._ranks(chunk_id.split(":", 1)[0]).get(chunk_id)
        return 0.0 if rank is None else 1.0 - rank / API_RANKING_DEPTH

    def _ranked(self, api: str) -> list[str]:
        """The API's operations, best-ranked for the question first."""
        ranks = self._ranks(api)
        return sorted(ranks, key=ranks.get)

    def _ranks(self, api: str) -> dict[str, int]:
        """chunk id -> rank of the API's operations for the question (computed once per API)."""
        if self.rank_api is None:
            return {}
        if api not in self._api_ranks:
            self._api_ranks[api] = {cid: r for r, cid in enumerate(self.rank_api(api))}
        return self._api_ranks[api]

    def _place(self, hit: NodeWithScore, consumer_id: str | None, reason: str) -> None:
        """Move (or insert) ``hit`` right before ``consumer_id``; None: at the end."""
        self.out = [n for n in self.out if n.node.node_id != hit.node.node_id]
        at = self._ids().index(consumer_id) if consumer_id is not None else len(self.out)
        score = self.out[min(at, len(self.out) - 1)].score if self.out else hit.score
        self.out.insert(at, _marked(hit, reason, score))
        self.added += 1


def _marked(hit: NodeWithScore, reason: str, score: float | None) -> NodeWithScore:
    node = hit.node.model_copy(update={"metadata": {**hit.node.metadata, ADDED_STEP: reason}})
    node.excluded_embed_metadata_keys = [*hit.node.excluded_embed_metadata_keys, ADDED_STEP]
    node.excluded_llm_metadata_keys = [*hit.node.excluded_llm_metadata_keys, ADDED_STEP]
    return NodeWithScore(node=node, score=score)
