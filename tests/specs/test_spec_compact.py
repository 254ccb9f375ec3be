"""The compact rendering of referenced components keeps every property name and type of a closure
(real corpus specs), and is shorter than the full text."""

from __future__ import annotations

from pathlib import Path

import pytest
from specrag.specs.compact import compact_component
from specrag.specs.ingest import ingest_spec
from specrag.specs.limits import SpecLimits
from specrag.specs.loader import SpecSource

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
SPECS = [CORPUS / "restbench" / "tmdb.json", CORPUS / "twilio" / "twilio_api_v2010.json"]


def _properties(schema, seen=()):
    """(name, type) of every inline property, recursively: what the compact form must keep."""
    if not isinstance(schema, dict) or id(schema) in seen or "$ref" in schema:
        return
    seen = (*seen, id(schema))
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield str(name), sub.get("type")
            yield from _properties(sub, seen)
    for key in ("items", "additionalProperties"):
        yield from _properties(schema.get(key), seen)
    for key in ("allOf", "oneOf", "anyOf"):
        for member in schema.get(key) or []:
            yield from _properties(member, seen)


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_every_property_name_and_type_of_every_schema_is_kept(spec):
    if not spec.is_file():
        pytest.skip(f"{spec} is not in ../shared")
    doc = SpecSource(spec, SpecLimits.from_settings()).doc
    schemas = (doc.get("components") or {}).get("schemas") or doc.get("definitions") or {}
    checked = 0
    for name, schema in schemas.items():
        text = compact_component("schemas", name, f"components/schemas/{name}", schema)
        lines = text.splitlines()
        for prop, kind in _properties(schema):
            line = next((ln for ln in lines if ln.lstrip().startswith(f"- {prop}: ")), None)
            assert line is not None, (name, prop)
            if isinstance(kind, str):
                assert kind in line, (name, prop, kind, line)
            checked += 1
    assert checked > 50


def test_compact_text_is_stored_on_components_and_is_shorter():
    spec = SPECS[0]
    if not spec.is_file():
        pytest.skip(f"{spec} is not in ../shared")
    result = ingest_spec(spec, "tmdb", 1500)
    compact = [c for c in result.chunks if c.compact_text]
    assert compact and all(c.compact_tokens < c.n_tokens for c in compact)
    assert not any(c.compact_text for c in result.chunks if c.type.value != "component")


def test_nested_inline_objects_refs_enums_and_compositions():
    schema = {"type": "object", "required": ["id"], "description": "A pet. Long prose follows here.",
              "properties": {"id": {"type": "integer", "format": "int64"},
                             "owner": {"$ref": "#/components/schemas/Person"},
                             "status": {"type": "string", "enum": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]},
                             "tags": {"type": "array", "items": {"type": "object",
                                                                 "properties": {"label": {"type": "string"}}}},
                             "kind": {"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/x/Dog"}]}},
              "example": {"id": 1, "owner": "x" * 500}}
    text = compact_component("schemas", "Pet", "components/schemas/Pet", schema)
    assert text.splitlines() == [
        "# schemas Pet (components/schemas/Pet) [compact]",
        "Pet: object — A pet.",
        "  - id: integer(int64) required",
        "  - owner: Person",
        "  - status: string enum [a, b, c, d, e, f, g, h, …]",
        "  - tags: array[object]",
        "    - label: string",
        "  - kind: one of [Cat, Dog]",
    ]
    assert compact_component("examples", "E", "components/examples/E", {"value": 1}) == ""


def test_a_note_keeps_the_example_its_description_gives_and_scalar_examples_and_defaults():
    schema = {"type": "object", "properties": {
        "country": {"type": "string", "description": "ISO 3166-1 alpha-2 code, e.g. DE. Upper case."},
        "phone": {"type": "string", "description": "The number to send from in E.164 format, for example +15017122661."},
        "size": {"type": "integer", "description": "Page size (i.e. items per page).", "example": 5, "default": 20},
        "kind": {"type": "string", "enum": ["a", "b"], "example": "a"}}}
    lines = compact_component("schemas", "S", "components/schemas/S", schema).splitlines()
    assert "  - country: string — ISO 3166-1 alpha-2 code, e.g. DE." in lines
    assert "  - phone: string — The number to send from in E.164 format, for example +15017122661." in lines
    assert "  - size: integer — Page size (i.e. items per page).; example 5, default 20" in lines
    assert "  - kind: string enum [a, b] — example a" in lines
