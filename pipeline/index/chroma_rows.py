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

    def replace_api(self, api: ApiChunks, vectors: np.ndarray, hashes: list[int], batch_size: int,
                    after_first_batch: Callable[[], None] | None = None) -> None:
        fid = api.api.file_id
        metadatas = [{"source_file": fid, "type": c.type.value, "embed_hash": hash_hex(h)}
                     for c, h in zip(api.chunks, hashes)]
        keep: set[str] = set()
        if not self.empty:
            got = self._call(lambda: self._collection.get(where={"source_file": fid}, include=["metadatas"]))
            have = {cid: (m or {}).get("embed_hash") for cid, m in zip(got["ids"], got["metadatas"] or [])}
            wanted = {c.id: m["embed_hash"] for c, m in zip(api.chunks, metadatas)}
            keep = {cid for cid, h in have.items() if wanted.get(cid) == h}
            if stale := [cid for cid in have if cid not in keep]:
                self._call(lambda: self._collection.delete(ids=stale))
        todo = [i for i, c in enumerate(api.chunks) if c.id not in keep]
        for n, start in enumerate(range(0, len(todo), batch_size)):
            part = todo[start:start + batch_size]
            self._call(lambda: self._collection.add(ids=[api.chunks[i].id for i in part],
                                                    embeddings=vectors[part], metadatas=[metadatas[i] for i in part]))
            if n == 0 and after_first_batch is not None:
                after_first_batch()


def _rows(embeddings) -> list:
    return [] if embeddings is None else list(embeddings)
