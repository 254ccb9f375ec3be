"""The builder's writes to Chroma, the store of record for vectors.

Each chunk is one row: its id, float32 vector and ``{source_file, type, embed_hash}``; no text
(it lives once, in the local index), except on a server, where replicas pull their local index
from the rows: there a row also holds the chunk's JSON, its ordinal and a ``row_hash``. A changed API is diffed against its rows: rows that
vanished or whose embed text changed are deleted, new ones added, the rest left alone.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
from specrag.index.vector_reuse import hash_hex, text_hash
from specrag.specs.models import ApiChunks, Chunk


class ChromaRows:
    def __init__(self, store, reset: bool):
        self.store = store
        self.empty = reset  # the collection was dropped in this run: nothing to read or diff
        self.published = bool(store.settings.storage.chroma_host)  # rows carry their chunks for replicas (publish.py)
        self.seconds = 0.0

    def _call(self, call):
        t0 = time.perf_counter()
        try:
            return self.store.chroma_call(call)
        finally:
            self.seconds += time.perf_counter() - t0

    @property
    def _collection(self):
        return self.store.chroma

    def delete_apis(self, file_ids: list[str]) -> None:
        if not self.empty:
            for fid in file_ids:
                self._call(lambda: self._collection.delete(where={"source_file": fid}))

    def delete_others(self, wanted: set[str]) -> None:
        """Rows of APIs not in ``wanted`` (after the manifest that listed them was lost)."""
        if not self.empty:
            self._call(lambda: self._collection.delete(where={"source_file": {"$nin": sorted(wanted) or [""]}}))

    def vectors_by_hash(self, file_id: str, wanted: set[int]) -> tuple[list[int], list]:
        """(hashes, vectors) of this API's rows whose embed text hash is in ``wanted``."""
        if self.empty or not wanted:
            return [], []
        got = self._call(lambda: self._collection.get(where={"source_file": file_id},
                                                      include=["metadatas", "embeddings"]))
        pairs = [(int(m["embed_hash"], 16), v) for m, v in zip(got["metadatas"] or [], _rows(got["embeddings"]))
                 if isinstance(m, dict) and isinstance(m.get("embed_hash"), str)]
        pairs = [(h, v) for h, v in pairs if h in wanted]
        return [h for h, _ in pairs], [v for _, v in pairs]

    def replace_group(self, apis: list[ApiChunks], vectors: list[np.ndarray], hashes: list[list[int]],
                      batch_size: int, after_first_batch_of: tuple[int, Callable[[], None]] | None = None) -> None:
        """Replace the rows of ``apis``: rows whose id and embed text are unchanged stay; the rest
        are deleted and added in batches of ``batch_size``. ``after_first_batch_of`` (i, hook):
        call hook after the first batch that holds rows of ``apis[i]`` (a test's kill point)."""
        ids, embeddings, metadatas, documents, owners = [], [], [], [], []
        for n, (api, api_vectors, api_hashes) in enumerate(zip(apis, vectors, hashes)):
            fid = api.api.file_id
            rows = {c.id: self._row(fid, i, c, h) for i, (c, h) in enumerate(zip(api.chunks, api_hashes))}
            keep: set[str] = set()
            if not self.empty:
                got = self._call(lambda: self._collection.get(where={"source_file": fid}, include=["metadatas"]))
                have = {cid: _identity(m) for cid, m in zip(got["ids"], got["metadatas"] or [])}
                keep = {cid for cid, h in have.items() if cid in rows and _identity(rows[cid][0]) == h}
                if stale := [cid for cid in have if cid not in keep]:
                    self._call(lambda: self._collection.delete(ids=stale))
            for i, chunk in enumerate(api.chunks):
                if chunk.id not in keep:
                    ids.append(chunk.id)
                    embeddings.append(api_vectors[i])
                    metadatas.append(rows[chunk.id][0])
                    documents.append(rows[chunk.id][1])
                    owners.append(n)
        hooked = after_first_batch_of is None
        for start in range(0, len(ids), batch_size):
            end = start + batch_size
            self._call(lambda: self._collection.add(ids=ids[start:end], embeddings=np.asarray(embeddings[start:end]),
                                                    metadatas=metadatas[start:end],
                                                    documents=documents[start:end] if self.published else None))
            if not hooked and after_first_batch_of[0] in owners[start:end]:
                hooked = True
                after_first_batch_of[1]()


    def _row(self, file_id: str, ordinal: int, chunk: Chunk, embed_hash: int) -> tuple[dict, str | None]:
        """(metadata, document) of a chunk's row; on a server the row also carries the chunk (its
        JSON as the document, its place in the API, a hash of both) for replicas to pull."""
        metadata = {"source_file": file_id, "type": chunk.type.value, "embed_hash": hash_hex(embed_hash)}
        if not self.published:
            return metadata, None
        document = chunk.model_dump_json()
        return metadata | {"ordinal": ordinal, "row_hash": hash_hex(text_hash(f"{ordinal}\0{document}"))}, document


def _identity(metadata: dict | None) -> tuple:
    """What must match for a row to stay: the embed text, and (on a server) the chunk and its place."""
    metadata = metadata or {}
    return metadata.get("embed_hash"), metadata.get("row_hash")


def _rows(embeddings) -> list:
    return [] if embeddings is None else list(embeddings)
