"""The local index: BM25 over ``chunk.search_text`` plus an exact-search copy of the vectors.

One folder per generation (``data_dir/bm25/gen-N``): a ``BM25Retriever`` (bm25s underneath)
persisted in its own format, so ``BM25Retriever.from_persist_dir(folder)`` also works on it;
``vectors.npy`` (unit vectors in corpus order); and ``docs.json`` (chunk ids, chunk types, each
API's contiguous document range, the spec hashes indexed).

Why not filter in the libraries: ``BM25Retriever`` fixes its metadata filter at construction
and returns filtered-out hits at score 0, and Chroma's filtered HNSW query took 50-130 ms over
68k chunks here (unfiltered: ~5 ms). Selecting a few APIs' rows by range and scoring them with
numpy takes about a millisecond on both sides. Chroma stays the store of record.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import bm25s
import numpy as np
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
from llama_index.retrievers.bm25 import BM25Retriever
from pydantic import BaseModel, Field

from pipeline.analysis import index_tokens, query_terms, stemmer
from pipeline.index.batching import BatchCoalescer
from pipeline.nodes import chunk_to_node
from pipeline.specs.ids import parse_operation_id
from pipeline.specs.models import Chunk

DOCS_NAME, VECTORS_NAME = "docs.json", "vectors.npy"
FULL_PRODUCT_SHARE = 0.25  # a query over at least this share of the rows scores every row (batched)
STUB = "_stub"  # metadata flag of a node that carries only id, source_file and type


class LexicalDocs(BaseModel):
    """What a query needs besides the BM25 matrices (corpus order = sorted by API)."""

    ids: list[str] = Field(description="chunk id of each BM25 document")
    types: list[str] = Field(description="chunk type of each document")
    ranges: dict[str, tuple[int, int]] = Field(description="file_id -> [start, end) of its documents")
    api_hashes: dict[str, str] = Field(description="file_id -> content_hash of the spec indexed")


class LexicalIndex:
    """A loaded local index; build with :meth:`build`, open with :meth:`load`."""

    def __init__(self, retriever: BM25Retriever, docs: LexicalDocs, vectors: np.ndarray | None):
        self.retriever = retriever
        self.docs = docs
        self.vectors = vectors
        self._types = np.array(docs.types)
        self._methods: np.ndarray | None = None
        self._every_row = np.arange(len(docs.ids))
        self._rows_cache: dict[tuple, np.ndarray] = {}  # every API's rows, by (types, methods)
        self._product = BatchCoalescer(self._products)  # concurrent queries share one pass over the matrix
        self._position = {chunk_id: i for i, chunk_id in enumerate(docs.ids)}
        self._file_of = [""] * len(docs.ids)
        for file_id, (start, end) in docs.ranges.items():
            self._file_of[start:end] = [file_id] * (end - start)

    @property
    def api_hashes(self) -> dict[str, str]:
        return self.docs.api_hashes

    @classmethod
    def build(cls, chunks: list[Chunk], api_hashes: dict[str, str], folder: Path,
              vectors: np.ndarray | None = None) -> "LexicalIndex":
        """Index ``chunks`` (``vectors``: one row per chunk, same order) into ``folder``, atomically."""
        if not chunks:
            raise ValueError("no chunks to index")
        order = sorted(range(len(chunks)), key=lambda i: chunks[i].file_id)  # stable: API order kept
        chunks = [chunks[i] for i in order]
        tokens = index_tokens([c.search_text for c in chunks])
        bm25 = bm25s.BM25()
        bm25.index(tokens, show_progress=False)
        nodes = [chunk_to_node(c) for c in chunks]
        bm25.corpus = [node_to_metadata_dict(n, flat_metadata=True) | {"node_id": n.node_id} for n in nodes]
        retriever = BM25Retriever(existing_bm25=bm25, stemmer=stemmer(), similarity_top_k=min(10, len(chunks)))
        docs = LexicalDocs(ids=[c.id for c in chunks], types=[c.type.value for c in chunks],
                           ranges=_ranges(chunks), api_hashes=api_hashes)
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        retriever.persist(str(tmp), show_progress=False)
        if vectors is not None:
            np.save(tmp / VECTORS_NAME, _unit_rows(np.asarray(vectors, dtype=np.float32)[order]))
        (tmp / DOCS_NAME).write_text(docs.model_dump_json(), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
        return cls.load(folder)

    @classmethod
    def load(cls, folder: Path) -> "LexicalIndex":
        """Memory-mapped load: opening a 68k-chunk index reads only ids and the vocabulary."""
        retriever = BM25Retriever.from_persist_dir(str(folder), mmap=True, show_progress=False)
        docs = LexicalDocs.model_validate_json((folder / DOCS_NAME).read_text(encoding="utf-8"))
        vectors_file = folder / VECTORS_NAME
        vectors = np.load(vectors_file, mmap_mode="r") if vectors_file.is_file() else None
        return cls(retriever, docs, vectors)

    def search(self, query: str, file_ids: set[str], types: list[str] | None, top_k: int,
               hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]:
        """Top ``top_k`` documents of ``file_ids`` (and ``types``, ``methods``) by BM25; no zero-score hits."""
        rows = self._rows(file_ids, types, methods)
        if rows is None or top_k <= 0:
            return []
        query_tokens = query_terms(query)  # the question analyser (pipeline.analysis)
        token_ids = self.retriever.bm25.get_tokens_ids(query_tokens)
        if not token_ids:
            return []
        mask = np.zeros(len(self.docs.ids), dtype=np.float32)
        mask[rows] = 1.0
        scores = self.retriever.bm25.get_scores_from_ids(token_ids, weight_mask=mask)
        return self._top(np.arange(len(scores)), scores, top_k, lambda s: s, hydrate=hydrate)

    def vector_search(self, embedding: list[float], file_ids: set[str], types: list[str] | None,
                      top_k: int, hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]:
        """Exact cosine search over the rows of ``file_ids``; scores as ChromaVectorStore gives them
        (``exp(cosine - 1)``, see :func:`cosine_of`)."""
        rows = self._rows(file_ids, types, methods)
        if rows is None or self.vectors is None or top_k <= 0:
            return []
        query = _unit_rows(np.asarray(embedding, dtype=np.float32)[None, :])[0]
        if len(rows) >= FULL_PRODUCT_SHARE * len(self.docs.ids):  # most rows: score them all, batched
            sims = self._product(query)
            sims = sims if len(rows) == len(sims) else sims[rows]
        else:
            sims = self.vectors[rows] @ query
        return self._top(rows, sims, top_k, lambda s: math.exp(s - 1.0), keep_all=True, hydrate=hydrate)

    def _products(self, queries: list[np.ndarray]) -> list[np.ndarray]:
        """Cosines of each query with every row: one matrix product for the batch (the matrix is
        read once per batch, not once per query)."""
        return list(np.stack(queries) @ self.vectors.T)

    @property
    def methods(self) -> np.ndarray:
        """HTTP method of each document ('' for components): parsed from the ids once, on first use."""
        if self._methods is None:
            self._methods = np.array([(parse_operation_id(i) or ("", "", ""))[2] for i in self.docs.ids])
        return self._methods

    def rows_vectors(self, file_id: str) -> np.ndarray | None:
        start, end = self.docs.ranges.get(file_id, (0, 0))
        return None if self.vectors is None or end == start else np.asarray(self.vectors[start:end])

    def get_nodes(self, ids: list[str]) -> dict[str, TextNode]:
        positions = {cid: self._position[cid] for cid in ids if cid in self._position}
        return {cid: self._node(pos) for cid, pos in positions.items()}

    def chunk_ids(self, file_id: str) -> list[str]:
        start, end = self.docs.ranges.get(file_id, (0, 0))
        return self.docs.ids[start:end]

    def _node(self, position: int) -> TextNode:
        return metadata_dict_to_node(self.retriever.corpus[position])

    def _stub(self, position: int) -> TextNode:
        """Id, API and type only: ranking and fusion need no more, and parsing a full node
        costs ~0.1 ms (a query touches a few hundred candidates). See ``hydrate``."""
        return TextNode(id_=self.docs.ids[position], text="",
                        metadata={"source_file": self._file_of[position], "type": str(self._types[position]), STUB: True})

    def _rows(self, file_ids: set[str], types: list[str] | None, methods: list[str] | None = None) -> np.ndarray | None:
        """Document positions of ``file_ids`` restricted to ``types`` and ``methods``; None when there are none."""
        if len(file_ids) >= len(self.docs.ranges) and all(f in file_ids for f in self.docs.ranges):
            key = (tuple(sorted(types)) if types is not None else None,
                   tuple(sorted(methods)) if methods is not None else None)
            if (rows := self._rows_cache.get(key)) is None:
                rows = self._rows_cache[key] = self._narrow(self._every_row, types, methods)
            return rows if rows.size else None
        spans = [self.docs.ranges[f] for f in sorted(file_ids) if f in self.docs.ranges]
        rows = np.concatenate([np.arange(s, e) for s, e in spans]) if spans else np.empty(0, dtype=np.int64)
        rows = self._narrow(rows, types, methods)
        return rows if rows.size else None

    def _narrow(self, rows: np.ndarray, types: list[str] | None, methods: list[str] | None) -> np.ndarray:
        if types is not None:
            rows = rows[np.isin(self._types[rows], list(types))]
        if methods is not None:
            rows = rows[np.isin(self.methods[rows], [m.upper() for m in methods])]
        return rows

    def _top(self, rows: np.ndarray, scores: np.ndarray, k: int, scale, keep_all: bool = False,
             hydrate: bool = True) -> list[NodeWithScore]:
        k = min(k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        make = self._node if hydrate else self._stub
        return [NodeWithScore(node=make(int(rows[i])), score=float(scale(scores[i])))
                for i in best if keep_all or scores[i] > 0]


def cosine_of(score: float) -> float:
    """The cosine similarity behind a vector hit's score (the inverse of ``exp(cosine - 1)``)."""
    return 1.0 + math.log(score) if score > 0 else -1.0


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def _ranges(sorted_chunks: list[Chunk]) -> dict[str, tuple[int, int]]:
    ranges: dict[str, tuple[int, int]] = {}
    for i, chunk in enumerate(sorted_chunks):
        start = ranges.get(chunk.file_id, (i, i))[0]
        ranges[chunk.file_id] = (start, i + 1)
    return ranges
