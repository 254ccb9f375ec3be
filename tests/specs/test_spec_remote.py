"""Specs at URLs, fetched from a real HTTP server on 127.0.0.1 (``tests/spec_server.py``): ingested like
local files, revalidated by ETag, and every failure (HTTP error, time-out, size, scheme,
redirect) one line in the report while the other specs still ingest."""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import pytest
from spec_server import SpecServer, endless, redirect, send, slow
from specrag.core.settings import Settings
from specrag.specs.ingest import ingest_paths, ingest_spec
from specrag.specs.inputs import resolve_inputs
from specrag.specs.limits import SpecLimits
from specrag.specs.models import ApiChunks
from specrag.specs.remote import FetchError, RemoteFetcher, assign_stems, url_stem

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def server(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    shutil.copy(FIXTURES / "zoo_oas3.yaml", folder / "zoo.yaml")
    shutil.copy(FIXTURES / "shop_swagger2.yaml", folder / "shop.yaml")
    srv = SpecServer(folder)
    yield srv
    srv.close()


def settings_for(tmp_path: Path, **changes) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **changes)


def ingest(path: Path, settings: Settings) -> ApiChunks:
    result = ingest_spec(path, path.stem, settings.ingest.chunk_max_tokens, limits=SpecLimits.from_settings(settings))
    assert isinstance(result, ApiChunks), result
    return result


def test_a_url_is_fetched_into_the_data_dir_and_ingested(server, tmp_path):
    settings = settings_for(tmp_path)
    inputs = resolve_inputs(settings, [server.url("/zoo.yaml")])
    [path] = inputs.paths
    assert path.is_relative_to(settings.tenant_dir / "remote") and path.name == f"127.0.0.1-{server.port}_zoo.yaml"
    assert path.read_bytes() == (FIXTURES / "zoo_oas3.yaml").read_bytes()
    assert inputs.fetched == {"downloaded": 1, "not_modified": 0, "failed": 0} and inputs.skipped == []
    api = ingest(path, settings)
    assert api.api.file_id == f"127.0.0.1-{server.port}_zoo"
    assert f"127.0.0.1-{server.port}_zoo:paths/~1animals/post" in {c.id for c in api.chunks}


def test_a_rerun_sends_if_none_match_and_reuses_the_body_on_304(server, tmp_path):
    settings = settings_for(tmp_path)
    [path] = resolve_inputs(settings, [server.url("/zoo.yaml")]).paths
    mtime = path.stat().st_mtime_ns
    again = resolve_inputs(settings, [server.url("/zoo.yaml")])
    first, second = server.seen("/zoo.yaml")
    assert "If-None-Match" not in first and second["If-None-Match"].startswith('"')
    assert again.paths == [path] and again.fetched == {"downloaded": 0, "not_modified": 1, "failed": 0}
    assert path.stat().st_mtime_ns == mtime  # untouched: the incremental ingest sees no change
    assert ingest(path, settings).api.title == "Zoo"
    (server.folder / "zoo.yaml").write_text((FIXTURES / "zoo_oas3.yaml").read_text().replace("title: Zoo", "title: Zoo2"))
    third = resolve_inputs(settings, [server.url("/zoo.yaml")])
    assert third.fetched["downloaded"] == 1 and ingest(path, settings).api.title == "Zoo2"


def test_a_kept_copy_that_was_edited_is_not_trusted_on_304(server, tmp_path):
    settings = settings_for(tmp_path)
    [path] = resolve_inputs(settings, [server.url("/zoo.yaml")]).paths
    path.write_text("openapi: 3.0.0\n")  # no longer what the ETag stands for
    assert resolve_inputs(settings, [server.url("/zoo.yaml")]).fetched["downloaded"] == 1
    assert "If-None-Match" not in server.seen("/zoo.yaml")[1]
    assert path.read_bytes() == (FIXTURES / "zoo_oas3.yaml").read_bytes()


