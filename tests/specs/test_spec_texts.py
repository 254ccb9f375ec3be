"""The search views of an operation: its BM25 text names what the operation takes and returns."""

from __future__ import annotations

from specrag.specs.text import SEARCH_RESPONSE_FIELDS, operation_texts


def _credits(responses: dict) -> str:
    return operation_texts("GET", "/tv/{tv_id}/credits", {"summary": "Get Credits", "responses": responses})["search_text"]


def test_fields_an_oas3_operation_returns_are_searchable():
    text = _credits({"200": {"content": {"application/json": {"schema": {
        "type": "object", "properties": {"cast": {"type": "array"}, "crew_members": {"type": "array"}}}}}}})
    assert "cast" in text.split()
    assert "crew_members" in text and "crew members" in text  # raw and split, like every name


def test_fields_of_a_swagger2_response_and_of_its_array_items_are_searchable():
    text = _credits({200: {"schema": {"type": "array", "items": {"properties": {"character": {}, "name": {}}}}}})
    assert {"character", "name"} <= set(text.split())


def test_error_and_default_responses_add_no_fields():
    text = _credits({"404": {"schema": {"properties": {"status_message": {}}}},
                     "default": {"content": {"application/json": {"schema": {"properties": {"trace_id": {}}}}}}})
    assert "status_message" not in text and "trace_id" not in text


def test_a_huge_response_adds_a_bounded_number_of_names():
    fields = {f"field{i}": {} for i in range(500)}
    text = _credits({"200": {"schema": {"properties": fields}}})
    assert f"field{SEARCH_RESPONSE_FIELDS - 1}" in text.split()
    assert f"field{SEARCH_RESPONSE_FIELDS}" not in text.split()


def test_hostile_response_shapes_are_ignored():
    for responses in (None, [], {"200": "ok"}, {"200": {"content": ["x"]}}, {"200": {"content": {"a": None}}},
                      {"200": {"schema": {"properties": ["x"]}}}, {"200": {"schema": {"properties": 1.5}}},
                      {"200": {"schema": {"allOf": 2.5, "items": 3}}}):
        assert operation_texts("GET", "/x", {"responses": responses})["search_text"].startswith("GET /x")
    assert operation_texts("POST", "/x", {"parameters": 1.5, "requestBody": {"content": {"a": {"schema": {
        "properties": 7, "anyOf": 1.0}}}}})["search_text"].startswith("POST /x")
