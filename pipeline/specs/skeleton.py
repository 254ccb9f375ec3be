"""A minimal valid JSON value for a schema: the body of an example request.

A developer copies an example call, so its body must pass the schema: the required properties
(a top-level object that requires none shows its first few), each from the spec's own
``example``/``examples``/``default``/first ``enum`` value when that value fits the schema's
constraints, else a typed placeholder that respects ``format``, bounds, lengths and ``pattern``.
``$ref``s are followed through a resolver (so multi-file specs work), ``allOf`` members are
merged, ``oneOf``/``anyOf`` take their first branch that is not ``null`` (a discriminator gets the
branch's name), and a schema that refers back to itself is cut: an optional recursive property
is left out, a recursive array is empty. Every schema is hostile: depth, values, merged members,
example sizes and generated strings are bounded, and a pattern whose shape can backtrack
exponentially is never run.
"""

from __future__ import annotations

import copy
import datetime
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

try:  # the regular-expression parser of the standard library (``sre_parse`` before 3.11)
    from re import _constants as sre_const  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants as sre_const  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

MAX_DEPTH = 12  # nesting of generated values
MAX_NODES = 300  # values generated for one body
MAX_PARTS = 64  # schemas merged into one (allOf members, $ref targets)
MAX_REF_HOPS = 8
MAX_EXAMPLE_CHARS = 400  # a spec's example larger than this (as JSON) is not copied
MAX_ITEMS = 5
MAX_PROPERTIES = 80
MAX_BRANCHES = 4  # oneOf branches tried for a value that fits no other
OPTIONAL_SHOWN = 3  # a top-level object that requires nothing shows this many of its properties
MAX_PATTERN_CHARS = 300
MAX_STRING = 200
MAX_LONG_STRING = 1000  # minLength beyond this is not met
CUT = object()  # a value that could not be built (a recursive schema)

# resolve(ref, base) -> (target value, the target's base, an identity key) or None
Resolve = Callable[[str, Any], "tuple[Any, Any, Any] | None"]

_FORMATS = {
    "date-time": "2024-01-01T00:00:00Z", "date": "2024-01-01", "time": "12:00:00Z", "email": "user@example.com",
    "idn-email": "user@example.com", "uri": "https://example.com", "url": "https://example.com",
    "uri-reference": "https://example.com", "iri": "https://example.com", "hostname": "example.com",
    "uuid": "3fa85f64-5717-4562-b3fc-2c963f66afa6", "ipv4": "192.0.2.1", "ipv6": "2001:db8::1",
    "byte": "U3dhZ2dlcg==", "binary": "<binary>", "password": "<password>", "int32": "1", "int64": "1",
    "double": "1.5", "float": "1.5", "decimal": "1.5", "duration": "P1D", "phone-number": "+15555550100",
}


@dataclass
class Facts:
    """What the merged schemas of one value say."""

    types: list[str] | None = None
    nullable: bool | None = None
    const: Any = CUT
    enum: list | None = None
    candidates: list = field(default_factory=list)  # examples, then defaults
    props: dict[str, list] = field(default_factory=dict)
    required: list[str] = field(default_factory=list)
    additional: Any = None  # False, or a list of (schema, base)
    items: list = field(default_factory=list)
    prefix_items: list = field(default_factory=list)
    minimum: float | None = None
    maximum: float | None = None
    multiple_of: float | None = None
    min_length: int = 0
    max_length: int | None = None
    patterns: list[str] = field(default_factory=list)
    format: str = ""
    min_items: int = 0
    max_items: int | None = None
    unique_items: bool = False
    min_properties: int = 0
    choice: tuple | None = None  # (index of the part, key, branches, discriminator)
    unsatisfiable: str = ""


