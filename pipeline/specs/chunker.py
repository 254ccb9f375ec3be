"""Cut one spec into a graph of chunks linked by exact ``ref_ids``.

Operations, components and error-response groups become chunks; every ``$ref`` inside a
chunk's fragment is mapped to the chunk that holds its target (longest enclosing chunk, so
``#/components/schemas/User/properties/id`` links to ``User``). Targets in other files of a
multi-file spec, or at entry-file locations no chunk covers, become chunks of their own.
Refs are links, never inlined, so cycles need no special care.
"""

from __future__ import annotations

import hashlib
import logging
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from specrag.core import ids
from specrag.graph.build import api_graph
from specrag.graph.infer import operation_deps
from specrag.graph.links import StatedLink, stated_links
from specrag.graph.models import ApiGraph, OperationDeps
from specrag.specs import servers, text
from specrag.specs.compact import compact_component
from specrag.specs.example_request import RequestRecipe, build_recipe, source_resolver
from specrag.specs.loader import Resolved, SpecSource, Unresolved, spec_format
from specrag.specs.models import ApiChunks, ApiInfo, Chunk, ChunkType, RefStats
from specrag.specs.render import strip_markdown
from specrag.specs.split import split_chunk
from specrag.specs.yaml_dump import to_yaml

logger = logging.getLogger(__name__)
# 4: one identifier splitter; 5: webhooks, path-item cycles, suffix-safe ids;
# 6: operation chunks carry params and producers (the dependency graph); 7: base URL, auth, compact text;
# 8: an operation's search text names the fields it returns; 9: a bare id outside the path (``?ids=``)
# is of the collection the request addresses; 10: operations carry their example request's recipe and
# name the security schemes declared but not applied, compact schemas keep examples
CHUNKER_VERSION = "10"
SWAGGER_SECTIONS = {"definitions": "schemas", "parameters": "parameters", "responses": "responses",
                    "securityDefinitions": "securitySchemes"}
MAX_REF_HOPS = 8  # a path item or operation that is a $ref to a $ref ... (multi-file specs)
_DROPPED_KEYS = {"x-codeSamples", "x-code-samples"}
_SCHEMA_KEYS = {"schema", "items", "properties", "additionalProperties", "allOf", "oneOf", "anyOf", "not",
                "patternProperties", "prefixItems", "contains", "then", "else", "if"}
_CONTEXT_KINDS = {"parameters": "parameters", "responses": "responses", "requestBody": "requestBodies",
                  "headers": "headers", "examples": "examples", "example": "examples",
                  "callbacks": "callbacks", "links": "links"}


