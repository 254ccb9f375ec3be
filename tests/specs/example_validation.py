"""Validating example request bodies against their schemas, for the corpus test and its unit tests.

The body a recipe holds is checked with ``jsonschema`` against the operation's request schema,
resolved here independently of the generator: every ``$ref`` is inlined through the spec's own
loader (so multi-file specs work), and OpenAPI's meaning is given to plain JSON Schema where the
two differ: ``nullable`` allows null, a ``readOnly`` property is not required in a request, and
Swagger 2's ``type: file`` is any value. A recursive schema becomes a cyclic object graph, which
``jsonschema`` walks only as deep as the (finite) body goes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator, Draft202012Validator
from specrag.core.ids import HTTP_METHODS
from specrag.specs.example_request import build_recipe, source_resolver
from specrag.specs.loader import Resolved, SpecSource

MAX_REF_HOPS = 8


class Inliner:
    """Schemas of one spec with their ``$ref``s replaced by the (shared, transformed) targets."""

    def __init__(self, src: SpecSource, openapi31: bool):
        self.src = src
        self.openapi31 = openapi31
        self.done: dict[tuple, Any] = {}
        self.foreign_patterns: set[str] = set()  # patterns Python's re cannot compile (\p{L}, \z): not checked

    def schema(self, value: Any, base: Path) -> Any:
        if isinstance(value, list):
            return [self.schema(v, base) for v in value]
        if not isinstance(value, dict):
            return value
        ref = value.get("$ref")
        if isinstance(ref, str):
            target = self.src.resolve(ref, base)
            if not isinstance(target, Resolved):
                return {}  # the generator cannot see it either; it is reported by the chunker's ref stats
            key = (target.file, target.tokens)
            if key not in self.done:
                self.done[key] = {}
                inner = target.value
                chained = isinstance(inner, dict) and isinstance(inner.get("$ref"), str)  # a component that is a $ref
                self.done[key].update(self.schema(inner, target.file) if chained else self._object(inner, target.file))
            siblings = {k: v for k, v in value.items() if k != "$ref"}
            if self.openapi31 and siblings:
                return {"allOf": [self.done[key], self.schema(siblings, base)]}
            return self.done[key]
        return self._object(value, base)

    def _object(self, value: Any, base: Path) -> dict:
        if not isinstance(value, dict):
            return {} if value is not False else {"not": {}}
        out: dict = {}
        for key, sub in value.items():
            key = str(key)
            if key.startswith("x-") or key in ("example", "examples", "xml", "externalDocs"):
                continue
            if key in ("properties", "patternProperties", "definitions", "$defs", "dependentSchemas"):
                out[key] = {str(k): self.schema(v, base) for k, v in sub.items()} if isinstance(sub, dict) else {}
            elif key in ("items", "additionalProperties", "not", "contains", "if", "then", "else",
                         "propertyNames", "additionalItems", "unevaluatedProperties", "unevaluatedItems"):
                out[key] = self.schema(sub, base)
            elif key in ("allOf", "oneOf", "anyOf", "prefixItems"):
                out[key] = [self.schema(v, base) for v in sub] if isinstance(sub, list) else []
            else:
                out[key] = sub
        if out.get("type") == "file":
            del out["type"]
        if isinstance(out.get("pattern"), str) and not _compiles(out["pattern"]):
            self.foreign_patterns.add(out.pop("pattern"))
        if out.get("nullable") is True:
            if isinstance(out.get("type"), str):
                out["type"] = [out["type"], "null"]
            if isinstance(out.get("enum"), list) and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        return out


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def request_only(schema: Any, seen: set[int] | None = None) -> None:
    """OpenAPI: a required ``readOnly`` property is required in responses only."""
    seen = set() if seen is None else seen
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        if isinstance(node.get("required"), list):
            node["required"] = [r for r in node["required"] if not _read_only(props.get(r))]
        stack.extend(v for v in node.values() if isinstance(v, (dict, list)))


def _read_only(schema: Any) -> bool:
    return isinstance(schema, dict) and (schema.get("readOnly") is True or any(
        _read_only(m) for m in schema.get("allOf", []) if isinstance(m, dict)))


@dataclass
class Operation:
    id: str
    op: dict
    shared: list
    op_file: Path
    item_file: Path


def operations(src: SpecSource) -> list[Operation]:
    """Every operation of the spec, path items and operations that are ``$ref``s followed."""
    out = []
    paths = src.doc.get("paths") if isinstance(src.doc.get("paths"), dict) else {}
    for path, item in paths.items():
        item, item_file = _follow(src, item, src.entry)
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") if isinstance(item.get("parameters"), list) else []
        for method in HTTP_METHODS:
            if method in item:
                op, op_file = _follow(src, item[method], item_file)
                if isinstance(op, dict):
                    out.append(Operation(f"{method.upper()} {path}", op, shared, op_file, item_file))
    return out


def _follow(src: SpecSource, value: Any, base: Path) -> tuple[Any, Path]:
    for _ in range(MAX_REF_HOPS):
        if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
            break
        target = src.resolve(value["$ref"], base)
        if not isinstance(target, Resolved):
            return None, base
        value, base = target.value, target.file
    return value, base


def body_schema(src: SpecSource, operation: Operation, media: str) -> tuple[Any, Path] | None:
    """The schema of the body the recipe chose, found from the spec itself."""
    params = []
    for group, base in ((operation.shared, operation.item_file), (operation.op.get("parameters"), operation.op_file)):
        for p in group if isinstance(group, list) else []:
            p, where = _follow(src, p, base)
            if isinstance(p, dict):
                params.append((p, where))
    for p, where in params:
        if p.get("in") == "body":
            return p.get("schema"), where
    form = [(p, where) for p, where in params if p.get("in") == "formData"]
    if form:
        return {"type": "object", "required": [p["name"] for p, _ in form if p.get("required") is True],
                "properties": {p["name"]: {k: v for k, v in p.items() if k not in ("name", "in", "required")}
                               for p, _ in form}}, form[0][1]
    body, where = _follow(src, operation.op.get("requestBody"), operation.op_file)
    if isinstance(body, dict) and isinstance(body.get("content"), dict) and media in body["content"]:
        spec = body["content"][media]
        return (spec.get("schema"), where) if isinstance(spec, dict) and "schema" in spec else None
    return None


@dataclass
class Tally:
    operations: int = 0
    bodies: int = 0
    valid: int = 0
    no_body: int = 0
    not_json: list[str] = field(default_factory=list)
    unsatisfiable: list[str] = field(default_factory=list)
    validator_failed: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    discriminator_decides: list[str] = field(default_factory=list)
    foreign_patterns: int = 0

    def line(self, name: str) -> str:
        return (f"{name}: {self.operations} operations, {self.bodies} bodies checked, {self.valid} valid, "
                f"{len(self.invalid)} invalid, {self.no_body} without a body, {len(self.not_json)} not JSON/form, "
                f"{len(self.unsatisfiable)} unsatisfiable, {len(self.discriminator_decides)} valid only by their "
                f"oneOf's discriminator (JSON Schema ignores it), {len(self.validator_failed)} the validator could "
                f"not check; {self.foreign_patterns} patterns Python cannot compile left unchecked")


JSON_OR_FORM = ("json", "x-www-form-urlencoded", "multipart/form-data", "*/*")


def check_spec(path: Path, limits) -> Tally:
    src = SpecSource(path, limits)
    doc = src.doc
    openapi31 = str(doc.get("openapi", "")).startswith("3.1")
    validator_class = Draft202012Validator if openapi31 else Draft4Validator
    inliner = Inliner(src, openapi31)
    resolve = source_resolver(src.resolve)
    tally = Tally()
    for operation in operations(src):
        tally.operations += 1
        recipe = build_recipe(doc, operation.op, operation.shared, operation.op_file, operation.item_file,
                              src.entry, resolve)
        if not recipe.media_type:
            tally.no_body += 1
            continue
        if not any(hint in recipe.media_type.lower() for hint in JSON_OR_FORM):
            tally.not_json.append(f"{operation.id}: {recipe.media_type}")
            continue
        found = body_schema(src, operation, recipe.media_type)
        if found is None or not isinstance(found[0], dict):
            tally.no_body += 1
            continue
        tally.bodies += 1
        schema = inliner.schema(*found)
        request_only(schema)
        unsatisfiable = [n for n in recipe.notes if n.startswith("unsatisfiable")]
        try:
            errors = list(validator_class(schema).iter_errors(recipe.body))
        except Exception as exc:  # noqa: BLE001 - a schema the validator cannot run is counted, with why
            tally.validator_failed.append(f"{operation.id}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        if not errors:
            tally.valid += 1
        elif unsatisfiable:
            tally.unsatisfiable.append(f"{operation.id}: {unsatisfiable[0]}")
        elif all(_discriminator_decides(e) for e in errors):
            tally.discriminator_decides.append(f"{operation.id}: {errors[0].message[:120]}")
        else:
            worst = errors[0]
            where = "/".join(str(p) for p in worst.absolute_path)
            tally.invalid.append(f"{operation.id}: at /{where}: {worst.message[:160]} (notes: {recipe.notes})")
    tally.foreign_patterns = len(inliner.foreign_patterns)
    return tally


def _discriminator_decides(error) -> bool:
    """A oneOf whose branches both accept the body, told apart in OpenAPI by its discriminator."""
    return error.validator == "oneOf" and isinstance(error.schema, dict) and "discriminator" in error.schema \
        and "is valid under each of" in error.message


def main(argv: list[str]) -> int:
    """``python -m tests.specs.example_validation DIR_OR_SPEC...``: the same check over any specs
    (every ``.json``/``.yaml`` entry file with ``openapi`` or ``swagger``), one line each, then the sums."""
    import sys

    from specrag.specs.limits import SpecLimits
    from specrag.specs.loader import discover_spec_files

    explicit, found = discover_spec_files([Path(a) for a in argv])
    total = Tally()
    for path in sorted({*explicit, *found}):
        try:
            src_doc = SpecSource(path, SpecLimits.from_settings()).doc
        except Exception:  # noqa: BLE001 - not a spec this check can read; the ingest report says why
            continue
        if not isinstance(src_doc, dict) or not ("openapi" in src_doc or "swagger" in src_doc):
            continue
        tally = check_spec(path, SpecLimits.from_settings())
        print(tally.line(str(path)))
        for line in tally.invalid:
            print("  invalid:", line)
        for name in ("operations", "bodies", "valid", "no_body", "foreign_patterns"):
            setattr(total, name, getattr(total, name) + getattr(tally, name))
        for name in ("not_json", "unsatisfiable", "validator_failed", "invalid", "discriminator_decides"):
            getattr(total, name).extend(getattr(tally, name))
    print(total.line("total"))
    sys.stdout.flush()
    return 1 if total.invalid else 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
