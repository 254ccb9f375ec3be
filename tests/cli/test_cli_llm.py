"""The CLI against a real OpenAI-compatible server on 127.0.0.1: a `.env` in the working folder is
never read, a base URL from a `.env` never receives the environment's API key, and an
``eval --mode llm`` run in which every LLM call failed warns and exits 3."""

from __future__ import annotations

import json

import pytest
from llm.openai_server import Reply, ScriptedServer, answer
from specrag.cli.evaluate import every_llm_call_failed
from specrag.context.knowledge import Fallback
from specrag.evals.metrics import LLMUsage, MetricSummary
from specrag.evals.report import EvalRun, Gold, QueryResult, RunInfo, RunMetrics

from .conftest import DEMO_SET, DEMO_SPECS, run_cli

ENV_KEY = "sk-from-the-environment"


@pytest.fixture
def server():
    srv = ScriptedServer().start()
    yield srv
    srv.stop()


def _select_answer() -> Reply:
    return answer({"selected_apis": ["users_api"], "reasoning": "users"})


def test_dotenv_in_the_working_folder_is_not_read(demo_data, server, tmp_path):
    cwd, env = demo_data
    work = tmp_path / "someone-elses-specs"
    work.mkdir()
    (work / ".env").write_text(f"SPECRAG_LLM_BASE_URL={server.base_url}\nSPECRAG_LLM_MODEL=evil\n")
    proc = run_cli("query", "How do I create a user?", cwd=work, env=env)  # env's data dir: the demo index
    assert proc.returncode == 0, proc.stderr
    assert server.requests == [] and "offline mode" in proc.stderr


def _query_with_dotenv(demo_data, server, dotenv, lines: str):
    """`query --env-file dotenv` (which names the server) with OPENAI_API_KEY in the environment."""
    cwd, env = demo_data
    dotenv.write_text(f"SPECRAG_LLM_BASE_URL={server.base_url}\nSPECRAG_LLM_MODEL=test-model\n{lines}")
    server.script(default=_select_answer())
    proc = run_cli("query", "How do I create a user?", "--env-file", str(dotenv), cwd=cwd,
                   env=env | {"OPENAI_API_KEY": ENV_KEY})
    assert proc.returncode == 0, proc.stderr
    assert server.authorizations, "the .env's server was asked"
    return proc


def test_dotenv_base_url_never_gets_the_environment_key(demo_data, server, tmp_path):
    dotenv = tmp_path / "local.env"
    proc = _query_with_dotenv(demo_data, server, dotenv, "")
    assert all(ENV_KEY not in (a or "") for a in server.authorizations)
    warning = [line for line in proc.stderr.splitlines() if "is not sent to it" in line]
    assert len(warning) == 1 and "OPENAI_API_KEY from the environment" in warning[0] and str(dotenv) in warning[0]


def test_dotenv_with_its_own_key_sends_that_key(demo_data, server, tmp_path):
    _query_with_dotenv(demo_data, server, tmp_path / "local.env", "OPENAI_API_KEY=sk-dotenv\n")
    assert set(server.authorizations) == {"Bearer sk-dotenv"}


def test_environment_url_gets_the_environment_key(demo_data, server):
    cwd, env = demo_data
    server.script(default=_select_answer())
    proc = run_cli("query", "How do I create a user?", cwd=cwd,
                   env=env | {"OPENAI_API_KEY": ENV_KEY, "SPECRAG_LLM_BASE_URL": server.base_url,
                              "SPECRAG_LLM_MODEL": "m"})
    assert proc.returncode == 0, proc.stderr
    assert set(server.authorizations) == {f"Bearer {ENV_KEY}"} and "not sent" not in proc.stderr


def test_llm_eval_where_every_call_failed_warns_and_exits_3(demo_data, server):
    cwd, env = demo_data
    server.script(default=Reply(status=500, content="down"))
    llm_env = env | {"SPECRAG_LLM_BASE_URL": server.base_url, "SPECRAG_LLM_MODEL": "m",
                     "SPECRAG_LLM_TIMEOUT_S": "0.5", "SPECRAG_LLM_MAX_ATTEMPTS": "1"}
    proc = run_cli("eval", str(DEMO_SET), "--corpus", str(DEMO_SPECS), "--mode", "llm", "--out", "failed-run",
                   "--json", cwd=cwd, env=llm_env)
    assert proc.returncode == 3, proc.stderr
    warning = proc.stderr.strip().splitlines()[-1]
    assert warning.startswith("specrag: warning: every LLM call of this --mode llm run failed")
    assert "server_error" in warning and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["overall"]["fallback_rate"] == 1.0  # the run is still reported
    assert (cwd / "failed-run" / "results.json").is_file()


def _run(*queries: tuple[int, list[str]]) -> EvalRun:
    """An LLM-mode run whose queries made ``calls`` LLM calls and fell back for ``reasons``."""
    results = [QueryResult(id=f"q{i}", set="s", query="q", gold=Gold(apis=[], endpoints=[]),
                           llm=LLMUsage(calls=calls), fallbacks=[Fallback(stage="select", reason=r) for r in reasons])
               for i, (calls, reasons) in enumerate(queries)]
    return EvalRun(run=RunInfo(mode="llm", setting="fleet"), metrics=RunMetrics(overall=MetricSummary()),
                   queries=results)


def test_every_llm_call_failed_counts_calls_not_queries():
    assert every_llm_call_failed(_run((2, ["timeout", "server_error"]), (1, ["invalid_output"])))
    assert not every_llm_call_failed(_run((2, ["timeout"]), (2, ["timeout", "timeout"])))  # one call answered
    assert not every_llm_call_failed(_run((0, []), (0, [])))  # cached or no call at all: nothing failed
    assert not every_llm_call_failed(_run((1, ["no_valid_ids"])))  # the LLM answered (with unknown ids)
