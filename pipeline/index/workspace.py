"""Where a corpus's index lives, and bringing it up to date.

Each corpus (its set of input paths) gets its own folder under ``<tenant dir>/corpora/`` holding
Chroma, the local index, the manifest and the catalogs, so the demo corpus and a fleet never
evict each other; ``<tenant dir>/current`` names the last corpus indexed, which queries use by
default. The tenant dir is ``data_dir`` for the default tenant, ``data_dir/tenants/<tenant>`` else.
With a Chroma server, a build publishes the corpus there and a data dir new to the corpus starts
from what is published (pipeline/index/publish.py, replica.py).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import time
from pathlib import Path

from pydantic import BaseModel, Field
from specrag.catalog.io import CatalogWriteReport, load_catalog, write_catalogs
from specrag.core.errors import IndexDamagedError, IndexNotBuiltError
from specrag.core.settings import Settings
from specrag.index.builder import IndexBuilder
from specrag.index.catalog_vectors import catalog_vectors
from specrag.index.embeddings import embed_model_id
from specrag.index.lock import IndexLock
from specrag.index.manifest import load_manifest
from specrag.index.publish import publish
from specrag.index.replica import pull, server_corpora, sync_corpus
from specrag.index.store import ChunkStore
from specrag.specs.incremental import ingest_changed
from specrag.specs.ingest import no_usable_spec, require_spec_files
from specrag.specs.limits import SpecLimits
from specrag.specs.models import IngestReport
from specrag.specs.pool import gc_paused
from specrag.specs.sources import load_sources, save_sources

CURRENT = "current"


def corpus_key(paths: list[Path]) -> str:
    resolved = sorted(str(p.resolve()) for p in paths)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", "+".join(Path(p).name for p in resolved))[:40].strip("-") or "corpus"
    return f"{slug}-{hashlib.sha256(chr(0).join(resolved).encode()).hexdigest()[:10]}"


def corpus_settings(settings: Settings, paths: list[Path] | None = None) -> Settings:
    """Settings whose data_dir is the folder of ``paths``' index (or of the last indexed corpus)."""
    root = settings.tenant_dir
    if paths:
        key = corpus_key(paths)
    else:
        current = root / CURRENT
        if not current.exists():
            raise IndexNotBuiltError(f"no index in {root}: run `specrag index PATH...` "
                                     "or pass --corpus PATH")
        key = current.read_text().strip()
    return settings.model_copy(update={"data_dir": root / "corpora" / key})


def synced_corpus_settings(settings: Settings) -> Settings:
    """``corpus_settings(settings)`` for a query; with a Chroma server, the local index is first
    brought to the generation published there, and a data dir that never indexed anything
    uses the tenant's corpus on the server when it has exactly one."""
    if not settings.storage.chroma_host:
        return corpus_settings(settings)

    try:
        local = corpus_settings(settings)
    except IndexNotBuiltError:
        served = server_corpora(settings)
        if len(served) != 1:
            raise IndexNotBuiltError(
                f"no index in {settings.tenant_dir} and {len(served)} corpora published on the Chroma server at "
                f"{settings.storage.chroma_host}:{settings.storage.chroma_port}" + (f" ({', '.join(served)})" if served else "")
                + ": pass --corpus PATH") from None
        local = settings.model_copy(update={"data_dir": settings.tenant_dir / "corpora" / served[0]})
    sync_corpus(local)
    return local


class IndexRun(BaseModel):
    ingest: IngestReport
    catalogs: CatalogWriteReport
    index: dict
    specs_parsed: list[str] = Field(default_factory=list, description="files read in this run (the rest were unchanged)")
    seconds: float


