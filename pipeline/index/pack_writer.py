"""Writing the next generation of the local index: unchanged APIs' rows are copied from the
previous generation as bytes (no re-parse, re-embed or re-tokenize), changed APIs' rows are
added from their new chunks. The folder is written under a temporary name and renamed whole."""

from __future__ import annotations

import json
import os
import shutil
import zlib
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from specrag.index.lexical import LEXICAL_VERSION, document_terms
from specrag.index.pack import TYPE_ORDER, ApiRows, Pack, PackHeader, seal
from specrag.specs.models import Chunk


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
    with open(tmp / "chunks.bin", "wb") as records, (open(tmp / "vectors.npy", "wb") if dim else nullcontext()) as vectors:
        if dim:
            np.lib.format.write_array_header_1_0(vectors, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)),
                                                           "fortran_order": False, "shape": (n, dim)})
        for span in spans:
            rows = slice(span.start, span.end)
            if span.old is not None:
                s, e = span.old
                ids[rows] = old.ids[s:e]
                ordinal[rows], embed_hash[rows] = old.arrays["ordinal"][s:e], old.arrays["embed_hash"][s:e]
                if dim:
                    old.copy_vectors(s, e, vectors)
                old_offsets = old.arrays["chunk_offsets"]
                offsets[span.start + 1:span.end + 1] = old_offsets[s + 1:e + 1] - old_offsets[s] + offsets[span.start]
                old.copy_records(s, e, records)
                continue
            api, positions = span.new
            for row, i in zip(range(span.start, span.end), positions):
                data = zlib.compress(api.chunks[i].model_dump_json().encode(), 6)
                records.write(data)
                offsets[row + 1] = offsets[row] + len(data)
                ids[row], ordinal[row], embed_hash[row] = api.chunks[i].id, i, api.embed_hashes[i]
            if dim:
                vectors.write(_unit(api.vectors[positions]).astype(np.float16).tobytes())
    vocab, post = _postings(old, spans, n, retokenize)
    for name, array in (("ordinal", ordinal), ("embed_hash", embed_hash), ("chunk_offsets", offsets), *post.items()):
        np.save(tmp / f"{name}.npy", array)
    (tmp / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
    (tmp / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    header = seal(tmp, PackHeader(generation=generation, n_rows=n, dim=dim, embed_model=embed_model,
                                  lexical_version=LEXICAL_VERSION, blocks=blocks, apis=apis))
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return header


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
    """Postings of the new generation: copied (rows renumbered) for old spans, tokenized for new.

    Old postings stay in term order (the vocabulary keeps their relative order and row numbers
    only shift), so a stable sort by term appends the new rows' postings after them."""
    vocab: list[str] = []
    parts_rows, parts_terms, parts_tf = [], [], []
    doc_len = np.zeros(n, np.int32)
    old_spans = [s for s in spans if s.old is not None]
    if old is not None and old_spans and not retokenize:
        row_map = np.full(old.header.n_rows, -1, np.int32)
        for s in old_spans:
            row_map[s.old[0]:s.old[1]] = np.arange(s.start, s.end, dtype=np.int32)
            doc_len[s.start:s.end] = old.arrays["doc_len"][s.old[0]:s.old[1]]
        rows = row_map[old.arrays["post_rows"]]
        kept = rows >= 0
        term_of = np.repeat(np.arange(len(old.vocab), dtype=np.int32), np.diff(old.arrays["post_ptr"]))
        counts = np.bincount(term_of[kept], minlength=len(old.vocab))
        used = np.flatnonzero(counts)
        vocab = [old.vocab[i] for i in used]
        parts_rows.append(rows[kept])
        parts_terms.append(np.repeat(np.arange(len(used), dtype=np.int32), counts[used]))
        parts_tf.append(np.asarray(old.arrays["post_tf"])[kept])
        del rows, kept, row_map, term_of
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
    rows_l, terms_l, tf_l = [], [], []
    for row, tokens in zip(rows_of, document_terms(texts) if texts else []):
        doc_len[row] = len(tokens)
        for term, count in Counter(tokens).items():
            rows_l.append(row)
            terms_l.append(term_id.setdefault(term, len(term_id)))
            tf_l.append(min(count, 65535))
    vocab = list(term_id)
    parts_rows.append(np.asarray(rows_l, np.int32))
    parts_terms.append(np.asarray(terms_l, np.int32))
    parts_tf.append(np.asarray(tf_l, np.uint16))
    terms = np.concatenate(parts_terms)
    order = np.argsort(terms, kind="stable")
    ptr = np.zeros(len(vocab) + 1, np.int64)
    np.cumsum(np.bincount(terms, minlength=len(vocab)), out=ptr[1:])
    return vocab, {"post_ptr": ptr, "post_rows": np.concatenate(parts_rows)[order],
                   "post_tf": np.concatenate(parts_tf)[order], "doc_len": doc_len}


def _unit(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
