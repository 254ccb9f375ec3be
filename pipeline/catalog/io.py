"""Catalog files: ``catalog.json``, ``indexes/{file_id}.json`` and ``graphs/{file_id}.json.gz``.

Output is deterministic (sorted keys and lists; graphs gzip'd with a zero mtime), and a file is
written only when its bytes change, so regenerating after one spec changed rewrites only that
API's index and graph and the catalog. The graphs are internal (read on demand by the query path)
and ~30x smaller compressed; the indexes are user-facing JSON and stay plain. ``graphs/*.json``
of an index written before is still read, and the next index run compresses it.
``catalog.state.json`` remembers each API's entry, spec hash and index file hash and stamp (size,
mtime_ns), so an index run that did not re-read a spec reuses its entry instead of rebuilding it
from its chunks, hashing its index file only when the stamp moved.
A served index reads them from its generation's snapshot (snapshot.py), the ``load_*`` functions
taking either: the folder is the builder's working copy.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import zlib
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Callable, NamedTuple

from pydantic import BaseModel, Field, TypeAdapter
from specrag.catalog.build import api_index, catalog_entry
from specrag.catalog.models import ApiIndex, Catalog, CatalogEntry
from specrag.catalog.snapshot import CatalogSnapshot
from specrag.core.atomic import write_atomic
from specrag.core.errors import IndexDamagedError, IndexNotBuiltError
from specrag.graph.models import ApiGraph
from specrag.specs.models import ApiChunks, ApiInfo, Chunk, RefStats

CATALOG_FILE = "catalog.json"
INDEX_DIR = "indexes"
GRAPH_DIR = "graphs"  # the dependency graph of each API, beside its index: read on demand, never at start
GRAPH_SUFFIX, LEGACY_GRAPH_SUFFIX = ".json.gz", ".json"  # gzip'd; plain JSON in indexes written before
GRAPH_MAX_BYTES = 256 << 20  # a graph that inflates past this is damage, not a graph (the fleet's largest: 5 MB)
STATE_FILE = "catalog.state.json"
INDEX_CACHE = 64  # parsed detailed indexes kept (a query reads those of the 2-3 APIs it selected)


class _ApiCatalogState(BaseModel):
    content_hash: str
    entry: CatalogEntry
    index_sha256: str
    index_stamp: tuple[int, int] | None = Field(None, description="(size, mtime_ns) of the index file when its hash "
                                                                  "was last checked: vouches for it while unchanged")


# one validation or dump for the fleet's entries, not one model call each (~0.15 s at 2,540 APIs)
_STATES = TypeAdapter(dict[str, _ApiCatalogState])
_ENTRIES = TypeAdapter(list[CatalogEntry])


class CatalogWriteReport(BaseModel):
    written: list[str] = Field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = Field(default_factory=list)


def _dump(model: BaseModel) -> bytes:
    """pydantic's own serializer: the field order is the model's, so the bytes are deterministic;
    ``json.dumps(indent=...)`` runs in pure Python and took ~10x longer on the fleet's graphs."""
    return model.model_dump_json(indent=1).encode() + b"\n"


def _write_if_changed(path: Path, data: bytes, report: CatalogWriteReport) -> None:
    if path.exists() and path.read_bytes() == data:
        report.unchanged += 1
        return
    write_atomic(path, data)
    report.written.append(str(path))


class RenderedApi(NamedTuple):
    """An API's index and graph files as bytes, and its catalog entry: a caller can render them
    as each API comes in (the CLI does, while workers read the next specs) and write them with
    the rest, so the files still change only once every spec is read."""

    index: bytes
    graph: bytes | None
    entry: CatalogEntry


def render_api(api: ApiChunks) -> RenderedApi:
    graph = None if api.graph is None else gzip.compress(_dump(api.graph), 6, mtime=0)
    return RenderedApi(_dump(api_index(api)), graph, catalog_entry(api))


