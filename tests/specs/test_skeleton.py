"""The minimal valid value of a schema (an example request's body): required properties, the spec's
own values when they fit, typed placeholders that respect the constraints, $ref / allOf / oneOf /
anyOf, recursion and hostile sizes. Each value is checked with jsonschema against its schema."""

from __future__ import annotations

import time

import pytest
from jsonschema import Draft4Validator, Draft202012Validator
from specrag.specs.skeleton import Skeleton, matches, pattern_example, safe_pattern


def resolver(doc: dict):
    """A resolver over one in-memory document's ``#/...`` pointers."""
    def resolve(ref: str, base):
        if not ref.startswith("#/"):
            return None
        node = doc
        for token in ref[2:].split("/"):
            if not isinstance(node, dict) or token not in node:
                return None
            node = node[token]
        return node, base, ref
    return resolve


def build(schema: dict, defs: dict | None = None, top: bool = True):
    doc = {"$defs": defs or {}}
    skeleton = Skeleton(resolver(doc))
    return skeleton.value(schema, None, top=top), skeleton.notes


def valid(value, schema: dict, defs: dict | None = None, draft=Draft202012Validator) -> bool:
    return draft({**schema, "$defs": defs or {}}).is_valid(value)


def test_only_required_properties_with_typed_placeholders():
    schema = {"type": "object", "required": ["name", "age", "email", "when"],
              "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                             "email": {"type": "string", "format": "email"},
                             "when": {"type": "string", "format": "date-time"}, "nick": {"type": "string"}}}
    value, notes = build(schema)
    assert value == {"name": "<string>", "age": 1, "email": "user@example.com", "when": "2024-01-01T00:00:00Z"}
    assert notes == [] and valid(value, schema)


def test_the_specs_own_example_default_and_enum_are_used_when_they_fit():
    schema = {"type": "object", "required": ["country", "size", "kind", "flag"], "properties": {
        "country": {"type": "string", "example": "DE", "pattern": "^[A-Z]{2}$"},
        "size": {"type": "integer", "default": 20, "maximum": 100},
        "kind": {"type": "string", "enum": ["cat", "dog"]},
        "flag": {"type": "string", "example": 12, "enum": ["on", "off"]}}}  # an example of the wrong type is not copied
    value, _ = build(schema)
    assert value == {"country": "DE", "size": 20, "kind": "cat", "flag": "on"} and valid(value, schema)


def test_an_example_that_breaks_a_constraint_is_replaced():
    schema = {"type": "object", "required": ["code", "n"], "properties": {
        "code": {"type": "string", "example": "de", "pattern": "^[A-Z]{2}$"},
        "n": {"type": "integer", "example": 500, "minimum": 1, "maximum": 10}}}
    value, _ = build(schema)
    assert value == {"code": "AA", "n": 1} and valid(value, schema)


@pytest.mark.parametrize("constraints, expected", [
    ({"type": "integer", "minimum": 5}, 5),
    ({"type": "integer", "exclusiveMinimum": 5}, 6),
    ({"type": "integer", "maximum": -3}, -3),
    ({"type": "integer", "minimum": 7, "multipleOf": 5}, 10),
    ({"type": "number", "minimum": 0.5, "maximum": 0.75}, 0.75),
    ({"type": "string", "minLength": 12}, "<string>xxxx"),
    ({"type": "string", "maxLength": 3}, "x"),
    ({"type": "string", "pattern": "^[0-9]{3}-[A-Z]{2}$"}, "000-AA"),
    ({"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 2, "uniqueItems": True},
     ["a", "b"]),
    ({"type": "boolean"}, True),
    ({"type": ["null", "string"]}, "<string>"),
    ({"const": "fixed"}, "fixed"),
])
def test_placeholders_respect_the_constraints(constraints, expected):
    value, _ = build(constraints, top=False)
    assert value == expected and valid(value, constraints)


def test_refs_and_allof_merge_properties_and_required():
    defs = {"Base": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "format": "uuid"}}},
            "Named": {"allOf": [{"$ref": "#/$defs/Base"},
                                {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}]}}
    schema = {"$ref": "#/$defs/Named"}
    value, _ = build(schema, defs)
    assert value == {"id": "3fa85f64-5717-4562-b3fc-2c963f66afa6", "name": "<string>"}
    assert valid(value, schema, defs)


def test_read_only_required_properties_are_left_out_of_a_request():
    schema = {"type": "object", "required": ["id", "name"],
              "properties": {"id": {"type": "string", "readOnly": True}, "name": {"type": "string"}}}
    assert build(schema)[0] == {"name": "<string>"}


