"""Incremental index builds that survive being killed at any point.

The index mirrors the corpus it was last built from. An API whose spec and chunks are unchanged
is left alone (its rows are copied into the next local generation as bytes); a changed one has
its new embed texts added to Chroma and its local rows replaced; a missing one is removed. What a settings
change affects is rebuilt and no more: a new embedding model re-embeds, a new chunker or
``chunk_max_tokens`` re-chunks (and reuses every vector whose embed text is unchanged), new
lexical analysis re-tokenizes. Damage found on open is repaired from the specs and Chroma.

Commit protocol: APIs are marked pending (manifest written) before Chroma is touched; the new
local generation is written under a temporary name and renamed; one atomic manifest write then
marks them complete and switches ``local_dir`` and ``catalogs`` (the listing of the catalogs the
caller wrote for this run: catalog/snapshot.py; only the files that changed get new blobs); until
then, queries read the previous generation whole (pending APIs included: their rows there are
intact), catalogs included. The listing it replaced is kept with its blobs for one more generation.
Chroma rows (one per distinct embed text: chroma_rows.py) are only added before the commit; the
texts the new generation no longer uses are deleted after it, so a killed run never loses a vector
the served generation needs (the rows it leaves unused are swept by the next build, which
repairs). Test hook:
``SPECRAG_TEST_PAUSE_AFTER_APIS=N`` sleeps right after the first Chroma batch of the (N+1)-th
changed API, so a test can kill it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time

import numpy as np
from pydantic import BaseModel, Field
from specrag.catalog.io import served_files
from specrag.catalog.snapshot import drop_damaged_blobs, remove_stale_snapshots, write_snapshot
from specrag.core.errors import EmbedModelUnavailableError
from specrag.core.settings import Settings
from specrag.index.chroma_rows import ChromaRows
from specrag.index.embeddings import NO_EMBEDDINGS, embed_model_id
from specrag.index.lexical import LEXICAL_VERSION
from specrag.index.manifest import TEXT_ROWS, ApiEntry, ApiState, IndexShape, Manifest
from specrag.index.pack import Pack, encode_record
from specrag.index.pack_writer import NewApi, write_generation
from specrag.index.store import LOCAL_DIR, ChunkStore
from specrag.index.vector_reuse import VectorSource, embed_text, text_hash
from specrag.specs.chunker import CHUNKER_VERSION
from specrag.specs.models import ApiChunks
from tqdm import tqdm

logger = logging.getLogger(__name__)

PAUSE_HOOK_ENV = "SPECRAG_TEST_PAUSE_AFTER_APIS"
LEGACY_DIRS = ("bm25",)
BUILD_BATCH = 2048  # chunks per group: one embedding pass and Chroma batches this large (measured: 5000-row
# adds ran 1.5x faster than 256-row ones); a killed build loses at most one group's work


class IndexBuildReport(BaseModel):
    apis_added: list[str] = Field(default_factory=list)
    apis_updated: list[str] = Field(default_factory=list, description="spec or chunks changed: rows replaced")
    apis_unchanged: list[str] = Field(default_factory=list)
    apis_removed: list[str] = Field(default_factory=list, description="no longer in the input")
    apis_repaired: list[str] = Field(default_factory=list, description="left pending by an interrupted build, or lost to damage")
    full_rebuild: str = Field("", description="why every API was re-examined (settings changed, no manifest), else ''")
    damage: str = Field("", description="damage found on open and repaired by this build, else ''")
    local_written: bool = Field(False, description="a new local generation was written")
    chunks_embedded: int = Field(0, description="distinct embed texts embedded in this run")
    chunks_reused: int = Field(0, description="chunks of changed APIs whose vector was found already computed")
    embed_seconds: float = 0.0
    chunks_per_s: float = Field(0.0, description="embedding throughput: chunks_embedded / embed_seconds")
    vectors_added: int = Field(0, description="Chroma rows added: embed texts it did not hold")
    vectors_deleted: int = Field(0, description="Chroma rows deleted after the commit: texts no API uses any more")
    chroma_seconds: float = 0.0
    chroma_rss_mb: float | None = Field(None, description="peak RSS of the process that held Chroma for this run, "
                                                          "when it was not this one (chroma_aside.py)")
    local_seconds: float = 0.0
    seconds: float = 0.0
    search_mode: str = Field("hybrid", description="hybrid, or lexical when no embedding model loaded")


def digest_chunks(chunks: list) -> str:
    return _digest(_dumps(chunks))


def _dumps(chunks: list) -> list[bytes]:
    """Each chunk's JSON as it is hashed and stored."""
    return [chunk.model_dump_json().encode() for chunk in chunks]


