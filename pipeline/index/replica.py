"""A replica's local index, pulled from what a build published on the Chroma server.

Pulling writes the same files a local build writes (catalogs, ``sources.json``, a local
generation, its catalogs snapshot (the same listing and blobs: catalog/snapshot.py) and the
manifest that commits them), from the server's files (each API's chunks among them) and vector
rows (found by the hashes of the chunks' embed texts): no spec is parsed and nothing is
embedded; only the BM25 postings are computed
here. The manifest is written last, so a pull killed midway leaves the previous generation
served. ``ReplicaSync`` bounds how often a serving process asks the server whether a newer
generation was published.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
import zlib

import numpy as np
from specrag.catalog.io import served_files
from specrag.catalog.snapshot import drop_damaged_blobs, remove_stale_snapshots, write_snapshot
from specrag.core.atomic import write_atomic
from specrag.core.errors import IndexDamagedError
from specrag.core.settings import Settings
from specrag.index.builder import digest_chunks
from specrag.index.collections import (
    PUBLISHED,
    check_owner,
    collection_name,
    files_name,
    served_corpora,
)
from specrag.index.lock import IndexLock
from specrag.index.manifest import MANIFEST_NAME, Manifest, load_manifest, save_manifest
from specrag.index.pack_writer import NewApi, write_generation
from specrag.index.publish import listing, local_path, read_chunks, read_files
from specrag.index.store import LOCAL_DIR, ChunkStore
from specrag.index.vector_reuse import embed_text, hash_hex, text_hash
from specrag.specs.models import Chunk

logger = logging.getLogger(__name__)
PAGE = 4096  # vectors per request while pulling


def published_generation(store: ChunkStore) -> int | None:
    """The generation published for the store's corpus, None when none is (or no collection)."""
    collection = _collection(store, collection_name(store.settings))
    value = (collection.metadata or {}).get(PUBLISHED) if collection is not None else None
    return value if isinstance(value, int) else None


