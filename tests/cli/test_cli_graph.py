"""``specrag impact`` and ``deps`` read the dependency graph without an engine (no LLM, so no
offline notice); ``deps`` lists the operations its response feeds, and says how many producers
and consumers it shows of how many (``--all``: every one)."""

from __future__ import annotations

import json

from specrag.cli.graph import DEPS_SHOWN, render_deps
from specrag.core.ids import operation_chunk_id
from specrag.engine.graph_queries import DepsReport
from specrag.graph.models import DependencyEdge, EdgeSource, ParamNeed

OP = operation_chunk_id("shop", "/orders/{orderId}", "get")


def _edge(consumer: str, producer: str, param: str = "orderId", score: float = 1.0) -> DependencyEdge:
    return DependencyEdge(consumer=consumer, param=param, producer=producer, field="id", score=score,
                          source=EdgeSource.TYPE)


def _report(n_producers: int, n_consumers: int) -> DepsReport:
    """GET /orders/{orderId} with n producers of its id and n consumers (two per operation)."""
    producers = [_edge(OP, operation_chunk_id("shop", f"/p{i}", "post")) for i in range(n_producers)]
    consumers = [_edge(operation_chunk_id("shop", f"/c{i // 2}/{{id}}", "delete"), OP, f"x{i}")
                 for i in range(n_consumers)]
    return DepsReport(api="shop", operation=OP, method="GET", path="/orders/{orderId}",
                      params=[ParamNeed(name="orderId", location="path", id_like=True)],
                      producers=producers, consumers=consumers)


def test_deps_says_how_many_it_shows_of_how_many():
    text = render_deps(_report(16, 7))
    assert DEPS_SHOWN == 5
    assert "  orderId (path, id): 16 producers, the best 5 shown" in text
    assert "  its response fills 7 parameters of 4 operations, the best 5 shown" in text
    assert text.count("    POST /p") == 5 and text.count("    id -> {x") == 5
    assert text.splitlines()[-1] == "  (--all lists every producer and consumer)"
    assert "    id -> {x0} of DELETE /c0/{id}  [type 1.00]" in text  # the field, the parameter it fills, where


def test_deps_all_lists_every_one_and_no_hint():
    text = render_deps(_report(16, 7), limit=None)
    assert "16 producers\n" in text and "7 parameters of 4 operations\n" in text
    assert text.count("    POST /p") == 16 and text.count("    id -> {x") == 7 and "--all" not in text
    few = render_deps(_report(1, 0))
    assert "  orderId (path, id): 1 producer\n" in few and few.endswith("  its response feeds no other operation")


def test_deps_and_impact_commands_need_no_llm_notice(cli):
    code, out, err = cli("deps", "users_api", "getUser")
    assert code == 0 and err == "", err  # no "offline mode" line: no LLM stage runs
    assert out.splitlines()[:2] == ["GET /users/{userId}", "  userId (path, id): 3 producers"]
    assert "  its response fills 2 parameters of 2 operations" in out
    assert "    id -> {userId} of DELETE /users/{userId}  [type 1.00]" in out
    code, out, err = cli("deps", "users_api", "getUser", "--all", "--json")
    assert code == 0 and err == "" and len(json.loads(out)["consumers"]) == 2
    code, out, err = cli("impact", "users_api", "Address")
    assert code == 0 and err == "" and out.startswith("4 operations of users_api use Address")
    code, out, err = cli("impact", "users_ap", "Address")
    assert code == 2 and err.strip() == "specrag: error: unknown API 'users_ap' (did you mean users_api?)"