@dataclass
class Fragment:
    id: str
    type: ChunkType
    kind: str
    file: Path
    value: Any
    name: str = ""
    method: str = ""
    path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class SpecChunker:
    def __init__(self, source: SpecSource, file_id: str, max_tokens: int, count_tokens: Callable[[str], int]):
        self.src = source
        self.file_id = file_id
        self.max_tokens = max_tokens
        self.count_tokens = count_tokens
        self.doc: dict = source.doc
        self.aliases: dict[tuple[Path, tuple[str, ...]], str] = {}
        self.queue: deque[Fragment] = deque()
        self.stats = RefStats()
        self.unresolved_samples: list[str] = []
        self.deps: list[OperationDeps] = []
        self.links: list[StatedLink] = []
        self.operation_ids: dict[str, str] = {}
        self._graph_refs: dict[tuple[str, Path], tuple | None] = {}
        self._body_walks: dict[tuple, list] = {}
        self._example_resolve = source_resolver(source.resolve)

    # ---- phase 1: where the chunks are ------------------------------------------------------
    def _register(self, frag: Fragment, tokens: tuple[str, ...]) -> None:
        self.aliases.setdefault((frag.file, tokens), frag.id)
        self.queue.append(frag)

    def _register_components(self) -> None:
        entry = self.src.entry
        if "swagger" in self.doc:
            sections = [(s, k, self.doc.get(s)) for s, k in SWAGGER_SECTIONS.items()]
        else:
            comps = self.doc.get("components") if isinstance(self.doc.get("components"), dict) else {}
            sections = [(("components", k), k, v) for k, v in comps.items()]
        for section, kind, group in sections:
            if not isinstance(group, dict):
                continue
            prefix = section if isinstance(section, tuple) else (section,)
            for name, value in group.items():
                tokens = (*prefix, str(name))
                frag = Fragment(ids.make_chunk_id(self.file_id, tokens), ChunkType.COMPONENT, kind, entry,
                                value, name=str(name))
                self._register(frag, tokens)

    def _resolve_structural(self, value: Any, file: Path, tokens: tuple[str, ...]):
        """Follow a path item / operation that is itself a ``$ref`` (multi-file specs). A chain
        that comes back to a place it passed (a path item that refs itself) is a ``cycle``."""
        seen = {(file, tokens)}
        for _ in range(MAX_REF_HOPS + 1):
            if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
                return value, file, tokens
            target = self.src.resolve(value["$ref"], file)
            if isinstance(target, Resolved) and (target.file, target.tokens) in seen:
                target = Unresolved("cycle", value["$ref"])
            self._count(target)
            if not isinstance(target, Resolved):
                return None, file, tokens
            value, file, tokens = target.value, target.file, target.tokens
            seen.add((file, tokens))
        self._count(Unresolved("chain_too_long", value["$ref"]))
        return None, file, tokens

    def _operation_sections(self) -> list[tuple[str, dict]]:
        sections = [("paths", self.doc.get("paths") or {})]
        if spec_format(self.doc) == "openapi-3.1":
            sections.append(("webhooks", self.doc.get("webhooks") or {}))
        return sections

    def _register_operations(self) -> None:
        entry = self.src.entry
        for section, items in self._operation_sections():
            for path, item in items.items():
                path = str(path)
                item, item_file, item_tokens = self._resolve_structural(item, entry, (section, path))
                if isinstance(item, dict):
                    self._register_path_item(section, path, item, item_file, item_tokens)

    def _register_path_item(self, section: str, path: str, item: dict, item_file: Path,
                            item_tokens: tuple[str, ...]) -> None:
        entry = self.src.entry
        shared_params = item.get("parameters") if isinstance(item.get("parameters"), list) else []
        for method in ids.HTTP_METHODS:
            if method not in item:
                continue
            op, op_file, op_tokens = self._resolve_structural(item[method], item_file, (*item_tokens, method))
            if not isinstance(op, dict):
                continue
            webhook = section == "webhooks"
            op_id = (ids.webhook_chunk_id if webhook else ids.operation_chunk_id)(self.file_id, path, method)
            frag = Fragment(op_id, ChunkType.ENDPOINT, "webhook" if webhook else "operation", op_file, op,
                            name=str(op.get("operationId", "")), method=method.upper(), path=path,
                            extra={"shared_params": shared_params, "item_file": item_file, "path_item": item})
            self.aliases.setdefault((entry, (section, path)), op_id)
            self.aliases.setdefault((item_file, item_tokens), op_id)
            self._register(frag, op_tokens)
            self.aliases.setdefault((entry, (section, path, method)), op_id)

    # ---- phase 2: texts and links -----------------------------------------------------------
    def run(self) -> ApiChunks:
        self._register_components()
        self._register_operations()
        chunks: list[Chunk] = []
        while self.queue:
            frag = self.queue.popleft()
            chunks.extend(self._build(frag))
        graph = self._graph(chunks)
        chunks = [part for chunk in chunks for part in split_chunk(chunk, self.max_tokens, self.count_tokens)]
        chunks, dropped = _unique(chunks)
        _link_inverse(chunks)
        return ApiChunks(api=self._api_info(), chunks=chunks, refs=self.stats, graph=graph,
                         unresolved_samples=self.unresolved_samples, dropped=dropped)

    def _graph(self, chunks: list[Chunk]) -> ApiGraph | None:
        """The dependency graph; each operation chunk gets its parameters and their producers.
        A failure costs the graph (logged), never the API's chunks."""
        try:
            graph = api_graph(self.file_id, self.deps, self.links, self.operation_ids)
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            logger.warning("%s: no dependency graph (%s: %s)", self.file_id, type(exc).__name__, exc)
            return None
        params = {d.chunk_id: d.params for d in graph.operations}
        producers: dict[str, list] = {}
        produced = graph.produced()
        for edge in graph.edges:
            producers.setdefault(edge.consumer, []).append(edge)
        for chunk in chunks:
            if chunk.type is ChunkType.ENDPOINT:
                chunk.params, chunk.producers = params.get(chunk.id, []), producers.get(chunk.id, [])
                chunk.produces = produced.get(chunk.id, [])
        return graph

    def _resolve_for_graph(self, ref: str, base: Path):
        """Each operation's body walk meets the same refs again: each is resolved once per spec."""
        key = (ref, base)
        if key not in self._graph_refs:
            target = self.src.resolve(ref, base)
            self._graph_refs[key] = None if not isinstance(target, Resolved) else (
                target.value, target.file, target.tokens[-1] if target.tokens else Path(target.file).stem)
        return self._graph_refs[key]

    def _build(self, frag: Fragment) -> list[Chunk]:
        if frag.type is ChunkType.ENDPOINT:
            return self._build_operation(frag)
        refs = self._collect_refs(frag.value, frag.file, frag.kind)
        where = frag.id.split(':', 1)[1]
        value = _clean(frag.value)
        chunk = self._chunk(frag, f"# {frag.kind} {frag.name} ({where})\n" + to_yaml(value), refs,
                            **text.component_texts(frag.kind, frag.name, frag.value))
        compact = compact_component(frag.kind, frag.name, where, value)
        compact_tokens = self.count_tokens(compact) if compact else 0
        if compact and compact_tokens < chunk.n_tokens:
            chunk = chunk.model_copy(update={"compact_text": compact, "compact_tokens": compact_tokens})
        return [chunk]

    def _build_operation(self, frag: Fragment) -> list[Chunk]:
        op = dict(_clean(frag.value))
        responses = op.get("responses") if isinstance(op.get("responses"), dict) else {}
        errors = {str(c): r for c, r in responses.items() if _is_error(str(c))}
        if errors:
            op["responses"] = {c: r for c, r in responses.items() if not _is_error(str(c))}
        refs = self._collect_refs(op, frag.file, "")
        shared = frag.extra["shared_params"]
        if shared:  # path-level parameters, resolved against the path item's own file
            for rid, locs in self._collect_refs(shared, frag.extra["item_file"], "parameters", ("parameters",)).items():
                refs.setdefault(rid, []).extend(locs)
            op["parameters"] = _merge_params(shared, op.get("parameters"))
        self._security_refs(op.get("security", self.doc.get("security")), refs)
        self._record_deps(frag, shared)
        out: list[Chunk] = []
        webhook = frag.kind == "webhook"
        where = f"webhook {frag.path} ({frag.method})" if webhook else f"{frag.method} {frag.path}"
        head = f"# {where}" + (f"  (operationId: {frag.name})" if frag.name else "")
        urls = [] if webhook else servers.base_urls(self.doc, frag.extra["path_item"], frag.value)
        auth = servers.auth_requirements(self.doc, frag.value)
        recipe = None if webhook else self._recipe(frag, shared)
        declared = recipe.declared_only if recipe is not None else []
        head += "".join(f"\n# {label}: {' | '.join(values)}" for label, values in
                        (("base URL", urls), ("auth", auth), ("auth declared, not applied here", declared)) if values)
        if errors:
            err_id = ids.errors_chunk_id(frag.id)
            refs.setdefault(err_id, []).append("responses")
            err_frag = Fragment(err_id, ChunkType.ERRORS, "errors", frag.file, errors, name="errors",
                                method=frag.method, path=frag.path)
            err_refs = self._collect_refs(errors, frag.file, "responses", ("responses",))
            err_text = f"# Error responses of {where}\n" + to_yaml(errors)
            out.append(self._chunk(err_frag, err_text, err_refs,
                                   **_labelled(webhook, text.errors_texts(frag.method, frag.path, frag.name, errors)), op=op))
            head += f"\n# error responses ({', '.join(errors)}): see {err_id}"
        endpoint = self._chunk(frag, head + "\n" + to_yaml(op), refs,
                               **_labelled(webhook, text.operation_texts(frag.method, frag.path, op)), op=op)
        out.insert(0, endpoint.model_copy(update={"base_urls": urls, "auth": auth, "request": recipe}))
        return out

    def _recipe(self, frag: Fragment, shared: list) -> RequestRecipe | None:
        """The operation's example request recipe; a failure costs the example, never the API."""
        try:
            return build_recipe(self.doc, frag.value, shared, frag.file, frag.extra["item_file"], self.src.entry,
                                self._example_resolve)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            logger.warning("%s: no example request for %s (%s: %s)", self.file_id, frag.id, type(exc).__name__, exc)
            return None

    def _record_deps(self, frag: Fragment, shared: list) -> None:
        """What the operation consumes and produces, for the graph built once all are read.
        A webhook is a call the API makes, so it neither consumes nor produces for the caller."""
        if frag.kind == "webhook":
            return
        self.deps.append(operation_deps(frag.id, frag.method, frag.path, frag.value, self._resolve_for_graph,
                                        frag.file, shared, frag.extra["item_file"], self._body_walks))
        self.links += stated_links(frag.id, frag.value, self._resolve_for_graph, frag.file)
        if frag.name:
            self.operation_ids.setdefault(frag.name, frag.id)

    def _chunk(self, frag: Fragment, body: str, refs: dict[str, list[str]], *, embed_text: str, search_text: str,
               op: dict | None = None) -> Chunk:
        op = op if op is not None else {}
        tags = [str(t) for t in op.get("tags", [])] if isinstance(op.get("tags"), list) else []
        return Chunk(id=frag.id, file_id=self.file_id, type=frag.type, kind=frag.kind, name=frag.name,
                     method=frag.method, path=frag.path, operation_id=str(op.get("operationId", "") or ""),
                     summary=strip_markdown(op.get("summary", ""))[:200], tags=tags, text=body,
                     embed_text=embed_text, search_text=search_text, n_tokens=self.count_tokens(body),
                     ref_ids=refs)

    def _security_refs(self, security: Any, refs: dict[str, list[str]]) -> None:
        """Security requirements name schemes instead of ``$ref``-ing them: link them too."""
        section = ("securityDefinitions",) if "swagger" in self.doc else ("components", "securitySchemes")
        for req in security if isinstance(security, list) else []:
            for name in req if isinstance(req, dict) else []:
                rid = self.aliases.get((self.src.entry, (*section, str(name))))
                if rid:
                    refs.setdefault(rid, []).append("security")

    def _collect_refs(self, value: Any, file: Path, kind: str, base: tuple[str, ...] = ()) -> dict[str, list[str]]:
        refs: dict[str, list[str]] = {}
        stack: list[tuple[Any, tuple[str, ...]]] = [(value, base)]
        while stack:
            node, loc = stack.pop()
            if isinstance(node, dict):
                for key, child in node.items():
                    key = str(key)
                    if key == "$ref" and isinstance(child, str):
                        self._link(child, file, loc, kind, refs)
                    elif key == "operationRef" and isinstance(child, str) and (
                            loc[-2:-1] == ("links",) or (not loc and kind == "links")):  # a link, inline or component
                        self._link(child, file, loc, kind, refs)
                    elif key == "mapping" and loc and loc[-1] == "discriminator" and isinstance(child, dict):
                        for target in child.values():
                            if isinstance(target, str) and ("#" in target or "." in target):
                                self._link(target, file, (*loc, "mapping"), "schemas", refs)
                    elif not key.startswith("x-") and isinstance(child, (dict, list)):
                        stack.append((child, (*loc, key)))
            elif isinstance(node, list):
                stack.extend((child, (*loc, str(i))) for i, child in enumerate(node) if isinstance(child, (dict, list)))
        return refs

    def _count(self, target: Any) -> None:
        if isinstance(target, Resolved):
            self.stats.total += 1
            self.stats.resolved += 1
        elif target.external:
            self.stats.external[target.kind] = self.stats.external.get(target.kind, 0) + 1
        else:
            self.stats.total += 1
            self.stats.unresolved += 1
            self.stats.unresolved_by_kind[target.kind] = self.stats.unresolved_by_kind.get(target.kind, 0) + 1
            if len(self.unresolved_samples) < 5:
                self.unresolved_samples.append(f"{target.kind}: {target.ref[:200]}")

    def _link(self, ref: str, file: Path, loc: tuple[str, ...], kind: str, refs: dict[str, list[str]]) -> None:
        target = self.src.resolve(ref, file)
        self._count(target)
        if not isinstance(target, Resolved):
            return
        rid = self._chunk_for(target, _infer_kind(loc, kind))
        refs.setdefault(rid, []).append("/" + ids.tokens_to_path(loc))

    def _chunk_for(self, target: Resolved, kind: str) -> str:
        for n in range(len(target.tokens), -1, -1):
            rid = self.aliases.get((target.file, target.tokens[:n]))
            if rid:
                return rid
        if target.file == self.src.entry:
            rid = ids.make_chunk_id(self.file_id, target.tokens)
        else:
            rid = ids.external_chunk_id(self.file_id, self.src.relpath(target.file), target.tokens)
        name = target.tokens[-1] if target.tokens else Path(target.file).stem
        self._register(Fragment(rid, ChunkType.COMPONENT, kind, target.file, target.value, name=name), target.tokens)
        return rid

    def _api_info(self) -> ApiInfo:
        info = self.doc.get("info") if isinstance(self.doc.get("info"), dict) else {}
        digest = hashlib.sha256()
        for path in sorted(self.src.files, key=lambda p: p.as_posix()):
            digest.update(self.src.relpath(path).encode() + b"\0" + self.src.files[path] + b"\0")
        tags = self.doc.get("tags") if isinstance(self.doc.get("tags"), list) else []
        cats = info.get("x-apisguru-categories", [])
        return ApiInfo(
            file_id=self.file_id, source=str(self.src.entry), title=str(info.get("title", "") or ""),
            version=str(info.get("version", "") or ""),
            description=info.get("description", "") if isinstance(info.get("description"), str) else "",
            spec_format=spec_format(self.doc), content_hash=digest.hexdigest(),
            files=sorted(self.src.relpath(p) for p in self.src.files if p != self.src.entry),
            tags=[str(t["name"]) for t in tags if isinstance(t, dict) and "name" in t],
            categories=[str(c) for c in cats] if isinstance(cats, list) else [],
            tag_descriptions={str(t["name"]): strip_markdown(t.get("description", ""))[:200]
                              for t in tags if isinstance(t, dict) and "name" in t and isinstance(t.get("description"), str)},
        )


