"""What one operation consumes (parameters a caller must fill) and produces (fields of its
success responses that can carry an id), read from its spec fragment at ingest.

Response schemas are walked through ``$ref``, ``allOf`` (one object), ``oneOf``/``anyOf`` (each
alternative), ``items`` and ``additionalProperties``. Every object gets candidate resource
types, RESTler-style (``ApiResourceTypes.fs``) plus schema names:

- the property holding it, singularised (``production_companies[]`` -> production company);
- the names of the schemas it is made of (``movie-list-object``);
- near the top of the body (the root and up to two properties down: ``results[]``, ``data``),
  the operation's literal path segments, the last one first (``GET /search/person`` returns
  persons), with weights that fall with depth.

A field named like an id (``id``, ``uuid``) takes the types of its object; ``owner_id`` names
its own type (owner). Every scalar field name is kept too, so a parameter can be matched by
its exact name (``username``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

from specrag.graph.models import OperationDeps, ParamNeed, ProducedField
from specrag.graph.naming import (
    id_subject,
    is_id_name,
    param_resources,
    query_resources,
    static_segments,
    type_label,
    type_words,
)

# (ref, base) -> (target value, its base, the target's name) or None when it cannot be read
Resolve = Callable[[str, Any], Optional[tuple[Any, Any, str]]]

MAX_DEPTH = 8  # property hops followed into a response body
MAX_FIELDS = 400  # fields kept per operation (huge bodies are cut, deterministically)
PATH_TYPE_DEPTH = 2  # how many property hops below the root the path's segments still type objects
PATH_WEIGHTS = (0.9, 0.6)  # last literal segment, earlier ones (at the root; x0.8 per hop down)


def operation_deps(chunk_id: str, method: str, path: str, op: dict, resolve: Resolve, base: Any,
                   shared_params: list = (), shared_base: Any = None,
                   memo: dict[tuple, list[Event]] | None = None) -> OperationDeps:
    """The parameters ``op`` needs and the fields its 2xx responses carry. ``shared_params`` are
    the path item's parameters (resolved against ``shared_base``); the operation's own win.
    ``memo``: the body walks of one spec's shared schemas, for all its operations (pass one dict per spec)."""
    deps = OperationDeps(chunk_id=chunk_id, method=method.upper(), path=path)
    raw = [(p, shared_base if shared_base is not None else base) for p in _as_list(list(shared_params))]
    deps.params = list(_params(path, [*raw, *((p, base) for p in _as_list(op.get("parameters")))], resolve))
    segments = static_segments(path)
    path_types = [(type_words(s), PATH_WEIGHTS[0] if i == 0 else PATH_WEIGHTS[1])
                  for i, s in enumerate(reversed(segments))]
    walker = _BodyWalker(resolve, [(t, w) for t, w in path_types if t], memo if memo is not None else {})
    deps.fields = walker.fields(success_schemas(op, resolve, base))
    return deps


def success_schemas(op: dict, resolve: Resolve, base: Any) -> Iterator[tuple[Any, Any]]:
    """The body schema of every 2xx response (OpenAPI 3 ``content``, the JSON one first; Swagger 2 ``schema``)."""
    for _, response, resp_base in success_responses(op, resolve, base):
        if isinstance(response.get("schema"), dict):
            yield response["schema"], resp_base
        content = response.get("content") if isinstance(response.get("content"), dict) else {}
        media = sorted(content, key=lambda m: (0 if "json" in str(m) else 1, str(m)))
        for name in media[:1]:
            body = content[name]
            if isinstance(body, dict) and isinstance(body.get("schema"), dict):
                yield body["schema"], resp_base


def success_responses(op: dict, resolve: Resolve, base: Any) -> Iterator[tuple[str, dict, Any]]:
    responses = op.get("responses") if isinstance(op.get("responses"), dict) else {}
    for code, response in responses.items():
        if not str(code).startswith("2"):
            continue
        response, resp_base, _ = _deref(response, resolve, base)
        if isinstance(response, dict):
            yield str(code), response, resp_base


