"""``specrag apis`` lists an index's APIs from its catalogs; ``specrag show`` prints one operation
through the same lookup as ``GET /api/v1/apis/{api}/operations/{operation}``. Neither loads an
engine, so neither says the offline-LLM notice."""

from __future__ import annotations

import json

DEMO_APIS = [
    {"api": "petstore_v2", "title": "Pet Store", "version": "2.0.0", "operations": 6,
     "base_urls": ["https://petstore.example.com/v2"]},
    {"api": "users_api", "title": "Users API", "version": "1.0.0", "operations": 5,
     "base_urls": ["https://api.example.com/v1"]},
]


def test_apis_lists_id_title_version_operations_and_base_url(cli):
    code, out, err = cli("apis")
    assert code == 0 and err == "", err
    header, *rows, summary = out.splitlines()
    assert header.split() == ["API", "title", "version", "operations", "base", "URL"]
    assert [r.split()[0] for r in rows] == ["petstore_v2", "users_api"]
    assert rows[1].split() == ["users_api", "Users", "API", "1.0.0", "5", "https://api.example.com/v1"]
    assert header.index("base URL") == rows[0].index("https://") == rows[1].index("https://"), "aligned columns"
    assert summary.startswith("2 APIs in ")


def test_apis_json_and_match(cli):
    code, out, _ = cli("apis", "--json")
    assert code == 0 and json.loads(out) == DEMO_APIS
    _, out, _ = cli("apis", "PET", "--json")
    assert [a["api"] for a in json.loads(out)] == ["petstore_v2"]  # id or title, any case
    code, out, _ = cli("apis", "nothing-like-it")
    assert code == 0 and out.startswith("0 APIs matching 'nothing-like-it' in ")


def test_show_by_operation_id_or_method_and_path(cli):
    code, out, err = cli("show", "users_api", "createUser")
    assert code == 0 and err == "", err
    assert out.startswith("users_api:paths/~1users/post · ")
    assert "operationId: createUser" in out and "$ref: '#/components/schemas/UserCreate'" in out
    assert "users_api:paths/~1users/post:errors · " in out and "'409':" in out  # its error responses, in full
    assert out.rstrip().splitlines()[-1].startswith("references: components/schemas/User, ")
    _, out, _ = cli("show", "users_api", "post  /users", "--json")
    detail = json.loads(out)
    assert detail["chunk_id"] == "users_api:paths/~1users/post" and detail["operation_id"] == "createUser"
    assert detail["errors"]["chunk_id"] == "users_api:paths/~1users/post:errors" and not detail["truncated"]


def test_show_names_what_it_cannot_find(cli):
    for args, needles in [
        (("users_api", "GET /user/{userId}"), ("users_api:paths/~1user~1{userId}/get", "did you mean GET /users/{userId}")),
        (("users_api", "getUsr"), ("no operation 'getUsr'", "did you mean getUser")),
        (("users_ap", "createUser"), ("unknown API 'users_ap'", "did you mean users_api")),
    ]:
        code, out, err = cli("show", *args)
        assert code == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith("specrag: error: "), err
        assert all(n in err for n in needles), (needles, err)
