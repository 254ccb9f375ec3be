"""Vectors for the chunks a build stores: reused wherever the same embed text was embedded
before, embedded (once per distinct text) otherwise.

A vector depends only on the model and the embed text, so it is found by a 64-bit hash of the
text: first among the texts embedded in this run (the fleet repeats many operations and
schemas verbatim), then in the previous local index, then in Chroma, whose rows are keyed by
the same hash (a run killed before it committed left its vectors there).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import numpy as np
from specrag.index.embeddings import Embedder
from specrag.index.local import LocalIndex
from specrag.specs.models import Chunk

EMBED_SUB_BATCH = 64


def embed_text(chunk: Chunk) -> str:
    return chunk.embed_text or chunk.name or chunk.id


def text_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def hash_hex(value: int) -> str:
    """Chroma metadata holds signed 64-bit ints only: the hash goes there as hex."""
    return f"{value:016x}"


def distinct_in_first_order(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct hashes in the order of their first occurrence (each text once, in file order):
    (the index of each one's first occurrence, and for every element the place of its hash in
    that order)."""
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    return first[order], place[inverse.reshape(-1)]


def embed_sorted(model: Embedder, texts: list[str], sub_batch: int = EMBED_SUB_BATCH) -> list[list[float]]:
    """Embed documents in length-sorted sub-batches (a batch is padded to its longest text: ~1.8x
    faster here than mixed lengths), returned in the input order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: list[list[float]] = [[] for _ in texts]
    for start in range(0, len(order), sub_batch):
        chunk = order[start:start + sub_batch]
        for i, vector in zip(chunk, model.embed_documents([texts[i] for i in chunk])):
            vectors[i] = vector
    return vectors


class VectorSource:
    """Hash -> vector, filled from the previous local index, Chroma rows and this run's embeddings.

    ``stored``: hashes -> (hashes found, their vectors) in the store of record (Chroma, by id)."""

    def __init__(self, model: Embedder | None, previous: LocalIndex | None,
                 stored: Callable[[list[int]], tuple[list[int], list]] | None = None):
        self.model = model
        self._stored = stored
        self._known: dict[int, np.ndarray] = {}
        self._previous = previous if previous is not None and previous.vectors is not None else None
        self.embedded = self.reused = 0
        self.embed_seconds = 0.0

    def missing(self, hashes: list[int]) -> list[int]:
        """Hashes of ``hashes`` that no source has (after looking in the previous index)."""
        unknown = [h for h in dict.fromkeys(hashes) if h not in self._known]
        if self._previous is None or not unknown:
            return unknown
        pack = self._previous.pack
        rows = pack.rows_of_embed_hashes(np.asarray(unknown, dtype=np.uint64))
        found = rows >= 0
        vectors = pack.distinct_vectors(pack.arrays["vector_of"][rows[found]]).astype(np.float32)
        for h, vector in zip((h for h, ok in zip(unknown, found) if ok), vectors):
            self._known[h] = vector
        return [h for h, ok in zip(unknown, found) if not ok]

    def offer(self, hashes: list[int], vectors) -> None:
        """Vectors found elsewhere (Chroma rows of a killed run)."""
        for h, v in zip(hashes, vectors):
            self._known.setdefault(h, np.asarray(v, dtype=np.float32))

    def find(self, hashes: list[int]) -> None:
        """Look up every hash no source has yet: in the previous index, then (one batched request
        by id, not per API) in the store of record."""
        if (missing := self.missing(hashes)) and self._stored is not None:
            self.offer(*self._stored(missing))

    def embed(self, chunks: list[Chunk], hashes: list[int]) -> None:
        """Embed the texts of ``chunks`` that no source has, each distinct text once, in one
        length-sorted pass; count the rest as reused."""
        texts = {h: embed_text(c) for c, h in zip(chunks, hashes) if h not in self._known}
        if texts:
            t0 = time.perf_counter()
            for h, vector in zip(texts, embed_sorted(self.model, list(texts.values()))):
                self._known[h] = np.asarray(vector, dtype=np.float32)
            self.embed_seconds += time.perf_counter() - t0
            self.embedded += len(texts)
        self.reused += len(chunks) - len(texts)

    def vectors_for(self, chunks: list[Chunk], hashes: list[int]) -> np.ndarray:
        """One row per chunk (texts not embedded yet are embedded now)."""
        if any(h not in self._known for h in hashes):
            self.embed(chunks, hashes)
        return np.stack([self._known[h] for h in hashes]) if hashes else np.zeros((0, 0), np.float32)
