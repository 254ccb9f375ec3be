"""Writing the next generation of the local index: unchanged APIs' rows are copied from the
previous generation as bytes (no re-parse, re-embed or re-tokenize), changed APIs' rows are
added from their new chunks. The folder is written under a temporary name and renamed whole."""

from __future__ import annotations

import json
import os
import shutil
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from specrag.index.lexical import LEXICAL_VERSION, document_terms
from specrag.index.pack import TYPE_ORDER, ApiRows, Pack, PackHeader, id_hash, seal
from specrag.index.vector_reuse import text_hash
from specrag.specs.models import Chunk

WRITE_ROWS = 8192  # distinct vectors gathered and written per step (6 MB as float16)


@dataclass
class NewApi:
    """An API whose rows are written from chunks: its vectors (float32, chunk order) and the
    64-bit hashes of its embed texts."""

    file_id: str
    content_hash: str
    chunks_digest: str
    chunks: list[Chunk]
    vectors: np.ndarray | None
    embed_hashes: np.ndarray


@dataclass
class _Span:
    start: int  # first row in the new generation
    end: int
    old: tuple[int, int] | None  # rows in the previous generation, or
    new: tuple[NewApi, list[int]] | None  # the API and the chunk positions of this span


def write_generation(folder: Path, generation: int, old: Pack | None, keep: list[str], new: list[NewApi], *,
                     embed_model: str, dim: int, retokenize: bool = False) -> PackHeader:
    """Rows of ``keep`` (APIs of ``old``) and of ``new``, sealed into ``folder``."""
    spans, blocks, apis = _plan(old, keep, new)
    n = blocks[TYPE_ORDER[-1]][1]
    tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ids: list[str] = [""] * n
    ordinal, embed_hash = np.zeros(n, np.int32), np.zeros(n, np.uint64)
    offsets = np.zeros(n + 1, np.int64)
    sources = _VectorSources(n, old, new) if dim else None
    with open(tmp / "chunks.bin", "wb") as records:
        for span in spans:
            rows = slice(span.start, span.end)
            if span.old is not None:
                s, e = span.old
                ids[rows] = old.ids[s:e]
                ordinal[rows], embed_hash[rows] = old.arrays["ordinal"][s:e], old.arrays["embed_hash"][s:e]
                old_offsets = old.arrays["chunk_offsets"]
                offsets[span.start + 1:span.end + 1] = old_offsets[s + 1:e + 1] - old_offsets[s] + offsets[span.start]
                old.copy_records(s, e, records)
                if sources is not None:
                    sources.old_span(span.start, span.end, s)
                continue
            api, positions = span.new
            for row, i in zip(range(span.start, span.end), positions):
                data = zlib.compress(api.chunks[i].model_dump_json().encode(), 6)
                records.write(data)
                offsets[row + 1] = offsets[row] + len(data)
                ids[row], ordinal[row], embed_hash[row] = api.chunks[i].id, i, api.embed_hashes[i]
            if sources is not None:
                sources.new_span(span.start, api, positions)
    vector_of = sources.write(tmp / "vectors.npy", embed_hash, dim) if sources is not None else np.zeros(n, np.int32)
    vocab, post = _postings(old, spans, n, retokenize)
    for name, array in (("ordinal", ordinal), ("embed_hash", embed_hash), ("vector_of", vector_of),
                        ("chunk_offsets", offsets), *post.items()):
        np.save(tmp / f"{name}.npy", array)
    _write_ids(tmp, ids)
    (tmp / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    n_vectors = int(vector_of.max()) + 1 if sources is not None and n else 0
    header = seal(tmp, PackHeader(generation=generation, n_rows=n, dim=dim, n_vectors=n_vectors,
                                  embed_model=embed_model, lexical_version=LEXICAL_VERSION, blocks=blocks, apis=apis))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return header


def _write_ids(folder: Path, ids: list[str]) -> None:
    """``ids.bin`` with its offsets, each id's hash and its place in sorted order (pack.py)."""
    encoded = [i.encode("utf-8") for i in ids]
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    (folder / "ids.bin").write_bytes(b"".join(encoded))
    rank = np.empty(len(ids), np.int32)
    rank[sorted(range(len(ids)), key=ids.__getitem__)] = np.arange(len(ids), dtype=np.int32)
    for name, array in (("id_offsets", offsets), ("id_rank", rank),
                        ("id_hash", np.fromiter((id_hash(i) for i in ids), np.uint64, len(ids)))):
        np.save(folder / f"{name}.npy", array)


class _VectorSources:
    """Where each row's vector comes from (the previous generation's vector, or a new API's
    chunk), so the generation stores each distinct embed text's vector once, in first-row order."""

    def __init__(self, n: int, old: Pack | None, new: list[NewApi]):
        self.old, self.new = old, new
        self.old_vector = np.full(n, -1, np.int64)  # the previous generation's vector index
        self.new_api = np.full(n, -1, np.int32)  # else: index in ``new`` and the chunk's position
        self.new_pos = np.zeros(n, np.int32)
        self._api_index = {id(api): i for i, api in enumerate(new)}

    def old_span(self, start: int, end: int, old_start: int) -> None:
        self.old_vector[start:end] = self.old.arrays["vector_of"][old_start:old_start + end - start]

    def new_span(self, start: int, api: NewApi, positions: list[int]) -> None:
        self.new_api[start:start + len(positions)] = self._api_index[id(api)]
        self.new_pos[start:start + len(positions)] = positions

    def write(self, path: Path, embed_hash: np.ndarray, dim: int) -> np.ndarray:
        """Write the distinct vectors to ``path``; each row's index into them."""
        _, first, inverse = np.unique(embed_hash, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # distinct texts in the order of their first row
        rank = np.empty(len(order), np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        first_rows = first[order]
        unit: dict[int, np.ndarray] = {}  # new API index -> its unit float16 vectors
        with open(path, "wb") as out:
            np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)),
                                                       "fortran_order": False, "shape": (len(order), dim)})
            for lo in range(0, len(first_rows), WRITE_ROWS):
                rows = first_rows[lo:lo + WRITE_ROWS]
                step = np.empty((len(rows), dim), np.float16)
                from_old = self.old_vector[rows] >= 0
                if from_old.any():
                    step[from_old] = self.old.distinct_vectors(self.old_vector[rows[from_old]])
                for i in np.flatnonzero(~from_old):
                    a = int(self.new_api[rows[i]])
                    if a not in unit:
                        unit[a] = _unit(self.new[a].vectors).astype(np.float16)
                    step[i] = unit[a][self.new_pos[rows[i]]]
                out.write(step.tobytes())
        return rank[inverse.reshape(-1)].astype(np.int32)


