"""ChunkStore: the persistent index that queries read and ``IndexBuilder`` fills.

Layout under ``settings.data_dir``: ``manifest.json`` (manifest.py), ``chroma/`` (the embedded
Chroma store, unless ``settings.chroma_host`` names a server) and ``bm25/gen-N/`` (the local
index: BM25 + vector copy, lexical.py). Chroma holds every chunk with its vector; it is only
ever given vectors we compute (never its default embedding function, which downloads a model).
Queries run on the local index, and on Chroma for an API the local index does not hold in its
current version (after an interrupted build). Only complete APIs are ever returned.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import chromadb
from chromadb.config import Settings as ChromaSettings
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery
from llama_index.vector_stores.chroma import ChromaVectorStore

from pipeline.index.batching import BatchCoalescer
from pipeline.index.embeddings import build_embed_model, embed_model_id, embed_queries
from pipeline.index.lexical import STUB, LexicalIndex
from pipeline.index.manifest import Manifest, load_manifest, save_manifest
from pipeline.nodes import node_to_chunk
from pipeline.settings import Settings
from pipeline.specs.ids import split_chunk_id
from pipeline.specs.models import Chunk

logger = logging.getLogger(__name__)

HYBRID, LEXICAL = "hybrid", "lexical"
QUERY_EMBEDDING_CACHE = 256
_COLLECTION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")


class ChunkStore:
    """Read side for queries; the write helpers at the bottom are for ``IndexBuilder``."""

    def __init__(self, settings: Settings, embed_model: BaseEmbedding | None):
        if not _COLLECTION_RE.match(settings.collection):
            raise ValueError(f"collection name {settings.collection!r}: use 3-512 chars of [A-Za-z0-9._-]")
        self.settings = settings
        self.data_dir = Path(settings.data_dir)
        self.embed_model = embed_model
        self.manifest: Manifest | None = None
        self.local: LexicalIndex | None = None
        self.search_mode = LEXICAL
        self._client = None
        self._vectors: ChromaVectorStore | None = None
        self._embedding_cache: dict[str, list[float]] = {}
        self._embed = BatchCoalescer(self._embed_batch)  # concurrent queries share one model call
        self._ids_cache: tuple | None = None  # (manifest, local, writes, complete ids, local ids)
        self._manifest_writes = 0

    @classmethod
    def open(cls, settings: Settings, embed_model: BaseEmbedding | None | str = "auto") -> "ChunkStore":
        """Open (or prepare) the index in ``settings.data_dir``; ``"auto"`` loads the model in settings."""
        if embed_model == "auto":
            embed_model = build_embed_model(settings)
        store = cls(settings, embed_model)
        store.reload()
        return store

    def reload(self) -> None:
        """Re-read the manifest and the local index (after a build, possibly by another process)."""
        self.manifest = load_manifest(self.data_dir)
        folder = self.manifest.bm25_dir if self.manifest else None
        self.local = LexicalIndex.load(self.data_dir / "bm25" / folder) if folder else None
        self.search_mode = self._mode()

    def _mode(self) -> str:
        if self.embed_model is None:
            return LEXICAL
        built_with, wanted = (self.manifest.embed_model if self.manifest else None), embed_model_id(self.embed_model)
        if built_with not in (None, wanted) and self.manifest.apis:
            logger.warning("index was built with embeddings %r but the model now is %r: lexical search only "
                           "until `specrag index` rebuilds it", built_with, wanted)
            return LEXICAL
        return HYBRID

    # ---- queries -------------------------------------------------------------------------

    def complete_api_ids(self) -> set[str]:
        """APIs safe to serve: complete in the manifest (and, lexical-only, in the local index)."""
        return set(self._complete_ids())

    def _complete_ids(self) -> frozenset[str]:
        return self._ids()[0] if self.search_mode == HYBRID else self._ids()[1]

    def _ids(self) -> tuple[frozenset[str], frozenset[str]]:
        """(complete APIs, complete APIs the local index holds in their current version); computed
        once per manifest write or local index swap, not per query (640 APIs: ~5 ms)."""
        cached = self._ids_cache
        if cached is None or cached[0] is not self.manifest or cached[1] is not self.local \
                or cached[2] != self._manifest_writes:
            complete = self.manifest.complete_ids() if self.manifest else set()
            local = set()
            if self.manifest is not None and self.local is not None:
                hashes = self.local.api_hashes
                local = {f for f in complete if hashes.get(f) == self.manifest.apis[f].content_hash}
            cached = (self.manifest, self.local, self._manifest_writes, frozenset(complete), frozenset(local))
            self._ids_cache = cached
        return cached[3], cached[4]

    def vector_search(self, query: str, file_ids: list[str] | None, types: list[str] | None,
                      top_k: int, hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]:
        if self.search_mode != HYBRID or top_k <= 0 or types == [] or methods == []:
            return []
        allowed = self._allowed(file_ids)
        if not allowed:
            return []
        embedding = self._query_embedding(query)
        local = allowed & self._local_ids() if self.local is not None and self.local.vectors is not None else set()
        hits = self.local.vector_search(embedding, local, types, top_k, hydrate=hydrate, methods=methods) if local else []
        if rest := allowed - local:  # not in the local index in this version: ask Chroma (slower)
            filters = [MetadataFilter(key="source_file", value=sorted(rest), operator=FilterOperator.IN)]
            if types is not None:
                filters.append(MetadataFilter(key="type", value=list(types), operator=FilterOperator.IN))
            if methods is not None:
                filters.append(MetadataFilter(key="method", value=list(methods), operator=FilterOperator.IN))
            found = self.vectors.query(VectorStoreQuery(query_embedding=embedding, similarity_top_k=top_k,
                                                        filters=MetadataFilters(filters=filters)))
            hits += [NodeWithScore(node=n, score=s) for n, s in zip(found.nodes or [], found.similarities or [])]
        return sorted(hits, key=lambda h: -(h.score or 0.0))[:top_k]

    def embed_query(self, query: str) -> list[float] | None:
        """The query's embedding (cached), or None in lexical mode."""
        return self._query_embedding(query) if self.search_mode == HYBRID else None

    def _query_embedding(self, query: str) -> list[float]:
        """Stage 1's fleet-wide evidence and stage 3 embed the same words: embed them once."""
        cached = self._embedding_cache.get(query)
        if cached is None:
            cached = self._embed(query)
            if len(self._embedding_cache) >= QUERY_EMBEDDING_CACHE:
                self._embedding_cache.pop(next(iter(self._embedding_cache)))
            self._embedding_cache[query] = cached
        return cached

    def _embed_batch(self, queries: list[str]) -> list[list[float]]:
        return embed_queries(self.embed_model, queries)

    def lexical_search(self, query: str, file_ids: list[str] | None, types: list[str] | None,
                       top_k: int, hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]:
        """``hydrate=False`` returns stub nodes (id, source_file, type): enough to rank and fuse."""
        allowed = self._allowed(file_ids) & self._local_ids()
        return self.local.search(query, allowed, types, top_k, hydrate=hydrate, methods=methods) if allowed else []

    def hydrate(self, hits: list[NodeWithScore]) -> list[NodeWithScore]:
        """Replace stub nodes by the full chunks (one batched lookup), keeping order and scores."""
        def is_stub(hit: NodeWithScore) -> bool:  # flagged, or any node without text
            return bool(hit.node.metadata.get(STUB)) or not hit.node.get_content()

        stubs = [h.node.node_id for h in hits if is_stub(h)]
        if not stubs:
            return hits
        full = self.local.get_nodes(stubs) if self.local is not None else {}
        if missing := [i for i in stubs if i not in full]:
            full |= {n.node_id: n for n in self.vectors.get_nodes(node_ids=missing)}
        return [NodeWithScore(node=full[h.node.node_id], score=h.score) if is_stub(h) else h
                for h in hits if not is_stub(h) or h.node.node_id in full]

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        """At most one batched Chroma get; ids that are missing (or of an API not complete) are absent."""
        complete, local = self._complete_ids(), self._local_ids()
        wanted = [cid for cid in dict.fromkeys(ids) if _file_id(cid) in complete]
        nodes = self.local.get_nodes([c for c in wanted if _file_id(c) in local]) if self.local else {}
        if self.search_mode == HYBRID and (rest := [c for c in wanted if _file_id(c) not in local]):
            nodes |= {n.node_id: n for n in self.vectors.get_nodes(node_ids=rest)}
        return {cid: node_to_chunk(n) for cid, n in nodes.items() if isinstance(n, TextNode)}

    def api_chunk_ids(self, file_id: str) -> list[str]:
        if file_id not in self._complete_ids():
            return []
        if file_id in self._local_ids():
            return self.local.chunk_ids(file_id)
        return list(self.vectors.client.get(where={"source_file": file_id}, include=[])["ids"])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client, self._vectors, self.local = None, None, None

    def _allowed(self, file_ids: list[str] | None) -> frozenset[str]:
        complete = self._complete_ids()
        return complete if file_ids is None else complete & frozenset(file_ids)

    def _local_ids(self) -> frozenset[str]:
        """Complete APIs that the local index holds in their current version."""
        return self._ids()[1]

    # ---- write helpers for IndexBuilder ---------------------------------------------------

    @property
    def vectors(self) -> ChromaVectorStore:
        if self._vectors is None:
            collection = self.client.get_or_create_collection(
                self.settings.collection, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})
            self._vectors = ChromaVectorStore(chroma_collection=collection)
        return self._vectors

    @property
    def client(self):
        if self._client is None:
            chroma_settings = ChromaSettings(anonymized_telemetry=False)
            if self.settings.chroma_host:
                self._client = chromadb.HttpClient(host=self.settings.chroma_host, port=self.settings.chroma_port,
                                                   settings=chroma_settings)
            else:
                path = self.data_dir / "chroma"
                path.mkdir(parents=True, exist_ok=True)
                self._client = chromadb.PersistentClient(path=str(path), settings=chroma_settings)
        return self._client

    def add_nodes(self, nodes: list[TextNode]) -> None:
        self.vectors.add(nodes)

    def delete_api_vectors(self, file_id: str) -> None:
        self.vectors.client.delete(where={"source_file": file_id})

    def reset_vectors(self) -> None:
        """Drop the whole collection (embedding model or chunker changed)."""
        if self.settings.collection in {c.name for c in self.client.list_collections()}:
            self.client.delete_collection(self.settings.collection)
        self._vectors = None

    def write_manifest(self, manifest: Manifest) -> None:
        save_manifest(self.data_dir, manifest)
        self.manifest = manifest
        self._manifest_writes += 1


def _file_id(chunk_id: str) -> str:
    return split_chunk_id(chunk_id)[0] if ":" in chunk_id else ""
