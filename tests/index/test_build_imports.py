"""`specrag index` never imports llama_index.core (~1.8 s of a one-spec re-index): not on a first
build, not when one spec changed, not when nothing did. Queries import it, as they should."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from specrag.bench.fleet import edit_one_spec

from .fleet import MODEL_DIR

ROOT = Path(__file__).resolve().parents[2]
DEMO_SPECS = ROOT / "examples" / "specs"
# `specrag index` (or a query) in a fresh interpreter, then the LlamaIndex modules it loaded
SCRIPT = """
import json, sys
from specrag.cli import main
code = main(sys.argv[1:])
print("exit", code)
print("loaded", json.dumps(sorted(m for m in sys.modules if m.startswith("llama_index."))))
"""


def run(*args: str, data_dir: Path) -> tuple[str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECRAG_", "OPENAI_"))}
    env.update(SPECRAG_EMBED_MODEL_PATH=str(MODEL_DIR), SPECRAG_ENV_FILE=str(data_dir.parent / "empty.env"))
    (data_dir.parent / "empty.env").touch()
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *args, "--data-dir", str(data_dir)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "exit 0" in proc.stdout, proc.stdout + proc.stderr
    loaded = proc.stdout.rsplit("loaded ", 1)[1]
    return proc.stdout, json.loads(loaded)


@pytest.mark.needs_embeddings
def test_index_runs_never_import_llama_index_core(tmp_path):
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(f"local ONNX model folder {MODEL_DIR} is absent")
    corpus, data = tmp_path / "specs", tmp_path / "data"
    shutil.copytree(DEMO_SPECS, corpus)

    out, loaded = run("index", str(corpus), data_dir=data)
    assert "2 added" in out and "search mode hybrid" in out and " 0 chunks embedded" not in out
    assert "llama_index.core" not in loaded, loaded

    edit_one_spec([corpus], {"users_api", "petstore_v2"})
    out, loaded = run("index", str(corpus), data_dir=data)
    assert "1 updated, 1 unchanged" in out and " 0 chunks embedded" not in out  # the edited summary's chunk
    assert "llama_index.core" not in loaded, loaded

    out, loaded = run("index", str(corpus), data_dir=data)
    assert "2 unchanged" in out
    assert "llama_index.core" not in loaded, loaded

    out, loaded = run("query", "create a user", "--corpus", str(corpus), data_dir=data)
    assert "llama_index.core" in loaded  # the query path runs on LlamaIndex's classes
