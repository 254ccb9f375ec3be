"""One interface across the JSON outputs: real lists (never JSON text inside JSON), ``api`` as the
API id everywhere, a ``schema_version`` in ``query --json`` and ``results.json``; ``eval compare``
is a real subcommand with its own --help and --json."""

from __future__ import annotations

import json

import pytest
from specrag.context.knowledge import CONTEXT_SCHEMA_VERSION
from specrag.evals.report import RESULTS_SCHEMA_VERSION

from .conftest import DEMO_SET, DEMO_SPECS, run_cli


def _query_json(demo_data, question: str) -> dict:
    cwd, env = demo_data
    proc = run_cli("query", question, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_query_json_metadata_has_real_lists_and_the_api_id(demo_data):
    ctx = _query_json(demo_data, "How do I create a user?")
    assert ctx["schema_version"] == CONTEXT_SCHEMA_VERSION == 4
    first = ctx["primary_chunks"][0]
    meta = first["metadata"]
    assert meta["api"] == "users_api" and "source_file" not in meta
    assert meta["tags"] == ["users"]
    assert isinstance(meta["referenced_by"], list)
    assert "users_api:components/schemas/UserCreate" in meta["ref_ids"]  # chunk id -> where it is referenced
    assert first["example_request"]["curl"].startswith("curl -X POST 'https://api.example.com/v1/users'")
    assert "request" not in meta  # the stored recipe, shown as example_request
    assert all(isinstance(v, list) for v in meta["ref_ids"].values())
    for chunk in ctx["referenced_chunks"]:
        assert isinstance(chunk["metadata"]["referenced_by"], list) and chunk["metadata"]["api"] == "users_api"


@pytest.fixture(scope="module")
def eval_runs(demo_data):
    """Two offline runs of the demo set over the demo corpus (the same code: nothing moves)."""
    cwd, env = demo_data
    for name in ("run-a", "run-b"):
        proc = run_cli("eval", str(DEMO_SET), "--corpus", str(DEMO_SPECS), "--out", name, "--json", cwd=cwd, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "overall" in json.loads(proc.stdout)
    return cwd, env


def test_results_json_has_schema_version_and_the_same_api_id(eval_runs):
    cwd, _ = eval_runs
    results = json.loads((cwd / "run-a" / "results.json").read_text())
    assert results["schema_version"] == RESULTS_SCHEMA_VERSION == 2
    retrieved = [r for q in results["queries"] for r in q["retrieved"]]
    assert retrieved and all("api" in r and "source_file" not in r for r in retrieved)
    assert {r["api"] for r in retrieved} <= {"users_api", "petstore_v2"}


def test_eval_compare_is_a_subcommand_with_json(eval_runs):
    cwd, env = eval_runs
    proc = run_cli("eval", "compare", "run-a", "run-b", "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    comparison = json.loads(proc.stdout)
    assert comparison["schema_version"] == RESULTS_SCHEMA_VERSION and comparison["same_mode_and_setting"]
    overall = next(s for s in comparison["sets"] if s["name"] == "overall")
    mrr = next(m for m in overall["metrics"] if m["metric"] == "MRR")
    assert mrr["delta"] == 0.0 and comparison["moves"] == [] and comparison["only_in_a"] == []
    text = run_cli("eval", "compare", "run-a", "run-b", cwd=cwd, env=env)
    assert text.returncode == 0 and "== overall" in text.stdout and "better (0):" in text.stdout


def test_eval_compare_has_its_own_help(tmp_path):
    proc = run_cli("eval", "compare", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.startswith("usage: specrag eval compare") and "run_a" in proc.stdout
    assert "--corpus" not in proc.stdout  # not eval's own help
    assert "eval compare RUN_A RUN_B" in run_cli("eval", "--help", cwd=tmp_path).stdout
