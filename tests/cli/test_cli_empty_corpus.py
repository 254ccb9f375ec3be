"""A corpus path with no usable spec (an empty folder, a folder of other files, a file that is not a
spec) is one line on stderr and exit 2 for every command that takes one, with and without an
embedding model, and the failed run leaves the data dir as it found it: no half-made corpus
folder, ``current`` unmoved, and a plain ``specrag serve`` afterwards starts (or says what it
said before)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from specrag.bench.loadtest import free_port

from .conftest import DEMO_SET, DEMO_SPECS, assert_one_line_error, clean_env, run_cli

LOCAL_MODEL = Path(__file__).resolve().parents[3] / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
needs_model = pytest.mark.skipif(not (LOCAL_MODEL / "model.onnx").is_file(), reason=f"no embedding model at {LOCAL_MODEL}")
WHAT_TO_DO = "pass the spec files, or folders that hold them"

COMMANDS = {  # each command that takes corpus paths, as it takes them
    "query": ["query", "How do I create a user?", "--corpus"],
    "plan": ["plan", "How do I create a user?", "--corpus"],
    "index": ["index"],
    "ingest": ["ingest"],
    "serve": ["serve", "--port", "0", "--corpus"],
    "mcp": ["mcp", "--corpus"],
    "eval": ["eval", str(DEMO_SET), "--corpus"],
    "apis": ["apis", "--corpus"],
    "show": ["show", "users_api", "createUser", "--corpus"],
    "deps": ["deps", "users_api", "getUser", "--corpus"],
}


def model_env(tmp: Path, with_model: bool, **extra: str) -> dict[str, str]:
    """The CLI's clean environment, lexical or with the local embedding model."""
    if not with_model:
        return clean_env(tmp, **extra)
    env = clean_env(tmp, SPECRAG_EMBED_MODEL_PATH=str(LOCAL_MODEL), **extra)
    env.pop("SPECRAG_EMBED_MODEL")
    return env


def no_spec_corpora(tmp: Path) -> dict[str, Path]:
    """An empty folder, a folder holding only a README.md, a README.md given as the spec."""
    (tmp / "empty").mkdir()
    (tmp / "docs").mkdir()
    (tmp / "docs" / "README.md").write_text("# notes\n")
    (tmp / "README.md").write_text("# notes\n")
    return {"empty": tmp / "empty", "docs": tmp / "docs", "readme": tmp / "README.md"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_folder_without_specs_is_one_line_before_anything_is_made(tmp_path, command):
    """Checked before a corpus folder is made or the model loaded (so the model, set where there is
    one, changes nothing): nothing is left in the data dir."""
    corpora = no_spec_corpora(tmp_path)
    env = model_env(tmp_path, (LOCAL_MODEL / "model.onnx").is_file())
    proc = run_cli(*COMMANDS[command], str(corpora["empty"]), cwd=tmp_path, env=env, timeout=120)
    line = assert_one_line_error(proc, "no readable OpenAPI/Swagger spec in", "empty", "no .json, .yaml, .yml file",
                                 WHAT_TO_DO)
    assert proc.stderr.strip() == line, proc.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("with_model", [False, pytest.param(True, marks=needs_model)], ids=["lexical", "model"])
@pytest.mark.parametrize("command, corpus, said", [
    ("query", "docs", "no .json, .yaml, .yml file"),
    ("query", "readme", "README.md: top level is NoneType, not a mapping"),
    ("index", "readme", "README.md: top level is NoneType, not a mapping"),
    ("serve", "readme", "README.md: top level is NoneType, not a mapping"),
])
def test_files_that_are_not_specs_are_one_line_and_leave_nothing(tmp_path, command, corpus, said, with_model):
    """A README.md given as the spec is read before it is refused (in a corpus folder made for it,
    removed again): the traceback of an empty catalog's vectors was the model's case."""
    corpora = no_spec_corpora(tmp_path)
    proc = run_cli(*COMMANDS[command], str(corpora[corpus]), cwd=tmp_path, env=model_env(tmp_path, with_model),
                   timeout=120)
    line = assert_one_line_error(proc, "no readable OpenAPI/Swagger spec in", said, WHAT_TO_DO)
    assert proc.stderr.strip() == line, proc.stderr
    assert not (tmp_path / "data").exists()


def test_a_failed_run_leaves_the_current_corpus_and_its_index_as_they_were(tmp_path):
    """The demo corpus indexed; a failed `query --corpus README.md` in the same data dir; a plain
    `query` still answers from the demo corpus, and the corpora folder holds the demo's alone."""
    no_spec_corpora(tmp_path)
    env = clean_env(tmp_path)
    assert run_cli("index", str(DEMO_SPECS), cwd=tmp_path, env=env).returncode == 0
    before = sorted(p.name for p in (tmp_path / "data" / "corpora").iterdir())
    current = (tmp_path / "data" / "current").read_text()
    assert_one_line_error(run_cli("query", "x", "--corpus", "README.md", cwd=tmp_path, env=env), "README.md")
    assert sorted(p.name for p in (tmp_path / "data" / "corpora").iterdir()) == before
    assert (tmp_path / "data" / "current").read_text() == current
    proc = run_cli("query", "How do I create a user?", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "POST /users" in proc.stdout, proc.stderr


def test_serve_says_after_a_failed_run_what_it_said_before(tmp_path):
    """No corpus indexed: `serve` refuses in the same one line before and after a failed run (it
    used to find the half-made corpus and refuse with another reason)."""
    no_spec_corpora(tmp_path)
    env = clean_env(tmp_path)
    before = assert_one_line_error(run_cli("serve", "--port", "0", cwd=tmp_path, env=env), "no index in")
    assert_one_line_error(run_cli("index", "README.md", cwd=tmp_path, env=env), "README.md")
    assert run_cli("serve", "--port", "0", cwd=tmp_path, env=env).stderr.strip() == before


@needs_model
def test_serve_starts_after_a_failed_run_with_the_model(tmp_path):
    """The demo corpus indexed with the model, then a failed `index README.md` (the model's case left
    a corpus folder holding no API, and `serve` refused to start): a plain `serve` answers /healthz."""
    no_spec_corpora(tmp_path)
    env = model_env(tmp_path, True)
    assert run_cli("index", str(DEMO_SPECS), cwd=tmp_path, env=env).returncode == 0
    assert_one_line_error(run_cli("index", "README.md", cwd=tmp_path, env=env), "README.md")
    port = free_port()
    with (tmp_path / "serve.log").open("w+") as log:
        server = subprocess.Popen([sys.executable, "-m", "specrag.cli", "serve", "--port", str(port)], cwd=tmp_path,
                                  env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            assert _answers(f"http://127.0.0.1:{port}/healthz", server, timeout_s=90), (tmp_path / "serve.log").read_text()
        finally:
            server.terminate()
            server.wait(timeout=30)


def _answers(url: str, server: subprocess.Popen, timeout_s: float) -> bool:
    """True once ``url`` answers 200; False when the server exits or the time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    return False