def write_catalogs(apis: list[ApiChunks], catalog_dir: Path, kept: dict[str, ApiInfo] | None = None,
                   chunks_of: Callable[[str], list[Chunk]] | None = None,
                   rendered: Mapping[str, RenderedApi] | None = None) -> CatalogWriteReport:
    """Catalog and index files of ``apis`` and of ``kept`` (APIs not re-read: file_id -> ApiInfo),
    whose entry and index are reused when the state file vouches for them, else rebuilt from
    ``chunks_of(file_id)``. Incremental callers (``kept`` given, even empty) keep the state file.
    ``rendered``: files already rendered from ``apis``, by file_id (the others are rendered here)."""
    report = CatalogWriteReport()
    previous, state = _load_state(catalog_dir), {}
    legacy_graphs = {n for n in catalog_names(catalog_dir / GRAPH_DIR) if not n.endswith(GRAPH_SUFFIX)}
    for api in apis:
        files = (rendered or {}).get(api.api.file_id) or render_api(api)
        state[api.api.file_id] = _write_api(api, files, catalog_dir, report)
    for fid, info in sorted((kept or {}).items()):
        cached, path = previous.get(fid), catalog_dir / INDEX_DIR / f"{fid}.json"
        vouched = _vouched(path, cached) if cached is not None and cached.content_hash == info.content_hash else None
        if vouched is not None:
            state[fid] = vouched
            report.unchanged += 1
        elif chunks_of is None:
            raise ValueError(f"{fid}: no catalog state to reuse and no stored chunks to rebuild it from")
        else:
            api = ApiChunks(api=info, chunks=chunks_of(fid), refs=RefStats())
            state[fid] = _write_api(api, render_api(api), catalog_dir, report)
        if f"{fid}{LEGACY_GRAPH_SUFFIX}" in legacy_graphs:
            _compress_legacy_graph(catalog_dir, fid, report)
    entries = sorted((s.entry for s in state.values()), key=lambda e: e.file_id)
    body = json.dumps(_ENTRIES.dump_python(entries, mode="json"), sort_keys=True).encode()
    catalog = Catalog(version=hashlib.sha256(body).hexdigest()[:16], apis=entries)
    _write_if_changed(catalog_dir / CATALOG_FILE, _dump(catalog), report)
    keep = {INDEX_DIR: {f"{fid}.json" for fid in state},  # an unchanged API keeps its graph file as it is
            GRAPH_DIR: {f"{fid}{GRAPH_SUFFIX}" for fid in state}}  # (the plain one of an older index is compressed)
    for folder in (INDEX_DIR, GRAPH_DIR):
        for name in catalog_names(catalog_dir / folder):
            if name not in keep[folder]:
                stale = catalog_dir / folder / name
                stale.unlink()
                report.removed.append(str(stale))
    if kept is not None:
        data = json.dumps(_STATES.dump_python(dict(sorted(state.items())), mode="json"), sort_keys=True)
        _write_if_changed(catalog_dir / STATE_FILE, data.encode(), CatalogWriteReport())
    return report


def served_files(catalog_dir: Path) -> list[tuple[str, Path]]:
    """(name, path) of the files a served index reads (catalog, indexes, graphs), sorted: what a
    generation's snapshot holds; [] without a catalog."""
    if not (catalog_dir / CATALOG_FILE).is_file():
        return []
    files = [(CATALOG_FILE, catalog_dir / CATALOG_FILE)]
    for folder in (INDEX_DIR, GRAPH_DIR):
        files += [(f"{folder}/{n}", catalog_dir / folder / n) for n in catalog_names(catalog_dir / folder)]
    return files


def catalog_names(folder: Path) -> list[str]:
    """The index and graph files in ``folder`` (not hidden), sorted; none without the folder."""
    try:
        return sorted(n for n in os.listdir(folder) if n.endswith((GRAPH_SUFFIX, LEGACY_GRAPH_SUFFIX))
                      and not n.startswith("."))
    except FileNotFoundError:
        return []


def _write_api(api: ApiChunks, files: RenderedApi, catalog_dir: Path, report: CatalogWriteReport) -> _ApiCatalogState:
    path = catalog_dir / INDEX_DIR / f"{api.api.file_id}.json"
    _write_if_changed(path, files.index, report)
    if files.graph is not None:
        _write_if_changed(catalog_dir / GRAPH_DIR / f"{api.api.file_id}{GRAPH_SUFFIX}", files.graph, report)
    return _ApiCatalogState(content_hash=api.api.content_hash, entry=files.entry,
                            index_sha256=hashlib.sha256(files.index).hexdigest(), index_stamp=_stamp(path))


def _vouched(path: Path, cached: _ApiCatalogState) -> _ApiCatalogState | None:
    """``cached`` (with the file's stamp) when the index file is still the one it describes: by
    its stamp (a stat), else by its hash (read only when the stamp moved); None when it is not."""
    stamp = _stamp(path)
    if stamp is not None and stamp == cached.index_stamp:
        return cached
    if stamp is None or _sha256_of(path) != cached.index_sha256:
        return None
    return cached.model_copy(update={"index_stamp": stamp})


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _compress_legacy_graph(catalog_dir: Path, fid: str, report: CatalogWriteReport) -> None:
    """An index written before graphs were compressed: the kept API's plain graph (listed in its
    folder), gzip'd (the plain file is then removed as stale)."""
    plain = catalog_dir / GRAPH_DIR / f"{fid}{LEGACY_GRAPH_SUFFIX}"
    if plain.is_file() and not (catalog_dir / GRAPH_DIR / f"{fid}{GRAPH_SUFFIX}").is_file():
        _write_if_changed(plain.with_name(f"{fid}{GRAPH_SUFFIX}"), gzip.compress(plain.read_bytes(), 6, mtime=0), report)


