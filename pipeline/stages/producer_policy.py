"""One producer policy: which operation fills an unbound id parameter.

A producer of an id is an operation whose response yields it (a :class:`DependencyEdge` of the
dependency graph, ``GET /search/movie -> results[].id -> {movie_id}``). Three places choose one
producer among a parameter's edges, and all three now call :func:`best_producer`.

What each did before this module (kept exactly, on the labeled eval as in the unit tests):

- **Producer expansion** (``stages/producers.py``, ``_Placement._choose/_score``): among the
  edges whose producer has a hit (in the ranking, else hydrated with content), the highest
  *strength* ``edge.score + w_ss * (needs no id) + w_lookup * fits + w_rel * relevance``
  (``fits``: it takes free text in the query when the question names something, else it is a
  ``GET`` that takes nothing; ``relevance``: ``1 - rank / 30`` in its API's ranking for the
  question, 0 unranked; the ``w_*`` are the expander's fields, 1.0 by default). Ties: the edge
  offered first.
- **Plans** (``plan._bound_by``): among the edges whose producer is an earlier step (or a call
  ranked above), one that needs no id first (when the chunks are known: in ``bindings`` they are
  not, and every producer counts as needing none), then the one nearest before the consumer (the
  latest in the candidates). The edge's score is never read. Ties (one producer, two edges): the
  edge offered first.
- **Agentic retrieval** (``agentic/retriever._Run._best_producer``): among the edges whose
  producer is one of the first 8 offered edges' producers that the store has, those needing no id
  if any, then the strongest edge (``edge.score``). Ties: the edge offered first.

All three first keep, for the asker's own things ("my playlists"), only the producers
:func:`for_the_asker` keeps.

The one policy (:func:`rank_producers`; :func:`best_producer` is its first):

1. *Who counts*: the edges :func:`for_the_asker` keeps (the caller does this, with what it can
   read of a producer's own edges); of them, when ``facts`` are given, those whose producer has
   facts (a hit, a chunk); with ``nearness`` only the producers in it (a plan's earlier calls);
   with ``looked_at`` only the producers of the first ``looked_at`` edges. ``facts=None`` means
   nothing is known of the producers: all count alike.
2. *Best first*, by the key (each part a named argument where the callers differ):

   ``(needs no id   if self_sufficient_first,
     position in nearness (the later the better)   if nearness is given,
     strength = weights.edge * edge.score + weights.self_sufficient * (needs no id)
                + weights.fit * fits + weights.relevance * relevance,
     the edge offered first)``

The three callers are the three settings of these arguments:

=====================  ======================  ===================  ===========================  =========
caller                 self_sufficient_first   nearness             weights                      looked_at
=====================  ======================  ===================  ===========================  =========
producer expansion     False                   None                 the expander's (all 1.0)     None
plans                  True                    the earlier calls    :data:`NO_STRENGTH`          None
agentic retrieval      True                    None                 :data:`EDGE_STRENGTH`        8
=====================  ======================  ===================  ===========================  =========

Why they differ: expansion chooses a call to *add* and weighs every signal it has (the ranking
within the API, what the question names); a plan *binds* to calls already chosen, so the nearest
one before the consumer is the one whose output is at hand; agentic retrieval has no ranking
within the API and reads each producer from the store (at most 8 per id), so the edge's own
strength decides among the producers that end the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from specrag.core.analysis import query_terms
from specrag.core.ids import operation_method, parse_operation_id
from specrag.graph.models import DependencyEdge, ParamNeed
from specrag.stages.names import names_the_caller

AGENTIC_LOOKED_AT = 8  # producers the agentic step reads from the store per unbound id


@dataclass(frozen=True)
class ProducerFacts:
    """What a caller knows of one producer operation."""

    needs_id: bool = False  # it takes an id parameter itself (it does not end the chain)
    fits: bool = False  # a free-text lookup when the question names something, else an input-free GET
    relevance: float = 0.0  # its place in its API's ranking for the question: 1 (first) .. 0 (not ranked)


def producer_facts(params: Iterable[ParamNeed], method: str = "GET", names: bool = False,
                   relevance: float = 0.0) -> ProducerFacts:
    """A producer's facts from its parameters and method; ``names``: the question names something
    (a quoted title, a capitalised name), so a call that takes free text in its query fits; when it
    names nothing, a ``GET`` that takes no input (a list) fits."""
    params = list(params)
    takes_text = any(p.text and p.location == "query" for p in params)
    reads = str(method).upper() == "GET"
    return ProducerFacts(needs_id=any(p.id_like for p in params),
                         fits=takes_text if names else (not params and reads),
                         relevance=relevance)


@dataclass(frozen=True)
class Weights:
    """The terms of a producer's strength (see the module docstring)."""

    edge: float = 1.0  # the edge's own score (a stated link or an exact field name beats a type guess)
    self_sufficient: float = 1.0  # it needs no id itself
    fit: float = 1.0  # :attr:`ProducerFacts.fits`
    relevance: float = 1.0  # :attr:`ProducerFacts.relevance`