def _digest(dumps: list[bytes]) -> str:
    digest = hashlib.sha256()
    for data in dumps:
        digest.update(data + b"\0")
    return digest.hexdigest()


def _refuse_to_drop_vectors(store: ChunkStore, settings: Settings) -> None:
    """A model that failed to load is not a request for a lexical index: building without it
    would drop every vector (minutes of embedding to get back, or a paid API's bill). Only
    ``SPECRAG_EMBED_MODEL=none`` rebuilds an index with vectors as lexical."""
    built_with = store.manifest.embed_model if store.manifest is not None else NO_EMBEDDINGS
    wanted = settings.embeddings.embed_model.strip()
    if store.embedder is None and built_with != NO_EMBEDDINGS and wanted.lower() != NO_EMBEDDINGS:
        raise EmbedModelUnavailableError(
            f"the index holds vectors of {built_with} but the embedding model {wanted!r} could not be loaded "
            "(see the warning above); nothing was changed. Set SPECRAG_EMBED_MODEL_PATH to a local copy of "
            "the model, or SPECRAG_EMBED_MODEL=none to rebuild the index without vectors")


class IndexBuilder:
    """Brings ``store`` in line with the ingested APIs (and the ones kept without re-reading)."""

    def __init__(self, store: ChunkStore, settings: Settings, *, chunker_version: str = CHUNKER_VERSION,
                 batch_size: int = BUILD_BATCH, release_model: bool = False):
        """``release_model``: the store is the build's own; its model is let go after the last
        embedding, before the commit writes the next generation (its peak)."""
        self.store = store
        self.release_model = release_model
        self.settings = settings
        self.batch_size = batch_size
        self.shape = IndexShape(embed_model=embed_model_id(store.embedder), chunker_version=chunker_version,
                                chunk_max_tokens=settings.ingest.chunk_max_tokens, lexical_version=LEXICAL_VERSION)
        _refuse_to_drop_vectors(store, settings)
        self._pause_after = int(os.environ.get(PAUSE_HOOK_ENV, "-1"))
        self._blobs_checked: str | None = None  # the listing whose blobs check_catalog_blobs read

    def reusable(self) -> dict[str, str]:
        """file_id -> content hash of the APIs a caller may keep without re-reading their spec."""
        manifest = self.store.manifest
        if manifest is None or manifest.shape != self.shape or self.store.damage:
            return {}
        settled = manifest.settled_ids()  # a pending API's rows are being rewritten: never kept as it is
        return {fid: manifest.apis[fid].content_hash for fid in self.store.complete_api_ids() if fid in settled}

    def build(self, apis: list[ApiChunks], progress: bool = True, keep: set[str] = frozenset()) -> IndexBuildReport:
        """``apis``: the APIs read now; ``keep``: ones not re-read, taken as they are (see ``reusable``)."""
        started = time.perf_counter()
        _validate(apis, keep)
        report = IndexBuildReport(damage=self.store.damage)
        # a killed run's or a lost manifest's rows may be unused by any generation: swept after the commit
        sweep = self.store.manifest is None or bool(self.store.manifest.pending_ids()) or bool(self.store.damage)
        manifest, reset = self._prepare(report)
        local = self.store.local
        rows = ChromaRows(self.store, reset) if self.store.embedder is not None else None
        rebuilt = rows is not None and self._rows_by_text(manifest, rows, local)
        if rows is not None and not reset:
            self._restore_lost_rows(rows, local, report)
        rebuild_all = reset or local is None or local.header.embed_model != self.shape.embed_model
        digests, records = self._digests(manifest.apis, apis, rebuild_all)
        todo = self._plan(manifest, apis, keep, digests, rebuild_all, report)
        retokenize = local is not None and local.header.lexical_version != LEXICAL_VERSION
        if not (todo or report.apis_removed or retokenize):
            previous = manifest.catalogs
            catalogs = self._snapshot_catalogs(previous)
            if (manifest != self.store.manifest or (local is None and manifest.local_dir)
                    or catalogs != manifest.catalogs or rebuilt):
                manifest.local_dir = manifest.local_dir if local is not None else None
                if catalogs != manifest.catalogs:  # the catalogs alone changed: a generation of its own
                    manifest.catalogs = catalogs
                    manifest.generation += 1
                self.store.write_manifest(manifest)
                remove_stale_snapshots(self.store.data_dir / LOCAL_DIR, catalogs, previous)
            if rows is not None:
                self._count(rows, report)
            return self._finish(report, started)
        sources = VectorSource(self.store.embedder, None if rebuild_all else local, rows.vectors if rows else None)
        new = self._store_changed(manifest, todo, digests, records, sources, rows, progress)
        if self.release_model:
            sources.model = None  # its last text is embedded
            self.store.release_model()
        t0 = time.perf_counter()
        changed = {a.api.file_id for a in todo}
        kept = sorted({a.api.file_id for a in apis} - changed | set(keep))
        previous = _embed_hashes(local.pack, changed | set(report.apis_removed)) if local is not None else None
        if sweep or previous is None or not len(previous):
            self.store.close_chroma()  # written: the local generation is next, without Chroma's index in memory
        # else it stays open for the deletes after the commit: opening it again loads its vector index again
        # (measured at 4x: ~0.5 s of a one-spec re-index; peak RSS 504 -> 567 MB, the index held through the commit)
        self._commit(manifest, todo, kept, new, retokenize, report)
        report.local_seconds = round(time.perf_counter() - t0, 2)
        if rows is not None:
            self._drop_unused(manifest, rows, previous, sweep)
            self._count(rows, report)
        report.chunks_embedded, report.chunks_reused = sources.embedded, sources.reused
        report.embed_seconds = round(sources.embed_seconds, 2)
        return self._finish(report, started)

    def _rows_by_text(self, manifest: Manifest, rows: ChromaRows, local) -> bool:
        """Rebuild a collection of an earlier version (one row per chunk, each with its text's
        hash) as one row per distinct embed text, from its own float32 vectors: no re-embedding,
        whatever the local index's format. Rows without a hash are dropped (their texts are
        embedded again). True when it was rebuilt (the manifest then records the new rows)."""
        if manifest.vector_rows == TEXT_ROWS:
            return False
        manifest.vector_rows = TEXT_ROWS
        if rows.empty:  # dropped by this build already (a new model, or an index of another format)
            return False
        logger.warning("%s: Chroma holds one row per chunk (an index of an earlier specrag); rebuilding it as one row "
                       "per distinct embed text from its own vectors (no re-embedding)", self.store.data_dir)
        hashes, vectors = rows.per_chunk_vectors()
        self.store.reset_vectors()
        rows.copy_from(hashes, vectors, self.batch_size)
        rows.empty = not len(hashes)  # the copied rows are there to be found by hash
        self.store.compact_chroma()  # the dropped rows' pages: most of the database
        return True

    def _restore_lost_rows(self, rows: ChromaRows, local, report: IndexBuildReport) -> None:
        """The embedded Chroma database was gone on open (``ChunkStore.chroma_lost``): one row per
        distinct embed text of the served generation, from the local index's vectors (float16, what
        queries score with) rather than embedding every text again. The rest of the build adds and
        deletes rows as usual."""
        if not self.store.chroma_lost or local is None or local.vectors is None:
            return
        pack = local.pack
        distinct, first = np.unique(pack.arrays["vector_of"], return_index=True)
        rows.copy_from(pack.arrays["embed_hash"][first], pack.distinct_vectors(distinct), self.batch_size)
        found = f"the Chroma store in {self.store.embedded_chroma_path} was missing: {len(distinct)} vectors restored " \
                "from the local index"
        logger.warning("%s", found)
        report.damage = "; ".join(filter(None, (report.damage, found)))

    def _drop_unused(self, manifest: Manifest, rows: ChromaRows, previous: np.ndarray | None, sweep: bool) -> None:
        """After the commit: delete the rows of texts that the previous generation's changed and
        removed APIs used and the committed generation does not (an array op over its hashes, no
        per-API query); after a kill or damage, every row it does not use."""
        used = np.empty(0, np.uint64)
        if manifest.local_dir is not None:
            used = np.unique(np.load(self.store.data_dir / LOCAL_DIR / manifest.local_dir / "embed_hash.npy"))
        if sweep:
            rows.sweep(used)
        elif previous is not None and len(previous):
            rows.delete_unused(previous, used)
        self.store.close_chroma()

    def _count(self, rows: ChromaRows, report: IndexBuildReport) -> None:
        report.vectors_added, report.vectors_deleted = rows.added, rows.deleted
        report.chroma_seconds = round(rows.seconds, 2)
        report.chroma_rss_mb = self.store.aside_peak_rss_mb

    def _prepare(self, report: IndexBuildReport) -> tuple[Manifest, bool]:
        """The manifest to update, and whether Chroma's vectors were dropped (model changed).

        A fresh manifest when there is none, or when the vectors it lists are of another model."""
        old = self.store.manifest
        if old is not None and old.shape == self.shape and not self.store.damage:
            return old, False
        report.full_rebuild = (f"index damaged ({self.store.damage})" if self.store.damage else
                               f"index of another format ({self.store.outdated})" if self.store.outdated else
                               "no manifest" if old is None else
                               f"index built with {_describe(old.shape)}, now {_describe(self.shape)}")
        if old is not None and old.embed_model == self.shape.embed_model:
            return old.model_copy(update=self.shape.model_dump()), False
        reset = old is not None or not self.store.damage  # after a lost manifest, Chroma's rows are still ours
        if reset and (self.store.embedder is not None or (old is not None and old.embed_model != NO_EMBEDDINGS)
                      or self.store.outdated):
            self.store.reset_vectors()  # vectors of another model (or of unknown origin): never reuse them
        for legacy in LEGACY_DIRS:  # what older formats kept beside the manifest
            shutil.rmtree(self.store.data_dir / legacy, ignore_errors=True)
        fresh = Manifest(**self.shape.model_dump(), generation=(old.generation + 1) if old else 1, vector_rows=TEXT_ROWS)
        return fresh, reset

    @staticmethod
    def _digests(entries: dict[str, ApiEntry], apis: list[ApiChunks],
                 rebuild_all: bool) -> tuple[dict[str, str], dict[str, list[bytes]]]:
        """Each API's chunks digest, and the stored records of the APIs that look changed: one JSON
        dump of each chunk serves both (dumping twice was a tenth of a cold build's commit at 4x)."""
        digests, records = {}, {}
        for api in apis:
            fid = api.api.file_id
            dumps = _dumps(api.chunks)
            digests[fid] = _digest(dumps)
            entry = entries.get(fid)
            if rebuild_all or entry is None or (entry.content_hash, entry.chunks_digest) != (api.api.content_hash, digests[fid]):
                records[fid] = [encode_record(data) for data in dumps]
        return digests, records

    def _plan(self, manifest: Manifest, apis: list[ApiChunks], keep: set[str], digests: dict[str, str],
              rebuild_all: bool, report: IndexBuildReport) -> list[ApiChunks]:
        served = self.store.complete_api_ids()
        todo = []
        for api in apis:
            fid = api.api.file_id
            entry = manifest.apis.get(fid)
            same = not rebuild_all and entry is not None and entry.content_hash == api.api.content_hash and \
                entry.chunks_digest == digests[fid]
            bucket = (report.apis_added if entry is None else
                      report.apis_repaired if entry.state is ApiState.PENDING or fid not in served else
                      report.apis_unchanged if same else report.apis_updated)
            bucket.append(fid)
            if bucket is not report.apis_unchanged:
                todo.append(api)
        report.apis_unchanged += sorted(keep)
        wanted = {a.api.file_id for a in apis} | set(keep)
        report.apis_removed.extend(sorted(set(manifest.apis) - wanted))
        return todo

    def _store_changed(self, manifest: Manifest, todo: list[ApiChunks], digests: dict[str, str],
                       records: dict[str, list[bytes]],
                       sources: VectorSource, rows: ChromaRows | None, progress: bool) -> list[NewApi]:
        """Chroma rows of changed APIs' new embed texts, in groups marked pending first; a group's
        new texts are embedded in one length-sorted pass and its rows added in large batches.
        Removed APIs are not touched here: their rows go after the commit (``_drop_unused``)."""
        new: list[NewApi] = []
        bar = tqdm(total=sum(len(a.chunks) for a in todo), unit="chunk", disable=not progress,
                   desc="embedding" if rows is not None else "indexing")
        for group in _groups(todo, self.batch_size):
            self._mark_pending(manifest, [a.api.file_id for a in group])
            hashes = [[text_hash(embed_text(c)) for c in api.chunks] for api in group]
            vectors: list = [None] * len(group)
            if rows is not None:
                flat = [h for hs in hashes for h in hs]
                sources.find(flat)
                sources.embed([c for api in group for c in api.chunks], flat)
                vectors = [sources.vectors_for(api.chunks, hs) for api, hs in zip(group, hashes)]
                pause_at = self._pause_after - len(new) if 0 <= self._pause_after - len(new) < len(group) else None
                rows.add_missing(hashes, vectors, self.batch_size,
                                 after_first_batch_of=(pause_at, _pause) if pause_at is not None else None)
            for api, api_hashes, api_vectors in zip(group, hashes, vectors):
                new.append(NewApi(api.api.file_id, api.api.content_hash, digests[api.api.file_id], api.chunks,
                                  api_vectors, _as_uint64(api_hashes), records.pop(api.api.file_id, None)))
            bar.update(sum(len(a.chunks) for a in group))
        bar.close()
        return new

    def _mark_pending(self, manifest: Manifest, file_ids: list[str]) -> None:
        for fid in file_ids:
            if fid in manifest.apis:
                manifest.apis[fid].state = ApiState.PENDING
            else:
                manifest.apis[fid] = ApiEntry(content_hash="", state=ApiState.PENDING)
        manifest.generation += 1
        self.store.write_manifest(manifest)

    def _commit(self, manifest: Manifest, todo: list[ApiChunks], kept: list[str], new: list[NewApi],
                retokenize: bool, report: IndexBuildReport) -> None:
        """Write the next local generation, then switch the manifest to it in one atomic write."""
        manifest.generation += 1
        root = self.store.data_dir / LOCAL_DIR
        name = f"gen-{manifest.generation}"
        if new or kept:
            previous = self.store.local.pack if self.store.local is not None else None
            write_generation(root / name, manifest.generation, previous, kept, new,
                             embed_model=self.shape.embed_model, dim=self._dim(new), retokenize=retokenize)
        for fid in report.apis_removed:
            manifest.apis.pop(fid, None)
        for api, fresh in zip(todo, new):
            manifest.apis[api.api.file_id] = ApiEntry(content_hash=api.api.content_hash, state=ApiState.COMPLETE,
                                                      n_chunks=len(api.chunks), chunks_digest=fresh.chunks_digest)
        manifest.local_dir = name if (new or kept) else None
        replaced = manifest.catalogs
        manifest.catalogs = self._snapshot_catalogs(replaced)
        self.store.write_manifest(manifest)
        report.local_written = True
        for old in root.glob("gen-*"):
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        remove_stale_snapshots(root, manifest.catalogs, replaced)

    def check_catalog_blobs(self) -> None:
        """Drop the live listing's blobs that fail their CRC (reads every blob: ~0.1-0.2 s at 4x),
        ahead of the snapshot: a re-index runs it while its workers read the changed specs."""
        listing = self.store.manifest.catalogs if self.store.manifest is not None else None
        if dropped := drop_damaged_blobs(self.store.data_dir / LOCAL_DIR, listing):
            logger.warning("%d damaged catalog blobs in %s: written again", len(dropped), self.store.data_dir / LOCAL_DIR)
        self._blobs_checked = listing

    def _snapshot_catalogs(self, previous: str | None) -> str | None:
        """The snapshot of the catalogs as they are now (the caller wrote this run's first), which
        the next manifest write commits with the generation; None when there are none. Blobs of
        ``previous`` (the live listing) that fail their CRC are dropped first (unless checked
        already), so it writes them again."""
        if previous is None or self._blobs_checked != previous:
            self.check_catalog_blobs()
        return write_snapshot(served_files(self.settings.catalogs_path), self.store.data_dir / LOCAL_DIR, previous)

    def _dim(self, new: list[NewApi]) -> int:
        if self.store.embedder is None:
            return 0
        for api in new:
            if api.vectors is not None and api.vectors.ndim == 2 and api.vectors.shape[0]:
                return int(api.vectors.shape[1])
        return self.store.local.header.dim if self.store.local is not None else 0

    def _finish(self, report: IndexBuildReport, started: float) -> IndexBuildReport:
        # the generation is the one checked on open or the one this build just sealed (CRCs of the
        # files as written), under the index lock: checking it again cost ~0.25 s of a fleet re-index
        self.store.reload(verify=False)
        report.search_mode = self.store.search_mode
        report.chunks_per_s = round(report.chunks_embedded / report.embed_seconds, 1) if report.embed_seconds else 0.0
        report.seconds = round(time.perf_counter() - started, 2)
        return report


