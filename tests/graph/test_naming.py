"""Resource types from names: RESTler's rules, exact values."""

from __future__ import annotations

import pytest
from specrag.graph.naming import (
    id_subject,
    is_id_name,
    param_resources,
    query_resources,
    static_segments,
    type_match,
    type_words,
)


@pytest.mark.parametrize("path,name,expected", [
    ("/accounts/{accountId}", "accountId", [("account",)]),
    ("/users/{id}", "id", [("user",)]),
    ("/users/{id}/orders/{orderId}", "orderId", [("order",)]),
    ("/movie/{movie_id}/credits", "movie_id", [("movie",)]),
    ("/repos/{owner}/{repo}", "repo", []),  # not an id, and its container is a parameter
    ("/production_companies/{pc_uuid}", "pc_uuid", [("pc",), ("production", "company")]),
    ("/v2/{itemId}", "itemId", [("item",)]),  # version segments are no container
])
def test_param_resources(path, name, expected):
    assert param_resources(path, name) == expected


@pytest.mark.parametrize("path,name,expected", [
    ("/movies", "movie_id", [("movie",)]),  # the name says it
    ("/me/tracks", "ids", [("track",)]),  # a bare id: the collection the request addresses
    ("/v1/albums", "id", [("album",)]),
    ("/me/following", "ids", []),  # no plural: no collection
    ("/search", "q", []),  # not an id
    ("/{owner}", "id", []),
])
def test_query_resources(path, name, expected):
    assert query_resources(path, name) == expected


def test_names_and_types():
    assert type_words("production_companies") == ("production", "company")
    assert type_words("movie-list-object") == ("movie", "list", "object")
    assert type_words("People") == ("person",)
    assert [is_id_name(n) for n in ("id", "movieId", "movie_id", "UUID", "idea", "paid", "username")] == \
        [True, True, True, True, False, False, False]
    assert id_subject("credit_id") == ("credit",) and id_subject("id") == ()
    assert static_segments("/v1/tv/{tv_id}/season/{season_number}") == ["tv", "season"]


@pytest.mark.parametrize("need,candidate,score", [
    (("movie",), ("movie",), 1.0),
    (("company",), ("production", "company"), 0.8),
    (("movie",), ("movie", "list", "object"), 0.7),
    (("list",), ("movie", "list", "object"), 0.5),
    (("movie",), ("tv",), 0.0),
    (("production", "company"), ("company",), 0.0),
    ((), ("movie",), 0.0),
])
def test_type_match(need, candidate, score):
    assert type_match(need, candidate) == score
