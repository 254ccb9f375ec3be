"""Stored metadata's JSON-text fields read back as Python's ``json`` reads them, though orjson
reads the common case: the same values for every text, malformed and hostile ones included."""

from __future__ import annotations

import json

import pytest
from specrag.specs.models import Chunk, _json_or

TEXTS = [
    '["a", 1, 2.5, true, null]', '{"users:components/schemas/User": ["properties", "id"]}', "[]", "{}",
    '{"a": 1, "a": 2}',  # the last of a repeated key
    "[NaN]", "[Infinity, -Infinity]", "[1e400]",  # orjson refuses these, json takes them
    "[123456789012345678901234567890]", "[-9223372036854775809]", "[18446744073709551616]",  # orjson: floats
    '["\\ud800"]',  # a lone surrogate
    "[-0.0, 1.7976931348623157e308, 5e-324]", '{"x": 1.00000000000000000000000001}', '"\\u00e9"',
    "not json", "", "[1,]", '{"unclosed": [', '"a string"', "42",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize(("expected", "default"), [(list, []), (dict, {})])
def test_a_field_reads_as_pythons_json_reads_it(text, expected, default):
    try:
        value = json.loads(text)
        wanted = value if isinstance(value, expected) else default
    except ValueError:
        wanted = default
    assert repr(_json_or(text, default, expected)) == repr(wanted)


def test_values_already_decoded_or_not_text_pass_or_fall_back():
    assert _json_or(["a"], [], list) == ["a"]
    assert _json_or(None, [], list) == [] and _json_or(3, {}, dict) == {}


def test_a_chunk_round_trips_through_its_stored_metadata():
    chunk = Chunk(id="users:paths/~1users/get", file_id="users", type="endpoint", kind="operation", name="GET /users",
                  text="x", embed_text="list users", search_text="list users",
                  ref_ids={"users:components/schemas/User": ["responses", "200"]},
                  referenced_by=["users:paths/~1users~1{id}/get"], tags=["users"])
    again = Chunk.from_metadata(chunk.id, chunk.text, chunk.metadata())
    assert (again.ref_ids, again.referenced_by, again.tags) == (chunk.ref_ids, chunk.referenced_by, chunk.tags)