def _params(path: str, raw: list[tuple[Any, Any]], resolve: Resolve) -> Iterator[ParamNeed]:
    """Path parameters and required query/header/cookie ones (never bodies); own ones override shared."""
    seen: dict[tuple[str, str], ParamNeed] = {}
    for param, base in raw:
        param, param_base, _ = _deref(param, resolve, base)
        if not isinstance(param, dict) or not isinstance(param.get("name"), str):
            continue
        name, location = param["name"], str(param.get("in", ""))
        if location != "path" and not (param.get("required") and location in ("query", "header", "cookie")):
            continue
        id_like = is_id_name(name)
        resources = param_resources(path, name) if location == "path" else query_resources(path, name)
        seen[(name, location)] = ParamNeed(name=name, location=location, required=True, id_like=id_like,
                                           text=not id_like and _free_text(param, resolve, param_base),
                                           resources=[type_label(t) for t in resources])
    yield from seen.values()


def _free_text(param: dict, resolve: Resolve, base: Any) -> bool:
    """A plain string: no enum, no format, no pattern (Swagger 2 puts ``type`` on the parameter)."""
    schema, _, _ = _deref(param.get("schema", param), resolve, base)
    if not isinstance(schema, dict) or schema.get("type", "string") != "string":
        return False
    return not any(k in schema for k in ("enum", "format", "pattern", "const"))


def _deref(value: Any, resolve: Resolve, base: Any, names: tuple[str, ...] = ()) -> tuple[Any, Any, tuple[str, ...]]:
    """Follow a ``$ref`` chain (at most 8 hops); returns the target, its base and the names passed."""
    for _ in range(8):
        if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
            break
        target = resolve(value["$ref"], base)
        if target is None:
            return None, base, names
        value, base, name = target
        names = (*names, name) if name else names
    return value, base, names


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else []


# A field as the walk meets it: its path, its name, and what types its object: (holder, names, depth)
Event = tuple[str, str, tuple[Optional[str], tuple[str, ...], int]]
MAX_MEMO = 100_000  # subtree walks kept per spec (a hostile schema DAG fans out into more)


