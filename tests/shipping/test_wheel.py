"""What users install: the built wheel (not this checkout), in a fresh virtual environment, runs
``specrag query`` on the demo corpus offline and through the LLM path.

The wheel is built from a copy of the files pyproject.toml names, so it cannot lean on anything
else in the tree. The fresh environment gets the wheel alone (``--no-deps``); its dependencies are
the test environment's, reached through a plain path entry, which does not run the test
environment's editable-install hook: ``import specrag`` there can only find the wheel's copy.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from llm.openai_server import ScriptedServer, answer
from specrag.core.prompts import PROMPT_VARS

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT.parent / "shared" / "models" / "all-MiniLM-L6-v2-onnx"
# repository folder -> where the wheel installs it
FOLDERS = {"pipeline": "specrag", "evals": "specrag/evals", "prompts": "specrag/default_prompts"}
QUESTION = "How do I create a user?"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(source)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = out.glob("specrag-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    """A fresh environment holding the wheel; the test environment's site-packages as a path entry."""
    env = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "--no-compile", "-q", str(wheel)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    Path(purelib, "test-dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    return env


def run_in(env: Path, args: list[str], cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "SPECRAG_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ["SPECRAG_EMBED_MODEL_PATH" if (MODEL / "model.onnx").is_file() else "SPECRAG_EMBED_MODEL"] = (
        str(MODEL) if (MODEL / "model.onnx").is_file() else "none")
    return subprocess.run([str(env / "bin" / args[0]), *args[1:]], cwd=cwd, capture_output=True, text=True,
                          env=environ | extra_env, timeout=600)


def test_the_wheel_holds_one_package_with_its_prompts_and_every_module(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"specrag", f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.dist-info"}
    expected = {f"{target}/{path.relative_to(ROOT / folder).as_posix()}"
                for folder, target in FOLDERS.items()
                for path in (ROOT / folder).rglob("*") if path.suffix in (".py", ".txt", ".jsonl")
                and "__pycache__" not in path.parts}
    assert expected - set(names) == set(), "modules or data missing from the wheel (pyproject's packages list?)"
    assert {f"specrag/default_prompts/{name}.txt" for name in PROMPT_VARS} <= set(names)
    assert "specrag/py.typed" in names and any(n.endswith("licenses/LICENSE") for n in names)


def test_the_installed_package_is_the_wheels(venv, tmp_path):
    code = ("import specrag, specrag.cli; from specrag.bench.query import DEFAULT_QUERIES; "
            "print(DEFAULT_QUERIES.is_file()); print(specrag.__file__)")
    proc = run_in(venv, ["python", "-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr
    shipped_set, package = proc.stdout.split()
    assert shipped_set == "True" and Path(package).is_relative_to(venv), proc.stdout
    check = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr  # every declared dependency is met


def test_the_installed_command_answers_offline(venv, tmp_path):
    corpus = shutil.copytree(ROOT / "examples" / "specs", tmp_path / "specs")
    proc = run_in(venv, ["specrag", "query", QUESTION, "--corpus", str(corpus), "--data-dir", str(tmp_path / "data")],
                  tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "POST /users" in proc.stdout and "UserCreate" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_the_installed_command_sends_the_packaged_prompts_to_the_llm(venv, tmp_path):
    corpus = shutil.copytree(ROOT / "examples" / "specs", tmp_path / "specs")
    server = ScriptedServer().start()
    try:
        server.script(answer({"selected_apis": ["users_api"], "reasoning": "users"}),
                      answer({"expanded_query": "create user POST /users", "added_terms": ["createUser"]}))
        proc = run_in(venv, ["specrag", "query", QUESTION, "--corpus", str(corpus), "--data-dir", str(tmp_path / "data"),
                             "--json"], tmp_path, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key",
                      SPECRAG_LLM_MODEL="test-model")
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    sent = server.user_texts()
    packaged = {name: (ROOT / "prompts" / f"{name}.txt").read_text().split("\n", 1)[0] for name in PROMPT_VARS}
    assert len(sent) >= 2 and sent[0].startswith(packaged["select_apis"]) and sent[1].startswith(packaged["expand_query"])
    stats = json.loads(proc.stdout)["retrieval_stats"]
    assert stats["mode"] == "llm" and not stats["fallbacks"], stats
    assert {label.split("@")[0] for label in stats["prompts"].values()} >= {"select_apis", "expand_query"}, stats
    assert "POST /users" in proc.stdout
