"""The builder's writes to Chroma, the store of record for vectors.

A vector depends only on its embed text, so Chroma holds one row per distinct embed text: id =
the text's 64-bit hash as hex (``vector_reuse.hash_hex``), its float32 vector, no metadata and
no text (the chunks live once, in the local index; on a server, replicas pull them from the
companion collection: publish.py). The fleet repeats operations and schemas verbatim across
APIs and versions: 2,540 specs (68.6k chunks a copy, four copies) have 61k distinct texts.

A build adds the hashes Chroma lacks (asked by id, in batches) and deletes a hash only after the
manifest commit, when the new local generation no longer uses it: a killed run never loses a
vector the served generation needs. It may leave rows no generation uses (a killed run's, or
those of a delete cut short); ``sweep`` removes them when a build repairs after a kill or damage.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import numpy as np
from specrag.index.vector_reuse import distinct_in_first_order, hash_hex

logger = logging.getLogger(__name__)

ID_BATCH = 4096  # ids per get/delete request: well under sqlite's and a server's request limits


class ChromaRows:
    def __init__(self, store, reset: bool):
        self.store = store
        self.empty = reset  # every row was written by this run (collection dropped): nothing to ask Chroma
        self.present: set[int] = set()  # hashes known to have a row
        self.added = self.deleted = 0
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

    def vectors(self, hashes: list[int]) -> tuple[list[int], list]:
        """(hashes, vectors) of the rows Chroma has among ``hashes`` (a killed run's rows, or the
        store of record when the local index is gone)."""
        if self.empty or not hashes:
            return [], []
        found_hashes, found = [], []
        for ids in _batches([hash_hex(h) for h in dict.fromkeys(hashes)]):
            got = self._call(lambda: self._collection.get(ids=ids, include=["embeddings"]))
            for cid, vector in zip(got["ids"], _rows(got["embeddings"])):
                h = int(cid, 16)
                found_hashes.append(h)
                found.append(vector)
        self.present.update(found_hashes)
        return found_hashes, found

    def add_missing(self, hashes: list[list[int]], vectors: list[np.ndarray], batch_size: int,
                    after_first_batch_of: tuple[int, Callable[[], None]] | None = None) -> None:
        """Add a row for each hash (per API: its chunks' hashes and vectors, in chunk order) that
        Chroma lacks, in batches of ``batch_size``. ``after_first_batch_of`` (i, hook): call
        hook after the first batch holding a text that the i-th API brought (a test's kill point)."""
        first: dict[int, tuple[int, np.ndarray]] = {}
        for n, (api_hashes, api_vectors) in enumerate(zip(hashes, vectors)):
            for h, v in zip(api_hashes, api_vectors):
                if h not in first and h not in self.present:
                    first[h] = (n, v)
        absent = list(first) if self.empty else self._absent(list(first))
        hooked = after_first_batch_of is None
        for start in range(0, len(absent), batch_size):
            batch = absent[start:start + batch_size]
            ids = [hash_hex(h) for h in batch]
            embeddings = np.asarray([first[h][1] for h in batch], dtype=np.float32)
            self._call(lambda: self._collection.add(ids=ids, embeddings=embeddings))
            self.present.update(batch)
            self.added += len(batch)
            if not hooked and any(first[h][0] == after_first_batch_of[0] for h in batch):
                hooked = True
                after_first_batch_of[1]()
        self.present.update(first)

    def _absent(self, hashes: list[int]) -> list[int]:
        have: set[str] = set()
        for ids in _batches([hash_hex(h) for h in hashes]):
            have.update(self._call(lambda: self._collection.get(ids=ids, include=[]))["ids"])
        self.present.update(int(cid, 16) for cid in have)
        return [h for h in hashes if hash_hex(h) not in have]

    def delete_unused(self, candidates: np.ndarray, used: np.ndarray) -> None:
        """After the commit: delete the rows of ``candidates`` (hashes the previous generation's
        changed and removed APIs used) that the committed generation (``used``, sorted unique) does not."""
        unused = np.setdiff1d(np.asarray(candidates, np.uint64), used, assume_unique=False)
        self._delete([hash_hex(int(h)) for h in unused])

    def sweep(self, used: np.ndarray) -> None:
        """After the commit of a repair: delete every row the committed generation does not use
        (a killed run's rows, rows of a per-chunk store, rows of APIs a lost manifest listed)."""
        if self.empty:
            return
        ids = self._call(lambda: self._collection.get(include=[]))["ids"]
        wanted = {hash_hex(int(h)) for h in used}
        stale = [cid for cid in ids if cid not in wanted]
        if stale:
            logger.info("Chroma: %d rows no indexed text uses removed", len(stale))
        self._delete(stale)

    def _delete(self, ids: list[str]) -> None:
        for batch in _batches(ids):
            self._call(lambda: self._collection.delete(ids=batch))
            self.deleted += len(batch)

    def per_chunk_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(distinct hashes, their float32 vectors) of a collection of an earlier version, whose
        rows are chunks with their text's hash in ``embed_hash``: read a page at a time."""
        found: dict[int, np.ndarray] = {}
        total = self._call(lambda: self._collection.count())
        for offset in range(0, total, ID_BATCH):
            got = self._call(lambda: self._collection.get(include=["metadatas", "embeddings"], limit=ID_BATCH,
                                                          offset=offset))
            for metadata, vector in zip(got["metadatas"] or [], _rows(got["embeddings"])):
                value = metadata.get("embed_hash") if isinstance(metadata, dict) else None
                if isinstance(value, str):
                    try:
                        found.setdefault(int(value, 16), np.asarray(vector, dtype=np.float32))
                    except ValueError:
                        continue
        if not found:
            return np.empty(0, np.uint64), np.empty((0, 0), np.float32)
        return np.asarray(list(found), dtype=np.uint64), np.stack(list(found.values()))

    def copy_from(self, hashes: np.ndarray, vectors: np.ndarray, batch_size: int) -> None:
        """Fill the (empty) collection with one row per distinct hash, from ``vectors`` (one per
        entry of ``hashes``): rebuilding a per-chunk store without re-embedding."""
        hashes = np.asarray(hashes, np.uint64)
        first, _ = distinct_in_first_order(hashes)  # rows in file order: the vectors file is read front to back
        for start in range(0, len(first), batch_size):
            rows = first[start:start + batch_size]
            ids = [hash_hex(int(h)) for h in hashes[rows]]
            embeddings = np.asarray(vectors[rows], dtype=np.float32)
            self._call(lambda: self._collection.add(ids=ids, embeddings=embeddings))
            self.added += len(ids)
        self.present.update(int(h) for h in hashes[first])


def _batches(items: list, size: int = ID_BATCH) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _rows(embeddings) -> list:
    return [] if embeddings is None else list(embeddings)
