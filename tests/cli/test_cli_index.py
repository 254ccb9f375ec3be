"""`ingest` writes the catalogs where `index` and `query` read them; `bench` honours --data-dir,
relative ones included (its serving child runs in another working folder)."""

from __future__ import annotations

import json

from specrag.core.settings import Settings
from specrag.index.workspace import corpus_settings

from .conftest import DEMO_SPECS, clean_env, run_cli


def test_ingest_writes_the_catalogs_index_reads(tmp_path):
    env = clean_env(tmp_path)
    proc = run_cli("ingest", str(DEMO_SPECS), "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    catalogs = corpus_settings(Settings(_env_file=None, data_dir=tmp_path / "data"), [DEMO_SPECS]).catalogs_path
    assert sorted(p.relative_to(catalogs).as_posix() for p in catalogs.rglob("*.json*")) == [
        "catalog.json", "graphs/petstore_v2.json.gz", "graphs/users_api.json.gz", "indexes/petstore_v2.json",
        "indexes/users_api.json"]
    assert not (tmp_path / "data" / "catalogs").exists()  # the old place nothing read
    proc = run_cli("index", str(DEMO_SPECS), "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    written = json.loads(proc.stdout)["catalogs"]
    assert written["written"] == [] and written["unchanged"] == 5  # index found ingest's files in place


def test_catalog_dir_is_shared_by_ingest_and_index(tmp_path):
    env = clean_env(tmp_path)
    shared = tmp_path / "my-catalogs"
    assert run_cli("ingest", str(DEMO_SPECS), "--catalog-dir", str(shared), cwd=tmp_path, env=env).returncode == 0
    proc = run_cli("index", str(DEMO_SPECS), "--catalog-dir", str(shared), "--json", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["catalogs"]["unchanged"] == 5  # the catalog, 2 indexes, 2 graphs


def test_bench_uses_a_relative_data_dir_from_the_working_folder(tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "q1", "query": "How do I create a user?", "apis": ["users_api"],
                                   "endpoints": []}) + "\n")
    env = clean_env(tmp_path)
    proc = run_cli("bench", "--corpus", str(DEMO_SPECS), "--queries", str(queries), "--reuse", "--json",
                   "--data-dir", "bench-data", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["latency_ms"]["wall"]["n"] == 1 and report["chunks"] > 0
    index = corpus_settings(Settings(_env_file=None, data_dir=tmp_path / "bench-data"), [DEMO_SPECS]).storage.data_dir
    assert (index / "manifest.json").is_file()
    proc = run_cli("bench", "--corpus", str(DEMO_SPECS), "--queries", str(queries), "--json",
                   "--data-dir", "fresh-data", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["fresh_build"]
    assert (tmp_path / "fresh-data").is_dir() and list((tmp_path / "fresh-data").iterdir()) == []  # built there, removed
