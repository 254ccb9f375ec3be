"""The dependency graph on hand-written specs of shapes other than TMDB: a stated link, a shared
path parameter, nested resources, allOf, a bare ``{id}``, a non-id key matched by name, and
Swagger 2 (``parameters`` refs, body parameters, ``definitions``)."""

from __future__ import annotations

from specrag.catalog.build import api_index
from specrag.core.ids import operation_chunk_id
from specrag.graph.build import MAX_PRODUCERS, api_graph
from specrag.graph.infer import operation_deps
from specrag.graph.models import EdgeSource, ParamNeed

SHOP, LIB = "shop_oas3", "library_swagger2"


def op(api: str, path: str, method: str = "get") -> str:
    return operation_chunk_id(api, path, method)


def edges_of(api, path: str, method: str = "get") -> dict[str, list[tuple[str, str, float, str]]]:
    out: dict[str, list] = {}
    for e in api.graph.producers_of(op(api.api.file_id, path, method)):
        out.setdefault(e.param, []).append((e.label().split(" -> ")[0], e.field, e.score, e.source.value))
    return out


def test_a_stated_link_wins_and_inference_still_adds_the_list(fixture_apis):
    found = edges_of(fixture_apis[SHOP], "/users/{id}")["id"]
    assert found[0] == ("POST /users", "id", 1.0, "link")
    assert ("GET /users", "[].id", 1.0, "type") in found  # array of User: the schema names the type


def test_nested_resources_and_allof(fixture_apis):
    found = edges_of(fixture_apis[SHOP], "/users/{id}/orders/{orderId}")
    assert [f[:2] for f in found["orderId"]] == [("GET /users/{id}/orders", "data[].id")]  # Order = allOf(Base, ...)
    users = {f[0] for f in found["id"]}
    assert users == {"POST /users", "GET /users/{id}", "GET /users", "GET /users/{id}/orders"}
    assert ("GET /users/{id}/orders", "data[].user_id", 1.0, "type") in found["id"]  # user_id names its type


def test_a_bare_id_is_never_matched_by_name(fixture_apis):
    found = edges_of(fixture_apis[SHOP], "/users/{id}/orders")["id"]
    assert all(field != "data[].id" for _, field, _, _ in found)  # an order's id is no user id


def test_a_key_that_is_no_id_is_matched_by_its_exact_name(fixture_apis):
    assert edges_of(fixture_apis[SHOP], "/products/{sku}") == {
        "sku": [("GET /products/search", "items[].sku", 0.95, "name")]}


def test_params_keep_path_and_required_query_and_say_what_they_are(fixture_apis):
    graph = fixture_apis[SHOP].graph
    params = {o.path: o.params for o in graph.operations if o.method == "GET"}
    assert params["/products/search"] == [ParamNeed(name="q", location="query", required=True, text=True)]
    assert params["/users/{id}"] == [ParamNeed(name="id", location="path", required=True, id_like=True,
                                               resources=["user"])]  # the path item's shared parameter
    resources = {r.name: r for r in graph.resources}
    assert set(resources) == {"user", "order"}
    assert resources["order"].consumers == [op(SHOP, "/users/{id}/orders/{orderId}")]


def test_swagger2_parameter_refs_definitions_and_body_params(fixture_apis):
    lib = fixture_apis[LIB]
    assert edges_of(lib, "/authors/{authorId}/books")["authorId"] == [
        ("GET /authors", "[].id", 1.0, "type"), ("GET /books/{bookId}", "author.id", 1.0, "type")]
    assert edges_of(lib, "/books/{bookId}")["bookId"] == [
        ("GET /authors/{authorId}/books", "[].id", 1.0, "type"), ("POST /loans", "bookId", 1.0, "name")]
    assert edges_of(lib, "/loans/{loanId}", "delete")["loanId"] == [("POST /loans", "id", 1.0, "type")]
    loans = next(o for o in lib.graph.operations if o.path == "/loans")
    assert loans.params == []  # a body parameter is filled from the request, not bound to a call


