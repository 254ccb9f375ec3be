"""Chunk ids are reversible by pure functions (``specrag.core.ids``)."""

from __future__ import annotations

import pytest
from specrag.core import ids


@pytest.mark.parametrize("token, escaped", [
    ("User", "User"),
    ("/movie/{movie_id}", "~1movie~1{movie_id}"),
    ("a~b", "a~0b"),
    ("~1", "~01"),  # a literal "~1" must not come back as "/"
    ("/a~/b~1", "~1a~0~1b~01"),
    ("/v1/{name}:cancel", "~1v1~1{name}:cancel"),
])
def test_escape_round_trip(token, escaped):
    assert ids.escape_token(token) == escaped
    assert ids.unescape_token(escaped) == token


def test_pointer_tokens_round_trip():
    tokens = ["paths", "/pets/{id}", "get"]
    path = ids.tokens_to_path(tokens)
    assert path == "paths/~1pets~1{id}/get"
    assert ids.pointer_to_tokens("#/" + path) == tokens
    assert ids.pointer_to_tokens("/" + path) == tokens
    assert ids.pointer_to_tokens("#") == [] and ids.pointer_to_tokens("") == []
    with pytest.raises(ValueError):
        ids.pointer_to_tokens("#components/schemas")


def test_make_and_split_chunk_id():
    cid = ids.make_chunk_id("tmdb", ["components", "schemas", "User"])
    assert cid == "tmdb:components/schemas/User"
    assert ids.split_chunk_id(cid) == ("tmdb", "components/schemas/User")
    ext = ids.external_chunk_id("do", "resources/droplets/models/droplet.yml", [])
    assert ext == "do:resources/droplets/models/droplet.yml#/"
    assert ids.split_chunk_id(ext) == ("do", "resources/droplets/models/droplet.yml#/")


@pytest.mark.parametrize("bad", ["", "no-colon", ":components/schemas/X"])
def test_split_chunk_id_rejects_non_ids(bad):
    with pytest.raises(ValueError):
        ids.split_chunk_id(bad)


def test_parse_operation_id_endpoint_errors_and_parts():
    op = ids.operation_chunk_id("tmdb", "/movie/{movie_id}", "GET")
    assert op == "tmdb:paths/~1movie~1{movie_id}/get"
    expected = ("tmdb", "/movie/{movie_id}", "GET")
    assert ids.parse_operation_id(op) == expected
    errors = ids.errors_chunk_id(op)
    assert errors == op + ":errors"
    assert ids.parse_operation_id(errors) == expected
    part = ids.part_chunk_id(op, 3)
    assert part == op + ":part3" and ids.part_chunk_id(op, 1) == op
    assert ids.base_chunk_id(part) == op
    assert ids.parse_operation_id(part) == expected


def test_operation_method_of_operations_and_their_errors_else_none():
    op = ids.operation_chunk_id("tmdb", "/movie/{movie_id}", "delete")
    assert ids.operation_method(op) == ids.operation_method(ids.errors_chunk_id(op)) == "DELETE"
    assert ids.operation_method("tmdb:components/schemas/Movie") is None
    assert ids.operation_method("no colon at all") is None  # malformed: no error, no method


def test_parse_operation_id_with_colon_in_path():
    """Google style custom methods put ``:`` inside the path; only the first ``:`` splits."""
    op = ids.operation_chunk_id("pubsub", "/v1/{name}:cancel", "post")
    assert ids.split_chunk_id(op) == ("pubsub", "paths/~1v1~1{name}:cancel/post")
    assert ids.parse_operation_id(op) == ("pubsub", "/v1/{name}:cancel", "POST")
    assert ids.parse_operation_id(ids.errors_chunk_id(op)) == ("pubsub", "/v1/{name}:cancel", "POST")
    assert ids.parse_operation_id(ids.part_chunk_id(op, 2)) == ("pubsub", "/v1/{name}:cancel", "POST")
    # a path ending in a ":partN"-looking segment is still an operation path, not a part
    weird = ids.operation_chunk_id("g", "/v1/x:part2", "get")
    assert ids.parse_operation_id(weird) == ("g", "/v1/x:part2", "GET")


@pytest.mark.parametrize("cid", [
    "tmdb:components/schemas/User",
    "tmdb:paths/~1movie",
    "tmdb:paths/~1movie/parameters",
    "do:resources/droplets/models/droplet.yml#/",
])
def test_parse_operation_id_none_for_non_operations(cid):
    assert ids.parse_operation_id(cid) is None


@pytest.mark.parametrize("token, escaped", [
    ("Big:part2", "Big~3Apart2"),
    ("Big:errors", "Big~3Aerrors"),
    ("a:part2:part3", "a:part2~3Apart3"),  # only the tail could pass for a suffix
    ("Big:part", "Big:part"),
    ("Big:partial", "Big:partial"),
    ("/v1/{name}:cancel", "~1v1~1{name}:cancel"),
    ("x~3A:errors", "x~03A~3Aerrors"),  # a literal "~3A" stays distinguishable
])
def test_id_tokens_never_end_like_a_suffix(token, escaped):
    assert ids.escape_id_token(token) == escaped
    assert ids.unescape_id_token(escaped) == token


def test_component_named_like_a_part_is_no_part():
    own = ids.make_chunk_id("api", ["components", "schemas", "Big:part2"])
    part = ids.part_chunk_id(ids.make_chunk_id("api", ["components", "schemas", "Big"]), 2)
    assert own == "api:components/schemas/Big~3Apart2" and part == "api:components/schemas/Big:part2"
    assert ids.base_chunk_id(own) == own and ids.base_chunk_id(part) == "api:components/schemas/Big"
    errors_named = ids.make_chunk_id("api", ["paths", "/x", "get:errors"])
    assert errors_named != ids.errors_chunk_id(ids.operation_chunk_id("api", "/x", "get"))


def test_operation_path_ending_like_a_suffix_round_trips():
    op = ids.operation_chunk_id("g", "/v1/x:errors", "get")
    assert op == "g:paths/~1v1~1x~3Aerrors/get"
    assert ids.parse_operation_id(op) == ("g", "/v1/x:errors", "GET")


def test_webhook_ids():
    hook = ids.webhook_chunk_id("shop", "order/created", "POST")
    assert hook == "shop:webhooks/order~1created/post"
    assert ids.parse_webhook_id(hook) == ("shop", "order/created", "POST")
    assert ids.parse_webhook_id(ids.errors_chunk_id(hook)) == ("shop", "order/created", "POST")
    assert ids.parse_webhook_id(ids.part_chunk_id(hook, 2)) == ("shop", "order/created", "POST")
    assert ids.parse_operation_id(hook) is None
    assert ids.parse_webhook_id(ids.operation_chunk_id("shop", "/orders", "get")) is None