class _BodyWalker:
    """Lists the fields of one response body; refs on the current branch are not re-entered.

    What a ``$ref`` subtree yields depends only on where it is walked from (the ref, its base,
    the path so far, the holder, the depth, the refs above, the schema names), never on the
    operation: ``memo`` (one per spec) keeps it, so operations that return the same schemas walk
    them once. The operation's path types are applied to the fields afterwards."""

    def __init__(self, resolve: Resolve, path_types: list[tuple[tuple[str, ...], float]],
                 memo: dict[tuple, list[Event]]):
        self.resolve, self.path_types, self.memo = resolve, path_types, memo

    def fields(self, schemas: Iterator[tuple[Any, Any]]) -> list[ProducedField]:
        events: list[Event] = []
        seen: set[str] = set()
        for schema, base in schemas:
            _extend(events, seen, self.walk(schema, base, "", None, 0, ()))
        return [self._field(*event) for event in events]

    def walk(self, schema: Any, base: Any, at: str, holder: str | None, depth: int, stack: tuple[str, ...],
             names: tuple[str, ...] = ()) -> list[Event]:
        """The subtree's fields in walk order, each path once, at most MAX_FIELDS (the first
        MAX_FIELDS of any concatenation of subtrees are then still exact)."""
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if depth > MAX_DEPTH or not isinstance(ref, str):
            return self._events(schema, base, at, holder, depth, stack, names)
        key = (ref, base, at, holder, depth, stack, names)
        events = self.memo.get(key)
        if events is None:
            events = self._events(schema, base, at, holder, depth, stack, names)
            if len(self.memo) < MAX_MEMO:
                self.memo[key] = events
        return events

    def _events(self, schema: Any, base: Any, at: str, holder: str | None, depth: int, stack: tuple[str, ...],
                names: tuple[str, ...]) -> list[Event]:
        out: list[Event] = []
        if depth > MAX_DEPTH:
            return out
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if isinstance(ref, str):
            if ref in stack:
                return out
            stack = (*stack, ref)
        schema, base, names = _deref(schema, self.resolve, base, names)
        if not isinstance(schema, dict):
            return out
        seen: set[str] = set()
        for key in ("oneOf", "anyOf"):
            for alt in _as_list(schema.get(key)):
                if len(out) < MAX_FIELDS:
                    _extend(out, seen, self.walk(alt, base, at, holder, depth, stack, names))
        props, items, more, names = self._flatten(schema, base, stack, names)
        for sub, suffix in ((items, "[]"), (more, "{}")):
            if sub is not None and len(out) < MAX_FIELDS:
                _extend(out, seen, self.walk(sub[0], sub[1], at + suffix, holder, depth, stack, names))
        kind = (holder, names, depth)
        for name, (prop, prop_base) in props.items():
            if len(out) >= MAX_FIELDS:
                break
            where = f"{at}.{name}" if at else name
            if _is_scalar(prop, self.resolve, prop_base):
                _extend(out, seen, [(where, name, kind)])
            else:
                _extend(out, seen, self.walk(prop, prop_base, where, name, depth + 1, stack))
        return out

    def _flatten(self, schema: dict, base: Any, stack: tuple[str, ...], names: tuple[str, ...]):
        """``allOf`` parts merged into one object: their properties, items and schema names."""
        props: dict[str, tuple[Any, Any]] = {}
        items = more = None
        parts = [(schema, base)]
        while parts:
            part, part_base = parts.pop(0)
            for sub in _as_list(part.get("allOf")):
                sub_ref = sub.get("$ref") if isinstance(sub, dict) else None
                if isinstance(sub_ref, str) and sub_ref in stack:
                    continue
                value, sub_base, names = _deref(sub, self.resolve, part_base, names)
                if isinstance(value, dict):
                    parts.append((value, sub_base))
            for name, prop in (part.get("properties") or {}).items() if isinstance(part.get("properties"), dict) else ():
                props.setdefault(str(name), (prop, part_base))
            if isinstance(part.get("items"), dict):
                items = items or (part["items"], part_base)
            if isinstance(part.get("additionalProperties"), dict):
                more = more or (part["additionalProperties"], part_base)
        return props, items, more, names

    def _field(self, where: str, name: str, kind: tuple[Optional[str], tuple[str, ...], int]) -> ProducedField:
        own = id_subject(name) if is_id_name(name) else ()
        field_types = [(own, 1.0)] if own else self._types(*kind) if is_id_name(name) else []
        return ProducedField(path=where, name=name, types=[(type_label(t), w) for t, w in field_types])

    def _types(self, holder: str | None, names: tuple[str, ...], depth: int) -> list[tuple[tuple[str, ...], float]]:
        types: list[tuple[tuple[str, ...], float]] = []
        if holder:
            types.append((type_words(holder), 1.0))
        types += [(type_words(n), 1.0) for n in names]
        if depth <= PATH_TYPE_DEPTH:
            types += [(t, w * 0.8 ** depth) for t, w in self.path_types]
        best: dict[tuple[str, ...], float] = {}
        for t, w in types:
            if t and w > best.get(t, 0.0):
                best[t] = w
        return list(best.items())


def _extend(events: list[Event], seen: set[str], more: list[Event]) -> None:
    """Append the events of a path not seen yet, up to MAX_FIELDS."""
    for event in more:
        if len(events) >= MAX_FIELDS:
            return
        if event[0] not in seen:
            seen.add(event[0])
            events.append(event)


def _is_scalar(prop: Any, resolve: Resolve, base: Any) -> bool:
    value, _, _ = _deref(prop, resolve, base)
    if not isinstance(value, dict):
        return True
    return not any(k in value for k in ("properties", "items", "allOf", "oneOf", "anyOf", "additionalProperties")) \
        and value.get("type") not in ("object", "array")
