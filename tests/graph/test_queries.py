"""Impact and deps as library calls on the fixture specs, and plan/impact/deps as commands on the
demo corpus (a real index: Chroma, BM25, the local model when present)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from specrag.catalog.build import api_index
from specrag.cli import main
from specrag.core.ids import operation_chunk_id
from specrag.engine.graph_queries import GraphQueries, GraphQueryError

from .conftest import DictLookup

ROOT = Path(__file__).resolve().parents[2]
DEMO_SPECS = ROOT / "examples" / "specs"
LOCAL_MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"

SHOP, LIB = "shop_oas3", "library_swagger2"


@pytest.fixture(scope="module")
def queries(fixture_apis) -> GraphQueries:
    indexes = {k: api_index(a) for k, a in fixture_apis.items()}
    graphs = {k: a.graph for k, a in fixture_apis.items()}
    return GraphQueries(DictLookup(fixture_apis.values()), indexes.get, graphs.get, frozenset(fixture_apis))


def test_impact_follows_references_upwards_to_every_operation(queries):
    report = queries.impact(SHOP, "address")  # names match case-insensitively
    assert (report.schema_id, report.schema_name) == (f"{SHOP}:components/schemas/Address", "Address")
    found = {(o.method, o.path): (o.depth, [v.split(":", 1)[1] for v in o.via]) for o in report.operations}
    assert found == {
        ("GET", "/users"): (2, ["components/schemas/User"]),
        ("POST", "/users"): (2, ["components/schemas/User"]),
        ("GET", "/users/{id}"): (2, ["components/schemas/User"]),
        ("GET", "/users/{id}/orders"): (3, ["components/schemas/Order", "components/schemas/User"]),
        ("GET", "/users/{id}/orders/{orderId}"): (3, ["components/schemas/Order", "components/schemas/User"]),
    }
    assert {o.operation_id for o in report.operations} >= {"listUsers", "createUser", "getUser"}
    assert report.components == [f"{SHOP}:components/schemas/User", f"{SHOP}:components/schemas/Order"]


def test_deps_lists_params_producers_and_consumers(queries):
    report = queries.deps(LIB, "getBook")
    assert report == queries.deps(LIB, "get /books/{bookId}") == queries.deps(LIB, "/books/{bookId}")
    assert report.operation == operation_chunk_id(LIB, "/books/{bookId}", "get")
    assert [p.name for p in report.params] == ["bookId"]
    assert [e.label() for e in report.producers] == ["GET /authors/{authorId}/books -> [].id -> {bookId}",
                                                     "POST /loans -> bookId -> {bookId}"]
    assert [e.consumer for e in report.consumers] == [operation_chunk_id(LIB, "/authors/{authorId}/books", "get")]


def test_unknown_names_are_clear_errors_with_suggestions(queries):
    with pytest.raises(GraphQueryError, match=r"no schema 'Adress' \(did you mean Address\?\)"):
        queries.impact(SHOP, "Adress")
    with pytest.raises(GraphQueryError, match="no operation 'GET /bookz/{bookId}'.*GET /books/{bookId}"):
        queries.deps(LIB, "GET /bookz/{bookId}")
    with pytest.raises(GraphQueryError, match="unknown API 'shop'.*shop_oas3"):
        queries.impact("shop", "User")


@pytest.fixture(scope="module")
def demo_cli(tmp_path_factory):
    """Runs ``specrag`` in-process against a demo index built once in a temp folder."""
    data = tmp_path_factory.mktemp("cli-graph")
    env = {"SPECRAG_EMBED_MODEL_PATH": str(LOCAL_MODEL)} if (LOCAL_MODEL / "model.onnx").is_file() \
        else {"SPECRAG_EMBED_MODEL": "none"}
    env |= {"OPENAI_API_KEY": "", "SPECRAG_LLM_BASE_URL": "", "OPENAI_BASE_URL": ""}

    def run(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        code = main([*args, "--data-dir", str(data)])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def test_impact_and_deps_commands(demo_cli, capsys, monkeypatch):
    code, out, _ = demo_cli(capsys, monkeypatch, "impact", "users_api", "Address", "--corpus", str(DEMO_SPECS))
    assert code == 0
    assert out.splitlines()[0] == "4 operations of users_api use Address (users_api:components/schemas/Address):"
    assert "  GET /users (listUsers) via components/schemas/UserList <- components/schemas/User" in out
    code, out, _ = demo_cli(capsys, monkeypatch, "deps", "users_api", "getUser", "--json")
    report = json.loads(out)
    assert code == 0 and report["method"] == "GET" and report["path"] == "/users/{userId}"
    assert {e["label"] if "label" in e else e["producer"] for e in report["producers"]} >= {
        operation_chunk_id("users_api", "/users", "post"), operation_chunk_id("users_api", "/users", "get")}
    code, _, err = demo_cli(capsys, monkeypatch, "impact", "users_api", "Nope")
    assert code == 2 and err.splitlines()[-1] == "specrag: error: users_api has no schema 'Nope'"


def test_plan_command_orders_the_calls_and_binds_the_parameters(demo_cli, capsys, monkeypatch):
    code, out, _ = demo_cli(capsys, monkeypatch, "plan", "Update the address of a user", "--apis", "users_api",
                            "--corpus", str(DEMO_SPECS), "--json")
    plan = json.loads(out)
    assert code == 0
    steps = [(s["method"], s["path"]) for s in plan["steps"]]
    assert steps[-1] == ("PUT", "/users/{userId}")
    assert len(steps) == 2 and steps[0][1] == "/users" and steps[0][0] in ("GET", "POST")
    binding = plan["steps"][1]["bindings"][0]
    assert (binding["param"], binding["source"], binding["from_step"]) == ("userId", "step", 1)
    assert binding["label"].endswith("-> {userId}") and binding["label"].startswith(f"{steps[0][0]} /users -> ")
    assert plan["steps"][0]["reason"] == "provides userId for PUT /users/{userId}"
    assert {(s["api"], s["base_url"]) for s in plan["steps"]} == {("users_api", "https://api.example.com/v1")}
    assert all(s["context"] and s["tokens"] > 0 for s in plan["steps"])
    assert plan["total_tokens"] == sum(s["tokens"] for s in plan["steps"])
    code, out, _ = demo_cli(capsys, monkeypatch, "plan", "Update the address of a user", "--apis", "users_api")
    assert code == 0 and out.startswith("Plan for: Update the address of a user\n\n1. ")
    assert "   userId (path) <- step 1: " in out
    assert out.count("   api: users_api at https://api.example.com/v1\n") == 2


def test_plan_command_gives_each_request_of_the_question_its_step(demo_cli, capsys, monkeypatch):
    code, out, _ = demo_cli(capsys, monkeypatch, "plan", "List all pets, then place an order for a pet",
                            "--corpus", str(DEMO_SPECS), "--json")
    plan = json.loads(out)
    assert code == 0
    assert [(s["method"], s["path"], s["reason"]) for s in plan["steps"]] == [
        ("GET", "/pets", "answers: List all pets"), ("POST", "/store/order", "answers: place an order for a pet")]
