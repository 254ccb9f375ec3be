"""Where a corpus's index lives, and bringing it up to date.

Each corpus (its set of input paths) gets its own folder under ``data_dir/corpora/`` holding
Chroma, BM25, the manifest and the catalogs, so the demo corpus and a fleet never evict each
other; ``data_dir/current`` names the last corpus indexed, which queries use by default.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from pipeline.catalog.io import CatalogWriteReport, write_catalogs
from pipeline.errors import IndexNotBuiltError
from pipeline.settings import Settings
from pipeline.specs.ingest import CorpusIngest, ingest_paths
from pipeline.specs.models import IngestReport

CURRENT = "current"


def corpus_key(paths: list[Path]) -> str:
    resolved = sorted(str(p.resolve()) for p in paths)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", "+".join(Path(p).name for p in resolved))[:40].strip("-") or "corpus"
    return f"{slug}-{hashlib.sha256(chr(0).join(resolved).encode()).hexdigest()[:10]}"


def corpus_settings(settings: Settings, paths: list[Path] | None = None) -> Settings:
    """Settings whose data_dir is the folder of ``paths``' index (or of the last indexed corpus)."""
    if paths:
        key = corpus_key(paths)
    else:
        current = settings.data_dir / CURRENT
        if not current.exists():
            raise IndexNotBuiltError(f"no index in {settings.data_dir}: run `specrag index PATH...` "
                                     "or pass --corpus PATH")
        key = current.read_text().strip()
    return settings.model_copy(update={"data_dir": settings.data_dir / "corpora" / key})


class IndexRun(BaseModel):
    ingest: IngestReport
    catalogs: CatalogWriteReport
    index: dict
    seconds: float


def update_index(settings: Settings, paths: list[Path], progress: bool = True, store=None) -> tuple[Settings, IndexRun]:
    """Ingest ``paths``, rewrite changed catalogs, and bring the corpus's index up to date.

    ``progress`` bars are drawn only when stderr is a terminal: never ``\r`` frames in a log."""
    from pipeline.index.builder import IndexBuilder
    from pipeline.index.store import ChunkStore

    progress = progress and sys.stderr.isatty()
    start = time.perf_counter()
    local = corpus_settings(settings, paths)
    ingest: CorpusIngest = ingest_paths(paths, local.chunk_max_tokens, progress=progress)
    catalogs = write_catalogs(ingest.apis, local.catalogs_path)
    store = store or ChunkStore.open(local)
    report = IndexBuilder(store, local).build(ingest.apis, progress=progress)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / CURRENT).write_text(local.data_dir.name)
    return local, IndexRun(ingest=ingest.report, catalogs=catalogs, index=report.model_dump(),
                           seconds=round(time.perf_counter() - start, 2))
