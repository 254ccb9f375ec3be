"""Catalogs snapshots: content-named blobs and a listing; a commit writes only what changed."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from specrag.catalog import snapshot as snap
from specrag.catalog.io import load_api_graph, load_api_index, load_catalog, served_files, write_catalogs
from specrag.catalog.snapshot import (
    BLOB_DIR,
    CatalogSnapshot,
    drop_damaged_blobs,
    remove_stale_snapshots,
    write_snapshot,
)
from specrag.core.errors import IndexDamagedError
from specrag.specs.ingest import ingest_paths

from .specs import small_spec as _spec

PAST = 1_000_000  # an mtime no write in the test can have


def _deletes(resource: str) -> str:
    return f"""\
  /{resource}/{{id}}:
    delete:
      operationId: delete_{resource}
      responses:
        "204": {{description: gone}}
"""


class Corpus:
    """Specs, their catalogs folder and a ``local`` folder of snapshots, committed as an index run does."""

    def __init__(self, tmp_path: Path):
        self.specs, self.catalogs, self.local = tmp_path / "specs", tmp_path / "catalogs", tmp_path / "local"
        self.specs.mkdir()
        for name, resource in (("alpha", "apples"), ("beta", "bananas"), ("gamma", "grapes")):
            (self.specs / f"{name}.yaml").write_text(_spec(name.title(), resource))
        self.apis = {a.api.file_id: a for a in ingest_paths([self.specs], 1500, workers=1).apis}
        write_catalogs(list(self.apis.values()), self.catalogs, kept={})
        self.live: str | None = None
        self.commit()

    def change(self, fid: str, spec: str) -> None:
        """An index run that re-read one changed spec and kept the others."""
        (self.specs / f"{fid}.yaml").write_text(spec)
        changed = [a for a in ingest_paths([self.specs], 1500, workers=1).apis if a.api.file_id == fid]
        self.apis[fid] = changed[0]
        write_catalogs(changed, self.catalogs, kept={f: a.api for f, a in self.apis.items() if f != fid})

    def commit(self) -> str:
        """Write the snapshot, 'switch the manifest' to it, then remove what no kept listing names."""
        replaced = self.live
        self.live = write_snapshot(served_files(self.catalogs), self.local, replaced)
        remove_stale_snapshots(self.local, self.live, replaced)
        return self.live

    def blobs(self) -> dict[str, int]:
        return {p.name: p.stat().st_mtime_ns for p in (self.local / BLOB_DIR).iterdir()}

    def entries(self, listing: str | None = None) -> dict[str, list]:
        return json.loads((self.local / (listing or self.live)).read_bytes())["files"]


@pytest.fixture
def corpus(tmp_path) -> Corpus:
    return Corpus(tmp_path)


def _age(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(PAST, PAST))


def _hashed(monkeypatch) -> list[str]:
    """The working files a commit reads (and hashes) from now on."""
    read: list[str] = []
    real = snap._store
    monkeypatch.setattr(snap, "_store", lambda root, name, path: read.append(name) or real(root, name, path))
    return read


def test_snapshot_serves_the_catalogs_files(corpus):
    reader = CatalogSnapshot(corpus.local / corpus.live)
    assert [e.file_id for e in load_catalog(reader).apis] == ["alpha", "beta", "gamma"]
    assert load_api_index(reader, "beta") == load_api_index(corpus.catalogs, "beta")
    assert load_api_graph(reader, "beta") == load_api_graph(corpus.catalogs, "beta") is not None
    assert reader.read("indexes/nope.json") is None and load_api_graph(reader, "nope") is None
    entries = corpus.entries()
    assert sorted(entries) == ["catalog.json", *(f"graphs/{f}.json.gz" for f in ("alpha", "beta", "gamma")),
                               *(f"indexes/{f}.json" for f in ("alpha", "beta", "gamma"))]
    # JSON is zlib'd in its blob; a gzip'd graph is stored as it is
    assert entries["catalog.json"][0].endswith(".z") and not entries["graphs/beta.json.gz"][0].endswith(".z")
    assert (corpus.local / BLOB_DIR / entries["graphs/beta.json.gz"][0]).read_bytes() == \
        (corpus.catalogs / "graphs" / "beta.json.gz").read_bytes()


def test_a_commit_after_one_api_changed_writes_only_its_blobs_and_a_listing(corpus, monkeypatch):
    first = corpus.live
    _age(corpus.local)
    corpus.change("beta", _spec("Beta", "bananas", _deletes("bananas")).replace("for bananas.", "with deletes."))
    before, hashed = corpus.blobs(), _hashed(monkeypatch)
    second = corpus.commit()
    assert second != first
    # only the changed files were read: beta's index and graph, and the catalog (a new entry)
    assert sorted(hashed) == ["catalog.json", "graphs/beta.json.gz", "indexes/beta.json"]
    after = corpus.blobs()
    new = sorted(set(after) - set(before))
    old, now = corpus.entries(first), corpus.entries(second)
    assert new == sorted(now[n][0] for n in hashed)
    assert all(after[b] == PAST for b in before)  # no other blob was rewritten
    assert {n for n in now if now[n] != old[n]} == set(hashed)
    # the listing it replaced stays, with its blobs (a reader may not have swapped yet)
    assert sorted(p.name for p in corpus.local.glob("catalogs-*")) == sorted([first, second])
    assert set(before) <= set(after)

    # one more commit: the first listing goes, and the blobs only it named
    corpus.change("gamma", _spec("Gamma", "grapes", _deletes("grapes")))
    third = corpus.commit()
    assert sorted(p.name for p in corpus.local.glob("catalogs-*")) == sorted([second, third])
    named = {e[0] for listing in (second, third) for e in corpus.entries(listing).values()}
    assert set(corpus.blobs()) == named
    assert old["indexes/beta.json"][0] not in named and old["indexes/alpha.json"][0] in named


def test_a_commit_with_nothing_changed_reads_nothing_and_rewrites_nothing(corpus, monkeypatch):
    _age(corpus.local)
    hashed = _hashed(monkeypatch)
    assert write_snapshot(served_files(corpus.catalogs), corpus.local, corpus.live) == corpus.live
    assert hashed == [] and all(t == PAST for t in corpus.blobs().values())
    assert (corpus.local / corpus.live).stat().st_mtime_ns == PAST
    os.utime(corpus.catalogs / "indexes" / "alpha.json", ns=(PAST, PAST))  # touched, same bytes: hashed, same blob
    assert write_snapshot(served_files(corpus.catalogs), corpus.local, corpus.live) == corpus.live
    assert hashed == ["indexes/alpha.json"] and all(t == PAST for t in corpus.blobs().values())


def test_a_reader_keeps_reading_its_listing_after_one_more_commit(corpus):
    reader = CatalogSnapshot(corpus.local / corpus.live)
    corpus.change("beta", _spec("Beta", "bananas", _deletes("bananas")))
    corpus.commit()
    assert [e.path for e in load_api_index(reader, "beta").endpoints] == ["/bananas"]  # its own generation
    assert [e.path for e in load_api_index(CatalogSnapshot(corpus.local / corpus.live), "beta").endpoints] == [
        "/bananas", "/bananas/{id}"]
    corpus.change("beta", _spec("Beta", "bananas", _deletes("berries")))
    corpus.commit()
    assert load_api_index(reader, "alpha") is not None  # still named by a kept listing
    with pytest.raises(IndexDamagedError) as err:  # two commits behind: the blob of its beta index is gone
        load_api_index(reader, "beta")
    assert "indexes/beta.json" in str(err.value) and "is missing" in str(err.value)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-5])


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("harm, needle", [
    (Path.unlink, "is missing"), (_truncate, "is truncated or overwritten"), (_flip, "fails its checksum")])
def test_a_damaged_blob_is_one_line_and_the_next_commit_writes_it_again(corpus, harm, needle):
    blob = corpus.local / BLOB_DIR / corpus.entries()["indexes/beta.json"][0]
    good = blob.read_bytes()
    harm(blob)
    reader = CatalogSnapshot(corpus.local / corpus.live)
    with pytest.raises(IndexDamagedError) as err:
        load_api_index(reader, "beta")
    message = str(err.value)
    assert len(message.splitlines()) == 1 and needle in message
    assert str(blob) in message and "indexes/beta.json" in message and "specrag index" in message
    assert load_api_index(reader, "alpha") is not None  # the intact ones still read
    assert drop_damaged_blobs(corpus.local, corpus.live) == ([] if harm is Path.unlink else [blob.name])
    assert corpus.commit() == reader.path.name and blob.read_bytes() == good
    assert load_api_index(reader, "beta") == load_api_index(corpus.catalogs, "beta")


def test_a_damaged_listing_is_damage_and_is_written_again(corpus):
    listing = corpus.local / corpus.live
    good = listing.read_bytes()
    listing.write_bytes(good[: len(good) // 2])
    with pytest.raises(IndexDamagedError, match="is unreadable"):
        CatalogSnapshot(listing)
    assert write_snapshot(served_files(corpus.catalogs), corpus.local, corpus.live) == listing.name
    assert listing.read_bytes() == good


def test_a_zip_snapshot_of_the_previous_version_still_serves_plain_graphs(corpus):
    """An index written before blobs: a zip of catalog.json, indexes/*.json and plain graphs/*.json."""
    legacy = corpus.local / "catalogs-0123456789abcdef0123.zip"
    graph = load_api_graph(corpus.catalogs, "beta")
    with zipfile.ZipFile(legacy, "w") as out:
        out.writestr("catalog.json", (corpus.catalogs / "catalog.json").read_bytes())
        out.writestr("indexes/beta.json", (corpus.catalogs / "indexes" / "beta.json").read_bytes())
        out.writestr("graphs/beta.json", graph.model_dump_json(indent=1))
    reader = CatalogSnapshot(legacy)
    assert load_catalog(reader).ids() == {"alpha", "beta", "gamma"}
    assert load_api_graph(reader, "beta") == graph and load_api_graph(reader, "alpha") is None
    # the first commit after it: a listing, with the zip kept one generation
    replaced = corpus.live
    assert write_snapshot(served_files(corpus.catalogs), corpus.local, legacy.name) == replaced
    remove_stale_snapshots(corpus.local, replaced, legacy.name)
    assert legacy.is_file()
    remove_stale_snapshots(corpus.local, replaced, None)
    assert not legacy.exists() and (corpus.local / replaced).is_file()