def test_graph_is_on_the_chunks_and_in_the_detailed_index(fixture_apis):
    lib = fixture_apis[LIB]
    chunk = next(c for c in lib.chunks if c.id == op(LIB, "/books/{bookId}"))
    assert [(e.param, e.producer) for e in chunk.producers] == [
        ("bookId", op(LIB, "/authors/{authorId}/books")), ("bookId", op(LIB, "/loans", "post"))]
    assert [p.name for p in chunk.params] == ["bookId"]
    producer = next(c for c in lib.chunks if c.id == op(LIB, "/loans", "post"))
    assert producer.produces == ["book", "loan"]
    restored = type(chunk).from_metadata(chunk.id, chunk.text, chunk.metadata())
    assert restored.producers == chunk.producers and restored.params == chunk.params
    assert [r.name for r in api_index(lib).resources] == ["author", "book", "loan"]


def test_self_referencing_schemas_end_and_an_operation_never_produces_for_itself(fixture_apis):
    shop = fixture_apis[SHOP]
    assert all(e.producer != e.consumer for e in shop.graph.edges)
    get_user = next(o for o in shop.graph.operations if o.path == "/users/{id}" and o.method == "GET")
    assert get_user.fields == []  # fields are working data, not stored


def test_stored_metadata_that_is_damaged_decodes_to_nothing(fixture_apis):
    chunk = next(c for c in fixture_apis[LIB].chunks if c.params)
    meta = chunk.metadata() | {"params": "{not json", "producers": '[{"param": 3}]', "produces": "7"}
    restored = type(chunk).from_metadata(chunk.id, chunk.text, meta)
    assert (restored.params, restored.producers, restored.produces) == ([], [], [])


def test_each_parameter_keeps_its_best_producers():
    """Many producers of one type: the best MAX_PRODUCERS stay, strongest first."""
    resolve = lambda ref, base: None  # noqa: E731
    listing = {"responses": {"200": {"content": {"application/json": {"schema": {
        "type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}}}}}}}
    ops = [operation_deps(f"api:paths/~1things{i}/get", "get", f"/things{i}", listing, resolve, None) for i in range(20)]
    consumer = {"parameters": [{"name": "thingId", "in": "path", "required": True}]}
    ops.append(operation_deps("api:paths/~1thing~1{thingId}/get", "get", "/thing/{thingId}", consumer, resolve, None))
    graph = api_graph("api", ops)
    kept = graph.producers_of("api:paths/~1thing~1{thingId}/get")
    assert ops[-1].params[0].resources == ["thing"] and len(kept) == 0  # 'things0'.. are not 'thing' types
    ops = [operation_deps(f"api:paths/~1a{i}~1things/get", "get", f"/a{i}/things", listing, resolve, None)
           for i in range(20)] + [ops[-1]]
    kept = api_graph("api", ops).producers_of("api:paths/~1thing~1{thingId}/get")
    assert len(kept) == MAX_PRODUCERS and all(e.source is EdgeSource.TYPE and e.score == 0.9 for e in kept)
    assert [e.producer for e in kept] == sorted(e.producer for e in kept)  # ties: deterministic order


def test_a_parameter_shared_by_many_operations_is_ranked_once_and_never_by_itself(monkeypatch):
    """Twenty ``GET /p{i}/thing/{thingId}`` each need and return a thing: the candidates of
    ``thingId`` are ranked once, and each operation keeps the best others, never itself."""
    from specrag.graph import build

    resolve = lambda ref, base: None  # noqa: E731
    thing = {"parameters": [{"name": "thingId", "in": "path", "required": True}],
             "responses": {"200": {"content": {"application/json": {"schema": {
                 "type": "object", "properties": {"id": {"type": "string"}}}}}}}}
    ids = [f"api:paths/~1p{i:02d}~1thing~1{{thingId}}/get" for i in range(20)]
    ops = [operation_deps(cid, "get", f"/p{i:02d}/thing/{{thingId}}", thing, resolve, None) for i, cid in enumerate(ids)]
    calls = []
    real = build._candidates
    monkeypatch.setattr(build, "_candidates", lambda *a: calls.append(a[1]) or real(*a))
    graph = api_graph("api", ops)
    assert calls == ["thingId"]
    for cid in ids:
        kept = [e.producer for e in graph.producers_of(cid)]
        assert kept == [p for p in ids if p != cid][:MAX_PRODUCERS]
        assert {(e.score, e.source) for e in graph.producers_of(cid)} == {(0.9, EdgeSource.TYPE)}
