"""ChunkStore: the persistent index that queries read and ``IndexBuilder`` fills.

Layout under ``settings.data_dir``: ``manifest.json`` (manifest.py, the commit record),
``local/gen-N/`` (the local index that serves every query: chunks, float16 vectors, BM25
postings; pack.py), ``chroma/`` (the embedded Chroma store, unless ``settings.chroma_host``
names a server) and ``sources.json`` (what each spec file looked like when last read).

Chroma is the store of record for the vectors: one row per distinct embed text (id: the
text's hash, chroma_rows.py) with its float32 vector, no text and no metadata. The chunks' text
and metadata are stored once, in the local index; they are derived from the specs, so repairing
a damaged local index re-reads specs and reuses Chroma's vectors (found by the texts' hashes).
Queries never touch Chroma. Only APIs complete in the manifest and present in the live
generation with the same content hash are served. The catalogs the manifest names
(``local/catalogs-*.json`` and its blobs, catalog/snapshot.py) are opened with the local index: a
store's readers never see the catalogs a build rewrites for the next generation. On a Chroma server,
each corpus has a collection of its own (collections.py) and the build publishes it for replicas (publish.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from specrag.catalog.snapshot import CatalogSnapshot
from specrag.core.errors import (
    ChromaUnavailableError,
    IndexDamagedError,
    IndexFormatError,
)
from specrag.core.ids import split_chunk_id
from specrag.core.memory import return_freed_memory
from specrag.core.settings import Settings
from specrag.index.batching import BatchCoalescer
from specrag.index.chroma_aside import AsideCollection, ChromaAside
from specrag.index.collections import (
    CHROMA_DATABASE,
    check_owner,
    collection_name,
    open_collection,
    remove_orphan_segments,
    server_client,
    vacuum_store,
)
from specrag.index.embeddings import (
    NO_EMBEDDINGS,
    Embedder,
    ReleasedEmbedder,
    as_embedder,
    build_embedder,
    embed_model_id,
    embed_queries,
    load_now,
)
from specrag.index.local import STUB, LocalIndex, unit_vector
from specrag.index.manifest import MANIFEST_NAME, Manifest, load_manifest, save_manifest
from specrag.specs.models import Chunk

if TYPE_CHECKING:  # builds never import LlamaIndex (~1.8 s); queries have it loaded already
    import numpy as np
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.schema import NodeWithScore
    from specrag.context.nodes import Hit, RankedRows

logger = logging.getLogger(__name__)

HYBRID, LEXICAL = "hybrid", "lexical"
LOCAL_DIR = "local"
QUERY_EMBEDDING_CACHE = 256
_COLLECTION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")


class ChunkStore:
    """Read side for queries; ``chroma`` and ``write_manifest`` are for ``IndexBuilder``.

    ``embed_model``: the model as an ``Embedder`` or as its LlamaIndex face (either view of the
    same model); the store keeps the Embedder (``embedder``), and builds use nothing else."""

    in_memory = True  # chunk lookups read the memory-mapped local index: no call blocks on a server

    def __init__(self, settings: Settings, embed_model: Embedder | BaseEmbedding | None):
        if not _COLLECTION_RE.match(settings.storage.collection):
            raise ValueError(f"collection name {settings.storage.collection!r}: use 3-512 chars of [A-Za-z0-9._-]")
        self.settings = settings
        self.data_dir = Path(settings.storage.data_dir)
        self._use_embedder(embed_model)  # (open() may load it while reload() reads the index)
        self.manifest: Manifest | None = None
        self.local: LocalIndex | None = None
        self.catalogs: CatalogSnapshot | None = None  # the generation's catalogs (None: legacy, read the folder)
        self.damage = ""  # what was found broken on open (repair mode), else ''
        self.chroma_lost = False  # repair mode: the manifest lists vectors the embedded Chroma no longer has
        self.outdated = ""  # the index is of another format (repair mode: it is rebuilt), else ''
        self.search_mode = LEXICAL
        self._served: frozenset[str] = frozenset()
        self._client = None
        self._collection = None
        self._vectors = None
        self._aside: ChromaAside | None = None
        self.aside_peak_rss_mb: float | None = None  # the Chroma process's peak, once it ended
        self._embedding_cache: dict[str, tuple[list[float], np.ndarray]] = {}  # query -> (embedding, unit vector)

    @classmethod
    def open(cls, settings: Settings, embed_model: Embedder | BaseEmbedding | None | str = "auto", *,
             repair: bool = False, chroma_aside: bool = False, defer_model: bool = False) -> "ChunkStore":
        """Open the index in ``settings.data_dir`` (``"auto"`` loads the model in settings).

        Damage raises IndexDamagedError with one line, unless ``repair`` (the builder's mode):
        then ``store.damage`` says what is broken and the store serves what is intact.
        ``chroma_aside`` (a re-index): the embedded Chroma collection, if the index has one, opens
        in a child process meanwhile (chroma_aside.py). ``defer_model`` (a re-index): when the
        index holds this model's vectors, its session is made on the first new text, after the
        spec reader's worker is gone; a run that finds every vector never makes it."""
        if embed_model != "auto":
            store = cls(settings, embed_model)
            store._start_aside(chroma_aside and store.embedder is not None)
            store.reload(repair=repair)
            return store
        # The model loads (imports, ONNX session: ~0.9 s) while another thread reads and checks the
        # local index (file reads and CRCs, which let go of the interpreter lock: ~0.3 s at 4x)
        store = cls(settings, None)
        store._start_aside(chroma_aside)  # forked first: no thread of ours runs yet
        with ThreadPoolExecutor(1, thread_name_prefix="specrag-open") as pool:
            opened = pool.submit(store.reload, repair)
            model = build_embedder(settings, deferred=defer_model)
            opened.result()
        if defer_model and (store.manifest is None or store.manifest.embed_model != embed_model_id(model)):
            model = load_now(model)  # every text may need embedding, and a model that fails degrades to lexical
        store._use_embedder(model)
        store.search_mode = store._mode()
        if store.embedder is None:
            store.close_chroma()  # no model: the build writes no vectors
        return store

    def _start_aside(self, wanted: bool) -> None:
        """Only for an index that has its manifest and its embedded Chroma database already: a
        first build opens Chroma when it has rows to write, and a deleted database must be noticed
        (``reload``) before anything opens the store, which would create it empty."""
        storage = self.settings.storage
        if (wanted and ChromaAside.available() and not storage.chroma_host
                and self.settings.embeddings.embed_model.strip().lower() != NO_EMBEDDINGS
                and (self.data_dir / MANIFEST_NAME).is_file() and (self.embedded_chroma_path / CHROMA_DATABASE).is_file()):
            self._aside = ChromaAside(type(self)(self.settings, None))

    def release_model(self) -> None:
        """Let go of the model's weights once a build has embedded its last text (a re-index's
        commit then peaks ~180 MB lower); the store keeps its identity (search mode, manifest)."""
        if self.embedder is not None and not isinstance(self.embedder, ReleasedEmbedder):
            self._use_embedder(ReleasedEmbedder(self.embedder.model_id))
            return_freed_memory()

    def _use_embedder(self, embed_model: Embedder | BaseEmbedding | None) -> None:
        self.embedder = as_embedder(embed_model)
        # concurrent queries share one model call (bound to the model, not the store: no reference cycle)
        self._embed = BatchCoalescer(partial(embed_queries, self.embedder))

    def reload(self, repair: bool = False, verify: bool = True) -> None:
        """Re-read the manifest and the local index (after a build, possibly by another process).
        ``verify=False`` skips the checksums: for the builder, which sealed or checked the generation itself."""
        self.damage, self.outdated, self.local, self.catalogs = "", "", None, None
        for attempt in range(2):  # a build may switch generations between our reads: read again
            try:
                self.manifest = load_manifest(self.data_dir)
                self.local = self._open_local(verify)
                self.catalogs = self._open_catalogs()
                break
            except IndexDamagedError as exc:
                if attempt == 0 and self._generation_moved():
                    continue
                if not repair:
                    what, fix = ("cannot be read", "rebuild") if isinstance(exc, IndexFormatError) else ("is damaged", "repair")
                    raise type(exc)(f"the index in {self.data_dir} {what}: {exc}; run `specrag index` on the "
                                    f"same specs to {fix} it") from exc
                if isinstance(exc, IndexFormatError):
                    self.manifest, self.outdated = None, str(exc)
                else:
                    self.damage = str(exc)
                break
        self.search_mode = self._mode()
        self._served = frozenset(self._serveable())
        self.chroma_lost = repair and self._embedded_chroma_lost()

    def _open_local(self, verify: bool = True) -> LocalIndex | None:
        manifest = self.manifest
        if manifest is None and any((self.data_dir / LOCAL_DIR).glob("gen-*")):
            raise IndexDamagedError(f"{self.data_dir / 'manifest.json'} is missing but {self.data_dir / LOCAL_DIR} "
                                    "holds an index")
        if manifest is None or manifest.local_dir is None:
            if manifest is not None and manifest.complete_ids():
                raise IndexDamagedError(f"{self.data_dir / 'manifest.json'} lists APIs but no local index")
            return None
        local = LocalIndex.load(self.data_dir / LOCAL_DIR / manifest.local_dir, verify=verify)
        if missing := sorted(f for f in manifest.complete_ids() if f not in local.api_hashes):
            raise IndexDamagedError(f"{local.pack.folder} lacks {len(missing)} complete APIs (e.g. {missing[0]})")
        return local

    def _open_catalogs(self) -> CatalogSnapshot | None:
        """The catalogs snapshot the manifest names (its listing, in memory): the catalog, indexes and
        graphs this store's readers get are its generation's, while the next build keeps its blobs."""
        if self.manifest is None or self.manifest.catalogs is None:
            return None
        return CatalogSnapshot(self.data_dir / LOCAL_DIR / self.manifest.catalogs)

    @property
    def catalog_files(self) -> CatalogSnapshot | Path:
        """Where this store's readers read the catalogs: its generation's snapshot; the catalogs
        folder for an index written before snapshots (the next ``specrag index`` writes one)."""
        return self.catalogs if self.catalogs is not None else self.settings.catalogs_path

    def _embedded_chroma_lost(self) -> bool:
        """The local index holds vectors but the embedded Chroma database is gone (its folder
        deleted): queries do not notice (they read the local index), LlamaIndex readers of the
        collection would. Looked at before anything opens the store, which would create it empty."""
        return (not self.settings.storage.chroma_host and self.manifest is not None and bool(self.manifest.complete_ids())
                and self.local is not None and self.local.vectors is not None
                and not (self.embedded_chroma_path / CHROMA_DATABASE).is_file())

    def _generation_moved(self) -> bool:
        try:
            latest = load_manifest(self.data_dir)
        except IndexDamagedError:
            return False
        return latest is not None and self.manifest is not None and latest.live_files() != self.manifest.live_files()

    @property
    def embed_model(self) -> BaseEmbedding | None:
        """The model as a LlamaIndex ``BaseEmbedding`` (query side), or None in lexical mode."""
        return self.embedder.llama if self.embedder is not None else None

    def _mode(self) -> str:
        if self.embedder is None:
            return LEXICAL
        built_with, wanted = (self.manifest.embed_model if self.manifest else None), embed_model_id(self.embedder)
        if built_with not in (None, wanted) and self.manifest.apis:
            logger.warning("index was built with embeddings %r but the model now is %r: lexical search only "
                           "until `specrag index` rebuilds it", built_with, wanted)
            return LEXICAL
        return HYBRID

    def _serveable(self) -> set[str]:
        if self.manifest is None or self.local is None:
            return set()
        hashes = self.local.api_hashes
        return {f for f in self.manifest.complete_ids() if hashes.get(f) == self.manifest.apis[f].content_hash}

    # ---- queries -------------------------------------------------------------------------

    def complete_api_ids(self) -> set[str]:
        """APIs safe to serve: complete in the manifest and held by the live local index."""
        return set(self._served)

    def vector_search(self, query: str, file_ids: list[str] | None, types: list[str] | None,
                      top_k: int, hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore] | RankedRows:
        """``methods`` keeps operations of those HTTP methods only (components have none)."""
        if self.search_mode != HYBRID or top_k <= 0 or types == [] or methods == [] or self.local is None:
            return []
        allowed = self._allowed(file_ids)
        if not allowed:
            return []
        return self.local.vector_search(self._query_vectors(query)[1], allowed, types, top_k, hydrate=hydrate,
                                        methods=methods)

    def lexical_search(self, query: str, file_ids: list[str] | None, types: list[str] | None,
                       top_k: int, hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore] | RankedRows:
        """``hydrate=False`` returns the ranked rows, read as hits of stub nodes (id, source_file, type;
        :class:`~specrag.context.nodes.RankedRows`): enough to rank and fuse."""
        allowed = self._allowed(file_ids)
        if not allowed or types == [] or methods == [] or self.local is None:
            return []
        return self.local.search(query, allowed, types, top_k, hydrate=hydrate, methods=methods)

    def embed_query(self, query: str) -> list[float] | None:
        """The query's embedding (cached), or None in lexical mode."""
        return self._query_embedding(query) if self.search_mode == HYBRID else None

    def forget_query_embeddings(self) -> None:
        """Benchmarks time each query as if new: a repeated query's embedding would come from the cache."""
        self._embedding_cache.clear()

    def _query_embedding(self, query: str) -> list[float]:
        return self._query_vectors(query)[0]

    def _query_vectors(self, query: str) -> tuple[list[float], np.ndarray]:
        """Stage 1's fleet-wide evidence and stage 3 embed the same words: embed them once, and
        keep the unit vector every search of them scores with (~7 searches a query)."""
        cached = self._embedding_cache.get(query)
        if cached is None:
            embedding = self._embed(query)
            cached = (embedding, unit_vector(embedding))
            if len(self._embedding_cache) >= QUERY_EMBEDDING_CACHE:
                self._embedding_cache.pop(next(iter(self._embedding_cache)))
            self._embedding_cache[query] = cached
        return cached

    def hydrate(self, hits: Sequence[NodeWithScore] | Sequence[Hit]) -> list[NodeWithScore]:
        """Replace stub nodes by the full chunks (one batched lookup), keeping order and scores."""
        # lazy: keeps llama_index.core (~2 s) out of `specrag index` (tests/index/test_build_imports.py)
        from llama_index.core.schema import NodeWithScore
        from specrag.context.nodes import as_node_with_score

        def is_stub(hit: NodeWithScore | Hit) -> bool:  # flagged, or any node without text
            return bool(hit.node.metadata.get(STUB)) or not hit.node.get_content()

        flagged = [is_stub(h) for h in hits]
        stubs = [h.node.node_id for h, stub in zip(hits, flagged) if stub]
        full = self.local.get_nodes(stubs) if stubs and self.local is not None else {}
        return [NodeWithScore(node=full[h.node.node_id], score=h.score) if stub else as_node_with_score(h)
                for h, stub in zip(hits, flagged) if not stub or h.node.node_id in full]

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        """Chunks by id; ids that are missing (or of an API not served) are absent."""
        if self.local is None:
            return {}
        return self.local.get_chunks([cid for cid in dict.fromkeys(ids) if _file_id(cid) in self._served])

    def stored_metadata(self, chunk_id: str) -> dict | None:
        """A served chunk's stored metadata, read-only (``LocalIndex.stored_metadata``); None if absent."""
        if self.local is None or _file_id(chunk_id) not in self._served:
            return None
        return self.local.stored_metadata(chunk_id)

    def endpoint_centroids(self, file_ids: list[str]) -> np.ndarray | None:
        """Each API's mean endpoint vector (zeros for an API not served), or None in lexical mode."""
        if self.search_mode != HYBRID or self.local is None:
            return None
        return self.local.centroids([f if f in self._served else "" for f in file_ids])

    def api_chunk_ids(self, file_id: str) -> list[str]:
        return self.local.chunk_ids(file_id) if file_id in self._served else []

    def close(self) -> None:
        self.close_chroma()
        self.local = None
        if self.catalogs is not None:
            self.catalogs.close()
            self.catalogs = None

    def close_chroma(self) -> None:
        """Let go of Chroma (its vector index is loaded on the first write: ~150 MB at 68k
        chunks), so a build's later steps do not carry it. A Chroma process (``chroma_aside``)
        flushes, closes and exits."""
        if self._aside is not None:
            aside, self._aside, self._collection = self._aside, None, None
            aside.close()
            self.aside_peak_rss_mb = aside.peak_rss_mb
        if self._client is not None:
            self._client.close()
            self._client, self._collection, self._vectors = None, None, None
            return_freed_memory()

    def _allowed(self, file_ids: list[str] | None) -> frozenset[str]:
        """The served APIs among ``file_ids`` (None: all of them, the set itself: no copy per search)."""
        return self._served if file_ids is None else self._served.intersection(file_ids)

    # ---- Chroma (the builder's side, and the bench's plain VectorStoreIndex) ---------------

    @property
    def chroma(self):
        """The Chroma collection of this index (created on first use). Builds write it through
        chromadb alone: a re-index does not import the LlamaIndex vector store (~0.3 s). With a
        Chroma process, its calls run there."""
        if self._aside is not None:
            return AsideCollection(self._aside)
        if self._collection is None:
            self._collection = self.chroma_call(lambda: open_collection(
                self.client, self.settings, collection_name(self.settings), {"hnsw": {"space": "cosine"}}))
        return self._collection

    @property
    def vectors(self):
        """The collection as a LlamaIndex ``ChromaVectorStore``."""
        if self._vectors is None:
            from llama_index.vector_stores.chroma import ChromaVectorStore

            self._vectors = ChromaVectorStore(chroma_collection=self.chroma)
        return self._vectors

    @property
    def client(self):
        """The client, in this process: a Chroma process is closed first (one process writes the store)."""
        if self._aside is not None:
            self.close_chroma()
        if self._client is None:
            import chromadb
            from chromadb.config import Settings as ChromaSettings

            chroma_settings = ChromaSettings(anonymized_telemetry=False)
            if self.settings.storage.chroma_host:
                self._client = self.chroma_call(lambda: server_client(self.settings, chroma_settings))
            else:
                path = self.embedded_chroma_path
                path.mkdir(parents=True, exist_ok=True)
                try:
                    self._client = chromadb.PersistentClient(path=str(path), settings=chroma_settings)
                except Exception as exc:  # noqa: BLE001 - a damaged sqlite file, a lock, permissions
                    raise ChromaUnavailableError(f"the Chroma store in {path} cannot be opened "
                                                 f"({type(exc).__name__}: {_one_line(exc)})") from exc
        return self._client

    @property
    def embedded_chroma_path(self) -> Path:
        """Where the embedded Chroma store lives (unused with a server)."""
        return self.data_dir / "chroma"

    def chroma_call(self, call):
        """Run a Chroma call; a server that does not answer (refuses, or says nothing for
        ``chroma_timeout_s``: each request of a server client is bounded, collections.py) becomes
        one line naming host:port."""
        try:
            return call()
        except ChromaUnavailableError:
            raise  # already one line (a nested call, such as opening the client)
        except Exception as exc:  # noqa: BLE001 - chromadb raises ValueError, httpx and Rust errors alike
            text = _one_line(exc) or type(exc).__name__
            # chromadb rewords some transport errors (a ValueError raised while handling one)
            transport = [e for e in _chain(exc) if _transport_error(e)]
            timed_out = any(isinstance(e, TimeoutError) or type(e).__name__.endswith("Timeout") for e in transport)
            unreachable = bool(transport) or "connect" in text.lower() \
                or type(exc).__module__.startswith(("httpx", "httpcore"))
            if self.settings.storage.chroma_host and unreachable:
                server = f"{self.settings.storage.chroma_host}:{self.settings.storage.chroma_port}"
                if timed_out:
                    raise ChromaUnavailableError(
                        f"the Chroma server at {server} is unreachable: no answer within "
                        f"{self.settings.storage.chroma_timeout_s:g} s (SPECRAG_CHROMA_TIMEOUT_S; {text}); check that it "
                        "is running and not stopped or overloaded") from exc
                raise ChromaUnavailableError(
                    f"the Chroma server at {server} is unreachable "
                    f"({text}); start it, or unset SPECRAG_CHROMA_HOST to use the embedded store") from exc
            raise

    def reset_vectors(self) -> None:
        """Drop this corpus's collection (embedding model changed, or the index format); never
        one that another corpus or tenant owns (ForeignCollectionError)."""
        name = collection_name(self.settings)
        found = [c for c in self.chroma_call(self.client.list_collections) if c.name == name]
        if found:
            check_owner(self.settings, name, found[0].metadata)
            self.chroma_call(lambda: self.client.delete_collection(name))
            if not self.settings.storage.chroma_host:
                remove_orphan_segments(self.embedded_chroma_path)
        self._collection, self._vectors = None, None

    def compact_chroma(self) -> None:
        """Close Chroma and compact the embedded store's database (after a collection shrank a lot)."""
        self.close_chroma()
        if not self.settings.storage.chroma_host:
            vacuum_store(self.embedded_chroma_path)

    def write_manifest(self, manifest: Manifest) -> None:
        save_manifest(self.data_dir, manifest)
        self.manifest = manifest


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def _transport_error(exc: BaseException) -> bool:
    """The request did not get an answer: refused, reset, timed out (not an HTTP error status)."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    module = type(exc).__module__
    if module.startswith("httpcore"):
        return True
    if module.startswith("httpx"):
        import httpx

        return isinstance(exc, httpx.TransportError)
    return False


def _chain(exc: BaseException | None):
    """``exc`` and the exceptions it was raised from or while handling."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _file_id(chunk_id: str) -> str:
    return split_chunk_id(chunk_id)[0] if ":" in chunk_id else ""
