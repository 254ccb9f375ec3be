"""Query-set loading: the shared sets, the demo set, and clear errors for bad lines."""

from pathlib import Path

import pytest
import yaml
from specrag.core.ids import HTTP_METHODS
from specrag.evals.querysets import (
    EvalQuery,
    QuerySetError,
    endpoint_key,
    load_query_sets,
)

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "evals"
GOOD = '{"id": "q1", "query": "make a user", "apis": ["u"], "endpoints": [{"api": "u", "method": "post", "path": "/users"}]}'

# The demo corpus (examples/specs): users_api and petstore_v2 operations, as the brief lists them.
BRIEF_ENDPOINTS = {
    endpoint_key("users_api", m, p) for m, p in [
        ("POST", "/users"), ("GET", "/users"), ("GET", "/users/{userId}"), ("PUT", "/users/{userId}"),
        ("DELETE", "/users/{userId}")]
} | {
    endpoint_key("petstore_v2", m, p) for m, p in [
        ("GET", "/pets"), ("POST", "/pets"), ("GET", "/pets/{petId}"), ("DELETE", "/pets/{petId}"),
        ("GET", "/store/inventory"), ("POST", "/store/order")]
}


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/evals not present")
def test_shared_sets_load():
    queries = load_query_sets([SHARED / "restbench_tmdb.jsonl", SHARED / "toolalpaca_simulated.jsonl"])
    by_set = {}
    for q in queries:
        by_set.setdefault(q.set_name, []).append(q)
    assert {k: len(v) for k, v in by_set.items()} == {"restbench_tmdb": 100, "toolalpaca_simulated": 100}
    first = by_set["restbench_tmdb"][0]
    assert first.apis == ["tmdb"]
    assert [e.key() for e in first.endpoints] == [endpoint_key("tmdb", "GET", "/search/person"),
                                                  endpoint_key("tmdb", "GET", "/person/{person_id}/movie_credits")]


def _spec_endpoints() -> set:
    """Endpoints read from the demo spec files themselves, when they are there."""
    found = set()
    for name in ("users_api.yaml", "petstore_v2.json"):
        path = REPO / "examples" / "specs" / name
        if path.is_file():
            for route, ops in yaml.safe_load(path.read_text())["paths"].items():
                found |= {endpoint_key(path.stem, m, route) for m in ops if m in HTTP_METHODS}
    return found


def test_demo_set_is_answerable_from_the_demo_corpus():
    queries = load_query_sets([REPO / "evals" / "sets" / "demo.jsonl"])
    assert len(queries) >= 8 and len({q.id for q in queries}) == len(queries)
    in_specs = _spec_endpoints()
    for q in queries:
        assert q.endpoints and q.gold_keys() <= BRIEF_ENDPOINTS, q.id
        assert not in_specs or q.gold_keys() <= in_specs, q.id
        assert set(q.apis) == {e.api for e in q.endpoints}, q.id
    texts = " ".join(q.query.lower() for q in queries)
    assert "create a new user" in texts and "fields" in texts and "errors" in texts


def test_extra_fields_are_ignored_and_set_name_is_the_file_stem(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(GOOD[:-1] + ', "source": "x", "set_name": "spoof"}\n\n')
    (query,) = load_query_sets([path])
    assert isinstance(query, EvalQuery) and query.set_name == "mine"
    assert query.gold_keys() == {endpoint_key("u", "POST", "/users")}


@pytest.mark.parametrize("bad, fragment", [
    ('{"id": "q2", "query": ', "not valid JSON"),
    ('["a list"]', "want a JSON object"),
    ('{"id": "q2", "query": "x", "apis": ["u"]}', "endpoints"),
    ('{"id": "q2", "query": "x", "apis": ["u"], "endpoints": [{"api": "u", "path": "/x"}]}', "endpoints.0.method"),
])
def test_bad_line_names_file_and_line(tmp_path, bad, fragment):
    path = tmp_path / "bad.jsonl"
    path.write_text(GOOD + "\n" + bad + "\n")
    with pytest.raises(QuerySetError) as info:
        load_query_sets([path])
    assert f"{path}:2" in str(info.value) and fragment in str(info.value)


def test_duplicate_id_and_missing_file(tmp_path):
    path = tmp_path / "dup.jsonl"
    path.write_text(GOOD + "\n" + GOOD + "\n")
    with pytest.raises(QuerySetError, match="'q1' appears twice"):
        load_query_sets([path])
    with pytest.raises(QuerySetError, match="cannot read"):
        load_query_sets([tmp_path / "nope.jsonl"])
