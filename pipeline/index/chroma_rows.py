"""The builder's writes to Chroma, the store of record for vectors.

Each chunk is one row: its id, float32 vector and ``{source_file, type, embed_hash}``; no text
(it lives once, in the local index). A changed API is diffed against its rows: rows that
vanished or whose embed text changed are deleted, new ones added, the rest left alone.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from pipeline.index.vector_reuse import hash_hex
from pipeline.specs.models import ApiChunks


class ChromaRows:
    def __init__(self, store, reset: bool):
        self.store = store
        self.empty = reset  # the collection was dropped in this run: nothing to read or diff
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
        ids, embeddings, metadatas, owners = [], [], [], []
        for n, (api, api_vectors, api_hashes) in enumerate(zip(apis, vectors, hashes)):
            fid = api.api.file_id
            wanted = {c.id: hash_hex(h) for c, h in zip(api.chunks, api_hashes)}
            keep: set[str] = set()
            if not self.empty:
                got = self._call(lambda: self._collection.get(where={"source_file": fid}, include=["metadatas"]))
                have = {cid: (m or {}).get("embed_hash") for cid, m in zip(got["ids"], got["metadatas"] or [])}
                keep = {cid for cid, h in have.items() if wanted.get(cid) == h}
                if stale := [cid for cid in have if cid not in keep]:
                    self._call(lambda: self._collection.delete(ids=stale))
            for i, chunk in enumerate(api.chunks):
                if chunk.id not in keep:
                    ids.append(chunk.id)
                    embeddings.append(api_vectors[i])
                    metadatas.append({"source_file": fid, "type": chunk.type.value, "embed_hash": wanted[chunk.id]})
                    owners.append(n)
        hooked = after_first_batch_of is None
        for start in range(0, len(ids), batch_size):
            end = start + batch_size
            self._call(lambda: self._collection.add(ids=ids[start:end], embeddings=np.asarray(embeddings[start:end]),
                                                    metadatas=metadatas[start:end]))
            if not hooked and after_first_batch_of[0] in owners[start:end]:
                hooked = True
                after_first_batch_of[1]()


def _rows(embeddings) -> list:
    return [] if embeddings is None else list(embeddings)