def _load_state(catalog_dir: Path) -> dict[str, _ApiCatalogState]:
    try:
        return _STATES.validate_json((catalog_dir / STATE_FILE).read_bytes())
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return {}  # missing or damaged: every kept API is rebuilt from its chunks


def _sha256_of(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


CatalogSource = Path | CatalogSnapshot  # a catalogs folder, or one generation's snapshot (snapshot.py)


def load_catalog(catalogs: CatalogSource) -> Catalog:
    catalog = _load_optional(catalogs, CATALOG_FILE, Catalog)
    if catalog is None:
        raise IndexNotBuiltError(f"no catalog at {_where(catalogs, CATALOG_FILE)}; run `specrag index PATH...` "
                                 "(or `specrag ingest`) first")
    return catalog


def load_api_index(catalogs: CatalogSource, file_id: str) -> ApiIndex | None:
    return _load_optional(catalogs, f"{INDEX_DIR}/{file_id}.json", ApiIndex)


def load_api_graph(catalogs: CatalogSource, file_id: str) -> ApiGraph | None:
    """The API's dependency graph (gzip'd, or plain in an index written before); None when the
    index predates graphs or the API has none."""
    graph = _load_optional(catalogs, f"{GRAPH_DIR}/{file_id}{GRAPH_SUFFIX}", ApiGraph)
    return graph if graph is not None else _load_optional(catalogs, f"{GRAPH_DIR}/{file_id}{LEGACY_GRAPH_SUFFIX}", ApiGraph)


def _load_optional(catalogs: CatalogSource, name: str, model: type[BaseModel]):
    """The file as ``model``; None when it is absent; a damaged one is a one-line IndexDamagedError."""
    if isinstance(catalogs, CatalogSnapshot):
        data = catalogs.read(name)
    else:
        path = Path(catalogs) / name
        data = path.read_bytes() if path.exists() else None
    if data is None:
        return None
    try:
        if name.endswith(".gz"):
            data = _gunzip(data)
        return model.model_validate_json(data)
    except (ValueError, zlib.error, EOFError) as exc:
        raise IndexDamagedError(f"{_where(catalogs, name)} is truncated or invalid; run `specrag index` on the "
                                "same specs to repair it") from exc


def _gunzip(data: bytes) -> bytes:
    """gzip's bytes, bounded: a hostile file that inflates without end is damage, not a memory spike."""
    inflater = zlib.decompressobj(wbits=31)
    out = inflater.decompress(data, GRAPH_MAX_BYTES)
    if inflater.unconsumed_tail:
        raise ValueError(f"inflates past {GRAPH_MAX_BYTES} bytes")
    if not inflater.eof:
        raise ValueError("ends early")
    return out


def _where(catalogs: CatalogSource, name: str) -> str:
    return f"{catalogs}:{name}" if isinstance(catalogs, CatalogSnapshot) else str(Path(catalogs) / name)


class ApiIndexes(Mapping[str, ApiIndex]):
    """The detailed index of each catalog entry, read when first asked for and kept while recently used.

    A query needs the indexes of the few APIs it selected; parsed, the whole fleet's take ~45 MB of
    the serving process (16 MB of files), most of which no query reads. Reading one takes about a
    millisecond. Keys are the catalog's APIs, whether or not an index file exists (``get`` is None then).
    """

    def __init__(self, catalogs: CatalogSource, file_ids: list[str], cached: int = INDEX_CACHE):
        self._dir, self._ids = catalogs, list(file_ids)
        self._known = frozenset(self._ids)
        self._load = lru_cache(maxsize=cached)(self._read)

    def _read(self, file_id: str) -> ApiIndex | None:
        return load_api_index(self._dir, file_id)

    def __getitem__(self, file_id: str) -> ApiIndex:
        index = self._load(file_id) if file_id in self._known else None
        if index is None:
            raise KeyError(file_id)
        return index

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)


def load_api_indexes(catalogs: CatalogSource, catalog: Catalog) -> ApiIndexes:
    """The detailed index of every catalog entry that has one, each read on first use."""
    return ApiIndexes(catalogs, [e.file_id for e in catalog.apis])
