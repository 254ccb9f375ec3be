"""User errors are one line on stderr and exit code 2, for every command: bad settings, a missing
.env, an empty corpus, a missing eval run; `--version` works."""

from __future__ import annotations

import json

import pytest

from .conftest import DEMO_SPECS, assert_one_line_error, clean_env, run_cli


@pytest.mark.parametrize("name, value, allowed", [
    ("SPECRAG_LLM_TIMEOUT_S", "abc", "a number > 0 and <= 600"),
    ("RETRIEVAL_MAX_DEPTH", "-1", "an integer >= 0 and <= 20"),
    ("ENABLE_QUERY_ANALYSIS", "maybe", "true or false"),
    ("SPECRAG_CHROMA_PORT", "0", "an integer >= 1 and <= 65535"),
    ("CONTEXT_TOKEN_LIMIT", "-5", "an integer >= 100"),
    ("SPECRAG_LLM_DEADLINE_S", "nan", "a number > 0"),
])
def test_bad_setting_is_one_line_naming_the_variable(tmp_path, name, value, allowed):
    proc = run_cli("query", "create a user", cwd=tmp_path, env=clean_env(tmp_path, **{name: value}))
    line = assert_one_line_error(proc, f"{name}={value!r}", allowed)
    assert proc.stderr.strip() == line and proc.stdout == ""


def test_every_bad_setting_is_named_in_the_one_line(tmp_path):
    env = clean_env(tmp_path, SPECRAG_LLM_TIMEOUT_S="abc", RETRIEVAL_MAX_DEPTH="-1")
    assert_one_line_error(run_cli("index", str(DEMO_SPECS), cwd=tmp_path, env=env),
                          "SPECRAG_LLM_TIMEOUT_S='abc'", "RETRIEVAL_MAX_DEPTH='-1'")


def test_missing_env_file_is_one_line(tmp_path):
    assert_one_line_error(run_cli("query", "x", "--env-file", str(tmp_path / "nope.env"), cwd=tmp_path),
                          "--env-file", "nope.env: no such file")
    env = clean_env(tmp_path, SPECRAG_ENV_FILE=str(tmp_path / "gone.env"))
    assert_one_line_error(run_cli("query", "x", cwd=tmp_path, env=env), "SPECRAG_ENV_FILE", "gone.env")


def test_empty_corpus_index_is_one_line_and_the_next_query_finds_no_index(tmp_path):
    """A failed index leaves nothing: the next query says what it said before (test_cli_empty_corpus.py
    has every command); ingest reports the files it read before its one line."""
    (tmp_path / "empty").mkdir()
    proc = run_cli("index", "empty", cwd=tmp_path)
    assert proc.stdout == ""
    assert_one_line_error(proc, "no readable OpenAPI/Swagger spec in empty")
    proc = run_cli("query", "How do I create a user?", cwd=tmp_path)
    assert_one_line_error(proc, "no index in", "specrag index")
    (tmp_path / "empty" / "compose.yml").write_text("services: {}\n")
    (tmp_path / "empty" / "stub.yaml").write_text("openapi: 3.0.0\n")
    proc = run_cli("ingest", "empty", "--json", cwd=tmp_path)
    assert json.loads(proc.stdout)["specs_read"] == 0
    assert_one_line_error(proc, "no readable OpenAPI/Swagger spec", "stub.yaml: no 'paths' object")


def test_query_before_any_index_is_one_line(tmp_path):
    assert_one_line_error(run_cli("query", "create a user", cwd=tmp_path), "no index in", "specrag index")


def test_empty_question_and_unknown_api_are_one_line(demo_data):
    cwd, env = demo_data
    assert_one_line_error(run_cli("query", "   ", cwd=cwd, env=env), "empty query")
    assert_one_line_error(run_cli("query", "create", "--apis", "users_ap", cwd=cwd, env=env),
                          "unknown API id(s): 'users_ap'", "did you mean users_api")


def test_eval_compare_missing_run_is_one_line(tmp_path):
    assert_one_line_error(run_cli("eval", "compare", "run-a", "run-b", cwd=tmp_path), "no eval run at run-a")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("{not json")
    assert_one_line_error(run_cli("eval", "compare", "bad", "bad", "--json", cwd=tmp_path),
                          "is not a specrag results.json")


def test_bad_arguments_exit_2(tmp_path):
    proc = run_cli("eval", "compare", "only-one", cwd=tmp_path)
    assert proc.returncode == 2 and "usage: specrag eval compare" in proc.stderr
    proc = run_cli("bench", "--corpus", str(DEMO_SPECS), "--repeats", "0", cwd=tmp_path)
    assert_one_line_error(proc, "--repeats must be at least 1")


def test_version(tmp_path):
    proc = run_cli("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("specrag ") and proc.stderr == ""
    assert proc.stdout.split()[1][0].isdigit()


def test_unusable_data_dir_is_one_line(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    assert_one_line_error(run_cli("index", str(DEMO_SPECS), "--data-dir", "a-file", cwd=tmp_path),
                          "Not a directory", "a-file")


@pytest.mark.parametrize("args, flag, allowed", [
    (["serve", "--port", "8711349"], "--port", "an integer from 0 to 65535"),
    (["mcp", "--port", "-1"], "--port", "an integer from 0 to 65535"),
    (["serve", "--workers", "1000"], "--workers", "an integer from 1 to 64"),
    (["bench-serve", "--queries", "q.jsonl", "--clients", "0"], "--clients", "an integer from 1 to 1000"),
    (["bench-serve", "--queries", "q.jsonl", "--duration", "nan"], "--duration", "a number from 0.1 to 86400"),
    (["plan", "create a user", "--token-budget", "-5"], "--token-budget", "an integer from 100 to 100000"),
])
def test_out_of_range_flag_is_refused_before_anything_runs(tmp_path, args, flag, allowed):
    """A flag stands for a validated setting (--port for SPECRAG_PORT) but is not read through it:
    it is checked itself, with argparse's one-line error, before a server binds or a run starts."""
    proc = run_cli(*args, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"specrag {args[0]}: error: argument {flag}:") and line.endswith(allowed), line
    assert proc.stdout == "" and not (tmp_path / ".specrag").exists()
