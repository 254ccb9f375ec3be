"""The CLI answers help, bad arguments and refusals before it loads anything heavy: building the
parser imports no model, store, engine or HTTP stack, and a command checks its flags before it
imports what it runs with or indexes anything. Each case runs in a fresh interpreter and reports
which heavy modules it ended up with (a behaviour test, not a timing test)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import DEMO_SPECS, ROOT, clean_env

HEAVY = ("llama_index", "chromadb", "numpy", "fastapi", "starlette", "uvicorn", "mcp", "onnxruntime", "bm25s",
         "tiktoken", "yaml", "specrag.engine.query_engine", "specrag.engine.factory", "specrag.index.store", "specrag.serve.app")

# main(argv) for each argv in a fresh interpreter; prints each run's exit code and stdout, and the
# heavy modules loaded after them all, as JSON on the real stderr
SCRIPT = """
import contextlib, io, json, sys
from specrag.cli import main
runs = []
for argv in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    runs.append([code, out.getvalue()])
heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in {heavy!r}))
print(json.dumps({{"runs": runs, "heavy": heavy}}), file=sys.__stderr__)
"""


def run_many(tmp_path, *argvs: list[str]) -> tuple[list[tuple[int, str]], list[str], str]:
    """([(exit code, stdout)] per argv, heavy modules loaded, stderr without the report line)."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(heavy=HEAVY), json.dumps(argvs)], cwd=tmp_path,
                          env=clean_env(tmp_path), capture_output=True, text=True, timeout=60)
    *err, report = proc.stderr.strip().splitlines()
    found = json.loads(report)
    return [tuple(r) for r in found["runs"]], found["heavy"], "\n".join(err)


def run_main(tmp_path, *args: str) -> tuple[int, list[str], str, str]:
    """(exit code, heavy modules loaded, stdout, stderr) of one run."""
    [(code, out)], heavy, err = run_many(tmp_path, list(args))
    return code, heavy, out, err


COMMANDS = ("ingest", "index", "query", "apis", "show", "plan", "impact", "deps", "eval", "serve", "mcp",
            "bench-serve", "api-key", "openapi", "bench")


def test_help_of_every_command_loads_nothing_heavy(tmp_path):
    names = ["", *COMMANDS, "eval compare"]
    runs, heavy, _ = run_many(tmp_path, *([*name.split(), "--help"] for name in names))
    assert heavy == []
    for name, (code, out) in zip(names, runs):
        assert code == 0 and out.startswith(f"usage: specrag {name}".rstrip()), (name, out)
    assert all(name in runs[0][1] for name in COMMANDS), runs[0][1]


@pytest.mark.parametrize("args, message", [
    (["query", "create a user", "--top-k", "x"], "argument --top-k: 'x' is not a number"),
    (["query", "create a user", "--top-k", "2.5"], "argument --top-k: '2.5' is not an integer from 1 to 100"),
    (["query", "create a user", "--token-budget", "50"], "'50' is not an integer from 100 to 100000"),
    (["serve", "--port", "99999"], "argument --port: '99999' is not an integer from 0 to 65535"),
    (["deps", "users_api"], "the following arguments are required: operation"),
    (["show", "users_api", "createUser", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_a_bad_argument_is_refused_before_anything_heavy_loads(tmp_path, args, message):
    code, heavy, out, err = run_main(tmp_path, *args)
    assert code == 2 and heavy == [] and out == ""
    assert err.splitlines()[-1].endswith(message), err


def test_a_flag_that_is_no_number_is_refused_without_importing_the_settings(tmp_path):
    """The range of --top-k is the setting's own, read only for a number to check."""
    script = ("import sys\nfrom specrag.cli import main\ntry:\n    main(['query', 'q', '--top-k', 'x'])\n"
              "except SystemExit:\n    pass\nprint(sorted(m for m in ('specrag.core.settings', 'pydantic_settings') "
              "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(tmp_path), capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.strip() == "[]" and "'x' is not a number" in proc.stderr


def test_version_loads_nothing_heavy(tmp_path):
    code, heavy, out, _ = run_main(tmp_path, "--version")
    assert (code, heavy) == (0, []) and out.startswith("specrag ")


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--transport", "streamable-http"]])
def test_a_server_refuses_a_public_bind_before_importing_the_service_or_indexing(tmp_path, command):
    """No API key and a non-loopback host: refused before the HTTP stack is imported or --corpus indexed."""
    code, heavy, out, err = run_main(tmp_path, *command, "--host", "0.0.0.0", "--corpus", str(DEMO_SPECS))
    assert code == 2 and out == ""
    assert err.splitlines()[-1].startswith("specrag: error: SPECRAG_HOST=0.0.0.0 is not a loopback address"), err
    assert heavy == []
    assert not (tmp_path / "data").exists(), "nothing may be indexed before the refusal"


@pytest.mark.parametrize("args, message", [
    (["query", "   ", "--corpus", str(DEMO_SPECS)], "empty query"),
    (["plan", "", "--corpus", str(DEMO_SPECS)], "empty query"),
    (["bench", "--corpus", str(DEMO_SPECS), "--repeats", "0"], "--repeats must be at least 1"),
    (["bench-serve", "--queries", "q.jsonl"], "bench-serve needs --kb KB_ID"),
    (["eval", "set.jsonl"], "specrag eval needs --corpus"),
])
def test_a_command_checks_its_arguments_before_it_indexes(tmp_path, args, message):
    code, heavy, out, err = run_main(tmp_path, *args)
    assert code == 2 and out == "" and message in err.splitlines()[-1], err
    assert heavy == [] and not (tmp_path / "data").exists()


def test_python_dash_m_specrag_is_the_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "specrag", "--version"], cwd=tmp_path, capture_output=True,
                          text=True, env=clean_env(tmp_path), timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("specrag "), proc.stderr
    assert (ROOT / "pipeline" / "__main__.py").is_file()
