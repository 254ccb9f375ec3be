"""The CLI as a user runs it: a subprocess of ``python -m specrag.cli`` with a clean environment
(no settings inherited from the machine, an empty .env), its stdout, stderr and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO_SPECS = ROOT / "examples" / "specs"
DEMO_SET = ROOT / "evals" / "sets" / "demo.jsonl"
SETTING_PREFIXES = ("SPECRAG_", "OPENAI_", "RETRIEVAL_", "CONTEXT_", "ENABLE_QUERY", "LOG_RETRIEVAL", "SELECTION_")


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The machine's environment minus every setting; lexical search (fast); an empty .env."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(SETTING_PREFIXES)}
    (tmp / "empty.env").touch()
    env.update(SPECRAG_ENV_FILE=str(tmp / "empty.env"), SPECRAG_EMBED_MODEL="none",
               SPECRAG_DATA_DIR=str(tmp / "data"), PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def run_cli(*args: str | bytes, cwd: Path, env: dict[str, str] | None = None,
            timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specrag.cli", *args], cwd=cwd, env=env or clean_env(cwd),
                          capture_output=True, text=True, timeout=timeout, errors="backslashreplace")


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, no traceback, and the last stderr line is the error naming every needle."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("specrag: error: "), proc.stderr
    for needle in needles:
        assert needle in line, (needle, line)
    return line


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(working folder, environment) with the demo corpus indexed (lexical) as the current corpus."""
    cwd = tmp_path_factory.mktemp("cli")
    env = clean_env(cwd)
    proc = run_cli("index", str(DEMO_SPECS), cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return cwd, env


@pytest.fixture
def cli(demo_data, capsys, monkeypatch):
    """``specrag ARGS`` in this process over the demo index: (exit code, stdout, stderr). Faster
    than a subprocess for the many small commands a test runs; the environment is demo_data's."""
    from specrag.cli import main

    cwd, env = demo_data
    for key in list(os.environ):
        if key.upper().startswith(SETTING_PREFIXES):
            monkeypatch.delenv(key)
    for key, value in env.items():
        if key.upper().startswith(SETTING_PREFIXES):
            monkeypatch.setenv(key, value)
    monkeypatch.chdir(cwd)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