class Skeleton:
    """Builds values for one request; ``notes`` says what was cut or could not be satisfied."""

    def __init__(self, resolve: Resolve, max_nodes: int = MAX_NODES):
        self.resolve = resolve
        self.max_nodes = max_nodes
        self.nodes = 0
        self.notes: list[str] = []

    # ---- entry points -------------------------------------------------------------------
    def value(self, schema: Any, base: Any, top: bool = True) -> Any:
        """A minimal valid value of ``schema`` (written in ``base``); never raises on a bad schema."""
        try:
            out = self._gen([(schema, base)], 0, (), top)
        except RecursionError:  # pragma: no cover - bounded by MAX_DEPTH; a last guard
            self.note("schema nested too deeply")
            out = CUT
        return {} if out is CUT else out

    def known(self, schema: Any, base: Any) -> Any:
        """The schema's own example, default, const or first enum value that fits it; CUT if none."""
        try:
            flat, _, _ = self._expand([(schema, base)], ())
        except RecursionError:  # pragma: no cover
            return CUT
        facts = self._merge(flat)
        for candidate in facts.candidates:
            if candidate is not None and self.fits(candidate, facts):
                return copy.deepcopy(candidate)
        if facts.const is not CUT:
            return facts.const
        for value in facts.enum or []:
            if value is not None and self.fits(value, facts):
                return value
        return CUT

    def facts(self, schema: Any, base: Any) -> Facts:
        """What the schema (its refs and allOf members merged) says of its value."""
        try:
            flat, _, _ = self._expand([(schema, base)], ())
        except RecursionError:  # pragma: no cover
            return Facts()
        return self._merge(flat)

    def note(self, text: str) -> None:
        if text not in self.notes and len(self.notes) < 8:
            self.notes.append(text)

    # ---- schemas: $ref, allOf, merge -----------------------------------------------------
    def _expand(self, parts: list, stack: tuple) -> tuple[list, tuple, bool]:
        """``parts`` with ``$ref``s followed and ``allOf`` members added, as (dict, base) pairs;
        the refs entered (appended to ``stack``) and whether a ref led back into ``stack``."""
        out: list = []
        entered: list = []
        seen: set = set()
        cyclic = False
        queue = list(parts)
        hops = 0
        while queue and len(out) < MAX_PARTS:
            schema, base = queue.pop(0)
            if schema is False:
                out.append(({"not": {}}, base))
                continue
            if not isinstance(schema, dict):
                continue
            ref = schema.get("$ref")
            if isinstance(ref, str):
                hops += 1
                target = self.resolve(ref, base) if hops <= MAX_PARTS * MAX_REF_HOPS else None
                ahead = [(extra, base)] if (extra := {k: v for k, v in schema.items() if k != "$ref"}) else []
                if target is None:
                    self.note(f"unresolved $ref {ref[:80]}")
                else:
                    value, where, key = target
                    if key in stack:
                        cyclic = True
                    elif key not in seen:
                        seen.add(key)
                        entered.append(key)
                        ahead.insert(0, (value, where))
                queue[0:0] = ahead  # depth first: properties keep the spec's order
                continue
            out.append((schema, base))
            members = schema.get("allOf")
            if isinstance(members, list):
                queue[0:0] = [(m, base) for m in members[:MAX_PARTS]]
        if queue:
            self.note(f"schema cut at {MAX_PARTS} merged parts")
        return out, (*stack, *entered), cyclic

    def _merge(self, parts: list) -> Facts:
        f = Facts()
        for index, (s, base) in enumerate(parts):
            if "not" in s and s.get("not") == {}:
                f.unsatisfiable = "a schema that is false"
            kind = s.get("type")
            declared = [kind] if isinstance(kind, str) else [k for k in kind if isinstance(k, str)] \
                if isinstance(kind, list) else None
            if declared is not None:
                if declared == ["file"]:  # Swagger 2 formData
                    declared = ["string"]
                    f.format = f.format or "binary"
                f.types = declared if f.types is None else _common_types(f.types, declared)
                if not f.types and not f.unsatisfiable:
                    f.unsatisfiable = f"types {kind} and others that exclude each other"
            if "nullable" in s:
                f.nullable = bool(s["nullable"]) if f.nullable is None else f.nullable and bool(s["nullable"])
            if "const" in s and f.const is CUT:
                f.const = s["const"]
            if isinstance(s.get("enum"), list) and s["enum"]:
                f.enum = list(s["enum"]) if f.enum is None else [v for v in f.enum if _member(v, s["enum"])]
            for key in ("example", "x-example"):
                if key in s:
                    f.candidates.append(plain(s[key]))
            if isinstance(s.get("examples"), list):
                f.candidates.extend(plain(v) for v in s["examples"][:3])
            if "default" in s:
                f.candidates.append(plain(s["default"]))
            props = s.get("properties")
            if isinstance(props, dict):
                for name, sub in list(props.items())[:MAX_PROPERTIES * 4]:
                    f.props.setdefault(str(name), []).append((sub, base))
            if isinstance(s.get("required"), list):
                f.required += [str(r) for r in s["required"] if isinstance(r, (str, int)) and str(r) not in f.required]
            extra = s.get("additionalProperties")
            if extra is False:
                f.additional = False
            elif isinstance(extra, dict) and f.additional is not False:
                f.additional = [*(f.additional or []), (extra, base)]
            items = s.get("items")
            if isinstance(items, dict):
                f.items.append((items, base))
            elif isinstance(items, list) and not f.prefix_items:  # draft 4 tuples
                f.prefix_items = [(i, base) for i in items[:MAX_ITEMS]]
            if isinstance(s.get("prefixItems"), list) and not f.prefix_items:
                f.prefix_items = [(i, base) for i in s["prefixItems"][:MAX_ITEMS]]
            self._bounds(f, s)
            for key in ("minLength", "minItems", "minProperties"):
                if _count(s.get(key)) is not None:
                    attr = {"minLength": "min_length", "minItems": "min_items", "minProperties": "min_properties"}[key]
                    setattr(f, attr, max(getattr(f, attr), _count(s[key])))
            for key, attr in (("maxLength", "max_length"), ("maxItems", "max_items")):
                if _count(s.get(key)) is not None:
                    current = getattr(f, attr)
                    setattr(f, attr, _count(s[key]) if current is None else min(current, _count(s[key])))
            if isinstance(s.get("pattern"), str) and len(f.patterns) < 4:
                f.patterns.append(s["pattern"])
            if isinstance(s.get("format"), str) and not f.format:
                f.format = s["format"]
            f.unique_items = f.unique_items or s.get("uniqueItems") is True
            if f.choice is None:
                for key in ("oneOf", "anyOf"):
                    if isinstance(s.get(key), list) and s[key]:
                        f.choice = (index, key, s[key][:MAX_PARTS], s.get("discriminator"))
                        break
        if f.nullable and f.types is not None and "null" not in f.types:
            f.types = [*f.types, "null"]
        if f.enum is not None and f.types is not None and not f.unsatisfiable and not any(
                _json_type(v) in f.types or (_json_type(v) == "integer" and "number" in f.types) for v in f.enum):
            f.unsatisfiable = f"no enum value is of type {'/'.join(f.types)}"
        return f

    @staticmethod
    def _bounds(f: Facts, s: dict) -> None:
        low, high = _number(s.get("minimum")), _number(s.get("maximum"))
        ex_low, ex_high = s.get("exclusiveMinimum"), s.get("exclusiveMaximum")
        if low is not None and ex_low is True:  # OpenAPI 3.0 / draft 4: a flag on minimum
            low = math.nextafter(low, math.inf)
        if high is not None and ex_high is True:
            high = math.nextafter(high, -math.inf)
        if _number(ex_low) is not None:  # OpenAPI 3.1: a number of its own
            low = max(low, math.nextafter(ex_low, math.inf)) if low is not None else math.nextafter(ex_low, math.inf)
        if _number(ex_high) is not None:
            high = min(high, math.nextafter(ex_high, -math.inf)) if high is not None else math.nextafter(ex_high, -math.inf)
        if low is not None:
            f.minimum = low if f.minimum is None else max(f.minimum, low)
        if high is not None:
            f.maximum = high if f.maximum is None else min(f.maximum, high)
        step = _number(s.get("multipleOf"))
        if step is not None and step > 0:
            f.multiple_of = step if f.multiple_of is None else _lcm(f.multiple_of, step)

    # ---- values ---------------------------------------------------------------------------
    def _gen(self, parts: list, depth: int, stack: tuple, top: bool = False) -> Any:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            self.note(f"body cut at {self.max_nodes} values")
            return CUT
        if depth > MAX_DEPTH:
            self.note(f"body cut at depth {MAX_DEPTH}")
            return CUT
        flat, stack, cyclic = self._expand(parts, stack)
        if not flat:
            return CUT if cyclic else "<value>"
        f = self._merge(flat)
        if f.unsatisfiable:
            self.note(f"unsatisfiable: {f.unsatisfiable}")
        if f.choice is not None:
            return self._choose(flat, f, depth, stack, top)
        kind = _kind(f)
        for candidate in f.candidates:  # null says nothing a placeholder would not
            if candidate is not None and self.fits(candidate, f):
                return copy.deepcopy(candidate)
        if f.const is not CUT:
            return copy.deepcopy(f.const)
        if f.enum:
            fitting = [v for v in f.enum if v is not None and self.fits(v, f)]
            return copy.deepcopy(fitting[0] if fitting else f.enum[0])
        if kind == "object":
            return self._object(f, depth, stack, top)
        if kind == "array":
            return self._array(f, depth, stack)
        if kind == "string":
            return self._string(f)
        if kind in ("integer", "number"):
            return self._number(f, kind)
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return "<value>"

    def _choose(self, flat: list, f: Facts, depth: int, stack: tuple, top: bool) -> Any:
        """oneOf/anyOf: the first branch that is not ``null`` (and agrees with the declared
        types), merged with the rest of the schema. For oneOf, a value that provably fits no other
        branch is preferred (up to MAX_BRANCHES branches are tried); when every value tried may
        fit another branch too (branches that overlap, told apart only by a discriminator), the
        first is kept and a note says so."""
        index, key, branches, discriminator = f.choice
        dropped = {key, "allOf", "discriminator"}
        rest = [({k: v for k, v in s.items() if k != "allOf" and not (i == index and k in dropped)}, b)
                for i, (s, b) in enumerate(flat)]
        base = flat[index][1]
        ordered = sorted(range(len(branches)), key=lambda i: self._branch_rank(branches[i], base, f))
        first = CUT
        for i in ordered[:MAX_BRANCHES]:
            value = self._gen([*rest, (branches[i], base)], depth + 1, stack, top)
            if value is CUT:
                continue
            if isinstance(discriminator, dict) and isinstance(value, dict):
                self._discriminate(value, discriminator, branches[i], base, depth, stack)
            if key == "anyOf" or not any(self._may_fit(value, other, base) for j, other in enumerate(branches)
                                         if j != i):
                return value
            first = value if first is CUT else first
        if first is not CUT:
            name = discriminator.get("propertyName") if isinstance(discriminator, dict) else None
            self.note("oneOf: the value may also fit another branch" +
                      (f" (the discriminator '{name}' tells them apart)" if isinstance(name, str) else ""))
        return first

    def _may_fit(self, value: Any, branch: Any, base: Any) -> bool:
        """False only when ``value`` provably fails ``branch``: a type, enum, const or bound it
        breaks, a required property it lacks, or such a property value; True when unsure."""
        try:
            flat, _, _ = self._expand([(branch, base)], ())
        except RecursionError:  # pragma: no cover
            return True
        f = self._merge(flat)
        if f.choice is not None:
            return True
        kind = _json_type(value)
        if kind in ("object", "array"):
            if f.types is not None and kind not in f.types:
                return False
            if f.enum is not None and not _member(value, f.enum):
                return False
            if kind == "array" or not isinstance(value, dict):
                return True
            if any(name not in value for name in f.required):
                return False
            if f.additional is False and not any("patternProperties" in s for s, _ in flat) \
                    and any(name not in f.props for name in value):
                return False
            for name, sub in value.items():
                if name in f.props and _json_type(sub) not in ("object", "array", None):
                    prop = self._merge(self._expand(f.props[name], ())[0])
                    if prop.choice is None and not self.fits(sub, prop):
                        return False
            return True
        return f.unsatisfiable != "" or self.fits(value, f) or kind is None

    def _branch_rank(self, branch: Any, base: Any, f: Facts) -> int:
        """Branches that are plainly ``null``, or of a type the schema excludes, go last."""
        if not isinstance(branch, dict):
            return 2
        kind = branch.get("type")
        if kind == "null" or branch.get("enum") == [None]:
            return 2
        if isinstance(kind, str) and f.types is not None and kind not in f.types:
            return 1
        return 0

    def _discriminate(self, value: dict, discriminator: dict, branch: Any, base: Any, depth: int,
                      stack: tuple) -> None:
        """The discriminator property names the branch: its mapping key (or the branch's schema
        name) when the property's schema allows that value, else the property's own value."""
        name = discriminator.get("propertyName")
        if not isinstance(name, str) or not isinstance(branch, dict):
            return
        tags: list[str] = []
        ref = branch.get("$ref")
        if isinstance(ref, str):
            mapping = discriminator.get("mapping") if isinstance(discriminator.get("mapping"), dict) else {}
            tags = [str(k) for k, v in mapping.items() if v == ref]
            tags.append(re.sub(r"\.(ya?ml|json)$", "", ref.rstrip("/").rsplit("/", 1)[-1]))
        facts = self._merge(self._expand([(branch, base)], ())[0])
        if name not in facts.props:
            if tags and facts.additional is not False and value.get(name) in (None, "<string>", "<value>"):
                value[name] = tags[0]
            return
        prop = self._merge(self._expand(facts.props[name], ())[0])
        for tag in tags:
            if self.fits(tag, prop):
                value[name] = tag
                return
        if name not in value:
            own = self._gen(facts.props[name], depth + 1, stack)
            if own is not CUT and own not in ("<string>", "<value>"):
                value[name] = own

    def _object(self, f: Facts, depth: int, stack: tuple, top: bool) -> dict:
        # a required readOnly property is required in responses only (OpenAPI)
        names = [n for n in f.required if n not in f.props or not self._read_only(f.props[n])]
        if len(names) > MAX_PROPERTIES:
            self.note(f"{len(names)} required properties; the first {MAX_PROPERTIES} shown")
            names = names[:MAX_PROPERTIES]
        if not names and top:
            names = [n for n, parts in list(f.props.items())[:MAX_PROPERTIES]
                     if not self._deprecated(parts) and not self._read_only(parts)][:OPTIONAL_SHOWN]
        out: dict = {}
        for name in names:
            value = self._property(name, f, depth, stack, required=name in f.required)
            if value is not CUT:
                out[name] = value
        for name in list(f.props)[:MAX_PROPERTIES]:  # minProperties: more of the declared properties
            if len(out) >= f.min_properties:
                break
            if name not in out and not self._read_only(f.props[name]):
                value = self._property(name, f, depth, stack, required=False)
                if value is not CUT:
                    out[name] = value
        extra = 1
        while len(out) < f.min_properties and f.additional is not False and extra <= MAX_ITEMS:
            out[f"key{extra}"] = self._gen(f.additional, depth + 1, stack) if f.additional else "<value>"
            extra += 1
        return out

    def _property(self, name: str, f: Facts, depth: int, stack: tuple, required: bool) -> Any:
        if name in f.props:
            value = self._gen(f.props[name], depth + 1, stack)
        elif f.additional:
            value = self._gen(f.additional, depth + 1, stack)
        else:
            if f.additional is False:
                self.note(f"'{name}' is required but additionalProperties is false")
            return "<value>"
        if value is CUT and required:
            self.note(f"recursive schema: '{name}' cut")
            return {}
        return value

    def _read_only(self, parts: list) -> bool:
        try:
            flat, _, _ = self._expand(parts, ())
        except RecursionError:  # pragma: no cover
            return False
        return any(s.get("readOnly") is True for s, _ in flat)

    def _deprecated(self, parts: list) -> bool:
        return any(isinstance(s, dict) and s.get("deprecated") is True for s, _ in parts)

    def _array(self, f: Facts, depth: int, stack: tuple) -> list:
        count = max(f.min_items, 1 if depth < MAX_DEPTH // 2 else 0)  # one item shows its shape
        if f.max_items is not None:
            count = min(count, f.max_items)
        if count > MAX_ITEMS:
            self.note(f"minItems {f.min_items}: {MAX_ITEMS} items shown")
            count = MAX_ITEMS
        if f.prefix_items:
            values = [self._gen([p], depth + 1, stack) for p in f.prefix_items[:count or len(f.prefix_items)]]
            return [v for v in values if v is not CUT]
        if not f.items or count == 0:
            return ["<value>"] * count if f.min_items and not f.items else []
        item = self._gen(f.items, depth + 1, stack)
        if item is CUT:
            if f.min_items:
                self.note("recursive schema: array items cut")
            return []
        values = [copy.deepcopy(item) for _ in range(count)]
        if f.unique_items and count > 1:
            options = self._merge(self._expand(f.items, stack)[0]).enum or []
            distinct = [v for i, v in enumerate(options) if not any(_same(v, w) for w in options[:i])]
            values = distinct[:count] if len(distinct) >= count else [_vary(v, i) for i, v in enumerate(values)]
        return values

    def _string(self, f: Facts) -> str:
        if f.patterns:
            text = pattern_example(f.patterns[0], f.min_length, f.max_length)
            if text is not None and all(matches(p, text) is not False for p in f.patterns):
                return text
            self.note(f"no value found for pattern {f.patterns[0][:60]}")
        text = _FORMATS.get(f.format, "<string>")
        if len(text) < f.min_length:
            if f.min_length > MAX_LONG_STRING:
                self.note(f"minLength {f.min_length}: a shorter string shown")
            text += "x" * (min(f.min_length, MAX_LONG_STRING) - len(text))
        if f.max_length is not None and len(text) > f.max_length:
            text = "x" * max(f.min_length, min(1, f.max_length))
        return text

    def _number(self, f: Facts, kind: str) -> int | float:
        low, high, step = f.minimum, f.maximum, f.multiple_of
        value: float = 1
        if low is not None and value < low:
            value = low
        if high is not None and value > high:
            value = high if low is None or high >= low else low
        if kind == "integer":
            value = math.floor(high) if high is not None and math.ceil(value) > high else math.ceil(value)
        if step:
            value = math.ceil(value / step - 1e-9) * step
            if high is not None and value > high:
                value = math.floor(high / step + 1e-9) * step
            value = round(value, 12)
        if (kind == "integer" or float(value).is_integer()) and abs(value) < 2 ** 53:
            value = int(value)
        return value

    # ---- does a spec's own value fit? ----------------------------------------------------
    def fits(self, value: Any, f: Facts) -> bool:
        """Whether ``value`` (an example, a default, an enum value) passes the merged schema's
        constraints, so copying it keeps the body valid. Objects fit only a free-form schema
        (one with no properties of its own), arrays only when their items are plain values."""
        try:
            if len(json.dumps(value, default=str)) > MAX_EXAMPLE_CHARS:
                return False
        except (TypeError, ValueError, RecursionError):
            return False
        if f.enum is not None and not _member(value, f.enum):
            return False
        if f.const is not CUT and not _same(value, f.const):
            return False
        kinds = f.types
        actual = _json_type(value)
        if actual is None:
            return False
        if kinds is not None and not (actual in kinds or (actual == "integer" and "number" in kinds)):
            return False
        if actual == "null":
            return kinds is None or "null" in kinds or bool(f.nullable)
        if actual == "string":
            if len(value) < f.min_length or (f.max_length is not None and len(value) > f.max_length):
                return False
            return all(matches(p, value) is not False for p in f.patterns)
        if actual in ("integer", "number"):
            if (f.minimum is not None and value < f.minimum) or (f.maximum is not None and value > f.maximum):
                return False
            return not f.multiple_of or _multiple(value, f.multiple_of)
        if actual == "object":
            return not f.props and not f.required and f.choice is None and len(value) >= f.min_properties \
                and (f.additional is None or (f.additional is False and not value))
        if actual == "array":
            if len(value) < f.min_items or (f.max_items is not None and len(value) > f.max_items):
                return False
            if f.unique_items and len({json.dumps(v, sort_keys=True, default=str) for v in value}) < len(value):
                return False
            if f.prefix_items:
                return False
            if not f.items:
                return True
            item = self._merge(self._expand(f.items, ())[0])
            return item.choice is None and all(_json_type(v) not in ("object", "array") and self.fits(v, item)
                                               for v in value)
        return True


def _kind(f: Facts) -> str:
    if f.types:
        return next((t for t in f.types if t != "null"), f.types[0])
    if f.props or f.required or f.additional is not None or f.min_properties:
        return "object"
    if f.items or f.prefix_items or f.min_items:
        return "array"
    if f.patterns or f.format or f.min_length or f.max_length is not None:
        return "string"
    if f.minimum is not None or f.maximum is not None or f.multiple_of:
        return "number"
    if f.enum:
        return _json_type(f.enum[0]) or ""
    return ""


def _json_type(value: Any) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else None
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object" if all(isinstance(k, str) for k in value) else None
    return None  # dates and other YAML types: not JSON


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b or (_json_type(a) in ("integer", "number") and
                                            _json_type(b) in ("integer", "number") and a == b)


def _member(value: Any, options: list) -> bool:
    return any(_same(value, option) for option in options)


def _number(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _multiple(value: float, step: float) -> bool:
    """As jsonschema decides it."""
    try:
        if isinstance(step, float):
            quotient = value / step
            return int(quotient) == quotient
        return value % step == 0
    except (OverflowError, ZeroDivisionError):
        return False


def _common_types(mine: list[str], theirs: list[str]) -> list[str]:
    """Types both lists allow (an integer is a number)."""
    out = [t for t in mine if t in theirs or (t == "integer" and "number" in theirs)]
    return out + [t for t in theirs if t == "integer" and "number" in mine and t not in out]


def plain(value: Any) -> Any:
    """A YAML date or time as the string the spec wrote; other values unchanged."""
    return value.isoformat() if isinstance(value, (datetime.date, datetime.time)) else value


def _lcm(a: float, b: float) -> float:
    if float(a).is_integer() and float(b).is_integer():
        return abs(int(a) * int(b)) // math.gcd(int(a), int(b)) or a
    return max(a, b)


def _vary(value: Any, i: int) -> Any:
    if i == 0:
        return value
    if isinstance(value, str):
        return value + str(i)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value + i
    return value


# ---- patterns ---------------------------------------------------------------------------------
_REPEATS = {sre_const.MAX_REPEAT, sre_const.MIN_REPEAT}
_POSSESSIVE = getattr(sre_const, "POSSESSIVE_REPEAT", None)
if _POSSESSIVE is not None:
    _REPEATS.add(_POSSESSIVE)


def _parsed(pattern: str):
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        return None
    try:
        return sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        return None


def safe_pattern(pattern: str) -> bool:
    """A pattern that can be run on a short string without exponential backtracking: it parses,
    and no repetition holds another repetition or an alternation (``(a+)+``, ``(a|a)*``)."""
    tree = _parsed(pattern)
    return tree is not None and not _nested_repeat(tree, inside=False, depth=0)


def _nested_repeat(items, inside: bool, depth: int) -> bool:
    if depth > 50:
        return True
    for op, av in items:
        if op in _REPEATS:
            low, high, sub = av
            unbounded = high is sre_const.MAXREPEAT or high > 1
            if inside and unbounded:
                return True
            if _nested_repeat(sub, inside or unbounded, depth + 1):
                return True
        elif op is sre_const.BRANCH:
            if inside:
                return True
            if any(_nested_repeat(alt, inside, depth + 1) for alt in av[1]):
                return True
        elif op is sre_const.SUBPATTERN:
            if _nested_repeat(av[-1], inside, depth + 1):
                return True
        elif op in (sre_const.ASSERT, sre_const.ASSERT_NOT):
            if _nested_repeat(av[1], inside, depth + 1):
                return True
        elif op is getattr(sre_const, "ATOMIC_GROUP", None) and _nested_repeat(av, inside, depth + 1):
            return True
    return False


def matches(pattern: str, text: str) -> bool | None:
    """JSON Schema's ``pattern`` (a search, not a full match); None when it cannot be run safely."""
    if not safe_pattern(pattern):
        return None
    try:
        return re.search(pattern, text) is not None
    except (re.error, RecursionError, OverflowError):
        return None


_CATEGORY_CHARS = {
    sre_const.CATEGORY_DIGIT: "0", sre_const.CATEGORY_NOT_DIGIT: "a", sre_const.CATEGORY_WORD: "a",
    sre_const.CATEGORY_NOT_WORD: "-", sre_const.CATEGORY_SPACE: " ", sre_const.CATEGORY_NOT_SPACE: "a",
}
_SPARE = "aA0_-x. "
_COMMON = ("Example1!", "example", "Example-Password-1!", "a1", "ab-cd", "12345678", "abcdefgh12345678")


def pattern_example(pattern: str, min_length: int = 0, max_length: int | None = None) -> str | None:
    """A string that matches ``pattern`` within the lengths: the shortest its parse tree spells
    (each repetition its minimum, each alternation its first branch), its repetitions lengthened
    to reach ``min_length``, else a few common shapes (a password with a digit, a capital and a
    sign); None when none matches."""
    tree = _parsed(pattern)
    if tree is None:
        return None
    spelled = []
    try:
        shortest = _spell(tree, {}, 0, 0)
        spelled.append(shortest)
        if len(shortest) < min_length:
            growth = len(_spell(tree, {}, 1, 0)) - len(shortest)
            if growth > 0:
                spelled.append(_spell(tree, {}, -(-(min_length - len(shortest)) // growth), 0))
    except (ValueError, RecursionError):  # a construct not spelled, or too long
        pass
    for text in [*reversed(spelled), *_COMMON]:
        if min_length <= len(text) <= min(MAX_STRING, max_length if max_length is not None else MAX_STRING) \
                and matches(pattern, text) is not False:
            return text
    return None


def _spell(items, groups: dict, extra: int, depth: int) -> str:
    if depth > 40:
        raise ValueError("not spelled")
    out = []
    for op, av in items:
        if op is sre_const.LITERAL:
            out.append(chr(av))
        elif op is sre_const.NOT_LITERAL:
            out.append("a" if av != ord("a") else "b")
        elif op is sre_const.ANY:
            out.append("a")
        elif op is sre_const.IN:
            out.append(_one_of(av))
        elif op is sre_const.CATEGORY:
            out.append(_CATEGORY_CHARS.get(av, "a"))
        elif op in _REPEATS:
            low, high, sub = av
            count = low + (extra if high is sre_const.MAXREPEAT or high >= low + extra else high - low)
            if count > MAX_STRING:
                raise ValueError("not spelled")
            piece = _spell(sub, groups, extra, depth + 1)
            out.append(piece * count)
        elif op is sre_const.SUBPATTERN:
            group, *_, sub = av
            text = _spell(sub, groups, extra, depth + 1)
            if group is not None:
                groups[group] = text
            out.append(text)
        elif op is sre_const.BRANCH:
            out.append(_spell(av[1][0], groups, extra, depth + 1))
        elif op is sre_const.GROUPREF:
            out.append(groups.get(av, ""))
        elif op in (sre_const.AT, sre_const.ASSERT, sre_const.ASSERT_NOT):
            continue
        elif op is getattr(sre_const, "ATOMIC_GROUP", None):
            out.append(_spell(av, groups, extra, depth + 1))
        else:
            raise ValueError("not spelled")
        if sum(map(len, out)) > MAX_STRING:
            raise ValueError("not spelled")
    return "".join(out)


def _one_of(items) -> str:
    """A character of a class ``[...]``: a plain one it holds ("a", "A", "0" ...) when it has one,
    else its first printable member; for ``[^...]`` a plain one it does not exclude."""
    negate = bool(items) and items[0][0] is sre_const.NEGATE
    if negate:
        for char in _SPARE:
            if not any(_in_class(char, op, av) for op, av in items[1:]):
                return char
        raise ValueError("not spelled")
    for char in _SPARE:
        if any(_in_class(char, op, av) for op, av in items if op is not sre_const.CATEGORY or av in _CATEGORY_CHARS):
            return char
    for op, av in items:
        if op is sre_const.LITERAL and chr(av).isprintable():
            return chr(av)
        if op is sre_const.RANGE:
            for code in range(av[0], min(av[1], av[0] + 200) + 1):
                if chr(code).isprintable() and not chr(code).isspace():
                    return chr(code)
        if op is sre_const.CATEGORY:
            return _CATEGORY_CHARS.get(av, "a")
    for op, av in items:
        if op is sre_const.LITERAL:
            return chr(av)
    raise ValueError("not spelled")


def _in_class(char: str, op, av) -> bool:
    code = ord(char)
    if op is sre_const.LITERAL:
        return code == av
    if op is sre_const.RANGE:
        return av[0] <= code <= av[1]
    if op is sre_const.CATEGORY:
        probe = {sre_const.CATEGORY_DIGIT: char.isdigit(), sre_const.CATEGORY_NOT_DIGIT: not char.isdigit(),
                 sre_const.CATEGORY_WORD: char.isalnum() or char == "_",
                 sre_const.CATEGORY_NOT_WORD: not (char.isalnum() or char == "_"),
                 sre_const.CATEGORY_SPACE: char.isspace(), sre_const.CATEGORY_NOT_SPACE: not char.isspace()}
        return probe.get(av, True)
    return True