def _groups(todo: list[ApiChunks], size: int):
    """Consecutive APIs with at least ``size`` chunks per group: embedding batches stay full, and
    a kill loses at most one group's work."""
    group, count = [], 0
    for api in todo:
        group.append(api)
        count += len(api.chunks)
        if count >= size:
            yield group
            group, count = [], 0
    if group:
        yield group


def _as_uint64(hashes: list[int]):
    return np.asarray(hashes, dtype=np.uint64)


def _embed_hashes(pack: Pack, file_ids: set[str]) -> np.ndarray:
    """The embed hashes of ``file_ids``' rows in ``pack`` (a copy: the generation is removed by the commit)."""
    spans = [span for fid in sorted(file_ids) if fid in pack.header.apis for span in pack.header.apis[fid].spans.values()]
    hashes = pack.arrays["embed_hash"]
    return np.concatenate([hashes[s:e] for s, e in spans]) if spans else np.empty(0, np.uint64)


def _describe(shape: IndexShape | None) -> str:
    if shape is None:
        return "nothing"
    return (f"{shape.embed_model} / chunker {shape.chunker_version} / {shape.chunk_max_tokens} max tokens / "
            f"lexical {shape.lexical_version}")


def _validate(apis: list[ApiChunks], keep: set[str]) -> None:
    """Drop (in place, with a warning) every API that would corrupt the store: a second spec
    with a file_id already taken (``keep``: the unchanged APIs the index holds), duplicate chunk
    ids, a chunk of another file_id. One bad spec never stops the build of the others."""
    seen: set[str] = set(keep)
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


def _pause() -> None:
    logger.warning("%s: pausing mid-build for a kill test", PAUSE_HOOK_ENV)
    time.sleep(3600)