def update_index(settings: Settings, paths: list[Path], progress: bool = True, store=None) -> tuple[Settings, IndexRun]:
    """Read the specs that changed, update their catalogs, and bring the corpus's index up to date.

    One run per index folder at a time (IndexLock); damage found on open is repaired. ``progress``
    bars are drawn only when stderr is a terminal: never ``\r`` frames in a log.

    Paths with no usable spec raise EmptyCorpusError before anything is written. A corpus folder
    this run made is removed again on any error (an interrupted run keeps it: the next run reuses
    what it embedded, and with no manifest yet no command sees it); ``current`` moves only when a
    run succeeds. So a failed run leaves the data dir as the next command would have found it."""
    require_spec_files(paths)  # a wrong path fails here: no folder made, no model loaded
    progress = progress and sys.stderr.isatty()
    start = time.perf_counter()
    local = corpus_settings(settings, paths)
    made = make_folders(local.storage.data_dir)
    # The opened index, the sources' records and the read chunks live for the whole run, beside the
    # millions of short-lived objects (JSON, models) it makes: collections at the default threshold
    # walked that heap again and again (measured at 4x: ~1.3 s of a one-spec re-index's ~8 s, six
    # full passes; a 100-spec cold build left ~2,000 cyclic objects to collect afterwards).
    with IndexLock(local.storage.data_dir, local.storage.index_lock_timeout_s), gc_paused():
        try:
            ingest, catalogs, report = _update_locked(local, paths, progress, store)
        except Exception:
            remove_made_folders(local.storage.data_dir, made)  # under the lock: no other run writes in it
            raise
    settings.tenant_dir.mkdir(parents=True, exist_ok=True)
    (settings.tenant_dir / CURRENT).write_text(local.storage.data_dir.name)
    return local, IndexRun(ingest=ingest.report, catalogs=catalogs, index=report.model_dump(),
                           specs_parsed=ingest.parsed, seconds=round(time.perf_counter() - start, 2))


def _update_locked(local: Settings, paths: list[Path], progress: bool, store):
    """``update_index``'s work under the index lock: (ingest, catalogs report, build report)."""
    if local.storage.chroma_host:
        _start_from_server(local)
    own = store is None
    if own:
        store = ChunkStore.open(local, repair=True, chroma_aside=True, defer_model=True)
    else:
        store.reload(repair=True)
    if store.embedder is not None and local.storage.chroma_host:
        store.chroma  # noqa: B018 - an unreachable Chroma server fails here, before any spec is read
    # (the embedded store is opened by the build when it has rows to write: ~0.9 s saved when none changed)
    try:
        return _ingest_and_build(local, paths, progress, store, own)
    finally:
        store.close_chroma()  # a Chroma process ends with the run, under the index lock


def _ingest_and_build(local: Settings, paths: list[Path], progress: bool, store: ChunkStore, own: bool):
    builder = IndexBuilder(store, local, release_model=own)
    ingest = ingest_changed(paths, local.ingest.chunk_max_tokens, load_sources(local.storage.data_dir), builder.reusable(),
                            limits=SpecLimits.from_settings(local), progress=progress, meanwhile=builder.check_catalog_blobs)
    if not ingest.apis and not ingest.kept:  # before a catalog or an index of nothing is written
        raise no_usable_spec(paths, ingest.report.specs_skipped, files_read=True)
    kept = {s.info.file_id: s.info for s in ingest.kept}
    catalogs = write_catalogs(ingest.apis, local.catalogs_path, kept=kept,
                              chunks_of=lambda fid: store.local.api_chunks(fid))
    _cache_catalog_vectors(local, store)  # before the build, which may let go of the model
    report = builder.build(ingest.apis, progress=progress, keep=set(kept))
    save_sources(local.storage.data_dir, ingest.state)
    publish(store)
    return ingest, catalogs, report


def make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; -> the folders this call made, outermost first.
    ``mkdir`` without ``exist_ok`` tells them apart from folders another run made meanwhile."""
    made = []
    for path in [*reversed(folder.parents), folder]:
        if path.is_dir():
            continue
        try:
            path.mkdir()
        except FileExistsError:
            continue  # made meanwhile by another run (or a file: the next mkdir says so)
        made.append(path)
    return made


def remove_made_folders(folder: Path, made: list[Path]) -> None:
    """Undo ``make_folders(folder)``: ``folder`` with what a failed run wrote in it, if this run
    made it; the parents it made only while empty (another corpus may have started in them)."""
    if folder in made:
        shutil.rmtree(folder, ignore_errors=True)
    for path in reversed(made):
        if path != folder:
            try:
                path.rmdir()
            except OSError:
                return


def _start_from_server(local: Settings) -> None:
    """A data dir without an index of this corpus starts from the generation published on the
    server (replicas share it): the build then only redoes what changed, and never drops the
    corpus's collection as if it were new."""
    try:
        if load_manifest(local.storage.data_dir) is not None:
            return
    except IndexDamagedError:
        return  # the build repairs it
    store = ChunkStore(local, None)
    try:
        pull(store)
    finally:
        store.close()


def _cache_catalog_vectors(local: Settings, store) -> None:
    """Embed changed catalog entries now, while the model is loaded, not in the first query
    (whatever the index's vectors: a build with another model rebuilds them next)."""
    if store.embedder is None:
        return
    catalog_vectors(load_catalog(local.catalogs_path), store.embedder, embed_model_id(store.embedder),
                    local.catalogs_path)
