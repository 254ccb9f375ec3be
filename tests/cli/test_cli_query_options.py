"""``query --token-budget N --top-k K``: the context's budget (as the HTTP and MCP context
endpoints' token_budget) and how deep into the ranking it reads, as the settings they stand for;
``query`` still says the offline notice, since its stages would use an LLM."""

from __future__ import annotations

import json

from specrag.cli.query import engine_overrides

from .conftest import DEMO_SPECS

QUESTION = "How do I create a user?"


def test_the_flags_stand_for_the_engine_settings():
    assert engine_overrides(None, None) == {}
    assert engine_overrides(300, None) == {"context_token_limit": 300}
    assert engine_overrides(None, 3) == {"max_primary_results": 3, "context_signature_depth": 3}


def test_top_k_bounds_the_ranked_operations_in_the_context(cli):
    code, out, err = cli("query", QUESTION, "--json")
    default = json.loads(out)
    assert code == 0 and len(default["signature_chunks"]) >= 3
    _, out, _ = cli("query", QUESTION, "--json", "--top-k", "3")
    three = json.loads(out)
    assert len(three["primary_chunks"]) == 1 and len(three["signature_chunks"]) == 2  # ranks 2 and 3
    assert [c["id"] for c in three["signature_chunks"]] == [c["id"] for c in default["signature_chunks"][:2]]
    _, out, _ = cli("query", QUESTION, "--json", "--top-k", "1")
    assert json.loads(out)["signature_chunks"] == []


def test_token_budget_caps_the_context(cli):
    code, out, err = cli("query", QUESTION, "--json", "--token-budget", "300")
    ctx = json.loads(out)
    assert code == 0 and ctx["total_tokens"] <= 300 and ctx["retrieval_stats"]["truncated"]
    assert ctx["primary_chunks"][0]["id"] == "users_api:paths/~1users/post"  # the first operation is kept
    code, out, err = cli("query", QUESTION, "--token-budget", "300", "--corpus", str(DEMO_SPECS))
    assert code == 0 and err.startswith("offline mode: ") and "truncated: yes (token_limit)" in out
