"""The loaded local index: filtered vector and BM25 search over row spans, and chunk lookup.

Chroma's filtered HNSW query took 50-160 ms over 68k chunks (``$in`` on ``source_file``);
selecting a few APIs' row spans and scoring them with numpy takes about a millisecond. What does
not depend on the query is prepared once: the row spans of every (API, type), and the fleet's
endpoint vectors as one float32 block (the fleet-wide endpoint search of stage 1 is a single
matrix-vector product over it). Everything else stays memory-mapped until a query needs it.
"""

from __future__ import annotations

import math
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from llama_index.core.schema import NodeWithScore, TextNode

from pipeline.index.lexical import Postings, query_terms, top_k
from pipeline.index.pack import TYPE_ORDER, Pack
from pipeline.nodes import chunk_to_node
from pipeline.specs.models import Chunk

STUB = "_stub"  # metadata flag of a node that carries only id, source_file and type
HOT_TYPE = "endpoint"  # the block searched fleet-wide on every query (stage 1's endpoint evidence)
RECORD_CACHE = 4096
CONVERT_ROWS = 8192  # float16 rows converted per step outside the endpoint block (12 MB as float32)


class LocalIndex:
    """One generation, opened read-only (see pack.py for the files)."""

    def __init__(self, pack: Pack):
        self.pack = pack
        header = pack.header
        self.api_hashes = {fid: rows.content_hash for fid, rows in header.apis.items()}
        self._apis = sorted(header.apis)
        self._file_of = np.zeros(header.n_rows, dtype=np.int32)
        self._type_of = np.zeros(header.n_rows, dtype=np.int8)
        for i, fid in enumerate(self._apis):
            for kind, (start, end) in header.apis[fid].spans.items():
                self._file_of[start:end] = i
        for t, kind in enumerate(TYPE_ORDER):
            start, end = header.blocks[kind]
            self._type_of[start:end] = t
        a = pack.arrays
        self.postings = Postings(pack.vocab, a["post_ptr"], a["post_rows"], a["post_tf"], np.asarray(a["doc_len"]))
        self._hot: np.ndarray | None = None
        self._chunk = lru_cache(maxsize=RECORD_CACHE)(self._load_chunk)

    @classmethod
    def load(cls, folder: Path, verify: bool = True) -> "LocalIndex":
        return cls(Pack.open(folder, verify=verify))

    @cached_property
    def _position(self) -> dict[str, int]:
        """Row of each chunk id (built on the first lookup: a build that only copies rows never needs it)."""
        return {chunk_id: row for row, chunk_id in enumerate(self.pack.ids)}

    @property
    def vectors(self) -> np.ndarray | None:
        return self.pack.vectors

    @property
    def header(self):
        return self.pack.header

    # ---- search --------------------------------------------------------------------------

    def spans(self, file_ids: set[str], types: list[str] | None) -> list[tuple[int, int]]:
        """Row spans of ``file_ids`` x ``types``; one span per type when every API is wanted."""
        kinds = [k for k in TYPE_ORDER if types is None or k in types]
        if len(file_ids) == len(self._apis) and file_ids.issuperset(self._apis):
            return [self.header.blocks[k] for k in kinds if self.header.blocks[k][1] > self.header.blocks[k][0]]
        apis = self.header.apis
        return [apis[f].spans[k] for k in kinds for f in sorted(file_ids) if f in apis and k in apis[f].spans]

    def search(self, query: str, file_ids: set[str], types: list[str] | None, k: int,
               hydrate: bool = True) -> list[NodeWithScore]:
        """BM25 over ``search_text``; no zero-score hits."""
        spans = self.spans(file_ids, types)
        term_ids = self.postings.term_ids(query_terms(query))
        if not spans or not term_ids or k <= 0:
            return []
        allowed = np.zeros(self.header.n_rows, dtype=bool)
        for start, end in spans:
            allowed[start:end] = True
        rows, scores = self.postings.score(term_ids, allowed)
        return self._hits(top_k(rows, scores, k), lambda s: s, hydrate)

    def vector_search(self, embedding: list[float], file_ids: set[str], types: list[str] | None, k: int,
                      hydrate: bool = True) -> list[NodeWithScore]:
        """Exact cosine search; scores as ChromaVectorStore gives them (exp(cos - 1))."""
        spans = self.spans(file_ids, types)
        if not spans or self.vectors is None or k <= 0:
            return []
        query = np.asarray(embedding, dtype=np.float32)
        query /= max(float(np.linalg.norm(query)), 1e-12)
        rows = np.concatenate([np.arange(s, e) for s, e in spans])
        sims = np.concatenate([self._similarities(s, e, query) for s, e in spans])
        return self._hits(top_k(rows, sims, k), lambda s: math.exp(s - 1.0), hydrate)

    def _similarities(self, start: int, end: int, query: np.ndarray) -> np.ndarray:
        """Cosines of rows [start, end): a view of the float32 endpoint block when they lie in it,
        else float16 rows converted a block at a time (bounded memory for any selection)."""
        hot_start, hot_end = self.header.blocks[HOT_TYPE]
        if hot_start <= start and end <= hot_end:
            if self._hot is None:
                self._hot = np.asarray(self.vectors[hot_start:hot_end], dtype=np.float32)
            return self._hot[start - hot_start:end - hot_start] @ query
        out = np.empty(end - start, dtype=np.float32)
        for first in range(start, end, CONVERT_ROWS):
            last = min(end, first + CONVERT_ROWS)
            out[first - start:last - start] = np.asarray(self.vectors[first:last], dtype=np.float32) @ query
        return out

    def _hits(self, ranked: list[tuple[int, float]], scale, hydrate: bool) -> list[NodeWithScore]:
        make = self.node if hydrate else self._stub
        return [NodeWithScore(node=make(row), score=float(scale(score))) for row, score in ranked]

    # ---- chunks --------------------------------------------------------------------------

    def _load_chunk(self, row: int) -> Chunk:
        return Chunk.model_validate_json(self.pack.record(row))

    def chunk(self, row: int) -> Chunk:
        return self._chunk(row)

    def node(self, row: int) -> TextNode:
        return chunk_to_node(self._chunk(row))

    def _stub(self, row: int) -> TextNode:
        """Id, API and type only: ranking and fusion need no more (see ``ChunkStore.hydrate``)."""
        return TextNode(id_=self.pack.ids[row], text="", metadata={
            "source_file": self._apis[self._file_of[row]], "type": TYPE_ORDER[self._type_of[row]], STUB: True})

    def rows_of(self, ids: list[str]) -> dict[str, int]:
        return {cid: self._position[cid] for cid in ids if cid in self._position}

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        return {cid: self._chunk(row) for cid, row in self.rows_of(ids).items()}

    def get_nodes(self, ids: list[str]) -> dict[str, TextNode]:
        return {cid: self.node(row) for cid, row in self.rows_of(ids).items()}

    def api_rows(self, file_id: str) -> np.ndarray:
        """The API's rows in its chunk order."""
        spans = self.header.apis[file_id].spans.values() if file_id in self.header.apis else []
        rows = np.concatenate([np.arange(s, e) for s, e in spans]) if spans else np.empty(0, np.int64)
        return rows[np.argsort(self.pack.arrays["ordinal"][rows], kind="stable")]

    def chunk_ids(self, file_id: str) -> list[str]:
        return [self.pack.ids[r] for r in self.api_rows(file_id)]

    def api_chunks(self, file_id: str) -> list[Chunk]:
        return [self._load_chunk(int(r)) for r in self.api_rows(file_id)]

    def rows_vectors(self, file_id: str) -> np.ndarray | None:
        """The API's vectors (float32, chunk order), or None in lexical mode."""
        if self.vectors is None or file_id not in self.header.apis:
            return None
        return np.asarray(self.vectors[self.api_rows(file_id)], dtype=np.float32)