def _plan(old: Pack | None, keep: list[str], new: list[NewApi]):
    sources: dict[str, ApiRows | NewApi] = {fid: old.header.apis[fid] for fid in keep}
    sources |= {a.file_id: a for a in new}
    spans: list[_Span] = []
    blocks: dict[str, tuple[int, int]] = {}
    apis: dict[str, ApiRows] = {}
    row = 0
    for kind in TYPE_ORDER:
        first = row
        for fid in sorted(sources):
            src = sources[fid]
            if isinstance(src, ApiRows):
                s, e = src.spans.get(kind, (0, 0))
                span = _Span(row, row + e - s, (s, e), None)
                entry = apis.setdefault(fid, ApiRows(content_hash=src.content_hash, chunks_digest=src.chunks_digest,
                                                     n_chunks=src.n_chunks, spans={}))
            else:
                positions = [i for i, c in enumerate(src.chunks) if c.type.value == kind]
                span = _Span(row, row + len(positions), None, (src, positions))
                entry = apis.setdefault(fid, ApiRows(content_hash=src.content_hash, chunks_digest=src.chunks_digest,
                                                     n_chunks=len(src.chunks), spans={}))
            if span.end > span.start:
                spans.append(span)
                entry.spans[kind] = (span.start, span.end)
                row = span.end
        blocks[kind] = (first, row)
    return spans, blocks, apis


