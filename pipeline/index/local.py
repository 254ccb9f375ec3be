"""The loaded local index: filtered vector and BM25 search over row spans, and chunk lookup.

Chroma's filtered HNSW query took 50-160 ms over 68k chunks (``$in`` on ``source_file``);
selecting a few APIs' row spans and scoring them with numpy takes about a millisecond. What does
not depend on the query is prepared once: the row spans of every (API, type). Vectors stay
float16 on disk until a query needs them; a type block searched whole (the fleet-wide endpoint
search of stage 1 on every query; the component and error blocks only when a request covers most
of the fleet, as unfiltered basic retrieval does) is prepared once and kept, so each later search
over it is one matrix product with no conversion from float16 (measured under 20 concurrent
unfiltered requests: the per-query conversion of the component block was 70 % of the service's
CPU). The endpoint block keeps float32 rows, searched whole through int8 estimates with a bound
per row and exact cosines for the rows that can rank (``bounded.py``: the ranking is exact); the
others are int8 codes (a quarter of the memory: 19 MB instead of 76 MB for the fleet; cosines
within 0.002). Filtered searches outside a prepared block convert only their own rows.

Under concurrent load (``specrag serve``), searches that cover most of a type block share one
pass over it: a ``BatchCoalescer`` per block stacks the waiting queries into one matrix product.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from specrag.core.ids import (
    HTTP_METHODS,
    base_chunk_id,
    parse_operation_id,
    parse_webhook_id,
)
from specrag.index.batching import BatchCoalescer
from specrag.index.blas import one_blas_thread
from specrag.index.bounded import BoundedRows, Estimate, best_rows, quantize
from specrag.index.lexical import Postings, query_terms, top_k
from specrag.index.pack import TYPE_ORDER, Pack
from specrag.specs.models import Chunk

if TYPE_CHECKING:  # nodes are made for queries only: a build never imports LlamaIndex (~1.8 s)
    from llama_index.core.schema import NodeWithScore, TextNode
    from specrag.context.nodes import RankedRows

STUB = "_stub"  # metadata flag of a node that carries only id, source_file and type
RECORD_CACHE = 4096
STUB_CACHE = 16384  # ranking stubs, ~1 KB each (fresh queries after warm-up: p50 -1 ms for +12 MB RSS over 4096)
PRODUCT_CACHE = 8  # whole-block cosine arrays of recent query embeddings (270 KB for 68k rows)
BM25_CACHE = 8  # BM25 scores of every document (query term ids -> 4 bytes a distinct token list: 250 KB at 4x)
RANKING_CACHE = 64  # ranked rows of recent searches (a few KB each)
METHOD_MASK_CACHE = 16  # row masks per set of HTTP methods (one byte a row)
ROW_CACHE = 32768  # recent chunk id -> row answers (~3 us a lookup through the ids' hashes; ~4 MB)
# every search ranks at least this deep and keeps it: producer expansion ranks each API 90 deep
# (3 x its 30) after stage 3 ranked the same API 30 deep, and is served from that ranking
RANKING_DEPTH = 90
CONVERT_ROWS = 2048  # float16 rows read and converted per step: building a block (its float64 residuals: 6 MB), or a span outside one
PRODUCT_ROWS = 4096  # int8 rows widened to float32 per step of a product (6 MB: stays in cache)
# blocks ranked exactly when searched whole (float32 rows, found through int8 estimates: for the
# fleet's 19.3k endpoint rows, which every query's stage 1 searches, 0.25 against 0.83 ms with a
# hot cache, and 0.63 ms less CPU a query in all); the others as int8 (a quarter of the memory):
# the component and error blocks (49k rows, 76 MB as float32) are searched whole only by requests
# that cover most of the fleet.
EXACT_BLOCKS = ("endpoint",)
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
        self.postings = Postings(pack.vocab, a["post_ptr"], a["post_docs"], a["post_tf"], np.asarray(a["doc_len"]),
                                 np.asarray(a["doc_of"]))
        # type -> its whole block prepared for products (BoundedRows or QuantizedRows), once searched whole
        self._blocks: dict[str, BoundedRows | QuantizedRows] = {}
        # concurrent searches over the same whole blocks share one matrix product per block
        self.batchers: dict[tuple[str, ...], BatchCoalescer] = {}
        self._batchers_lock = threading.Lock()
        self._chunk = _weak_cache(self, LocalIndex._load_chunk, RECORD_CACHE)
        self._node_parts = _weak_cache(self, LocalIndex._load_node_parts, RECORD_CACHE)
        self._stored_metadata = _weak_cache(self, LocalIndex._load_stored_metadata, RECORD_CACHE)
        self.stub = _weak_cache(self, LocalIndex._make_stub, STUB_CACHE)  # a row's shared stub node (RankedRows reads it)
        self._recent_products = _weak_cache(self, LocalIndex._block_product, PRODUCT_CACHE)
        # one query searches several scopes with the same words (each stage-1 API, their union,
        # the producers' ranking): they share one scoring of the whole index
        self._bm25_totals = lru_cache(maxsize=BM25_CACHE)(self.postings.document_totals)
        self._query_term_ids = _weak_cache(self, LocalIndex._term_ids_of, BM25_CACHE)
        self._rankings = RecentRankings(RANKING_CACHE, RANKING_DEPTH)
        self._method_masks = _weak_cache(self, LocalIndex._load_method_mask, METHOD_MASK_CACHE)
        self._known_rows: OrderedDict[str, int] = OrderedDict()  # recent id -> row answers (a query asks hundreds)
        self._known_lock = threading.Lock()
        self._whole: frozenset[str] | None = None  # a frozenset of every API seen before (spans' check per search: 0.1 ms at 4x)

    @classmethod
    def load(cls, folder: Path, verify: bool = True) -> "LocalIndex":
        return cls(Pack.open(folder, verify=verify))


    @property
    def vectors(self) -> np.ndarray | None:
        return self.pack.vectors

    @property
    def header(self):
        return self.pack.header

    # ---- search --------------------------------------------------------------------------

    def spans(self, file_ids: AbstractSet[str], types: list[str] | None) -> list[tuple[int, int]]:
        """Row spans of ``file_ids`` x ``types``; one span per type when every API is wanted."""
        kinds = [k for k in TYPE_ORDER if types is None or k in types]
        if file_ids is self._whole or (len(file_ids) == len(self._apis) and file_ids.issuperset(self._apis)):
            if isinstance(file_ids, frozenset):  # the store's served set, asked for by every fleet-wide search
                self._whole = file_ids
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
        """Rows of operations (and their errors) of ``methods``, as a bool mask over all rows
        (read-only, kept per set of methods: a query's searches ask for the same few)."""
        wanted = tuple(sorted({METHOD_CODES[m.upper()] for m in methods if m and m.upper() in METHOD_CODES}))
        return self._method_masks(wanted)

    def _load_method_mask(self, codes: tuple[int, ...]) -> np.ndarray:
        mask = np.isin(self.methods, codes)
        mask.flags.writeable = False
        return mask

    def search(self, query: str, file_ids: AbstractSet[str], types: list[str] | None, k: int,
               hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore] | RankedRows:
        """BM25 over ``search_text`` (``methods``: operations of those HTTP methods only); no zero-score hits."""
        spans = sorted(self.spans(file_ids, types))  # rows ascending: ties at the cut fall as before
        term_ids = self._query_term_ids(query)
        if not spans or not term_ids or k <= 0:
            return []

        def rank(depth: int) -> tuple[np.ndarray, np.ndarray]:
            totals = self._bm25_totals(term_ids)  # per document: each span reads its rows' scores
            mask = self._method_mask(methods) if methods is not None else None
            rows, scores = [], []
            for start, end in spans:
                span_scores = totals[self.postings.doc_of[start:end]]
                picked = np.flatnonzero(span_scores if mask is None else (span_scores != 0) & mask[start:end])
                rows.append(start + picked)
                scores.append(span_scores[picked])
            return top_k(np.concatenate(rows), np.concatenate(scores), depth)

        ranked = self._rankings.get(("bm25", term_ids, tuple(spans), _methods_key(methods)), k, rank)
        return self._hits(*ranked, vector=False, hydrate=hydrate)

    def _term_ids_of(self, query: str) -> tuple[int, ...]:
        return tuple(self.postings.term_ids(query_terms(query)))

    def vector_search(self, query: np.ndarray, file_ids: AbstractSet[str], types: list[str] | None, k: int,
                      hydrate: bool = True, methods: list[str] | None = None) -> list[NodeWithScore] | RankedRows:
        """Exact cosine search of the query's :func:`unit_vector`; scores as ChromaVectorStore gives
        them (:func:`vector_score`)."""
        spans = self.spans(file_ids, types)
        if not spans or self.vectors is None or k <= 0:
            return []

        def rank(depth: int) -> tuple[np.ndarray, np.ndarray]:
            mask = self._method_mask(methods) if methods is not None else None
            rows, sims = [], []
            with one_blas_thread():
                similarities = self._span_similarities(spans, query)
            for (start, end), span_sims in zip(spans, similarities):
                keep = None if mask is None else mask[start:end]
                if isinstance(span_sims, Estimate):
                    picked, cosines = span_sims.best(depth, keep)
                else:
                    picked = best_rows(span_sims, depth, keep)
                    cosines = span_sims[picked]
                rows.append(start + picked)
                sims.append(cosines)
            return top_k(np.concatenate(rows), np.concatenate(sims), depth)

        ranked = self._rankings.get(("cosine", query.tobytes(), tuple(spans), _methods_key(methods)), k, rank)
        return self._hits(*ranked, vector=True, hydrate=hydrate)

    def _span_similarities(self, spans: list[tuple[int, int]], query: np.ndarray) -> list[np.ndarray | Estimate]:
        """Cosines of each span's rows; spans covering most of their type block are cut from the
        block's product, batched with concurrent searches over the same blocks (one queue for all
        of them: an unfiltered search waits once, not once per block), the others scored alone.
        A span cut from a bounded block (``EXACT_BLOCKS``) is an :class:`Estimate`, ranked by its
        ``best``."""
        out: dict[tuple[int, int], np.ndarray | Estimate] = {}
        whole: dict[str, list[tuple[int, int]]] = {}
        for kind in TYPE_ORDER:
            block_start, block_end = self.header.blocks[kind]
            inside = [(s, e) for s, e in spans if block_start <= s and e <= block_end]
            if inside and sum(e - s for s, e in inside) >= FULL_BLOCK_SHARE * (block_end - block_start):
                whole[kind] = inside
            else:
                out |= {(s, e): self._similarities(s, e, query[None, :])[0] for s, e in inside}
        if whole:
            products = self._recent_products(tuple(whole), query.tobytes())
            for kind, inside in whole.items():
                block_start = self.header.blocks[kind][0]
                product = products[kind]
                out |= {(s, e): product.span(s - block_start, e - block_start) if isinstance(product, Estimate)
                        else product[s - block_start:e - block_start] for s, e in inside}
        return [out[span] for span in spans]

    def _block_product(self, kinds: tuple[str, ...], query: bytes) -> dict[str, np.ndarray | Estimate]:
        """One query's whole-block cosines (cached in ``_recent_products``: stage 1's evidence and
        stage 3's fleet search score the same blocks with the same embedding)."""
        out: dict[str, np.ndarray | Estimate] = {}
        for kind, product in self._batcher(kinds)(np.frombuffer(query, dtype=np.float32)).items():
            if not isinstance(product, Estimate):  # an Estimate's arrays are its own, read-only already
                product = np.array(product)  # a batched row is a view that would keep the batch alive
                product.flags.writeable = False
            out[kind] = product
        return out

    def _batcher(self, kinds: tuple[str, ...]) -> BatchCoalescer:
        batcher = self.batchers.get(kinds)
        if batcher is None:
            this = weakref.ref(self)  # weak: no reference cycle keeps a dropped generation's arrays alive
            with self._batchers_lock:
                batcher = self.batchers.setdefault(kinds, BatchCoalescer(
                    lambda queries: this()._block_products(kinds, queries)))
        return batcher

    def _block_products(self, kinds: tuple[str, ...], queries: list[np.ndarray]) -> list[dict[str, np.ndarray | Estimate]]:
        """Per query, its cosines with each block of ``kinds`` (each block prepared once, then kept)."""
        stacked = np.stack(queries)
        products = {}
        for kind in kinds:
            block = self._blocks.get(kind)
            if block is None:
                block = self._blocks[kind] = self._prepared(*self.header.blocks[kind], exact=kind in EXACT_BLOCKS)
            products[kind] = block.estimates(stacked)
        return [{kind: product[i] for kind, product in products.items()} for i in range(len(queries))]

    def _prepared(self, start: int, end: int, exact: bool) -> "BoundedRows | QuantizedRows":
        """Rows [start, end) prepared for products (no full-size temporary), each distinct vector
        once: the block's rows point to them."""
        distinct, row_of = np.unique(self.pack.arrays["vector_of"][start:end], return_inverse=True)
        return (BoundedRows if exact else QuantizedRows).build(self._distinct_steps(distinct), len(distinct),
                                                             self.vectors.shape[1], row_of.reshape(-1))

    def _distinct_steps(self, distinct: np.ndarray):
        """The vectors at ``distinct`` as float16, ``CONVERT_ROWS`` at a time: (offset, end offset, rows)."""
        for first in range(0, len(distinct), CONVERT_ROWS):
            last = min(len(distinct), first + CONVERT_ROWS)
            yield first, last, self.pack.distinct_vectors(distinct[first:last])

    def _row_steps(self, start: int, end: int):
        """Rows [start, end) as float16, ``CONVERT_ROWS`` at a time: (offset, end offset, rows)."""
        for first in range(start, end, CONVERT_ROWS):
            last = min(end, first + CONVERT_ROWS)
            yield first - start, last - start, self.pack.vector_rows(first, last)

    def _similarities(self, start: int, end: int, queries: np.ndarray) -> np.ndarray:
        """Cosines (queries x rows) of rows [start, end): from a prepared block when they lie in
        one, else float16 rows converted a step at a time (bounded memory for any selection)."""
        for kind, block in tuple(self._blocks.items()):  # a snapshot: another thread may add a block
            block_start, block_end = self.header.blocks[kind]
            if block_start <= start and end <= block_end:
                return block.times(queries, start - block_start, end - block_start)
        out = np.empty((len(queries), end - start), dtype=np.float32)
        for first, last, rows in self._row_steps(start, end):
            out[:, first:last] = queries @ rows.astype(np.float32).T
        return out

    def _hits(self, rows: np.ndarray, scores: np.ndarray, vector: bool, hydrate: bool) -> list[NodeWithScore] | RankedRows:
        """Ranked rows as hits: full nodes as ``NodeWithScore``, or (``hydrate=False``, for ranking
        and fusion) the rows themselves, read as stub hits (:class:`~specrag.context.nodes.RankedRows`).
        The ``:partN`` rows of a split chunk carry the chunk's own search and embed texts: they come
        back as the chunk, once, at its best place (the reference expansion brings the other parts)."""
        chunk_rows = self._chunk_rows[rows]
        if self._has_parts and (chunk_rows != rows).any():
            _, first = np.unique(chunk_rows, return_index=True)  # each chunk at its first (best) place
            first.sort()
            chunk_rows, scores = chunk_rows[first], scores[first]
        scale = vector_score if vector else float
        if not hydrate:
            # lazy: keeps llama_index.core (~2 s) out of `specrag index` (tests/index/test_build_imports.py)
            from specrag.context.nodes import RankedRows

            return RankedRows(self, chunk_rows, scores, scale)
        from llama_index.core.schema import NodeWithScore

        return [NodeWithScore(node=self.node(row), score=scale(score))
                for row, score in zip(chunk_rows.tolist(), scores.tolist())]

    def id_order(self, rows: np.ndarray) -> np.ndarray:
        """Where each row's chunk id falls in the ids' sorted order (fusion breaks ties by id)."""
        return self._id_order[rows]

    @property
    def _id_order(self) -> np.ndarray:
        return self.pack.arrays["id_rank"]

    def in_apis(self, rows: np.ndarray, file_ids: set[str]) -> np.ndarray:
        """Which ``rows`` belong to one of ``file_ids``, as a bool array."""
        codes = [self._api_code[f] for f in file_ids if f in self._api_code]
        return np.isin(self._file_of[rows], codes)

    @cached_property
    def _api_code(self) -> dict[str, int]:
        return {file_id: i for i, file_id in enumerate(self._apis)}

    @cached_property
    def _has_parts(self) -> bool:
        return bool((self._chunk_rows != np.arange(len(self._chunk_rows))).any())

    @cached_property
    def _chunk_rows(self) -> np.ndarray:
        """Each row's chunk row: its own, or for a ``:partN`` row the row of the chunk's first part
        (which keeps the chunk's id). Built on the first search."""
        rows = np.arange(self.header.n_rows, dtype=np.int32)
        if not self.pack.ids.contains(":part"):
            return rows
        for row, chunk_id in enumerate(self.pack.ids):
            if ":part" in chunk_id:
                found = self._row_of(base_chunk_id(chunk_id))
                rows[row] = row if found is None else found
        return rows

    # ---- chunks --------------------------------------------------------------------------

    def _load_chunk(self, row: int) -> Chunk:
        return Chunk.model_validate_json(self.pack.record(row))

    def chunk(self, row: int) -> Chunk:
        return self._chunk(row)

    def node(self, row: int) -> TextNode:
        """A new node each call (callers may change theirs), from the row's cached metadata."""
        # lazy: keeps llama_index.core (~2 s) out of `specrag index`
        from specrag.context.nodes import text_node

        node_id, text, metadata = self._node_parts(row)
        return text_node(node_id, text, dict(metadata))

    def _load_node_parts(self, row: int) -> tuple[str, str, dict]:
        # lazy: keeps llama_index.core (~2 s) out of `specrag index`
        from specrag.context.nodes import node_parts

        # parsed here, not through the chunk cache: queries read operations as nodes, and their parsed
        # chunks (~25 KB, most of it producer edges as models) held 18 MB more after 1,500 varied
        # questions; its metadata serialises several fields as JSON: once per row
        return node_parts(self._load_chunk(row))

    def _make_stub(self, row: int) -> TextNode:
        """Id, API and type only: ranking and fusion need no more (see ``ChunkStore.hydrate``).
        Shared by every hit of the row (``stub`` caches them: a query builds hundreds of hits,
        and a node costs more than the search that finds it): a stub is read-only."""
        from llama_index.core.schema import TextNode

        return TextNode(id_=self.pack.ids[row], text="", metadata={
            "source_file": self._apis[self._file_of[row]], "type": TYPE_ORDER[self._type_of[row]], STUB: True})

    def _row_of(self, chunk_id: str) -> int | None:
        return self.rows_of([chunk_id]).get(chunk_id)

    def _remember_row(self, chunk_id: str, row: int) -> None:
        with self._known_lock:
            self._known_rows[chunk_id] = row
            if len(self._known_rows) > ROW_CACHE:
                self._known_rows.popitem(last=False)

    def rows_of(self, ids: list[str]) -> dict[str, int]:
        found = {cid: self._known_rows.get(cid) for cid in ids}
        if missing := [cid for cid, row in found.items() if row is None]:
            for cid, row in zip(missing, self.pack.ids.rows_of(missing)):
                found[cid] = row
                if row is not None:
                    self._remember_row(cid, row)
        return {cid: row for cid, row in found.items() if row is not None}

    def get_chunks(self, ids: list[str]) -> dict[str, Chunk]:
        return {cid: self._chunk(row) for cid, row in self.rows_of(ids).items()}

    def stored_metadata(self, chunk_id: str) -> dict | None:
        """A chunk's metadata as stored (``Chunk.metadata()``), kept per row: shared and read-only
        (copy it to change it). Each reference of a context needs it, and encoding it again from
        the chunk (ten JSON fields) was 0.3 ms of a query."""
        row = self._row_of(chunk_id)
        return None if row is None else self._stored_metadata(row)

    def _load_stored_metadata(self, row: int) -> dict:
        return self._chunk(row).metadata()

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

    def centroids(self, file_ids: list[str], kind: str = "endpoint") -> np.ndarray | None:
        """One unit row per API: the mean of its ``kind`` chunks' vectors (zeros for an API without
        such chunks), or None in lexical mode."""
        if self.vectors is None:
            return None
        out = np.zeros((len(file_ids), self.vectors.shape[1]), dtype=np.float32)
        for i, file_id in enumerate(file_ids):
            api = self.header.apis.get(file_id)
            if api is not None and kind in api.spans and api.spans[kind][1] > api.spans[kind][0]:
                mean = self.pack.vector_rows(*api.spans[kind]).astype(np.float32).mean(axis=0)
                out[i] = mean / max(float(np.linalg.norm(mean)), 1e-9)
        return out

    def rows_vectors(self, file_id: str) -> np.ndarray | None:
        """The API's vectors (float32, chunk order), or None in lexical mode."""
        if self.vectors is None or file_id not in self.header.apis:
            return None
        return self.pack.distinct_vectors(self.pack.arrays["vector_of"][self.api_rows(file_id)]).astype(np.float32)


def _methods_key(methods: list[str] | None) -> tuple[str, ...] | None:
    return None if methods is None else tuple(methods)


class RecentRankings:
    """The ranked rows and scores of recent searches, by what decides them (the query's terms or
    its unit embedding, the row spans, the methods), each to the depth it was ranked. A ranking to
    depth k is the first k rows of one to a greater depth (a total order: score, then row), so a
    repeat at most as deep is served from it: stage 3's fleet-wide search repeats stage 1's
    evidence search, and producer expansion the per-API searches of stage 3 (hence ``depth``: every
    search is ranked at least that deep)."""

    def __init__(self, size: int, depth: int = 0):
        self.size, self.depth = size, depth
        self._items: OrderedDict[tuple, tuple[int, np.ndarray, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def get(self, key: tuple, k: int, rank: Callable[[int], tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
        """The first ``k`` rows and scores of ``key``'s ranking; ``rank(depth)`` ranks it when no
        kept one is deep enough."""
        with self._lock:
            found = self._items.get(key)
            if found is not None and found[0] >= k:
                self._items.move_to_end(key)
                self.hits += 1
                return found[1][:k], found[2][:k]
        depth = max(k, self.depth)
        rows, scores = rank(depth)
        rows.flags.writeable = scores.flags.writeable = False  # every later caller gets a view of them
        with self._lock:
            self._items[key] = (depth, rows, scores)
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return rows[:k], scores[:k]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = 0


def unit_vector(embedding: list[float]) -> np.ndarray:
    """A query embedding as the read-only float32 unit vector every search of it scores with."""
    query = np.asarray(embedding, dtype=np.float32)
    query /= max(float(np.linalg.norm(query)), 1e-12)
    query.flags.writeable = False
    return query


def vector_score(cosine: float) -> float:
    """A vector hit's score as ChromaVectorStore gives it: ``exp(cosine - 1)``, in (0, 1]."""
    return math.exp(cosine - 1.0)


def cosine_of(score: float) -> float:
    """The cosine similarity behind a vector hit's score (the inverse of :func:`vector_score`)."""
    return 1.0 + math.log(score) if score > 0 else -1.0


class QuantizedRows(NamedTuple):
    """A block as int8 codes with one float32 scale per distinct vector (a vector is ``codes *
    scale``; ``row_of`` maps each block row to its vector): a quarter of float32's memory, and over
    a block too big for the CPU cache no slower (it reads a quarter of the bytes: 2.6 against 3.1
    ms for the fleet's 39.6k component rows, one thread). The cosines differ from float32's by
    under 0.002."""

    codes: np.ndarray  # int8, distinct vectors x dim
    scales: np.ndarray  # float32, one per distinct vector
    row_of: np.ndarray  # int32 per block row: its distinct vector

    @classmethod
    def build(cls, steps, n: int, dim: int, row_of: np.ndarray | None = None) -> "QuantizedRows":
        """From ``(offset, end, float rows)`` steps covering distinct vectors [0, n)."""
        codes, scales = np.empty((n, dim), dtype=np.int8), np.empty(n, dtype=np.float32)
        for first, last, rows in steps:
            codes[first:last], scales[first:last] = quantize(rows)
        row_of = np.arange(n, dtype=np.int32) if row_of is None else np.asarray(row_of, dtype=np.int32)
        return cls(codes, scales, row_of)

    @property
    def n_rows(self) -> int:
        return len(self.row_of)

    def estimates(self, queries: np.ndarray) -> np.ndarray:
        """Cosines (queries x rows) of every row: each distinct vector scored once."""
        return self._distinct_times(queries, None)[:, self.row_of]

    def times(self, queries: np.ndarray, start: int, end: int) -> np.ndarray:
        """Cosines (queries x rows) of rows [start, end)."""
        return self._distinct_times(queries, self.row_of[start:end])

    def _distinct_times(self, queries: np.ndarray, vectors: np.ndarray | None) -> np.ndarray:
        """Cosines (queries x ``vectors``; None: all of them), widened to float32 a step at a time."""
        n = len(self.scales) if vectors is None else len(vectors)
        out = np.empty((len(queries), n), dtype=np.float32)
        for first in range(0, n, PRODUCT_ROWS):
            last = min(n, first + PRODUCT_ROWS)
            codes = self.codes[first:last] if vectors is None else self.codes[vectors[first:last]]
            out[:, first:last] = queries @ codes.astype(np.float32).T
        out *= self.scales if vectors is None else self.scales[vectors]
        return out


def _weak_cache(index: "LocalIndex", method: Callable, maxsize: int) -> Callable:
    """An LRU cache of one of ``index``'s methods that does not keep the index alive. A cached bound
    method is a reference cycle (index -> cache -> method -> index), so a dropped generation, its
    arrays and its open files waited for the garbage collector (over a thousand files in one test
    run, past what ``select()`` takes) instead of going when the last reader lets go."""
    this = weakref.ref(index)
    return lru_cache(maxsize=maxsize)(lambda *args: method(this(), *args))
