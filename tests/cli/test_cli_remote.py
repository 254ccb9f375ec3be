"""`specrag ingest --corpus URL` as a user runs it, against a real HTTP server on 127.0.0.1: the
report counts the fetched URLs and names each failed one on a line of its own."""

from __future__ import annotations

import shutil

import pytest
from spec_server import SpecServer

from .conftest import DEMO_SPECS, assert_one_line_error, clean_env, run_cli


@pytest.fixture
def server(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    shutil.copy(DEMO_SPECS / "users_api.yaml", folder / "users_api.yaml")
    srv = SpecServer(folder)
    yield srv
    srv.close()


def test_ingest_fetches_urls_from_a_list_and_reports_each_failure(server, tmp_path):
    listing = tmp_path / "corpus.txt"
    listing.write_text(f"# the fleet\n{server.url('/users_api.yaml')}\n{server.url('/gone.json')}  # retired\n"
                       f"{DEMO_SPECS / 'petstore_v2.json'}\n")
    proc = run_cli("ingest", "--corpus", f"@{listing}", "ftp://127.0.0.1/x.json", cwd=tmp_path, env=clean_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("specs read: 2   skipped: 2")
    assert "spec URLs: 1 downloaded, 0 not modified (kept copy read), 2 failed" in lines
    assert "  skipped ftp://127.0.0.1/x.json: URL has scheme 'ftp': only http and https URLs are fetched" in lines
    assert f"  skipped {server.url('/gone.json')}: HTTP 404 Not Found" in lines
    assert "Traceback" not in proc.stderr


def test_a_corpus_whose_every_url_fails_is_a_one_line_error(server, tmp_path):
    proc = run_cli("index", server.url("/gone.json"), cwd=tmp_path, env=clean_env(tmp_path))
    assert_one_line_error(proc, "no readable OpenAPI/Swagger spec", server.url("/gone.json"), "HTTP 404 Not Found")
    assert not (tmp_path / "data" / "corpora").exists()
