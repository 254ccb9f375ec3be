"""Writing the next generation of the local index: unchanged APIs' rows are taken from the
previous generation as they are (no re-parse, re-embed or re-tokenize), changed APIs' rows are
added from their new chunks. The folder is written under a temporary name and renamed whole.

The records (``chunks.bin``) and vectors (``vectors.f16``) of kept rows are not copied: the new
generation links the previous one's files and appends its new rows' (a one-spec change at 4x
wrote 270 MB before, in ~0.5 s with their checksums). What the replaced rows held stays behind
as garbage, unread; a file is rewritten compact, in row order, once garbage would pass
``GARBAGE_SHARE`` of it. A reader of the previous generation reads only its own prefix of them;
a run killed while appending leaves a tail that the next run cuts off."""

from __future__ import annotations

import bisect
import json
import os
import shutil
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from specrag.index.lexical import LEXICAL_VERSION, document_terms
from specrag.index.pack import (
    RECORDS,
    TYPE_ORDER,
    VECTORS,
    ApiRows,
    Pack,
    PackFile,
    PackHeader,
    encode_record,
    file_crc32,
    id_hash,
    seal,
)
from specrag.index.vector_reuse import distinct_in_first_order, text_hash
from specrag.specs.models import Chunk

WRITE_ROWS = 8192  # distinct vectors gathered and written per step (6 MB as float16)
GARBAGE_SHARE = 0.2  # a shared file is rewritten compact when more of it than this would be garbage


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
    records: list[bytes] | None = None  # each chunk's stored record (``encode_record``), when made already


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
    ordinal, embed_hash = np.zeros(n, np.int32), np.zeros(n, np.uint64)
    old_row = np.full(n, -1, np.int64)  # each kept row's row in the previous generation
    ids = _IdsWriter(n, old)
    sources = _VectorSources(n, old, new) if dim else None
    runs = _runs(spans)
    for run in runs:
        if run.old is not None:  # consecutive kept rows of consecutive old rows
            s, e = run.old
            rows = slice(run.start, run.end)
            old_row[rows] = np.arange(s, e)
            ordinal[rows], embed_hash[rows] = old.arrays["ordinal"][s:e], old.arrays["embed_hash"][s:e]
            ids.old_run(run.start, s, e)
            if sources is not None:
                sources.old_span(run.start, run.end, s)
            continue
        api, positions = run.new
        ordinal[run.start:run.end] = positions
        embed_hash[run.start:run.end] = api.embed_hashes[positions]
        ids.new_rows(run.start, [api.chunks[i].id for i in positions])
        if sources is not None:
            sources.new_span(run.start, api, positions)
    records, (starts, ends) = _write_records(tmp / RECORDS, old, runs, n)
    shared = {RECORDS: records}
    vector_of = np.zeros(n, np.int32)
    n_vectors = 0
    if sources is not None:
        shared[VECTORS], vector_of, n_vectors = sources.write(tmp / VECTORS, embed_hash, dim)
    vocab, post = _postings(old, runs, n, retokenize)
    for name, array in (("ordinal", ordinal), ("embed_hash", embed_hash), ("vector_of", vector_of),
                        ("chunk_start", starts), ("chunk_end", ends), *post.items()):
        np.save(tmp / f"{name}.npy", array)
    ids.write(tmp, old_row)
    (tmp / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    header = seal(tmp, PackHeader(generation=generation, n_rows=n, dim=dim, n_vectors=n_vectors,
                                  embed_model=embed_model, lexical_version=LEXICAL_VERSION, blocks=blocks, apis=apis),
                  known=shared)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return header


def _runs(spans: list[_Span]) -> list[_Span]:
    """``spans`` with consecutive kept spans merged when their old rows are consecutive too: rows
    are ordered by (type, API) in both generations, so a change of one API leaves a handful of
    runs to copy whatever the fleet's size, not one per kept API and type."""
    out: list[_Span] = []
    for span in spans:
        last = out[-1] if out else None
        if (span.old is not None and last is not None and last.old is not None
                and last.end == span.start and last.old[1] == span.old[0]):
            out[-1] = _Span(last.start, span.end, (last.old[0], span.old[1]), None)
        else:
            out.append(span)
    return out


class _SharedFile:
    """``chunks.bin`` or ``vectors.f16`` of the new generation: the previous generation's file,
    linked and cut back to its prefix, then appended to; or a new file. Counts size and CRC32 as
    it goes (a linked file's are the prefix's, from the previous header)."""

    def __init__(self, path: Path, old: Pack | None, name: str, share: bool):
        self.path, self.size, self.crc = path, 0, 0
        prefix = old.header.files.get(name) if old is not None else None
        self.linked = bool(share and prefix is not None and prefix.shared and _link(old.folder / name, path))
        if self.linked:
            os.truncate(path, prefix.size)  # a killed run's tail: no generation reads it
            self.size, self.crc = prefix.size, prefix.crc32
        self.out = open(path, "ab" if self.linked else "wb")

    def write(self, data: bytes) -> int:
        """Append ``data``; its offset."""
        at = self.size
        self.out.write(data)
        self.size += len(data)
        if self.crc is not None:  # else taken once the file is written
            self.crc = zlib.crc32(data, self.crc)
        return at

    def copy(self, old: Pack, name: str, start: int, end: int) -> int:
        """Append bytes [start, end) of the previous generation's file (moved in the kernel; the CRC32
        is taken once the file is written); their offset."""
        at = self.size
        self.size += old.copy_bytes(name, start, end, self.out)
        self.crc = None
        return at

    def close(self) -> PackFile:
        self.out.close()
        crc = self.crc if self.crc is not None else file_crc32(self.path)
        return PackFile(size=self.size, crc32=crc, shared=True)


def _link(source: Path, target: Path) -> bool:
    try:
        os.link(source, target)
        return True
    except OSError:  # no hard links on this file system, or the file is gone: written anew
        return False


def _garbage_share(live: int, total: int) -> float:
    return (total - live) / total if total else 0.0


def _write_records(path: Path, old: Pack | None, runs: list[_Span], n: int):
    """(the file's PackFile, (each row's start, end)): kept rows keep their records where they
    are when the previous file is shared, else their runs are copied in row order."""
    starts, ends = np.zeros(n, np.int64), np.zeros(n, np.int64)
    share = False
    if old is not None and old.header.files.get(RECORDS) is not None:
        o_start, o_end = old.arrays["chunk_start"], old.arrays["chunk_end"]
        live = sum(int((o_end[r.old[0]:r.old[1]] - o_start[r.old[0]:r.old[1]]).sum()) for r in runs if r.old is not None)
        added = sum(len(d) for r in runs if r.new is not None for d in _records(r))
        share = _garbage_share(live + added, old.header.files[RECORDS].size + added) <= GARBAGE_SHARE
    out = _SharedFile(path, old, RECORDS, share)
    for run in runs:  # in row order: a file written anew is in row order
        if run.new is not None:
            for row, data in zip(range(run.start, run.end), _records(run)):
                starts[row] = out.write(data)
                ends[row] = starts[row] + len(data)
            continue
        s, e = run.old
        o_start, o_end = old.arrays["chunk_start"][s:e], old.arrays["chunk_end"][s:e]
        if out.linked:
            starts[run.start:run.end], ends[run.start:run.end] = o_start, o_end
            continue
        # runs of rows whose records lie back to back: one copy each
        breaks = np.flatnonzero(o_start[1:] != o_end[:-1]) + 1
        for lo, hi in zip(np.concatenate(([0], breaks)), np.concatenate((breaks, [e - s]))):
            at = out.copy(old, RECORDS, int(o_start[lo]), int(o_end[hi - 1]))
            shift = at - int(o_start[lo])
            starts[run.start + lo:run.start + hi] = o_start[lo:hi] + shift
            ends[run.start + lo:run.start + hi] = o_end[lo:hi] + shift
    return out.close(), (starts, ends)


def _records(run: _Span):
    """The stored records of a new span's chunks (made by the builder already, or made now)."""
    api, positions = run.new
    for i in positions:
        yield api.records[i] if api.records is not None else encode_record(api.chunks[i].model_dump_json().encode())


class _IdsWriter:
    """``ids.bin`` with its offsets, each id's hash and its place in sorted order (pack.py).

    Kept rows' ids, hashes and relative order come from the previous generation as they are
    (bytes, not strings); only the new rows' ids are encoded, hashed and placed among them by
    binary search, so the cost of a change of one API does not grow with the fleet."""

    def __init__(self, n: int, old: Pack | None):
        self.n, self.old = n, old
        self.parts: list[bytes | tuple[int, int]] = []  # in row order: new ids' bytes, or a run of old rows
        self.hashes = np.zeros(n, np.uint64)
        self.lengths = np.zeros(n, np.int64)
        self.new: dict[int, str] = {}  # row -> id, new rows only

    def old_run(self, start: int, s: int, e: int) -> None:
        old_offsets = self.old.ids.offsets
        self.lengths[start:start + e - s] = np.diff(old_offsets[s:e + 1])
        self.hashes[start:start + e - s] = self.old.ids.hashes[s:e]
        self.parts.append((s, e))

    def new_rows(self, start: int, chunk_ids: list[str]) -> None:
        encoded = [c.encode("utf-8") for c in chunk_ids]
        self.lengths[start:start + len(encoded)] = [len(b) for b in encoded]
        self.hashes[start:start + len(encoded)] = np.fromiter((id_hash(c) for c in chunk_ids), np.uint64, len(encoded))
        self.new.update(zip(range(start, start + len(chunk_ids)), chunk_ids))
        self.parts.append(b"".join(encoded))

    def write(self, folder: Path, old_row: np.ndarray) -> None:
        offsets = np.zeros(self.n + 1, np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        with open(folder / "ids.bin", "wb") as out:
            for part in self.parts:
                if isinstance(part, bytes):
                    out.write(part)
                else:
                    out.write(self.old.ids.raw(*part))
        for name, array in (("id_offsets", offsets), ("id_rank", self._ranks(old_row)), ("id_hash", self.hashes)):
            np.save(folder / f"{name}.npy", array)

    def _ranks(self, old_row: np.ndarray) -> np.ndarray:
        """Each row's place in the sorted order of all ids: the kept rows keep their previous
        relative order (their old ranks), the new ids are inserted by binary search."""
        kept = np.flatnonzero(old_row >= 0)
        kept = kept[np.argsort(self.old.arrays["id_rank"][old_row[kept]], kind="stable")] if len(kept) else kept
        kept_ids = _Sorted(self.old.ids if self.old is not None else None, old_row, kept)
        new_rows = sorted(self.new, key=self.new.__getitem__)
        places = np.array([bisect.bisect_left(kept_ids, self.new[r]) for r in new_rows], dtype=np.int64)
        rank = np.empty(self.n, np.int32)
        at = np.arange(len(kept), dtype=np.int64)
        rank[kept] = at + np.searchsorted(places, at, side="right")
        rank[np.asarray(new_rows, dtype=np.int64)] = places + np.arange(len(new_rows), dtype=np.int64)
        return rank


class _Sorted(Sequence[str]):
    """The kept ids in sorted order, decoded on access (a binary search reads ~18 of them)."""

    def __init__(self, ids, old_row: np.ndarray, kept: np.ndarray):
        self.ids, self.old_row, self.kept = ids, old_row, kept

    def __len__(self) -> int:
        return len(self.kept)

    def __getitem__(self, i):
        return self.ids[int(self.old_row[self.kept[i]])]


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

    def write(self, path: Path, embed_hash: np.ndarray, dim: int) -> tuple[PackFile, np.ndarray, int]:
        """Write the vectors file: (its PackFile, each row's index into it, the rows it holds).

        Appended to the previous generation's file when that leaves little garbage: kept rows keep
        their vectors, a new row reuses any vector the file holds for its text (a replaced row's
        too), the other new texts' are appended once each. Else every distinct text's vector is
        written once, in the order of its first row."""
        if self.old is not None and (appended := self._appended(embed_hash)) is not None:
            vector_of, new_rows = appended
            out = _SharedFile(path, self.old, VECTORS, share=True)
            if out.linked:
                self._write_rows(out, new_rows, dim)
                return out.close(), vector_of.astype(np.int32), self.old.header.n_vectors + len(new_rows)
            out.close()  # the previous file could not be linked: written anew below
        first_rows, rank = distinct_in_first_order(embed_hash)
        out = _SharedFile(path, None, VECTORS, share=False)
        self._write_rows(out, first_rows, dim)
        return out.close(), rank.astype(np.int32), len(first_rows)

    def _appended(self, embed_hash: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(each row's index in the previous file, extended; the first row of each text to append),
        or None when the previous file is not shared or would be more than ``GARBAGE_SHARE`` garbage."""
        header = self.old.header
        if header.files.get(VECTORS) is None or not header.files[VECTORS].shared or not header.n_vectors:
            return None
        vector_of = self.old_vector.copy()
        fresh = np.flatnonzero(vector_of < 0)
        if len(fresh):
            rows = self.old.rows_of_embed_hashes(embed_hash[fresh])
            found = rows >= 0
            vector_of[fresh[found]] = self.old.arrays["vector_of"][rows[found]]
            fresh = fresh[~found]
        first_rows, rank = distinct_in_first_order(embed_hash[fresh])
        vector_of[fresh] = header.n_vectors + rank
        live = len(np.unique(vector_of))
        if _garbage_share(live, header.n_vectors + len(first_rows)) > GARBAGE_SHARE:
            return None
        return vector_of, fresh[first_rows]

    def _write_rows(self, out: _SharedFile, rows: np.ndarray, dim: int) -> None:
        """The float16 vector of each of ``rows`` (one per distinct text), appended in that order."""
        unit: dict[int, np.ndarray] = {}  # new API index -> its unit float16 vectors
        for lo in range(0, len(rows), WRITE_ROWS):
            step_rows = rows[lo:lo + WRITE_ROWS]
            step = np.empty((len(step_rows), dim), np.float16)
            from_old = self.old_vector[step_rows] >= 0
            if from_old.any():
                step[from_old] = self.old.distinct_vectors(self.old_vector[step_rows[from_old]])
            for i in np.flatnonzero(~from_old):
                a = int(self.new_api[step_rows[i]])
                if a not in unit:
                    unit[a] = _unit(self.new[a].vectors).astype(np.float16)
                step[i] = unit[a][self.new_pos[step_rows[i]]]
            out.write(step.tobytes())


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
    distinct = list(dict.fromkeys(texts))  # a text the fleet repeats is tokenized once (documents: same order)
    doc_of_text: dict[str, int] = {}
    for text, tokens in zip(distinct, document_terms(distinct) if distinct else []):
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
        doc_of_text[text] = doc
    if rows_of:
        doc_of[np.asarray(rows_of, np.int64)] = [doc_of_text[t] for t in texts]
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
