"""`specrag ingest` as a user runs it: a subprocess, its stdout, stderr and exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = """\
openapi: 3.0.0
info: {title: Pets, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Pet"}
        "404": {description: none}
components:
  schemas:
    Pet:
      type: object
      properties:
        id: {type: integer}
        home: {$ref: "https://example.com/home.yaml#/Home"}
        lost: {$ref: "#/components/schemas/Lost"}
"""


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECRAG_")}
    env["SPECRAG_DATA_DIR"] = str(cwd / "data")
    return subprocess.run([sys.executable, "-m", "specrag.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def folder(tmp_path) -> Path:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "pets.yaml").write_text(GOOD)
    (specs / "broken.json").write_text('{"swagger": "2.0", ')
    (specs / "dead.yaml").symlink_to(tmp_path / "gone.yaml")  # listed, but cannot be read
    return specs


def test_ingest_json_prints_one_report_object(folder, tmp_path):
    catalogs = tmp_path / "catalogs"
    proc = run_cli("ingest", str(folder), "--json", "--catalog-dir", str(catalogs), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert report["specs_read"] == 1 and isinstance(report["specs_read"], int)
    skipped = {Path(s["file"]).name: s["reason"] for s in report["specs_skipped"]}
    assert all(set(s) == {"file", "reason"} for s in report["specs_skipped"])
    assert skipped["broken.json"].startswith("invalid JSON")
    assert skipped["dead.yaml"].startswith("unreadable")
    assert report["chunks"] == {"endpoint": 1, "component": 1, "errors": 1, "total": 3}
    refs = report["refs"]
    assert (refs["total"], refs["resolved"], refs["unresolved"]) == (2, 1, 1)
    assert refs["external"] == {"url": 1} and refs["unresolved_by_kind"] == {"missing_target": 1}
    assert isinstance(report["seconds"], float) and report["seconds"] >= 0
    assert sorted(p.relative_to(catalogs).as_posix() for p in catalogs.rglob("*.json*")) == [
        "catalog.json", "graphs/pets.json.gz", "indexes/pets.json"]
    assert "Traceback" not in proc.stderr


def test_no_catalogs_writes_nothing(folder, tmp_path):
    proc = run_cli("ingest", str(folder / "pets.yaml"), "--json", "--no-catalogs",
                   "--catalog-dir", str(tmp_path / "catalogs"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["specs_read"] == 1
    assert not (tmp_path / "catalogs").exists() and not (tmp_path / "data").exists()


def test_human_report_lists_skipped_files(folder, tmp_path):
    proc = run_cli("ingest", str(folder), "--no-catalogs", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("specs read: 1   skipped: 2")
    assert f"skipped {folder / 'broken.json'}: invalid JSON" in proc.stdout
    assert "external (not followed): url 1" in proc.stdout


def test_missing_path_is_one_clear_line(tmp_path):
    missing = tmp_path / "nowhere"
    proc = run_cli("ingest", str(missing), "--json", cwd=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.strip() == f"specrag: error: no such file or folder: {missing}"
    assert proc.stdout == "" and "Traceback" not in proc.stderr


def test_unreadable_file_is_a_skip_reason(folder, tmp_path):
    locked = folder / "locked.yaml"
    locked.write_text(GOOD)
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("running as root: chmod 000 leaves the file readable")
        proc = run_cli("ingest", str(folder), str(locked), "--json", "--no-catalogs", cwd=tmp_path)
    finally:
        locked.chmod(0o644)
    assert proc.returncode == 0, proc.stderr
    reasons = {Path(s["file"]).name: s["reason"] for s in json.loads(proc.stdout)["specs_skipped"]}
    assert reasons["locked.yaml"].startswith("unreadable: Permission denied")
