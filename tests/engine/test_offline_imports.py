"""An offline query process (no LLM configured) never imports the openai SDK: ~24 MB of a serving
process's RSS and ~0.5 s of its start. A configured LLM loads it, and its errors are classified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import json, sys
from specrag.cli import main
code = main(sys.argv[1:])
print("exit", code)
print("openai", json.dumps("openai" in sys.modules))
"""


def test_an_offline_query_never_imports_the_openai_sdk(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECRAG_", "OPENAI_"))}
    (tmp_path / "empty.env").touch()
    env.update(SPECRAG_EMBED_MODEL="none", SPECRAG_ENV_FILE=str(tmp_path / "empty.env"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "query", "How do I create a user?", "--corpus",
                           str(ROOT / "examples" / "specs"), "--data-dir", str(tmp_path / "data")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and "exit 0" in proc.stdout and "POST /users" in proc.stdout, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.rsplit("openai ", 1)[1]) is False


def test_the_sdk_errors_are_classified_once_it_is_loaded():
    import httpx
    import openai
    from specrag.core.llm import failure_detail, failure_reason

    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    assert failure_reason(openai.APITimeoutError(request)) == "timeout"
    assert failure_reason(openai.APIConnectionError(request=request)) == "connection_error"
    limited = openai.RateLimitError("slow down", response=httpx.Response(429, request=request), body=None)
    assert failure_reason(limited) == "rate_limit"
    assert failure_detail(limited, "http://127.0.0.1:9").startswith("HTTP 429 from http://127.0.0.1:9")
    assert failure_reason(ValueError("not the SDK's")) == "unexpected_error"
