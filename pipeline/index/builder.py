"""Incremental index builds that survive being killed at any point.

The index mirrors the corpus it was last built from: a spec with an unchanged content hash is
skipped, a changed one has its chunks replaced, a missing one is removed, and a new embedding
model or chunker version rebuilds everything. Each API is marked pending in the manifest before
its chunks change and complete after, so queries never see a half-written API and the next
build redoes pending ones. BM25 is rebuilt whole (bm25s has no incremental add) whenever the
stored chunks changed since it was last built.

Test hook: ``SPECRAG_TEST_PAUSE_AFTER_APIS=N`` makes a build sleep right after it stored the
first batch of its (N+1)-th API (state pending), so a test can ``kill -9`` it there.
"""

from __future__ import annotations

import logging
import os
import shutil
import time

import numpy as np
from pydantic import BaseModel, Field
from tqdm import tqdm

from pipeline.index.embeddings import EMBED_BATCH_SIZE, NO_EMBEDDINGS, embed_model_id
from pipeline.index.lexical import LexicalIndex
from pipeline.index.manifest import ApiEntry, ApiState, Manifest, load_manifest
from pipeline.index.store import ChunkStore
from pipeline.nodes import chunk_to_node
from pipeline.settings import Settings
from pipeline.specs.chunker import CHUNKER_VERSION
from pipeline.specs.models import ApiChunks

logger = logging.getLogger(__name__)

PAUSE_HOOK_ENV = "SPECRAG_TEST_PAUSE_AFTER_APIS"
EMBED_SUB_BATCH = 64