def test_failures_are_one_line_each_and_the_other_specs_still_ingest(server, tmp_path):
    server.routes["/to-file.yaml"] = redirect("file:///etc/passwd")
    settings = settings_for(tmp_path)
    inputs = resolve_inputs(settings, [server.url("/zoo.yaml"), server.url("/missing.yaml"), "ftp://127.0.0.1/x.yaml",
                                       "file:///etc/passwd", server.url("/to-file.yaml")])
    reasons = {s.file: s.reason for s in inputs.skipped}
    assert reasons == {
        server.url("/missing.yaml"): "HTTP 404 Not Found",
        "ftp://127.0.0.1/x.yaml": "URL has scheme 'ftp': only http and https URLs are fetched",
        "file:///etc/passwd": "URL has scheme 'file': only http and https URLs are fetched",
        server.url("/to-file.yaml"): "redirect to file:///etc/passwd has scheme 'file': only http and https URLs "
                                     "are fetched",
    }
    assert all("\n" not in r for r in reasons.values())
    assert inputs.fetched == {"downloaded": 1, "not_modified": 0, "failed": 4}
    result = ingest_paths(inputs.paths, settings.ingest.chunk_max_tokens, workers=1, limits=SpecLimits.from_settings(settings))
    inputs.merge_into(result.report)
    assert result.report.specs_read == 1 and len(result.report.specs_skipped) == 4
    assert result.report.fetched["failed"] == 4
    assert not any(p.name.startswith("127.0.0.1") and "to-file" in p.name
                   for p in (settings.tenant_dir / "remote").rglob("*"))


def test_a_redirect_within_http_is_followed_and_the_file_named_after_the_url_given(server, tmp_path):
    server.routes["/old/zoo"] = redirect(server.url("/zoo.yaml"), 301)
    server.routes["/loop.yaml"] = redirect("/loop.yaml")
    settings = settings_for(tmp_path, remote_max_redirects=3)
    inputs = resolve_inputs(settings, [server.url("/old/zoo"), server.url("/loop.yaml")])
    [path] = inputs.paths
    assert path.name == f"127.0.0.1-{server.port}_old_zoo.yaml"  # the stem from the URL given, the suffix from the target
    assert ingest(path, settings).api.title == "Zoo"
    assert [s.reason for s in inputs.skipped] == ["more than 3 redirects (SPECRAG_REMOTE_MAX_REDIRECTS)"]
    assert len(server.seen("/loop.yaml")) == 4


def test_a_body_past_the_size_limit_is_dropped_while_streaming(server, tmp_path):
    server.routes["/endless.json"] = endless  # no Content-Length: only counting the bytes stops it
    settings = settings_for(tmp_path, remote_max_bytes=2500)
    start = time.perf_counter()
    inputs = resolve_inputs(settings, [server.url("/endless.json"), server.url("/zoo.yaml"), server.url("/shop.yaml")])
    assert time.perf_counter() - start < 2
    reasons = {s.file: s.reason for s in inputs.skipped}
    assert reasons == {server.url("/endless.json"): "larger than 2500 bytes (SPECRAG_REMOTE_MAX_BYTES)",
                       server.url("/zoo.yaml"): "larger than 2500 bytes (SPECRAG_REMOTE_MAX_BYTES; Content-Length 2891)"}
    assert [p.name for p in inputs.paths] == [f"127.0.0.1-{server.port}_shop.yaml"]  # 2373 bytes


def test_a_server_slower_than_the_timeout_is_skipped(server, tmp_path):
    server.routes["/slow.json"] = slow(2.0)
    settings = settings_for(tmp_path, remote_timeout_s=0.3)
    start = time.perf_counter()
    inputs = resolve_inputs(settings, [server.url("/slow.json"), server.url("/zoo.yaml")])
    assert time.perf_counter() - start < 1.5
    assert [(s.file, s.reason) for s in inputs.skipped] == [
        (server.url("/slow.json"), "timed out after 0.3 s (SPECRAG_REMOTE_TIMEOUT_S)")]
    assert len(inputs.paths) == 1


