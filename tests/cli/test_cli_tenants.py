"""`specrag index --tenant` (or SPECRAG_TENANT) builds that tenant's index in its own folder;
`specrag api-key` writes only a key's hash."""

from __future__ import annotations

import json

from .conftest import DEMO_SPECS, assert_one_line_error, clean_env, run_cli


def test_index_for_a_tenant_builds_under_its_own_folder(tmp_path):
    proc = run_cli("index", str(DEMO_SPECS), "--tenant", "acme", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "data" / "tenants" / "acme" / "corpora").glob("*/manifest.json"))
    assert not (tmp_path / "data" / "corpora").exists()
    proc = run_cli("index", str(DEMO_SPECS), cwd=tmp_path, env=clean_env(tmp_path, SPECRAG_TENANT="beta"))
    assert proc.returncode == 0 and list((tmp_path / "data" / "tenants" / "beta" / "corpora").glob("*/manifest.json"))
    assert_one_line_error(run_cli("index", str(DEMO_SPECS), "--tenant", "../up", cwd=tmp_path), "SPECRAG_TENANT")


def test_api_key_prints_the_key_once_and_stores_its_hash(tmp_path):
    import hashlib

    keys = tmp_path / "keys.json"
    first, second = (run_cli("api-key", tenant, "--file", str(keys), cwd=tmp_path) for tenant in ("acme", "beta"))
    assert first.returncode == second.returncode == 0
    stored = json.loads(keys.read_text())["keys"]
    assert [e["tenant"] for e in stored] == ["acme", "beta"]
    key = first.stdout.strip()
    assert key not in keys.read_text() and stored[0]["sha256"] == hashlib.sha256(key.encode()).hexdigest()