def _postings(old: Pack | None, spans: list[_Span], n: int, retokenize: bool):
    """Postings of the new generation over documents (distinct token lists): the previous
    generation's documents that kept rows still use are copied (renumbered in their order, so
    their postings stay sorted), new rows are tokenized and share a document when their tokens
    repeat one. Each row's document is ``doc_of``."""
    doc_of = np.full(n, -1, np.int64)
    vocab: list[str] = []
    parts_docs, parts_terms, parts_tf = [], [], []
    doc_len: list[np.ndarray] = []
    doc_hash: list[np.ndarray] = []
    n_docs = 0
    known: dict[int, int] = {}  # document hash -> document
    old_spans = [s for s in spans if s.old is not None]
    if old is not None and old_spans and not retokenize:
        old_doc_of = old.arrays["doc_of"]
        used = np.unique(np.concatenate([old_doc_of[s.old[0]:s.old[1]] for s in old_spans]))
        doc_map = np.full(len(old.arrays["doc_len"]), -1, np.int64)
        doc_map[used] = np.arange(len(used))
        for s in old_spans:
            doc_of[s.start:s.end] = doc_map[old_doc_of[s.old[0]:s.old[1]]]
        docs = doc_map[old.arrays["post_docs"]]
        kept = docs >= 0
        term_of = np.repeat(np.arange(len(old.vocab), dtype=np.int32), np.diff(old.arrays["post_ptr"]))
        counts = np.bincount(term_of[kept], minlength=len(old.vocab))
        in_use = np.flatnonzero(counts)
        vocab = [old.vocab[i] for i in in_use]
        parts_docs.append(docs[kept])
        parts_terms.append(np.repeat(np.arange(len(in_use), dtype=np.int32), counts[in_use]))
        parts_tf.append(np.asarray(old.arrays["post_tf"])[kept])
        doc_len.append(np.asarray(old.arrays["doc_len"])[used])
        doc_hash.append(np.asarray(old.arrays["doc_hash"])[used])
        known = dict(zip(doc_hash[0].tolist(), range(len(used))))
        n_docs = len(used)
        del docs, kept, term_of, doc_map
    term_id = {t: i for i, t in enumerate(vocab)}
    fresh = [s for s in spans if s.old is None or retokenize]
    texts, rows_of = [], []
    for s in fresh:
        if s.old is not None:
            texts += [json.loads(old.record(r))["search_text"] for r in range(*s.old)]
        else:
            api, positions = s.new
            texts += [api.chunks[i].search_text for i in positions]
        rows_of += range(s.start, s.end)
    docs_l, terms_l, tf_l, len_l, hash_l = [], [], [], [], []
    for row, tokens in zip(rows_of, document_terms(texts) if texts else []):
        key = text_hash("\0".join(tokens))
        doc = known.get(key)
        if doc is None:
            doc = known[key] = n_docs
            n_docs += 1
            len_l.append(len(tokens))
            hash_l.append(key)
            for term, count in Counter(tokens).items():
                docs_l.append(doc)
                terms_l.append(term_id.setdefault(term, len(term_id)))
                tf_l.append(min(count, 65535))
        doc_of[row] = doc
    vocab = list(term_id)
    parts_docs.append(np.asarray(docs_l, np.int64))
    parts_terms.append(np.asarray(terms_l, np.int32))
    parts_tf.append(np.asarray(tf_l, np.uint16))
    doc_len.append(np.asarray(len_l, np.int32))
    doc_hash.append(np.asarray(hash_l, np.uint64))
    terms = np.concatenate(parts_terms)
    order = np.argsort(terms, kind="stable")
    ptr = np.zeros(len(vocab) + 1, np.int64)
    np.cumsum(np.bincount(terms, minlength=len(vocab)), out=ptr[1:])
    return vocab, {"post_ptr": ptr, "post_docs": np.concatenate(parts_docs).astype(np.int32)[order],
                   "post_tf": np.concatenate(parts_tf)[order], "doc_len": np.concatenate(doc_len).astype(np.int32),
                   "doc_of": doc_of.astype(np.int32), "doc_hash": np.concatenate(doc_hash).astype(np.uint64)}


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