def test_a_refused_connection_is_one_line(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    [skipped] = resolve_inputs(settings_for(tmp_path), [f"http://127.0.0.1:{port}/spec.json"]).skipped
    assert skipped.reason.startswith("cannot connect: ") and "\n" not in skipped.reason


ENTRY = """\
openapi: 3.0.3
info: {title: Multi, version: "1"}
paths:
  /things:
    get:
      x-codeSamples: [{$ref: "examples/get.yaml"}]
      responses:
        "200":
          description: a thing
          content:
            application/json:
              schema: {$ref: "models/thing.yaml#/Thing"}
components:
  schemas:
    Outside: {$ref: "../secret.yaml#/Secret"}
    Elsewhere: {$ref: "http://127.0.0.1:9/x.yaml"}
    Hidden: {$ref: ".private/p.yaml"}
"""
THING = """\
Thing:
  type: object
  properties:
    owner: {$ref: "common.yaml#/Owner"}
Unused: {$ref: "unused.yaml"}
"""
COMMON = "Owner: {type: object, properties: {name: {type: string}}}\n"


def test_the_relative_refs_the_loader_follows_are_fetched_and_nothing_outside_the_folder(server, tmp_path):
    for rel, text in {"api/v1/spec.yaml": ENTRY, "api/v1/models/thing.yaml": THING, "api/v1/models/common.yaml": COMMON,
                      "api/secret.yaml": "Secret: {type: string}\n", "api/v1/.private/p.yaml": "{}\n",
                      "api/v1/models/unused.yaml": "{}\n", "api/v1/examples/get.yaml": "{}\n"}.items():
        (server.folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (server.folder / rel).write_text(text)
    settings = settings_for(tmp_path)
    inputs = resolve_inputs(settings, [server.url("/api/v1/spec.yaml")])
    [path] = inputs.paths
    assert sorted(p.relative_to(path.parent).as_posix() for p in path.parent.rglob("*") if p.is_file()) == [
        f"127.0.0.1-{server.port}_api_v1_spec.yaml", "models/common.yaml", "models/thing.yaml"]
    assert server.seen("/api/secret.yaml") == [] and server.seen("/api/v1/.private/p.yaml") == []
    # as the loader does: only what the pointed-at part references, and no x- extension (code samples)
    assert server.seen("/api/v1/models/unused.yaml") == [] and server.seen("/api/v1/examples/get.yaml") == []
    api = ingest(path, settings)
    assert api.refs.unresolved_by_kind == {"hidden_file": 1}  # as for a local spec
    assert api.refs.external == {"escapes_root": 1, "url": 1}
    assert api.api.files == ["models/common.yaml", "models/thing.yaml"]
    again = resolve_inputs(settings, [server.url("/api/v1/spec.yaml")])
    assert again.fetched["not_modified"] == 1  # every document answered 304
    assert len(server.seen("/api/v1/models/common.yaml")) == 2
    assert server.seen("/api/v1/models/common.yaml")[1]["If-None-Match"]


def test_a_spec_with_more_documents_than_allowed_is_refused(server, tmp_path):
    (server.folder / "api").mkdir()
    (server.folder / "api/spec.yaml").write_text(ENTRY)
    (server.folder / "api/models").mkdir()
    (server.folder / "api/models/thing.yaml").write_text(THING)
    (server.folder / "api/models/common.yaml").write_text(COMMON)
    inputs = resolve_inputs(settings_for(tmp_path, remote_max_documents=2), [server.url("/api/spec.yaml")])
    assert [s.reason for s in inputs.skipped] == ["more than 2 documents (SPECRAG_REMOTE_MAX_DOCUMENTS)"]


def test_a_referenced_document_that_fails_names_itself(server, tmp_path):
    (server.folder / "api").mkdir()
    (server.folder / "api/spec.yaml").write_text(ENTRY)
    inputs = resolve_inputs(settings_for(tmp_path), [server.url("/api/spec.yaml")])
    assert [s.reason for s in inputs.skipped] == [
        f"referenced document {server.url('/api/models/thing.yaml')}: HTTP 404 Not Found"]


def test_a_referenced_document_may_not_redirect_to_another_origin(server, tmp_path):
    (server.folder / "api").mkdir()
    (server.folder / "api/spec.yaml").write_text(ENTRY)
    server.routes["/api/models/thing.yaml"] = redirect("http://localhost:9/thing.yaml")
    inputs = resolve_inputs(settings_for(tmp_path), [server.url("/api/spec.yaml")])
    assert [s.reason for s in inputs.skipped] == [
        f"referenced document {server.url('/api/models/thing.yaml')}: redirect to another origin "
        "(http://localhost:9/thing.yaml)"]


def test_the_suffix_comes_from_the_media_type_when_the_url_has_none(server, tmp_path):
    body = (FIXTURES / "zoo_oas3.yaml").read_bytes()
    server.routes["/openapi"] = lambda h: send(h, 200, body, {"Content-Type": "application/x-yaml; charset=utf-8"})
    server.routes["/v2/docs"] = lambda h: send(h, 200, b'{"swagger": "2.0", "info": {"title": "T", "version": "1"}, '
                                                       b'"paths": {}}', {"Content-Type": "text/plain"})
    settings = settings_for(tmp_path)
    inputs = resolve_inputs(settings, [server.url("/openapi"), server.url("/v2/docs")])
    assert sorted(p.name for p in inputs.paths) == [f"127.0.0.1-{server.port}_openapi.yaml",
                                                    f"127.0.0.1-{server.port}_v2_docs.json"]


@pytest.mark.parametrize(("url", "stem"), [
    ("https://api.example.com/v1/openapi.json", "api.example.com_v1_openapi"),
    ("https://www.example.com:8443/a%20b/spec.YAML?x=1", "example.com-8443_a-b_spec"),
    ("http://h/../../etc/passwd", "h_.._.._etc_passwd"),
    ("http://h/", "h"),
    ("http://[::1]:80/x.yml", "1-80_x"),
    ("http://h/.hidden.json", "h_.hidden"),
    ("http://h/a:b/c", "h_a-b_c"),
])
def test_stems_are_safe_file_names(url, stem):
    assert url_stem(url) == stem
    assert "/" not in stem and ":" not in stem and not stem.startswith(".")


def test_colliding_stems_are_parted_deterministically():
    urls = ["http://h/spec.json?v=2", "http://h/spec.json?v=1", "http://h/spec.yaml"]
    stems = assign_stems(urls)
    assert stems == assign_stems(list(reversed(urls)))
    assert stems["http://h/spec.json?v=1"] == "h_spec"
    assert len(set(stems.values())) == 3
    assert all(s.startswith("h_spec-") and len(s) == len("h_spec-") + 8 for u, s in stems.items() if u.endswith(("2", "yaml")))


def test_a_url_is_checked_before_anything_is_written(tmp_path):
    settings = settings_for(tmp_path)
    with RemoteFetcher.from_settings(settings) as fetcher:
        with pytest.raises(FetchError, match="has no host"):
            fetcher.fetch("http:///spec.json", "x")
        with pytest.raises(FetchError, match="invalid port"):
            fetcher.fetch("http://h:99999/spec.json", "x")
    assert not (settings.tenant_dir / "remote").exists()


def test_an_altered_record_never_names_files_outside_its_folder(server, tmp_path):
    settings = settings_for(tmp_path)
    [path] = resolve_inputs(settings, [server.url("/zoo.yaml")]).paths
    victim = tmp_path / "victim.yaml"
    victim.write_text("kept")
    record_file = path.parent.with_suffix(".json")  # <data dir>/remote/<hash>.json
    record = json.loads(record_file.read_text())
    record["documents"]["../../../victim.yaml"] = next(iter(record["documents"].values()))
    record_file.write_text(json.dumps(record))
    again = resolve_inputs(settings, [server.url("/zoo.yaml")])
    assert victim.read_text() == "kept" and again.fetched["downloaded"] == 1  # the record was ignored
    assert "If-None-Match" not in server.seen("/zoo.yaml")[1]