def test_oneof_takes_a_branch_no_other_branch_accepts_and_the_discriminator_names_it():
    defs = {"Cat": {"type": "object", "required": ["petType", "lives"],
                    "properties": {"petType": {"type": "string"}, "lives": {"type": "integer"}}},
            "Dog": {"type": "object", "required": ["petType", "bark"],
                    "properties": {"petType": {"type": "string"}, "bark": {"type": "boolean"}}}}
    schema = {"oneOf": [{"type": "null"}, {"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
              "discriminator": {"propertyName": "petType", "mapping": {"cat": "#/$defs/Cat"}}}
    value, _ = build(schema, defs)
    assert value == {"petType": "cat", "lives": 1} and valid(value, schema, defs)


def test_overlapping_oneof_branches_are_noted():
    schema = {"oneOf": [{"type": "object"}, {"type": "object", "properties": {"a": {"type": "string"}}}]}
    value, notes = build(schema)
    assert value == {} and any("may also fit another branch" in n for n in notes)


def test_anyof_takes_the_first_branch_that_is_not_null():
    schema = {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 3}]}
    assert build(schema, top=False)[0] == 3


def test_recursion_is_cut_an_optional_recursive_array_is_empty():
    defs = {"Node": {"type": "object", "required": ["name", "children"],
                     "properties": {"name": {"type": "string"},
                                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                                    "parent": {"$ref": "#/$defs/Node"}}}}
    schema = {"$ref": "#/$defs/Node"}
    value, notes = build(schema, defs)
    assert value == {"name": "<string>", "children": []} and notes == [] and valid(value, schema, defs)


def test_a_required_self_reference_is_reported_not_looped():
    defs = {"Loop": {"type": "object", "required": ["next"], "properties": {"next": {"$ref": "#/$defs/Loop"}}}}
    value, notes = build({"$ref": "#/$defs/Loop"}, defs)
    assert value == {"next": {}} and any("recursive" in n for n in notes)


def test_a_top_level_object_that_requires_nothing_shows_its_first_properties():
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(6)}}
    assert build(schema)[0] == {"p0": "<string>", "p1": "<string>", "p2": "<string>"}
    assert build({"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {"type": "string"}}}},
                  "required": ["x"]})[0] == {"x": {}}  # nested: minimal


def test_openapi_30_flags_nullable_and_exclusive_minimum():
    schema = {"type": "object", "required": ["n", "s"], "properties": {
        "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1},
        "s": {"type": "string", "nullable": True, "example": None}}}
    value, _ = build(schema)
    assert 0 < value["n"] <= 1 and value["s"] == "<string>"
    assert Draft4Validator(schema).is_valid(value)


def test_unresolved_refs_and_contradictions_are_noted():
    value, notes = build({"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/nowhere"}}})
    assert value == {"a": "<value>"} and any("unresolved" in n for n in notes)
    _, notes = build({"allOf": [{"type": "string"}, {"type": "integer"}]}, top=False)
    assert any(n.startswith("unsatisfiable") for n in notes)


def test_patterns_spell_their_shortest_match_and_unsafe_ones_are_never_run():
    assert pattern_example(r"^AC[0-9a-f]{4}$") == "ACaaaa"
    assert pattern_example(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$") == "a@a.aa"
    assert pattern_example(r"^(ab|cd)+x?$") == "ab"
    assert pattern_example(r"^[a-z]{2,}$", min_length=5) == "aaaaa"
    assert pattern_example("(") is None
    assert not safe_pattern(r"^(a+)+$") and not safe_pattern(r"(a|aa)*b")
    start = time.perf_counter()
    assert matches(r"^(a+)+$", "a" * 40 + "!") is None  # would backtrack for hours
    assert time.perf_counter() - start < 0.1


def test_hostile_schemas_stay_bounded():
    wide = {"type": "object", "required": [f"p{i}" for i in range(5000)],
            "properties": {f"p{i}": {"type": "string", "minLength": 10 ** 8} for i in range(5000)}}
    deep: dict = {"type": "string"}
    for _ in range(500):
        deep = {"type": "object", "required": ["x"], "properties": {"x": deep}}
    huge_items = {"type": "array", "minItems": 10 ** 9, "items": {"type": "array", "minItems": 10 ** 9,
                                                                 "items": {"type": "integer"}}}
    defs = {f"A{i}": {"allOf": [{"$ref": f"#/$defs/A{i + 1}"}, {"$ref": f"#/$defs/A{i + 1}"}]} for i in range(200)}
    start = time.perf_counter()
    for schema, extra in ((wide, None), (deep, None), (huge_items, None), ({"$ref": "#/$defs/A0"}, defs)):
        value, notes = build(schema, extra)
        assert len(str(value)) < 100_000 and notes
    assert time.perf_counter() - start < 2
