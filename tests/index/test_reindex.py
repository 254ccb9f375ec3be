"""Change detection: an index run reads again only the specs whose files changed (the parses are
counted), settings that shape chunks rebuild what they affect, and every result equals a fresh
build of the same corpus."""

from __future__ import annotations

import gc
import multiprocessing
import os
import shutil
from pathlib import Path

import chromadb
import pytest
import specrag.index.workspace as workspace
import specrag.specs.ingest as ingest_module
from specrag.catalog.io import CATALOG_FILE, INDEX_DIR
from specrag.index import ChunkStore, IndexBuilder
from specrag.index.workspace import corpus_settings, update_index

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "specs"
QUERIES = ["create a new user", "delete a pet", "list the things", "weather forecast for a city", "order not found"]
SMALL = """\
openapi: 3.0.0
info: {{title: {title}, version: "1", description: "{title} service"}}
paths:
  /{res}:
    get:
      operationId: list_{res}
      summary: List all {res}
      responses:
        "200":
          description: ok
          content: {{application/json: {{schema: {{$ref: "#/components/schemas/{item}"}}}}}}
        "404": {{description: {res} not found}}
components:
  schemas:
    {item}: {{type: object, description: "one of the {res} with a long list of fields", properties: {props}}}
"""
MULTI = """\
openapi: 3.0.3
info: {title: Things, version: "1"}
paths:
  /things:
    get:
      $ref: ops/list_things.yaml
"""
LIST_THINGS = """\
operationId: listThings
summary: List the things
responses:
  "200":
    description: the things
    content: {application/json: {schema: {$ref: ../models/thing.yaml}}}
"""
THING = "type: object\nproperties:\n  id: {type: string}\n  colour: {type: string}\n"


def small(title: str, res: str, item: str, n_props: int = 3) -> str:
    props = "{" + ", ".join(f"field_{i}: {{type: string, description: the field {i} of {res}}}"
                            for i in range(n_props)) + "}"
    return SMALL.format(title=title, res=res, item=item, props=props)


