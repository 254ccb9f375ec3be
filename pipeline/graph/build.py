"""The per-API dependency graph: every consumer parameter matched with the operations whose
responses can fill it.

Four kinds of evidence, strongest first:

- a stated OpenAPI link (score 1);
- a response field with the parameter's own name (``movie_id``, ``accountId``; ``username``,
  not an id: 0.95); a bare ``{id}`` is matched by type only;
- RESTler's rule: an id field inside an object whose type matches the parameter's resource
  (``results[].id`` of ``movie-list-object`` items for ``{movie_id}``), scored by how well the
  types match (:func:`~specrag.graph.naming.type_match`) times the type's weight;
- the object's shape: an id inside an object whose other fields are mostly fields of the
  resource's own representation (the root of ``GET .../{person_id}``'s response) is that
  resource's id, whatever the property is called (``cast[]`` items with ``name``, ``gender``,
  ``profile_path``... are persons). An object counts for the one representation it overlaps
  most; scored ``SHAPE_WEIGHT`` x the share of its fields found there.

An operation never produces for itself. Each parameter keeps its ``MAX_PRODUCERS`` best
producers; a field is looked up by the last word of the resource (an index, not a scan), so a
thousand-operation API builds in well under a second.
"""

from __future__ import annotations

from collections import defaultdict

from specrag.graph.links import StatedLink
from specrag.graph.models import (
    ApiGraph,
    DependencyEdge,
    EdgeSource,
    OperationDeps,
    ResourceEntry,
)
from specrag.graph.naming import id_subject, is_id_name, name_words, type_match

MAX_PRODUCERS = 16
MIN_SCORE = 0.3
SHAPE_WEIGHT = 0.75
SHAPE_MIN_SHARED = 3  # fields an object must share with a representation to count as one
SHAPE_MIN_SHARE = 0.5


def api_graph(file_id: str, operations: list[OperationDeps], links: list[StatedLink] = (),
              operation_ids: dict[str, str] | None = None) -> ApiGraph:
    """Edges for every parameter of every operation (fields are dropped from the stored graph)."""
    by_name, by_word = _field_index(operations)
    shapes = _ShapeIndex(operations)
    stated: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for consumer, param, producer, field in _link_edges(operations, links, operation_ids or {}):
        stated[(consumer, param)].append((producer, field))
    ranked = _RankedCandidates(by_name, by_word, shapes)
    edges: list[DependencyEdge] = []
    for op in operations:
        for need in op.params:
            kept = ranked.best(op.chunk_id, need, stated.get((op.chunk_id, need.name), ()))
            edges += [DependencyEdge(consumer=op.chunk_id, param=need.name, producer=producer, field=field,
                                     resource=resource, score=round(score, 3), source=source)
                      for producer, (score, field, resource, source) in kept]
    stored = [op.model_copy(update={"fields": []}) for op in operations]
    return ApiGraph(file_id=file_id, operations=stored, edges=edges, resources=_resources(operations, edges))


def _resources(operations: list[OperationDeps], edges: list[DependencyEdge]) -> list[ResourceEntry]:
    """Per resource type: its free-text lookups (strongest edge first), producer count, consumers."""
    by_op = {op.chunk_id: op for op in operations}
    entries: dict[str, ResourceEntry] = {}
    strength: dict[tuple[str, str], float] = {}
    for edge in edges:
        if edge.resource:
            key = (edge.resource, edge.producer)
            strength[key] = max(strength.get(key, 0.0), edge.score)
            entry = entries.setdefault(edge.resource, ResourceEntry(name=edge.resource))
            if edge.consumer not in entry.consumers:
                entry.consumers.append(edge.consumer)
    for (resource, producer), _ in sorted(strength.items(), key=lambda kv: (-kv[1], kv[0])):
        entry = entries[resource]
        entry.producers += 1
        op = by_op.get(producer)
        if op is not None and is_lookup(op):
            entry.lookups.append(producer)
    return [entries[name] for name in sorted(entries)]


def is_lookup(op: OperationDeps) -> bool:
    """Finds things from free text and needs no id: ``GET /search/movie?query=``."""
    return any(p.text and p.location == "query" for p in op.params) and not any(p.id_like for p in op.params)


def _rank(producer: str, found: tuple) -> tuple:
    """Best first: score, then the shallower field, then the id (deterministic)."""
    return -found[0], len(found[1]), producer


def _field_index(operations: list[OperationDeps]):
    by_name: dict[tuple[str, ...], list] = defaultdict(list)
    by_word: dict[str, list] = defaultdict(list)
    for op in operations:
        for field in op.fields:
            by_name[name_words(field.name)].append((op.chunk_id, field))
            for label, weight in field.types:
                words = tuple(label.split("_"))
                for word in set(words):
                    by_word[word].append((op.chunk_id, field, words, weight))
    return by_name, by_word


def _candidates(consumer: str, param: str, resources: list[str], id_like: bool, by_name, by_word) -> dict:
    """producer chunk id -> its best (score, field, resource, source) for this parameter."""
    best: dict[str, tuple] = {}
    named = not id_like or bool(id_subject(param))  # a bare ``{id}`` names nothing: every object has an id
    for producer, field in by_name.get(name_words(param), ()) if named else ():
        resource = resources[0] if resources and id_like else ""
        _offer(best, consumer, producer, (1.0 if id_like else 0.95, field.path, resource, EdgeSource.NAME))
    if not id_like:
        return best
    for rank, resource in enumerate(resources):
        need = tuple(resource.split("_"))
        for producer, field, ftype, weight in by_word.get(need[-1], ()):
            if not is_id_name(field.name):
                continue
            score = type_match(need, ftype) * weight * (1.0 if rank == 0 else 0.9)
            _offer(best, consumer, producer, (score, field.path, resource, EdgeSource.TYPE))
    return best