def embed_sorted(model, texts: list[str], sub_batch: int = EMBED_SUB_BATCH) -> list[list[float]]:
    """Embed in length-sorted sub-batches (a batch is padded to its longest text: ~1.8x faster
    here than mixed lengths), returned in the input order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: list[list[float]] = [[] for _ in texts]
    for start in range(0, len(order), sub_batch):
        chunk = order[start:start + sub_batch]
        for i, vector in zip(chunk, model.get_text_embedding_batch([texts[i] for i in chunk])):
            vectors[i] = vector
    return vectors


class IndexBuildReport(BaseModel):
    apis_added: list[str] = Field(default_factory=list)
    apis_updated: list[str] = Field(default_factory=list, description="content hash changed: chunks replaced")
    apis_unchanged: list[str] = Field(default_factory=list)
    apis_removed: list[str] = Field(default_factory=list, description="no longer in the input")
    apis_repaired: list[str] = Field(default_factory=list, description="left pending by an interrupted build")
    full_rebuild: str = Field("", description="why everything was rebuilt (new model/chunker/no manifest), else ''")
    bm25_rebuilt: bool = False
    chunks_embedded: int = 0
    embed_seconds: float = 0.0
    chunks_per_s: float = 0.0
    seconds: float = 0.0
    search_mode: str = Field("hybrid", description="hybrid, or lexical when no embedding model loaded")


class IndexBuilder:
    """Brings ``store`` in line with a list of ingested APIs."""

    def __init__(self, store: ChunkStore, settings: Settings, *, chunker_version: str = CHUNKER_VERSION,
                 batch_size: int = EMBED_BATCH_SIZE):
        self.store = store
        self.settings = settings
        self.chunker_version = chunker_version
        self.batch_size = batch_size
        self._pause_after = int(os.environ.get(PAUSE_HOOK_ENV, "-1"))
        self._fresh: dict[str, np.ndarray] = {}  # vectors embedded in this run, by file_id

    def build(self, apis: list[ApiChunks], progress: bool = True) -> IndexBuildReport:
        started = time.perf_counter()
        _validate(apis)
        self._fresh = {}
        report = IndexBuildReport()
        manifest = self._prepare(report)
        todo = self._plan(manifest, apis, report)
        for file_id in report.apis_removed:
            self._remove(manifest, file_id)
        mode = "embedding" if self.store.embed_model is not None else "indexing"
        with tqdm(total=sum(len(a.chunks) for a in todo), desc=mode, unit="chunk", disable=not progress) as bar:
            for n, api in enumerate(todo):
                self._store_api(manifest, api, bar, report, pause=n == self._pause_after)
        if self._lexical_outdated(manifest):
            self._rebuild_lexical(manifest, apis)
            report.bm25_rebuilt = True
        self.store.reload()
        report.search_mode = self.store.search_mode
        report.chunks_per_s = report.chunks_embedded / report.embed_seconds if report.embed_seconds else 0.0
        report.seconds = time.perf_counter() - started
        return report

    def _prepare(self, report: IndexBuildReport) -> Manifest:
        """The manifest to update, or a fresh one (vectors dropped) if the old one no longer fits."""
        identity = embed_model_id(self.store.embed_model)
        old = load_manifest(self.store.data_dir)
        if old is not None and old.compatible(identity, self.chunker_version):
            return old
        report.full_rebuild = ("no manifest" if old is None else
                               f"index built with {old.embed_model} / chunker {old.chunker_version}, "
                               f"now {identity} / chunker {self.chunker_version}")
        if self.store.embed_model is not None or (old is not None and old.embed_model != NO_EMBEDDINGS):
            self.store.reset_vectors()  # before the new manifest: a crash here just resets again
        self.store.local = None  # its vectors/chunks are of the old model or chunker: never copy from it
        fresh = Manifest(embed_model=identity, chunker_version=self.chunker_version,
                         generation=(old.generation + 1) if old else 1)
        self.store.write_manifest(fresh)
        return fresh

    def _plan(self, manifest: Manifest, apis: list[ApiChunks], report: IndexBuildReport) -> list[ApiChunks]:
        todo = []
        for api in apis:
            entry, file_id = manifest.apis.get(api.api.file_id), api.api.file_id
            bucket = (report.apis_added if entry is None else
                      report.apis_repaired if entry.state is ApiState.PENDING else
                      report.apis_updated if entry.content_hash != api.api.content_hash else
                      report.apis_unchanged)
            bucket.append(file_id)
            if bucket is not report.apis_unchanged:
                todo.append(api)
        wanted = {a.api.file_id for a in apis}
        report.apis_removed.extend(sorted(set(manifest.apis) - wanted))
        return todo

    def _remove(self, manifest: Manifest, file_id: str) -> None:
        manifest.apis[file_id].state = ApiState.PENDING
        manifest.generation += 1
        self.store.write_manifest(manifest)
        if self.store.embed_model is not None:
            self.store.delete_api_vectors(file_id)
        del manifest.apis[file_id]
        self.store.write_manifest(manifest)

    def _store_api(self, manifest: Manifest, api: ApiChunks, bar: tqdm, report: IndexBuildReport,
                   pause: bool) -> None:
        file_id = api.api.file_id
        manifest.apis[file_id] = ApiEntry(content_hash=api.api.content_hash, state=ApiState.PENDING,
                                          n_chunks=len(api.chunks))
        manifest.generation += 1
        self.store.write_manifest(manifest)
        model = self.store.embed_model
        if model is not None:
            self.store.delete_api_vectors(file_id)
            rows = []
            for start in range(0, len(api.chunks), self.batch_size):
                batch = api.chunks[start:start + self.batch_size]
                nodes = [chunk_to_node(c) for c in batch]
                t0 = time.perf_counter()
                vectors = embed_sorted(model, [c.embed_text or c.name or c.id for c in batch])
                report.embed_seconds += time.perf_counter() - t0
                rows.append(np.asarray(vectors, dtype=np.float32))
                for node, vector in zip(nodes, vectors):
                    node.embedding = vector
                self.store.add_nodes(nodes)
                report.chunks_embedded += len(batch)
                bar.update(len(batch))
                _maybe_pause(pause)
                pause = False
            self._fresh[file_id] = np.concatenate(rows) if rows else np.empty((0, 0), dtype=np.float32)
        else:
            bar.update(len(api.chunks))
            _maybe_pause(pause)
        manifest.apis[file_id].state = ApiState.COMPLETE
        self.store.write_manifest(manifest)

    def _lexical_outdated(self, manifest: Manifest) -> bool:
        """Stale generation, a missing folder, or a vector copy missing while embeddings are on."""
        if manifest.bm25_stale or manifest.bm25_dir is None:
            return manifest.bm25_stale
        if not (self.store.data_dir / "bm25" / manifest.bm25_dir).is_dir():
            return True
        local = self.store.local
        return self.store.embed_model is not None and (local is None or local.vectors is None)

    def _rebuild_lexical(self, manifest: Manifest, apis: list[ApiChunks]) -> None:
        """The local index (BM25 + vector copy) over every complete API, in a new generation folder."""
        done = [a for a in apis if manifest.apis[a.api.file_id].state is ApiState.COMPLETE and a.chunks]
        chunks = [c for a in done for c in a.chunks]
        name = f"gen-{manifest.generation}"
        root = self.store.data_dir / "bm25"
        if chunks:
            t0 = time.perf_counter()
            vectors = None if self.store.embed_model is None else np.concatenate([self._vectors(a) for a in done])
            LexicalIndex.build(chunks, {a.api.file_id: a.api.content_hash for a in done}, root / name, vectors)
            logger.info("BM25 over %d chunks built in %.1fs", len(chunks), time.perf_counter() - t0)
        manifest.bm25_dir = name if chunks else None
        manifest.bm25_generation = manifest.generation
        self.store.write_manifest(manifest)
        for old in root.glob("gen-*"):
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)

    def _vectors(self, api: ApiChunks) -> np.ndarray:
        """An API's vectors in chunk order: embedded now, else the previous local index, else Chroma."""
        file_id, ids = api.api.file_id, [c.id for c in api.chunks]
        if file_id in self._fresh:
            return self._fresh[file_id]
        previous = self.store.local
        if previous is not None and previous.api_hashes.get(file_id) == api.api.content_hash \
                and previous.chunk_ids(file_id) == ids and (rows := previous.rows_vectors(file_id)) is not None:
            return rows
        stored = self.store.vectors.client.get(ids=ids, include=["embeddings"])
        by_id = dict(zip(stored["ids"], stored["embeddings"]))
        if missing := [cid for cid in ids if cid not in by_id]:
            raise RuntimeError(f"{file_id}: {len(missing)} chunks have no vector in Chroma (e.g. {missing[0]!r}); "
                               "delete the index folder and rebuild")
        return np.asarray([by_id[cid] for cid in ids], dtype=np.float32)


def _validate(apis: list[ApiChunks]) -> None:
    """Drop (in place, with a warning) every API that would corrupt the store: a second spec
    with a file_id already taken, duplicate chunk ids, a chunk of another file_id. One bad spec
    never stops the build of the others."""
    seen: set[str] = set()
    kept: list[ApiChunks] = []
    for api in apis:
        file_id = api.api.file_id
        ids = [c.id for c in api.chunks]
        stray = next((c.id for c in api.chunks if c.file_id != file_id), None)
        problem = ("another spec has the same file_id; give one of them another name" if file_id in seen else
                   "duplicate chunk ids" if len(set(ids)) != len(ids) else
                   f"chunk {stray!r} belongs to another file_id" if stray else "")
        if problem:
            logger.warning("not indexed: %s (%s): %s", file_id, api.api.source, problem)
            continue
        seen.add(file_id)
        kept.append(api)
    apis[:] = kept


def _maybe_pause(pause: bool) -> None:
    if pause:
        logger.warning("%s: pausing mid-build for a kill test", PAUSE_HOOK_ENV)
        time.sleep(3600)
