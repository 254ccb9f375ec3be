"""The loaded local index: filtered vector and BM25 search over row spans, and chunk lookup.

Chroma's filtered HNSW query took 50-160 ms over 68k chunks (``$in`` on ``source_file``);
selecting a few APIs' row spans and scoring them with numpy takes about a millisecond. What does
not depend on the query is prepared once: the row spans of every (API, type), and the fleet's
endpoint vectors as one float32 block (the fleet-wide endpoint search of stage 1 is a single
matrix-vector product over it). Everything else stays memory-mapped until a query needs it.

Under concurrent load (``specrag serve``), searches that cover most of a type block share one
pass over it: a ``BatchCoalescer`` per block stacks the waiting queries into one matrix product,
so the block is read (and its float16 rows converted) once per batch, not once per query.
"""

from __future__ import annotations

import math
import weakref
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from llama_index.core.schema import NodeWithScore, TextNode

from pipeline.index.batching import BatchCoalescer
from pipeline.index.lexical import Postings, query_terms, top_k
from pipeline.index.pack import TYPE_ORDER, Pack
from pipeline.nodes import chunk_to_node
from pipeline.specs.ids import HTTP_METHODS, parse_operation_id, parse_webhook_id
from pipeline.specs.models import Chunk

STUB = "_stub"  # metadata flag of a node that carries only id, source_file and type
HOT_TYPE = "endpoint"  # the block searched fleet-wide on every query (stage 1's endpoint evidence)
RECORD_CACHE = 4096
CONVERT_ROWS = 8192  # float16 rows converted per step outside the endpoint block (12 MB as float32)
FULL_BLOCK_SHARE = 0.25  # a search over at least this share of a type block scores the whole block, batched
METHOD_CODES = {"": 0} | {m.upper(): i + 1 for i, m in enumerate(HTTP_METHODS)}


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
        this = weakref.ref(self)  # weak: no reference cycle keeps a dropped generation's arrays alive
        self.batchers = {kind: BatchCoalescer(lambda queries, kind=kind: list(this()._block_products(kind, queries)))
                         for kind in TYPE_ORDER}  # concurrent whole-block searches share one matrix product
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

    @cached_property
    def methods(self) -> np.ndarray:
        """HTTP method of each row as a ``METHOD_CODES`` code (0: none, as for components),
        parsed from the operation and webhook ids once per generation, on the first filtered query."""
        codes = np.zeros(self.header.n_rows, dtype=np.int8)
        for kind in ("endpoint", "errors"):
            start, end = self.header.blocks[kind]
            for row in range(start, end):
                parsed = parse_operation_id(self.pack.ids[row]) or parse_webhook_id(self.pack.ids[row])
                codes[row] = METHOD_CODES[parsed[2]] if parsed else 0
        return codes

    def _method_mask(self, methods: list[str]) -> np.ndarray:
        """Rows of operations (and their errors) of ``methods``, as a bool mask over all rows."""
        wanted = [METHOD_CODES[m.upper()] for m in methods if m and m.upper() in METHOD_CODES]
        return np.isin(self.methods, wanted)

    def search(self, query: str, file_ids: set[str], types: list[str] | None, k: int,
               hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]:
        """BM25 over ``search_text`` (``methods``: operations of those HTTP methods only); no zero-score hits."""
        spans = self.spans(file_ids, types)
        term_ids = self.postings.term_ids(query_terms(query))
        if not spans or not term_ids or k <= 0:
            return []
        allowed = np.zeros(self.header.n_rows, dtype=bool)
        for start, end in spans:
            allowed[start:end] = True
        if methods is not None:
            allowed &= self._method_mask(methods)
        rows, scores = self.postings.score(term_ids, allowed)
        return self._hits(top_k(rows, scores, k), lambda s: s, hydrate)

    def vector_search(self, embedding: list[float], file_ids: set[str], types: list[str] | None, k: int,
                      hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore]:
        """Exact cosine search; scores as ChromaVectorStore gives them (:func:`vector_score`)."""
        spans = self.spans(file_ids, types)
        if not spans or self.vectors is None or k <= 0:
            return []
        query = np.asarray(embedding, dtype=np.float32)
        query /= max(float(np.linalg.norm(query)), 1e-12)
        rows = np.concatenate([np.arange(s, e) for s, e in spans])
        sims = np.concatenate(self._span_similarities(spans, query))
        if methods is not None:
            keep = self._method_mask(methods)[rows]
            rows, sims = rows[keep], sims[keep]
        return self._hits(top_k(rows, sims, k), vector_score, hydrate)

    def _span_similarities(self, spans: list[tuple[int, int]], query: np.ndarray) -> list[np.ndarray]:
        """Cosines of each span's rows; spans covering most of their type block are cut from the
        block's batched product (shared with concurrent searches), the others scored alone."""
        out: dict[tuple[int, int], np.ndarray] = {}
        for kind in TYPE_ORDER:
            block_start, block_end = self.header.blocks[kind]
            inside = [(s, e) for s, e in spans if block_start <= s and e <= block_end]
            if inside and sum(e - s for s, e in inside) >= FULL_BLOCK_SHARE * (block_end - block_start):
                block = self.batchers[kind](query)
                out |= {(s, e): block[s - block_start:e - block_start] for s, e in inside}
            else:
                out |= {(s, e): self._similarities(s, e, query[None, :])[0] for s, e in inside}
        return [out[span] for span in spans]

    def _block_products(self, kind: str, queries: list[np.ndarray]) -> np.ndarray:
        start, end = self.header.blocks[kind]
        return self._similarities(start, end, np.stack(queries))

    def _similarities(self, start: int, end: int, queries: np.ndarray) -> np.ndarray:
        """Cosines (queries x rows) of rows [start, end): a view of the float32 endpoint block when
        they lie in it, else float16 rows converted a block at a time (bounded memory for any
        selection; converted once for all the queries of a batch)."""
        hot_start, hot_end = self.header.blocks[HOT_TYPE]
        if hot_start <= start and end <= hot_end:
            if self._hot is None:
                self._hot = np.asarray(self.vectors[hot_start:hot_end], dtype=np.float32)
            return queries @ self._hot[start - hot_start:end - hot_start].T
        out = np.empty((len(queries), end - start), dtype=np.float32)
        for first in range(start, end, CONVERT_ROWS):
            last = min(end, first + CONVERT_ROWS)
            out[:, first - start:last - start] = queries @ np.asarray(self.vectors[first:last], dtype=np.float32).T
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


def vector_score(cosine: float) -> float:
    """A vector hit's score as ChromaVectorStore gives it: ``exp(cosine - 1)``, in (0, 1]."""
    return math.exp(cosine - 1.0)


def cosine_of(score: float) -> float:
    """The cosine similarity behind a vector hit's score (the inverse of :func:`vector_score`)."""
    return 1.0 + math.log(score) if score > 0 else -1.0
