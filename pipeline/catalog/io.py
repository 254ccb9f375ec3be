"""Catalog files: ``catalog.json`` and ``indexes/{file_id}.json``.

Output is deterministic (sorted keys and lists), and a file is written only when its bytes
change, so regenerating after one spec changed rewrites only that API's index and the catalog.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, Field

from pipeline.catalog.build import api_index, catalog_entry
from pipeline.catalog.models import ApiIndex, Catalog
from pipeline.errors import IndexNotBuiltError
from pipeline.graph.models import ApiGraph
from pipeline.specs.models import ApiChunks

CATALOG_FILE = "catalog.json"
INDEX_DIR = "indexes"
GRAPH_DIR = "graphs"  # the dependency graph of each API, beside its index: read on demand, never at start


class CatalogWriteReport(BaseModel):
    written: list[str] = Field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = Field(default_factory=list)


def _dump(model: BaseModel) -> bytes:
    return (json.dumps(model.model_dump(mode="json"), indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _write_if_changed(path: Path, data: bytes, report: CatalogWriteReport) -> None:
    if path.exists() and path.read_bytes() == data:
        report.unchanged += 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    report.written.append(str(path))


def write_catalogs(apis: list[ApiChunks], catalog_dir: Path) -> CatalogWriteReport:
    report = CatalogWriteReport()
    entries = sorted((catalog_entry(a) for a in apis), key=lambda e: e.file_id)
    body = json.dumps([e.model_dump(mode="json") for e in entries], sort_keys=True).encode()
    catalog = Catalog(version=hashlib.sha256(body).hexdigest()[:16], apis=entries)
    _write_if_changed(catalog_dir / CATALOG_FILE, _dump(catalog), report)
    keep, graphs = set(), set()
    for api in apis:
        path = catalog_dir / INDEX_DIR / f"{api.api.file_id}.json"
        keep.add(path.name)
        _write_if_changed(path, _dump(api_index(api)), report)
        if api.graph is not None:
            graphs.add(path.name)
            _write_if_changed(catalog_dir / GRAPH_DIR / path.name, _dump(api.graph), report)
    for folder, kept in ((INDEX_DIR, keep), (GRAPH_DIR, graphs)):
        for stale in sorted((catalog_dir / folder).glob("*.json")):
            if stale.name not in kept:
                stale.unlink()
                report.removed.append(str(stale))
    return report


def load_catalog(catalog_dir: Path) -> Catalog:
    path = catalog_dir / CATALOG_FILE
    if not path.exists():
        raise IndexNotBuiltError(f"no catalog at {path}; run `specrag index PATH...` (or `specrag ingest`) first")
    return Catalog.model_validate_json(path.read_bytes())


def load_api_index(catalog_dir: Path, file_id: str) -> ApiIndex | None:
    path = catalog_dir / INDEX_DIR / f"{file_id}.json"
    return ApiIndex.model_validate_json(path.read_bytes()) if path.exists() else None


def load_api_graph(catalog_dir: Path, file_id: str) -> ApiGraph | None:
    """The API's dependency graph; None when the index predates graphs or the API has none."""
    path = catalog_dir / GRAPH_DIR / f"{file_id}.json"
    return ApiGraph.model_validate_json(path.read_bytes()) if path.exists() else None


def load_api_indexes(catalog_dir: Path, catalog: Catalog) -> dict[str, ApiIndex]:
    """The detailed index of every catalog entry that has one."""
    return {e.file_id: idx for e in catalog.apis if (idx := load_api_index(catalog_dir, e.file_id))}