@pytest.fixture
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    shutil.copytree(EXAMPLES, root)
    (root / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast"))
    (root / "orders.yaml").write_text(small("Orders", "orders", "Order"))
    multi = root / "things"
    (multi / "ops").mkdir(parents=True)
    (multi / "models").mkdir()
    (multi / "things.yaml").write_text(MULTI)
    (multi / "ops" / "list_things.yaml").write_text(LIST_THINGS)
    (multi / "models" / "thing.yaml").write_text(THING)
    age(root)
    return root


def age(root: Path) -> None:
    """Files written a while ago: a file changed within 2 s of a read is read again next time
    (its mtime cannot vouch for it), which is right but not what these tests count."""
    past = os.stat(root).st_mtime_ns - 60_000_000_000
    for path in root.rglob("*"):
        os.utime(path, ns=(past, past))


class Parses:
    """Names of the files ``ingest_spec`` reads, in whichever worker process reads them: each
    call appends a line to a file (workers are forked from this process, patch included)."""

    def __init__(self, log: Path):
        self.log = log

    def names(self) -> list[str]:
        return sorted(self.log.read_text().split()) if self.log.exists() else []

    def clear(self) -> None:
        self.log.unlink(missing_ok=True)


@pytest.fixture
def parses(monkeypatch, tmp_path) -> Parses:
    log = tmp_path / "parses.log"
    real = ingest_module.ingest_spec

    def counting(path, *args, **kwargs):
        with open(log, "a") as fh:  # O_APPEND: one whole line per write, whichever process
            fh.write(Path(path).name + "\n")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(ingest_module, "ingest_spec", counting)
    return Parses(log)


def _index(settings, corpus, model, **changes):
    settings = settings.model_copy(update=changes)
    store = ChunkStore.open(corpus_settings(settings, [corpus]), embed_model=model)
    local, run = update_index(settings, [corpus], progress=False, store=store)
    return store, run


def assert_same_as_fresh(settings, corpus, model, store, tmp_path, **changes):
    """A fresh build of the same corpus into another folder serves the same answers and catalogs."""
    fresh_settings = settings.model_copy(update={"data_dir": tmp_path / "fresh"})
    fresh, _ = _index(fresh_settings, corpus, model, **changes)
    assert store.complete_api_ids() == fresh.complete_api_ids()
    for fid in fresh.complete_api_ids():
        assert store.api_chunk_ids(fid) == fresh.api_chunk_ids(fid), fid
        assert store.get_chunks(fresh.api_chunk_ids(fid)) == fresh.get_chunks(fresh.api_chunk_ids(fid)), fid
    for query in QUERIES:
        for name in ("vector_search", "lexical_search"):
            ours = [(h.node.node_id, round(h.score, 5)) for h in getattr(store, name)(query, None, None, 10)]
            theirs = [(h.node.node_id, round(h.score, 5)) for h in getattr(fresh, name)(query, None, None, 10)]
            assert ours == theirs, (name, query)
    ours_dir, theirs_dir = store.settings.catalogs_path, fresh.settings.catalogs_path
    names = [CATALOG_FILE] + [f"{INDEX_DIR}/{p.name}" for p in sorted((theirs_dir / INDEX_DIR).iterdir())]
    assert sorted(p.name for p in (ours_dir / INDEX_DIR).iterdir()) == sorted(n.split("/")[-1] for n in names[1:])
    for name in names:
        assert (ours_dir / name).read_bytes() == (theirs_dir / name).read_bytes(), name
    fresh.close()


def test_one_changed_spec_is_the_only_one_parsed(settings, embed_model, corpus, parses, tmp_path):
    store, first = _index(settings, corpus, embed_model)
    assert sorted(Path(p).name for p in first.specs_parsed) == sorted(
        ["petstore_v2.json", "users_api.yaml", "weather.yaml", "orders.yaml", "things.yaml", "list_things.yaml",
         "thing.yaml"])
    assert parses.names() == sorted(Path(p).name for p in first.specs_parsed)  # the counter sees the workers
    (corpus / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast").replace("List all", "Show every"))
    parses.clear()
    store, run = _index(settings, corpus, embed_model)
    assert parses.names() == ["weather.yaml"] and [Path(p).name for p in run.specs_parsed] == ["weather.yaml"]
    assert run.index["apis_updated"] == ["weather"] and run.index["chunks_embedded"] == 1
    assert sorted(run.index["apis_unchanged"]) == ["orders", "petstore_v2", "things", "users_api"]
    assert run.ingest.specs_read == 5 and run.ingest.chunks == first.ingest.chunks
    assert [Path(p).name for p in run.catalogs.written] == ["weather.json"]
    assert_same_as_fresh(settings, corpus, embed_model, store, tmp_path)
    store.close()


def test_untouched_or_only_touched_files_are_not_parsed(settings, embed_model, corpus, parses):
    _index(settings, corpus, embed_model)[0].close()
    parses.clear()
    store, run = _index(settings, corpus, embed_model)
    assert parses.names() == [] and run.specs_parsed == [] and not run.index["local_written"]
    later = os.stat(corpus / "orders.yaml").st_mtime_ns + 5_000_000_000
    os.utime(corpus / "orders.yaml", ns=(later, later))  # same bytes, new mtime: hashed, not parsed
    store, run = _index(settings, corpus, embed_model)
    assert parses.names() == [] and run.index["apis_unchanged"] and not run.index["apis_updated"]
    store.close()


def test_a_changed_fragment_rereads_its_multi_file_spec(settings, embed_model, corpus, parses, tmp_path):
    _index(settings, corpus, embed_model)[0].close()
    (corpus / "things" / "models" / "thing.yaml").write_text(THING + "  weight: {type: number}\n")
    parses.clear()
    store, run = _index(settings, corpus, embed_model)
    assert parses.names() == ["thing.yaml", "things.yaml"]  # the fragment itself is sniffed: not a spec
    assert run.index["apis_updated"] == ["things"]
    assert "weight" in store.get_chunks(["things:models/thing.yaml#/"])["things:models/thing.yaml#/"].text
    assert_same_as_fresh(settings, corpus, embed_model, store, tmp_path)
    store.close()


def test_added_and_deleted_specs(settings, embed_model, corpus, parses, tmp_path):
    _index(settings, corpus, embed_model)[0].close()
    (corpus / "orders.yaml").unlink()
    (corpus / "invoices.yaml").write_text(small("Invoices", "invoices", "Invoice"))
    parses.clear()
    store, run = _index(settings, corpus, embed_model)
    assert parses.names() == ["invoices.yaml"]
    assert run.index["apis_added"] == ["invoices"] and run.index["apis_removed"] == ["orders"]
    assert "orders" not in store.complete_api_ids() and not (store.settings.catalogs_path / INDEX_DIR / "orders.json").exists()
    assert_same_as_fresh(settings, corpus, embed_model, store, tmp_path)
    store.close()


def test_chunk_max_tokens_change_rechunks_and_keeps_vectors(settings, embed_model, corpus, tmp_path):
    """The setting is part of the index: a change re-reads every spec, replaces the APIs whose
    chunks changed, embeds only the new texts, and answers as a fresh build with the new value."""
    _index(settings, corpus, embed_model)[0].close()
    (corpus / "orders.yaml").write_text(small("Orders", "orders", "Order", n_props=40))  # one big schema
    store, run = _index(settings, corpus, embed_model)
    assert not any(":part" in cid for cid in store.api_chunk_ids("orders"))
    store.close()
    store, run = _index(settings, corpus, embed_model, chunk_max_tokens=300)
    assert "300 max tokens" in run.index["full_rebuild"] and len(run.specs_parsed) == 7
    assert "orders" in run.index["apis_updated"] and "weather" in run.index["apis_unchanged"]
    assert any(":part" in cid for cid in store.api_chunk_ids("orders"))
    assert store.manifest.chunk_max_tokens == 300
    changed = sum(len(store.api_chunk_ids(f)) for f in run.index["apis_updated"])
    assert run.index["chunks_embedded"] + run.index["chunks_reused"] == changed  # only changed APIs' chunks
    assert run.index["chunks_reused"] > run.index["chunks_embedded"]  # texts seen before keep their vectors
    assert_same_as_fresh(settings, corpus, embed_model, store, tmp_path, chunk_max_tokens=300)
    store.close()


def test_an_index_run_pauses_the_collector_and_gives_it_back(settings, embed_model, corpus, monkeypatch):
    """The run's big long-lived heap is not walked by collections while it runs; whether it succeeds
    or fails, the caller gets the collector back as it had it."""
    seen, real = [], workspace.write_catalogs

    def recording(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(workspace, "write_catalogs", recording)
    assert gc.isenabled()
    _index(settings, corpus, embed_model)[0].close()
    assert seen == [False] and gc.isenabled()

    def failing(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(workspace, "write_catalogs", failing)
    (corpus / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast").replace("List all", "Show every"))
    with pytest.raises(OSError, match="disk full"):
        update_index(settings, [corpus], progress=False)
    assert gc.isenabled()


def test_a_reindex_checks_its_catalog_blobs_while_its_worker_reads_the_changed_spec(settings, embed_model, corpus,
                                                                                     monkeypatch):
    """The live listing's blobs are read and checked (~0.1-0.2 s at 4x) while the changed spec is
    read, and not again by the snapshot; a run that reads nothing checks them in the snapshot."""
    seen, real = [], IndexBuilder.check_catalog_blobs

    def recording(self):
        seen.append(len(multiprocessing.active_children()))
        real(self)

    monkeypatch.setattr(IndexBuilder, "check_catalog_blobs", recording)
    _index(settings, corpus, embed_model)[0].close()
    seen.clear()
    _index(settings, corpus, embed_model)[0].close()
    assert seen == [0]  # nothing read: checked by the snapshot
    seen.clear()
    (corpus / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast").replace("List all", "Show every"))
    store, run = _index(settings, corpus, embed_model)
    assert seen == [1]  # once, while the one worker was reading
    assert run.index["apis_updated"] == ["weather"] and run.index["chunks_embedded"] == 1
    store.close()


def test_a_reindex_that_deletes_rows_opens_chroma_once(settings, embed_model, corpus, monkeypatch):
    """The rows a changed spec no longer uses are deleted after the commit with the collection the
    run wrote in, still open: opening it again loads its whole vector index again."""
    _index(settings, corpus, embed_model)[0].close()
    opened, real = [], chromadb.PersistentClient

    def counting(*args, **kwargs):
        opened.append(kwargs.get("path"))
        return real(*args, **kwargs)

    monkeypatch.setattr(chromadb, "PersistentClient", counting)
    (corpus / "weather.yaml").write_text(small("Weather", "forecasts", "Forecast").replace("List all", "Show every"))
    store, run = _index(settings, corpus, embed_model)
    assert run.index["vectors_added"] == 1 and run.index["vectors_deleted"] == 1
    assert len(opened) == 1
    assert store.vector_search("show every forecast", None, None, 1)[0].node.node_id.startswith("weather:")
    store.close()
