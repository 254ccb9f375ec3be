"""Catalog files: deterministic bytes, and regeneration that touches only what changed."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from specrag.catalog.io import (
    CATALOG_FILE,
    GRAPH_DIR,
    INDEX_DIR,
    STATE_FILE,
    ApiIndexes,
    load_api_graph,
    load_api_index,
    load_catalog,
    render_api,
    write_catalogs,
)
from specrag.core.errors import IndexDamagedError, IndexNotBuiltError
from specrag.specs.ingest import ingest_paths

from .specs import small_spec as _spec

EXTRA = """\
  /{r}/{{id}}:
    delete:
      operationId: delete_{r}
      responses:
        "204": {{description: gone}}
"""


@pytest.fixture
def specs(tmp_path) -> Path:
    folder = tmp_path / "specs"
    folder.mkdir()
    for name, resource in (("alpha", "apples"), ("beta", "bananas"), ("gamma", "grapes")):
        (folder / f"{name}.yaml").write_text(_spec(name.title(), resource))
    return folder


def _write(folder: Path, out: Path):
    return write_catalogs(ingest_paths([folder], 1500, workers=1).apis, out)


def _age_all(out: Path) -> None:
    """Push every mtime into the past so a rewrite is visible even within one clock tick."""
    for path in out.rglob("*.json*"):
        os.utime(path, (1_000_000, 1_000_000))


def test_output_is_deterministic(specs, tmp_path):
    first = _write(specs, tmp_path / "a")
    second = _write(specs, tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    names = ["alpha.json", "beta.json", "gamma.json"]
    assert [str(p) for p in files] == ["catalog.json", *(f"graphs/{n}.gz" for n in names), *(f"indexes/{n}" for n in names)]
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    assert len(first.written) == len(second.written) == 7
    again = _write(specs, tmp_path / "a")
    assert (again.written, again.unchanged, again.removed) == ([], 7, [])


def test_catalog_and_index_content(specs, tmp_path):
    out = tmp_path / "cat"
    _write(specs, out)
    catalog = load_catalog(out)
    assert [e.file_id for e in catalog.apis] == ["alpha", "beta", "gamma"]
    assert catalog.get("beta").description == "The Beta API for bananas."
    assert catalog.get("beta").domains == ["bananas"]
    assert len(catalog.version) == 16
    raw = json.loads((out / CATALOG_FILE).read_text())
    assert raw["apis"][0]["file_id"] == "alpha"
    index = load_api_index(out, "alpha")
    assert [e.path for e in index.endpoints] == ["/apples"]
    assert [(s.name, s.type.value, s.used_by) for s in index.schemas] == [("Item", "response", ["list_apples"])]
    assert load_api_index(out, "nope") is None


def test_api_indexes_are_read_on_first_use_and_only_the_recent_ones_kept(specs, tmp_path, monkeypatch):
    out = tmp_path / "cat"
    _write(specs, out)
    reads = []
    real = load_api_index
    monkeypatch.setattr("specrag.catalog.io.load_api_index", lambda d, fid: reads.append(fid) or real(d, fid))
    indexes = ApiIndexes(out, [e.file_id for e in load_catalog(out).apis], cached=2)
    assert reads == [] and list(indexes) == ["alpha", "beta", "gamma"] and len(indexes) == 3
    assert [e.path for e in indexes["beta"].endpoints] == ["/bananas"]
    assert indexes.get("beta") is indexes["beta"] and reads == ["beta"]  # kept once read
    indexes.get("alpha"), indexes.get("gamma")  # beta is now the least recently used of three
    assert indexes.get("beta") is not None and reads == ["beta", "alpha", "gamma", "beta"]
    assert indexes.get("nope") is None and "nope" not in indexes and reads[-1] == "beta"  # unknown: no file read
    (out / INDEX_DIR / "gamma.json").unlink()
    (out / INDEX_DIR / "alpha.json").unlink()
    assert indexes.get("gamma") is not None  # still kept: read before the file went
    assert indexes.get("alpha") is None  # dropped from the two kept, then read again: no file now


def test_regenerating_after_one_spec_changed_rewrites_only_it(specs, tmp_path):
    out = tmp_path / "cat"
    _write(specs, out)
    version = load_catalog(out).version
    _age_all(out)
    (specs / "beta.yaml").write_text(_spec("Beta", "bananas", EXTRA.format(r="bananas")).replace(
        "The Beta API for bananas.", "The Beta API, now with deletes."))
    report = _write(specs, out)
    assert sorted(Path(p).relative_to(out).as_posix() for p in report.written) == [
        "catalog.json", "graphs/beta.json.gz", "indexes/beta.json"]  # beta gained GET /bananas/{id}: a new consumer
    assert report.unchanged == 4 and report.removed == []
    mtimes = {p.relative_to(out).as_posix(): p.stat().st_mtime for p in out.rglob("*.json")}
    assert mtimes["indexes/alpha.json"] == mtimes["indexes/gamma.json"] == 1_000_000
    assert mtimes["indexes/beta.json"] > 1_000_000 and mtimes["catalog.json"] > 1_000_000
    assert load_catalog(out).version != version
    assert load_catalog(out).get("beta").description == "The Beta API, now with deletes."
    assert [e.path for e in load_api_index(out, "beta").endpoints] == ["/bananas", "/bananas/{id}"]


def test_a_change_outside_the_catalog_entry_rewrites_only_the_index(specs, tmp_path):
    out = tmp_path / "cat"
    _write(specs, out)
    _age_all(out)
    spec = (specs / "gamma.yaml").read_text()
    (specs / "gamma.yaml").write_text(spec.replace("operationId: list_grapes", "operationId: listGrapes"))
    report = _write(specs, out)
    assert [Path(p).relative_to(out).as_posix() for p in report.written] == ["indexes/gamma.json"]
    assert (out / CATALOG_FILE).stat().st_mtime == 1_000_000


def test_removed_spec_index_is_deleted(specs, tmp_path):
    out = tmp_path / "cat"
    _write(specs, out)
    (specs / "gamma.yaml").unlink()
    report = _write(specs, out)
    assert [Path(p).relative_to(out).as_posix() for p in report.removed] == ["indexes/gamma.json", "graphs/gamma.json.gz"]
    assert not (out / INDEX_DIR / "gamma.json").exists() and not (out / GRAPH_DIR / "gamma.json.gz").exists()
    assert load_catalog(out).ids() == {"alpha", "beta"}
    assert [Path(p).name for p in report.written] == [CATALOG_FILE]
    assert not list(out.rglob("*.tmp"))


def test_load_catalog_without_catalog_says_what_to_do(tmp_path):
    with pytest.raises(IndexNotBuiltError, match="specrag"):
        load_catalog(tmp_path)


def test_kept_apis_reuse_their_entries_without_chunks(specs, tmp_path):
    """An index run that re-read one spec passes the others as kept: same files as a full write."""
    apis = ingest_paths([specs], 1500, workers=1).apis
    full = tmp_path / "full"
    write_catalogs(apis, full, kept={})
    out = tmp_path / "out"
    write_catalogs(apis, out, kept={})
    (specs / "beta.yaml").write_text(_spec("Beta", "bananas", EXTRA.format(r="bananas")))
    changed = [a for a in ingest_paths([specs], 1500, workers=1).apis if a.api.file_id == "beta"]
    kept = {a.api.file_id: a.api for a in apis if a.api.file_id != "beta"}

    def no_chunks(fid):
        raise AssertionError(f"{fid} rebuilt from chunks although its state was valid")

    report = write_catalogs(changed, out, kept=kept, chunks_of=no_chunks)
    # its catalog entry is the same; its index and its dependency graph are rewritten
    assert sorted(str(Path(p).relative_to(out)) for p in report.written) == [f"{GRAPH_DIR}/beta.json.gz",
                                                                              f"{INDEX_DIR}/beta.json"]
    write_catalogs(changed + [a for a in apis if a.api.file_id != "beta"], full, kept={})
    for name in (CATALOG_FILE, f"{INDEX_DIR}/alpha.json", f"{INDEX_DIR}/beta.json", f"{GRAPH_DIR}/alpha.json.gz",
                 f"{GRAPH_DIR}/beta.json.gz"):
        assert (out / name).read_bytes() == (full / name).read_bytes(), name
    assert _unstamped(out / STATE_FILE) == _unstamped(full / STATE_FILE)  # the stamps are of each folder's files


def _unstamped(state: Path) -> dict:
    return {fid: {k: v for k, v in s.items() if k != "index_stamp"} for fid, s in json.loads(state.read_bytes()).items()}


def _hashed(monkeypatch) -> list[str]:
    """The index files ``write_catalogs`` reads to hash them from now on."""
    from specrag.catalog import io

    read: list[str] = []
    real = io._sha256_of
    monkeypatch.setattr(io, "_sha256_of", lambda path: read.append(Path(path).name) or real(path))
    return read


def test_kept_index_files_are_hashed_only_when_their_stamp_moved(specs, tmp_path, monkeypatch):
    apis = {a.api.file_id: a for a in ingest_paths([specs], 1500, workers=1).apis}
    out = tmp_path / "out"
    write_catalogs(list(apis.values()), out, kept={})
    kept = {f: a.api for f, a in apis.items()}

    def no_chunks(fid):
        raise AssertionError(f"{fid} rebuilt from chunks although its state was valid")

    hashed = _hashed(monkeypatch)
    report = write_catalogs([], out, kept=kept, chunks_of=no_chunks)
    assert hashed == [] and report.written == [] and report.unchanged == 4  # 3 APIs vouched by a stat, the catalog
    os.utime(out / INDEX_DIR / "beta.json", ns=(10**15, 10**15))  # touched, same bytes: read once, then vouched
    write_catalogs([], out, kept=kept, chunks_of=no_chunks)
    assert hashed == ["beta.json"]
    write_catalogs([], out, kept=kept, chunks_of=no_chunks)
    assert hashed == ["beta.json"]
    path = out / INDEX_DIR / "gamma.json"
    data = path.read_bytes()
    path.write_bytes(data.replace(b"grapes", b"grapez"))  # same size, new mtime: hashed, and rebuilt
    os.utime(path, ns=(2 * 10**15, 2 * 10**15))  # (a mtime apart from the last one even on a coarse clock)
    report = write_catalogs([], out, kept=kept, chunks_of=lambda fid: apis[fid].chunks)
    assert hashed == ["beta.json", "gamma.json"] and path.read_bytes() == data
    assert [Path(p).name for p in report.written] == ["gamma.json"]


def test_an_index_written_before_graphs_were_compressed(specs, tmp_path):
    """Plain ``graphs/*.json`` (the previous version's) are read, and the next index run gzips them."""
    apis = {a.api.file_id: a for a in ingest_paths([specs], 1500, workers=1).apis}
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    write_catalogs(list(apis.values()), out, kept={})
    write_catalogs(list(apis.values()), fresh, kept={})
    for gz in sorted((out / GRAPH_DIR).iterdir()):
        gz.with_name(gz.name.removesuffix(".gz")).write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()
    assert load_api_graph(out, "beta") == load_api_graph(fresh, "beta") is not None
    report = write_catalogs([], out, kept={f: a.api for f, a in apis.items()}, chunks_of=lambda fid: [])
    assert sorted(p.name for p in (out / GRAPH_DIR).iterdir()) == ["alpha.json.gz", "beta.json.gz", "gamma.json.gz"]
    assert all((out / GRAPH_DIR / n).read_bytes() == (fresh / GRAPH_DIR / n).read_bytes()
               for n in ("alpha.json.gz", "beta.json.gz", "gamma.json.gz"))
    assert sorted(Path(p).name for p in report.removed) == ["alpha.json", "beta.json", "gamma.json"]


def test_a_damaged_graph_is_a_one_line_error(specs, tmp_path):
    out = tmp_path / "out"
    _write(specs, out)
    graph = out / GRAPH_DIR / "beta.json.gz"
    graph.write_bytes(graph.read_bytes()[:-12])
    with pytest.raises(IndexDamagedError, match=r"beta\.json\.gz is truncated or invalid; run `specrag index`"):
        load_api_graph(out, "beta")


def test_kept_api_with_a_damaged_index_file_is_rebuilt_from_chunks(specs, tmp_path):
    apis = {a.api.file_id: a for a in ingest_paths([specs], 1500, workers=1).apis}
    out = tmp_path / "out"
    write_catalogs(list(apis.values()), out, kept={})
    good = (out / INDEX_DIR / "gamma.json").read_bytes()
    (out / INDEX_DIR / "gamma.json").write_bytes(good[:20])
    (out / STATE_FILE).write_text("{", encoding="utf-8")  # a damaged state only costs a rebuild
    asked = []
    report = write_catalogs([], out, kept={f: a.api for f, a in apis.items()},
                            chunks_of=lambda fid: asked.append(fid) or apis[fid].chunks)
    assert sorted(asked) == ["alpha", "beta", "gamma"] and (out / INDEX_DIR / "gamma.json").read_bytes() == good
    assert [Path(p).name for p in report.written] == ["gamma.json"]


def test_truncated_catalog_is_a_one_line_error(specs, tmp_path):
    out = tmp_path / "out"
    _write(specs, out)
    (out / CATALOG_FILE).write_bytes((out / CATALOG_FILE).read_bytes()[:30])
    with pytest.raises(IndexDamagedError, match="catalog.json is truncated or invalid"):
        load_catalog(out)


def test_files_rendered_as_apis_come_in_are_the_files_written_after(specs, tmp_path):
    """The CLI renders each API's files while the workers read on: the same bytes, one render each."""
    (specs / "sub").mkdir()
    (specs / "sub" / "beta.yaml").write_text(_spec("Other Beta", "berries"))  # same file_id: skipped
    rendered = {}
    apis = ingest_paths([specs], 1500, workers=1,
                        on_api=lambda api: rendered.setdefault(api.api.file_id, []).append(render_api(api))).apis
    assert sorted(rendered) == ["alpha", "beta", "gamma"] and all(len(r) == 1 for r in rendered.values())
    write_catalogs(apis, tmp_path / "after")
    write_catalogs(apis, tmp_path / "during", rendered={fid: r[0] for fid, r in rendered.items()})
    after = sorted(p.relative_to(tmp_path / "after") for p in (tmp_path / "after").rglob("*.json*"))
    assert after == sorted(p.relative_to(tmp_path / "during") for p in (tmp_path / "during").rglob("*.json*"))
    assert len(after) == 7 and all((tmp_path / "after" / p).read_bytes() == (tmp_path / "during" / p).read_bytes()
                                   for p in after)
