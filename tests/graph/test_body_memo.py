"""Response-body walks shared by a spec's operations: the same fields as walking each alone."""

from __future__ import annotations

from specrag.graph.infer import MAX_FIELDS, operation_deps

SCHEMAS = {
    "User": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}},
    "Item": {"type": "object", "properties": {"id": {"type": "string"}, "owner_id": {"type": "string"},
                                              "owner": {"$ref": "#/s/User"}, "parts": {"type": "array", "items": {"$ref": "#/s/Item"}}}},
    "Wide": {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(MAX_FIELDS + 50)}},
    "Either": {"oneOf": [{"$ref": "#/s/User"}, {"$ref": "#/s/Wide"}]},
}


def resolve(ref: str, base):
    name = ref.rsplit("/", 1)[-1]
    return (SCHEMAS[name], base, name) if name in SCHEMAS else None


def returning(schema: dict) -> dict:
    return {"responses": {"200": {"content": {"application/json": {"schema": schema}}}}}


OPERATIONS = [
    ("/items", returning({"type": "array", "items": {"$ref": "#/s/Item"}})),
    ("/items/{id}", returning({"$ref": "#/s/Item"})),
    ("/users/{userId}/items", returning({"type": "array", "items": {"$ref": "#/s/Item"}})),
    ("/either", returning({"$ref": "#/s/Either"})),
    ("/wrapped", returning({"type": "object", "properties": {"data": {"$ref": "#/s/Either"}}})),
]


def test_a_shared_memo_gives_each_operation_its_own_fields():
    memo: dict = {}
    for path, op in OPERATIONS:
        shared = operation_deps(f"api:{path}", "get", path, op, resolve, None, memo=memo)
        alone = operation_deps(f"api:{path}", "get", path, op, resolve, None)
        assert shared == alone
    assert memo


def test_path_types_are_the_operations_own():
    memo: dict = {}
    items, user_items = (operation_deps(f"api:{p}", "get", p, op, resolve, None, memo=memo).fields
                         for p, op in (OPERATIONS[0], OPERATIONS[2]))
    first = {f.path: f.types for f in items}["[].id"]
    other = {f.path: f.types for f in user_items}["[].id"]
    assert first == [("item", 1.0)] and other == [("item", 1.0), ("user", 0.6)]  # same walk, other paths
    assert {f.path: f.types for f in items}["[].owner_id"] == [("owner", 1.0)]


def test_a_wide_body_is_cut_at_max_fields_in_walk_order():
    memo: dict = {}
    for path, op in OPERATIONS[3:]:
        fields = operation_deps(f"api:{path}", "get", path, op, resolve, None, memo=memo).fields
        prefix = "data." if path == "/wrapped" else ""
        assert len(fields) == MAX_FIELDS
        assert [f.path for f in fields[:3]] == [f"{prefix}id", f"{prefix}name", f"{prefix}f0"]
        assert fields[-1].path == f"{prefix}f{MAX_FIELDS - 3}"