EDGE_STRENGTH = Weights(edge=1.0, self_sufficient=0.0, fit=0.0, relevance=0.0)  # agentic: the edge alone
NO_STRENGTH = Weights(edge=0.0, self_sufficient=0.0, fit=0.0, relevance=0.0)  # plans: step order alone


def strength(edge: DependencyEdge, facts: ProducerFacts, weights: Weights) -> float:
    """The weighted sum of a producer's signals (summed in this order: the expander's float, bit for bit)."""
    return (weights.edge * edge.score + weights.self_sufficient * (not facts.needs_id)
            + weights.fit * facts.fits + weights.relevance * facts.relevance)


_UNKNOWN = ProducerFacts()  # facts=None: nothing known, every producer alike


def rank_producers(offered: Sequence[DependencyEdge], facts: Mapping[str, ProducerFacts] | None = None, *,
                   weights: Weights = Weights(), self_sufficient_first: bool = False,
                   nearness: Sequence[str] | None = None,
                   looked_at: int | None = None) -> list[DependencyEdge]:
    """The edges of ``offered`` that count, best first (the module docstring has the policy).

    ``facts``: producer chunk id -> its facts; only producers with facts count (None: all count,
    nothing known of them). ``self_sufficient_first``: a producer that needs no id beats every one
    that does, whatever its strength. ``nearness``: the calls already before the consumer, in
    order; only they count, and a later one beats an earlier one (before strength).
    ``looked_at``: only the producers of the first this many edges count. Ties fall to the edge
    offered first."""
    counted = {e.producer for e in offered[:looked_at]} if looked_at is not None else None
    position: dict[str, int] | None = None
    if nearness is not None:
        position = {}
        for i, cid in enumerate(nearness):
            position.setdefault(cid, i)  # a call listed twice is where it first comes
    keyed = []
    for order, edge in enumerate(offered):
        if (counted is not None and edge.producer not in counted) or \
                (position is not None and edge.producer not in position):
            continue
        known = facts.get(edge.producer) if facts is not None else _UNKNOWN
        if known is None:
            continue
        keyed.append(((not known.needs_id) if self_sufficient_first else False,
                      position[edge.producer] if position is not None else 0,
                      strength(edge, known, weights), -order, edge))
    keyed.sort(key=lambda k: k[:4], reverse=True)
    return [k[4] for k in keyed]


def best_producer(offered: Sequence[DependencyEdge], facts: Mapping[str, ProducerFacts] | None = None,
                  **how) -> DependencyEdge | None:
    """The first of :func:`rank_producers` (same arguments), None when none counts."""
    ranked = rank_producers(offered, facts, **how)
    return ranked[0] if ranked else None


def for_the_asker(offered: list, owned: list[str] | None,
                  edges_of: Callable[[str], list] | None = None) -> list:
    """The producers to choose from. For the asker's own things (``owned``: the words a
    first-person possessive governs, [] for the asker as beneficiary, which names no resource:
    :func:`~specrag.stages.names.owned_by_asker`), among the
    calls that name the caller (``GET /me``): the one whose record itself holds the id (``id``:
    the caller), else the caller's own list of the resource the possessive names ("my
    playlists": ``GET /me/playlists`` -> ``items[].id``). Without such a list, a list of that
    resource that takes the caller's id (``edges_of``: a producer's own producer edges), two
    calls away ("my playlist X": ``GET /me`` -> ``id`` -> ``GET /users/{user_id}/playlists`` ->
    ``items[].id``); a call that makes one is no playlist of mine yet. Else, and without a
    possessive, all offered: the graph also offers every list whose items carry some user's id,
    and "my" means the caller, but "the track X to my library" is no track of mine."""
    if owned is None:
        return list(offered)
    said = set(query_terms(" ".join(owned)))
    caller = [e for e in offered if _names_caller(e.producer)]
    record = [e for e in caller if _top_level(e.field)]
    listed = [e for e in caller if _of_resource_said(e, said)]
    if record or listed or edges_of is None:
        return record or listed or list(offered)
    keyed = [e for e in offered if "[]" in e.field and operation_method(e.producer) == "GET"
             and _of_resource_said(e, said)
             and any(_names_caller(x.producer) and _top_level(x.field) for x in edges_of(e.producer))]
    return keyed or list(offered)


def _top_level(field: str) -> bool:
    return "." not in field and "[]" not in field


def _of_resource_said(edge, said: set[str]) -> bool:
    stems = set(query_terms(edge.resource.replace("_", " ")))
    return bool(stems) and stems <= said


def _names_caller(chunk_id: str) -> bool:
    op = parse_operation_id(chunk_id)
    return op is not None and names_the_caller(op[1])