def pull(store: ChunkStore) -> int | None:
    """Write the published generation into the store's data dir; the generation pulled, or None
    when none is published or a build is publishing right now (then nothing is written)."""
    settings = store.settings
    generation = published_generation(store)
    companion = _collection(store, files_name(settings)) if generation is not None else None
    try:
        listed = listing(store, companion) if companion is not None else None
        files = read_files(store, companion, generation, listed) if listed is not None else None
        if files is None:
            return None
        manifest = Manifest.model_validate_json(files.pop(MANIFEST_NAME))
        apis = _apis(store, manifest, companion, listed) if manifest.generation == generation else None
    except (ValueError, KeyError, TypeError, zlib.error) as exc:  # pydantic's ValidationError is a ValueError
        raise IndexDamagedError(f"the index published for {settings.storage.data_dir.name} on {settings.storage.chroma_host}:"
                                f"{settings.storage.chroma_port} is unreadable ({type(exc).__name__}); run `specrag "
                                "index` on its specs to publish it again") from None
    if apis is None:
        logger.info("generation %s of %s is being published: keeping the local index", generation,
                    settings.storage.data_dir.name)
        return None
    settings.storage.data_dir.mkdir(parents=True, exist_ok=True)
    replaced = _local_catalogs(settings)
    _write_files(settings, files)
    root = settings.storage.data_dir / LOCAL_DIR
    name = f"gen-{generation}"
    dim = next((a.vectors.shape[1] for a in apis if a.vectors is not None and a.vectors.ndim == 2), 0)
    write_generation(root / name, generation, None, [], apis, embed_model=manifest.embed_model, dim=dim)
    manifest.local_dir = name
    drop_damaged_blobs(root, replaced)
    manifest.catalogs = write_snapshot(served_files(settings.catalogs_path), root, replaced)
    save_manifest(settings.storage.data_dir, manifest)  # the commit: queries now read the pulled generation
    for old in root.glob("gen-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)
    remove_stale_snapshots(root, manifest.catalogs, replaced)
    logger.info("pulled generation %d of %s: %d APIs", generation, settings.storage.data_dir.name, len(apis))
    return generation


def sync_corpus(settings: Settings) -> bool:
    """Pull the corpus's published generation when the local one differs (or is missing), under
    the index lock; True when a new generation was written."""
    store = ChunkStore(settings, None)
    try:
        published = published_generation(store)
        if published is None or published == _local_generation(settings):
            return False
        settings.storage.data_dir.mkdir(parents=True, exist_ok=True)
        with IndexLock(settings.storage.data_dir, settings.storage.index_lock_timeout_s):
            return pull(store) is not None
    finally:
        store.close()


def server_corpora(settings: Settings) -> list[str]:
    """Corpus keys this tenant has published on the server that this data dir can serve: the ones
    it holds an index of, and the ones it pulls now. A corpus whose publication cannot be read
    (a build publishing it right now, or a writer killed mid-publish; damaged) and that this
    data dir lacks is logged and skipped, the skips counted in one warning: the intact corpora
    are served, and a replica started after the next complete publish serves that one too."""
    store = ChunkStore(settings, None)
    try:
        published = store.chroma_call(lambda: served_corpora(store.client, settings))
    finally:
        store.close()
    usable, skipped = [], []
    for key in published:
        corpus = settings.model_copy(update={"data_dir": settings.tenant_dir / "corpora" / key})
        if _local_generation(corpus) is None:
            try:
                pulled = sync_corpus(corpus)
            except IndexDamagedError as exc:
                skipped.append(f"{key} ({exc})")
                continue
            if not pulled and _local_generation(corpus) is None:
                skipped.append(f"{key} (its publication is incomplete: being published, or the writer was stopped "
                               "midway; the next complete publish brings it)")
                continue
        usable.append(key)
    if skipped:
        logger.warning("%d of %d corpora published on %s:%s skipped, not pulled: %s", len(skipped), len(published),
                       settings.storage.chroma_host, settings.storage.chroma_port, "; ".join(skipped))
    return usable


class ReplicaSync:
    """At most one check per ``interval_s`` (0: every request), by one thread at a time."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self._next = 0.0
        self._lock = threading.Lock()

    def claim(self) -> bool:
        """True when a check is due now; the caller then checks and calls ``done``."""
        if time.monotonic() < self._next or not self._lock.acquire(blocking=False):
            return False
        if time.monotonic() < self._next:
            self._lock.release()
            return False
        return True

    def done(self) -> None:
        self._next = time.monotonic() + self.interval_s
        self._lock.release()


def _local_catalogs(settings: Settings) -> str | None:
    """The catalogs listing the local manifest names (kept one more generation for its readers)."""
    try:
        manifest = load_manifest(settings.storage.data_dir)
    except Exception:  # noqa: BLE001 - a damaged local index is replaced by the pull
        return None
    return manifest.catalogs if manifest is not None else None


def _local_generation(settings: Settings) -> int | None:
    try:
        manifest = load_manifest(settings.storage.data_dir)
    except Exception:  # noqa: BLE001 - a damaged local index is replaced by the pull
        return None
    return manifest.generation if manifest is not None and manifest.local_dir else None


def _collection(store: ChunkStore, name: str):
    from chromadb.errors import NotFoundError

    try:
        collection = store.chroma_call(lambda: store.client.get_collection(name, embedding_function=None))
    except NotFoundError:
        return None
    check_owner(store.settings, name, collection.metadata)
    return collection


def _apis(store: ChunkStore, manifest: Manifest, companion, listed: dict[str, dict]) -> list[NewApi] | None:
    """Every complete API of ``manifest`` from its published chunks and the vector rows of their
    embed texts, or None when any API's chunks do not hash to its ``chunks_digest`` or a vector
    is missing (a build is changing them)."""
    published = read_chunks(store, companion, manifest, listed)
    if published is None:
        return None
    chunks_of: dict[str, list[Chunk]] = {}
    for fid in sorted(manifest.complete_ids()):
        entry = manifest.apis[fid]
        chunks = [Chunk.model_validate_json(line) for line in published.pop(fid)]
        if len(chunks) != entry.n_chunks or digest_chunks(chunks) != entry.chunks_digest:
            return None
        chunks_of[fid] = chunks
    hashes = {fid: [text_hash(embed_text(c)) for c in chunks] for fid, chunks in chunks_of.items()}
    vectors = _vectors(store, sorted({h for hs in hashes.values() for h in hs}))
    if vectors is None:
        return None
    return [NewApi(fid, manifest.apis[fid].content_hash, manifest.apis[fid].chunks_digest, chunks,
                   np.asarray([vectors[h] for h in hashes[fid]], dtype=np.float32) if chunks else None,
                   np.asarray(hashes[fid], dtype=np.uint64)) for fid, chunks in chunks_of.items()]


def _vectors(store: ChunkStore, hashes: list[int]) -> dict[int, list] | None:
    """Hash -> vector from the corpus's vector rows, or None when any is missing."""
    collection = _collection(store, collection_name(store.settings))
    if collection is None:
        return None
    found: dict[int, list] = {}
    for start in range(0, len(hashes), PAGE):
        ids = [hash_hex(h) for h in hashes[start:start + PAGE]]
        got = store.chroma_call(lambda: collection.get(ids=ids, include=["embeddings"]))
        found.update((int(cid, 16), vector) for cid, vector in zip(got["ids"], _list(got["embeddings"])))
    return found if len(found) == len(hashes) else None


def _write_files(settings: Settings, files: dict[str, bytes]) -> None:
    """Catalogs and sources as published; catalog files no longer published are removed."""
    wanted = set()
    for name, data in files.items():
        path = local_path(settings, name)
        if path is None:
            logger.warning("published file %r ignored: not a catalog or sources file", name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        wanted.add(path)
    root = settings.catalogs_path
    for path in root.rglob("*") if root.is_dir() else []:
        if path.is_file() and path not in wanted:
            path.unlink(missing_ok=True)


def _list(embeddings) -> list:
    return [] if embeddings is None else list(embeddings)