class _RankedCandidates:
    """The ranked producers of a parameter depend only on its name, resources and id-likeness,
    never on the operation that has it (whose own entry is dropped afterwards, as ``_offer``
    would have): operations sharing a parameter (``subscriptionId`` in every Azure path) rank
    once. Stated links are per consumer, so a parameter that has one is ranked on its own."""

    def __init__(self, by_name, by_word, shapes: "_ShapeIndex"):
        self.by_name, self.by_word, self.shapes = by_name, by_word, shapes
        self._ranked: dict[tuple, list[tuple[str, tuple]]] = {}

    def best(self, consumer: str, need, links) -> list[tuple[str, tuple]]:
        """The ``MAX_PRODUCERS`` best (producer, (score, field, resource, source)), best first."""
        if links:
            found = self._found(consumer, need)
            resource = need.resources[0] if need.resources and need.id_like else ""
            for producer, field in links:  # a stated link wins over any inference
                _offer(found, consumer, producer, (1.0, field, resource, EdgeSource.LINK), replace=True)
            return sorted(found.items(), key=lambda kv: _rank(kv[0], kv[1]))[:MAX_PRODUCERS]
        key = (need.name, tuple(need.resources), need.id_like)
        ranked = self._ranked.get(key)
        if ranked is None:
            found = self._found("", need)
            ranked = self._ranked[key] = sorted(found.items(), key=lambda kv: _rank(kv[0], kv[1]))
        return [kv for kv in ranked[:MAX_PRODUCERS + 1] if kv[0] != consumer][:MAX_PRODUCERS]

    def _found(self, consumer: str, need) -> dict:
        found = _candidates(consumer, need.name, need.resources, need.id_like, self.by_name, self.by_word)
        if need.id_like:
            for resource in need.resources[:1]:
                for producer, field, score in self.shapes.producers(resource):
                    _offer(found, consumer, producer, (score, field, resource, EdgeSource.TYPE))
        return found


def _offer(best: dict[str, tuple], consumer: str, producer: str, found: tuple, replace: bool = False) -> None:
    """Keep ``producer``'s best (score, field, resource, source) for a parameter (never the
    consumer's own); ``replace``: a stated link wins over any inference."""
    if producer == consumer or found[0] < MIN_SCORE:
        return
    if replace or producer not in best or _rank(producer, found) < _rank(producer, best[producer]):
        best[producer] = found


class _ShapeIndex:
    """Objects with an id field, by the names of their other fields; and each resource's
    representation: the root fields of ``GET`` on a path that ends in its id parameter. An
    object is a view of the one representation it overlaps most (Dice), if it shares at least
    ``SHAPE_MIN_SHARED`` fields and half of its own with it."""

    def __init__(self, operations: list[OperationDeps]):
        self.representations: dict[str, set[str]] = {}
        self.objects: list[tuple[str, str, frozenset[str]]] = []  # (producer, id field path, sibling names)
        self.postings: dict[str, list[int]] = defaultdict(list)
        for op in operations:
            self._add(op)
        self.assigned = self._assign()

    def _add(self, op: OperationDeps) -> None:
        groups: dict[str, list] = defaultdict(list)
        for field in op.fields:
            groups[field.path.rsplit(".", 1)[0] if "." in field.path else ""].append(field)
        last = op.path.rstrip("/").rsplit("/", 1)[-1]
        if op.method == "GET" and last.startswith("{"):
            need = next((p for p in op.params if "{" + p.name + "}" == last and p.id_like), None)
            if need is not None and need.resources:
                self.representations.setdefault(need.resources[0], set()).update(
                    f.name for f in groups.get("", []) if not is_id_name(f.name))
        for fields in groups.values():
            ids = [f for f in fields if f.name.lower() in ("id", "uuid", "guid")]
            names = frozenset(f.name for f in fields if not is_id_name(f.name))
            for field in ids[:1]:
                index = len(self.objects)
                self.objects.append((op.chunk_id, field.path, names))
                for name in names:
                    self.postings[name].append(index)

    def _assign(self) -> dict[str, list[tuple[str, str, float]]]:
        best: dict[int, tuple[float, str, float]] = {}  # object -> (dice, resource, share)
        for resource, shape in sorted(self.representations.items()):
            shared: dict[int, int] = defaultdict(int)
            for name in shape:
                for index in self.postings.get(name, ()):
                    shared[index] += 1
            for index, count in shared.items():
                names = self.objects[index][2]
                share, dice = count / len(names), 2 * count / (len(names) + len(shape))
                if count >= SHAPE_MIN_SHARED and share >= SHAPE_MIN_SHARE and dice > best.get(index, (0.0,))[0]:
                    best[index] = (dice, resource, share)
        out: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
        for index, (_, resource, share) in best.items():
            producer, path, _ = self.objects[index]
            out[resource].append((producer, path, SHAPE_WEIGHT * share))
        return out

    def producers(self, resource: str) -> list[tuple[str, str, float]]:
        return self.assigned.get(resource, [])


def _link_edges(operations: list[OperationDeps], links, operation_ids: dict[str, str]):
    if not links:
        return
    by_route = {(op.method, op.path): op.chunk_id for op in operations}
    for link in links:
        consumer = operation_ids.get(link.target_operation_id) if link.target_operation_id else \
            by_route.get((link.target_method, link.target_path))
        if consumer and consumer != link.producer:
            yield consumer, link.param, link.producer, link.field