def _labelled(webhook: bool, texts: dict[str, str]) -> dict[str, str]:
    """A webhook's texts say so: it is a call the API makes, not one it receives."""
    return {k: f"webhook {v}" for k, v in texts.items()} if webhook else texts


def _is_error(code: str) -> bool:
    return code == "default" or code[:1] in ("4", "5")


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if str(k) not in _DROPPED_KEYS}
    return value


def _merge_params(shared: list, own: Any) -> list:
    own = own if isinstance(own, list) else []
    if not shared:
        return own
    own_keys = {(p.get("name"), p.get("in")) for p in own if isinstance(p, dict) and "name" in p}
    return [p for p in shared if not (isinstance(p, dict) and (p.get("name"), p.get("in")) in own_keys)] + own


def _infer_kind(loc: tuple[str, ...], default: str) -> str:
    for key in reversed(loc):
        if key in _SCHEMA_KEYS:
            return "schemas"
        if key in _CONTEXT_KINDS:
            return _CONTEXT_KINDS[key]
    return default or "schemas"


def _unique(chunks: list[Chunk]) -> tuple[list[Chunk], dict[str, int]]:
    """Keep the first chunk of each id: keys that stringify alike (YAML ``1`` and ``"1"``) would
    otherwise give two chunks one id, which no store accepts."""
    seen: set[str] = set()
    kept = [c for c in chunks if not (c.id in seen or seen.add(c.id))]
    return kept, ({"duplicate_id": len(chunks) - len(kept)} if len(kept) < len(chunks) else {})


def _link_inverse(chunks: list[Chunk]) -> None:
    """referenced_by is the exact inverse of ref_ids (refs to ids that are no chunk dropped)."""
    by_id = {c.id: c for c in chunks}
    for chunk in chunks:
        chunk.ref_ids = {rid: locs for rid, locs in chunk.ref_ids.items() if rid in by_id}
    for chunk in chunks:
        for rid in chunk.ref_ids:
            by_id[rid].referenced_by.append(chunk.id)
    for chunk in chunks:
        chunk.referenced_by = sorted(set(chunk.referenced_by))
