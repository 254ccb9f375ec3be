"""The on-disk format of the local index (one folder per generation: ``data_dir/local/gen-N``).

Rows are chunks, ordered by chunk type (endpoints first), then API, then the chunk's place in
its API, so every (type, API) pair is one contiguous row span and all endpoints of the fleet
are one block. Each piece is stored once:

- ``pack.json``: this header (row spans per API and type, hashes, and the size and CRC32 of
  every other file, checked on open: a truncated, deleted or altered file is damage);
- ``chunks.bin`` and ``vectors.f16`` are shared with the next generation: it links them into its
  folder and appends what its changed APIs bring, so a change of one spec writes that spec's
  records and vectors, not the fleet's. Their size and CRC32 in a header are of its generation's
  prefix (appended bytes are not its own); the writer rewrites them compact when more than a
  fifth of their bytes belong to rows no generation holds any more (pack_writer.py);
- ``ids.bin`` + ``id_offsets.npy`` (chunk id per row, UTF-8, read as one block: a list of
  str and a dict of them took ~48 MB at 274k rows), ``id_hash.npy`` (64-bit hash of each id: the
  lookup by id), ``id_rank.npy`` (each id's place in sorted order: fusion's tie-break),
  ``ordinal.npy`` (place in its API's chunk list);
- ``chunks.bin`` + ``chunk_start.npy``/``chunk_end.npy``: each chunk (text and metadata) as
  zlib-compressed JSON, read only for the chunks a query returns;
- ``vectors.f16`` (float16 unit vectors, rows of ``dim``, one per distinct embed text; absent in
  lexical mode), ``vector_of.npy`` (each row's vector), ``embed_hash.npy``
  (64-bit hash of each row's embed text, so an unchanged text is never embedded twice). A fleet
  repeats texts (versions of one API, shared schemas, copies): each is stored and scored once;
- ``vocab.json``, ``post_ptr.npy``, ``post_docs.npy``, ``post_tf.npy``: term postings for BM25
  (lexical.py) over documents (distinct token lists: ``doc_of.npy`` is each row's, ``doc_len.npy``
  and ``doc_hash.npy`` each document's length and 64-bit hash of its tokens).
"""

from __future__ import annotations

import hashlib
import json
import os
import weakref
import zlib
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
from pydantic import BaseModel, Field, ValidationError
from specrag.core.errors import IndexDamagedError

PACK_FORMAT = 3  # 2: vectors once per distinct embed text (vector_of.npy); 3: records and vectors shared, appended to
HEADER = "pack.json"
TYPE_ORDER = ("endpoint", "component", "errors")
ARRAYS = ("id_offsets", "id_hash", "id_rank", "ordinal", "embed_hash", "vector_of", "post_ptr", "post_docs", "post_tf", "doc_len", "doc_of", "doc_hash",
          "chunk_start", "chunk_end")
RECORDS, VECTORS = "chunks.bin", "vectors.f16"
_CRC_BLOCK = 1 << 20
RUN_GAP = 8  # distinct vectors this close are read in one run


class ApiRows(BaseModel):
    content_hash: str
    chunks_digest: str = Field(description="hash of the API's chunks as stored: a re-chunk that changes nothing keeps it")
    n_chunks: int
    spans: dict[str, tuple[int, int]] = Field(description="chunk type -> [start, end) rows")


RECORD_LEVEL = 6  # zlib level of a stored chunk


def encode_record(chunk_json: bytes) -> bytes:
    """A chunk's JSON as ``chunks.bin`` stores it (``Pack.record`` reads it back)."""
    return zlib.compress(chunk_json, RECORD_LEVEL)


class PackFile(BaseModel):
    size: int
    crc32: int
    shared: bool = Field(False, description="appended to by later generations: size and CRC32 are of this "
                                            "generation's prefix of the file")


class PackHeader(BaseModel):
    format_version: int = PACK_FORMAT
    generation: int
    n_rows: int
    dim: int = Field(0, description="vector width; 0 when the index is lexical only")
    n_vectors: int = Field(0, description="rows of vectors.f16 this generation may use (its prefix)")
    embed_model: str
    lexical_version: str
    blocks: dict[str, tuple[int, int]] = Field(description="chunk type -> [start, end) rows")
    apis: dict[str, ApiRows]
    files: dict[str, PackFile] = Field(default_factory=dict)


class ChunkIds(Sequence[str]):
    """The chunk id of each row, decoded on access from one UTF-8 block; ``row_of`` finds a
    row by id through the ids' sorted 64-bit hashes."""

    def __init__(self, blob: bytes, offsets: np.ndarray, hashes: np.ndarray):
        self._blob, self._offsets, self._hashes = blob, offsets, hashes

    def consistent(self, n: int) -> bool:
        return (len(self._offsets) == n + 1 and len(self._hashes) == n and (n == 0 or (
            int(self._offsets[0]) == 0 and int(self._offsets[-1]) == len(self._blob)
            and bool((np.diff(self._offsets) >= 0).all()))))

    def __len__(self) -> int:
        return len(self._hashes)

    @property
    def offsets(self) -> np.ndarray:
        return self._offsets

    @property
    def hashes(self) -> np.ndarray:
        return self._hashes

    def raw(self, start: int, end: int) -> bytes:
        """The UTF-8 bytes of rows [start, end)'s ids, as stored (a writer copies them as they are)."""
        return self._blob[int(self._offsets[start]):int(self._offsets[end])]

    def __getitem__(self, row):
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        row = int(row)
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        return self._blob[int(self._offsets[row]):int(self._offsets[row + 1])].decode("utf-8")

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def contains(self, text: str) -> bool:
        """Whether any id contains ``text`` (one scan of the block)."""
        return text.encode("utf-8") in self._blob

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, (list, tuple, ChunkIds)) else NotImplemented

    __hash__ = None  # mutable-looking sequence semantics: compared by value, never hashed

    @cached_property
    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """(hashes sorted, the row of each): built on the first lookup."""
        order = np.argsort(self._hashes, kind="stable")
        return self._hashes[order], order

    def row_of(self, chunk_id: str) -> int | None:
        """The row holding ``chunk_id``; None when no row does (LocalIndex keeps recent answers)."""
        return self.rows_of([chunk_id])[0]

    def rows_of(self, chunk_ids: list[str]) -> list[int | None]:
        """The row of each id (None where no row holds it): one vectorised search of their hashes."""
        hashes, order = self._sorted
        if not chunk_ids or not len(hashes):
            return [None] * len(chunk_ids)
        wanted = np.fromiter((id_hash(c) for c in chunk_ids), np.uint64, len(chunk_ids))
        at = np.minimum(hashes.searchsorted(wanted), len(hashes) - 1)
        rows = order[at].tolist()
        hit = (hashes[at] == wanted).tolist()
        out: list[int | None] = []
        for chunk_id, h, i, row, found in zip(chunk_ids, wanted.tolist(), at.tolist(), rows, hit):
            if found and self[row] != chunk_id:  # two ids share a 64-bit hash: look at the others
                found, i = False, i + 1
                while i < len(hashes) and int(hashes[i]) == h and not found:
                    row, i = int(order[i]), i + 1
                    found = self[row] == chunk_id
            out.append(row if found else None)
        return out


def id_hash(chunk_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(chunk_id.encode("utf-8"), digest_size=8).digest(), "little")


def file_crc32(path: Path, size: int | None = None) -> int:
    """CRC32 of the file, or of its first ``size`` bytes."""
    crc, left = 0, os.path.getsize(path) if size is None else size
    with open(path, "rb") as fh:  # buffered reads: checking costs page cache, not process memory
        while left > 0 and (block := fh.read(min(_CRC_BLOCK, left))):
            crc = zlib.crc32(block, crc)
            left -= len(block)
    return crc


def seal(folder: Path, header: PackHeader, known: dict[str, PackFile] | None = None) -> PackHeader:
    """Record size and CRC32 of every file in ``folder`` (``known``: shared files, as their writer
    counted them), then write the header (last)."""
    known = known or {}
    header.files = {p.name: known.get(p.name) or PackFile(size=p.stat().st_size, crc32=file_crc32(p))
                    for p in sorted(folder.iterdir()) if p.name != HEADER}
    (folder / HEADER).write_text(header.model_dump_json(), encoding="utf-8")
    return header


class Pack:
    """A generation folder opened read-only: the header, memory-mapped arrays, lazy records.

    Records and vector rows are read with positional reads (``os.pread``), not through a memory
    map: a mapped page a query touched stays in the process's resident set, so a server's RSS
    would grow towards the size of ``chunks.bin`` and ``vectors.f16`` (104 MB for the fleet) with
    the variety of its queries; read pages stay in the kernel's page cache instead. The small
    BM25 arrays stay mapped (every query reads a few postings)."""

    def __init__(self, folder: Path, header: PackHeader, arrays: dict[str, np.ndarray], ids: "ChunkIds",
                 vocab: list[str], vectors: np.ndarray | None):
        self.folder, self.header = folder, header
        # plain ndarray views of the maps: same lazily paged memory, without np.memmap's
        # per-slice Python overhead (a query slices these a few hundred times)
        self.arrays = {name: np.asarray(a) for name, a in arrays.items()}
        self.ids, self.vocab = ids, vocab
        self.vectors = np.asarray(vectors) if vectors is not None else None
        self._fds: dict[str, int] = {}
        weakref.finalize(self, _close, self._fds)  # when the generation is dropped (or failed to open)
        for name in [RECORDS] + ([VECTORS] if vectors is not None else []):
            try:
                self._fds[name] = os.open(folder / name, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            except OSError as exc:
                raise IndexDamagedError(f"{folder / name} is unreadable ({exc.strerror})") from exc

    @classmethod
    def open(cls, folder: Path, verify: bool = True) -> "Pack":
        """IndexDamagedError (one line) when anything is missing, truncated or altered."""
        header = read_header(folder)
        if verify:
            for name, want in header.files.items():
                path = folder / name
                if not path.is_file():
                    raise IndexDamagedError(f"{path} is missing")
                size = path.stat().st_size
                if size < want.size or (size != want.size and not want.shared):
                    raise IndexDamagedError(f"{path} is truncated or overwritten ({size} bytes, expected {want.size})")
                if file_crc32(path, want.size) != want.crc32:
                    raise IndexDamagedError(f"{path} fails its checksum")
        try:
            arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in ARRAYS}
            vectors = _vectors(folder / VECTORS, header) if header.dim else None
            ids = ChunkIds((folder / "ids.bin").read_bytes(), np.asarray(arrays["id_offsets"]),
                           np.asarray(arrays["id_hash"]))
            vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IndexDamagedError(f"{folder} is unreadable ({type(exc).__name__}: {str(exc)[:120]})") from exc
        n = header.n_rows
        n_docs = len(arrays["doc_len"])
        shapes_ok = (ids.consistent(n) and len(arrays["id_rank"]) == n and len(arrays["chunk_start"]) == n
                     and len(arrays["chunk_end"]) == n and len(arrays["doc_of"]) == n
                     and len(arrays["doc_hash"]) == n_docs and len(arrays["vector_of"]) == n
                     and len(arrays["post_ptr"]) == len(vocab) + 1 and len(arrays["post_tf"]) == len(arrays["post_docs"])
                     and (vectors is None or vectors.shape == (header.n_vectors, header.dim)))
        if not shapes_ok:
            raise IndexDamagedError(f"{folder}: its files disagree on the number of rows")
        if vectors is not None and n and not (0 <= int(arrays["vector_of"].min())
                                              and int(arrays["vector_of"].max()) < header.n_vectors):
            raise IndexDamagedError(f"{folder}: vector_of.npy points outside {VECTORS}")
        records = header.files.get(RECORDS)
        if n and not (records is not None and _spans_within(arrays["chunk_start"], arrays["chunk_end"], records.size)):
            raise IndexDamagedError(f"{folder}: its record offsets point outside {RECORDS}")
        if not (_within(arrays["doc_of"], n_docs) and _within(arrays["post_docs"], n_docs)
                and _ascending(arrays["post_ptr"], len(arrays["post_docs"]))):
            raise IndexDamagedError(f"{folder}: its BM25 postings point outside their documents")
        return cls(folder, header, arrays, ids, vocab, vectors)

    @cached_property
    def embed_hash_order(self) -> np.ndarray:
        """Rows sorted by their embed text's hash (a stable sort), built once per opened generation."""
        return np.argsort(self.arrays["embed_hash"], kind="stable")

    def rows_of_embed_hashes(self, hashes: np.ndarray) -> np.ndarray:
        """For each 64-bit embed-text hash, the first row whose text has it, or -1: the lookup of a
        text's vector, for the build and its writer."""
        hashes = np.asarray(hashes, dtype=np.uint64)
        stored, order = self.arrays["embed_hash"], self.embed_hash_order
        if not len(order) or not len(hashes):
            return np.full(len(hashes), -1, np.int64)
        at = np.minimum(np.searchsorted(stored, hashes, sorter=order), len(order) - 1)
        rows = order[at].astype(np.int64)
        return np.where(stored[rows] == hashes, rows, -1)

    def record(self, row: int) -> bytes:
        """The JSON of one stored chunk."""
        start, end = int(self.arrays["chunk_start"][row]), int(self.arrays["chunk_end"][row])
        return zlib.decompress(self._read(RECORDS, start, end - start))

    def vector_rows(self, start: int, end: int) -> np.ndarray:
        """The float16 vectors of rows [start, end) (rows that share a text share a vector)."""
        return self.distinct_vectors(self.arrays["vector_of"][start:end])

    def distinct_vectors(self, indexes: np.ndarray) -> np.ndarray:
        """The float16 vectors at ``indexes`` of vectors.f16, read from the file (see the class
        docstring) one run of consecutive indexes at a time."""
        indexes = np.asarray(indexes, dtype=np.int64)
        out = np.empty((len(indexes), self.header.dim), dtype=np.float16)
        if not len(indexes):
            return out
        order = np.argsort(indexes, kind="stable")
        ordered = indexes[order]
        # runs of nearby indexes, each one read (a few unneeded rows cost less than a read each)
        breaks = np.flatnonzero(np.diff(ordered) > RUN_GAP) + 1
        for lo, hi in zip(np.concatenate(([0], breaks)), np.concatenate((breaks, [len(ordered)]))):
            first, last = int(ordered[lo]), int(ordered[hi - 1]) + 1
            run = self._vector_block(first, last)
            out[order[lo:hi]] = run[ordered[lo:hi] - first]
        return out

    def _vector_block(self, first: int, last: int) -> np.ndarray:
        row = self.header.dim * 2
        data = self._read(VECTORS, first * row, (last - first) * row)
        return np.frombuffer(data, dtype=np.float16).reshape(last - first, self.header.dim)

    def _read(self, name: str, offset: int, size: int) -> bytes:
        parts, done = [], 0
        while done < size:
            data = _pread(self.folder / name, self._fds[name], size - done, offset + done)
            if not data:
                raise IndexDamagedError(f"{self.folder / name} ended early (truncated after it was opened)")
            parts.append(data)
            done += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def copy_bytes(self, name: str, start: int, end: int, out) -> int:
        """Append bytes [start, end) of the file ``name`` (records, vectors) to ``out``; bytes written."""
        return _copy_range(self.folder / name, start, end, out)



def _within(array: np.ndarray, n: int) -> bool:
    return not len(array) or (0 <= int(array.min()) and int(array.max()) < n)


def _spans_within(start: np.ndarray, end: np.ndarray, size: int) -> bool:
    return int(start.min()) >= 0 and int(end.max()) <= size and bool((start <= end).all())


def _vectors(path: Path, header: PackHeader) -> np.ndarray:
    """The generation's rows of the vectors file, mapped (``n_vectors`` x ``dim`` float16)."""
    if not header.n_vectors:
        return np.empty((0, header.dim), np.float16)
    return np.memmap(path, dtype=np.float16, mode="r", shape=(header.n_vectors, header.dim))


def _ascending(ptr: np.ndarray, total: int) -> bool:
    return len(ptr) > 0 and int(ptr[0]) == 0 and int(ptr[-1]) == total and bool((np.diff(ptr) >= 0).all())


def _pread(path: Path, fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    with open(path, "rb") as fh:  # no pread (Windows): a handle of its own, so no offset is shared
        fh.seek(offset)
        return fh.read(size)


def _close(fds: dict[str, int]) -> None:
    for fd in fds.values():
        try:
            os.close(fd)
        except OSError:
            pass


def _copy_range(path: Path, start: int, end: int, out, block: int = 1 << 22) -> int:
    if hasattr(os, "copy_file_range") and end > start:
        try:
            return _copy_in_kernel(path, start, end, out)
        except OSError:  # a file system or kernel without it: read and write, as below
            pass
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start
        while left > 0:
            data = fh.read(min(block, left))
            if not data:
                raise IndexDamagedError(f"{path} ended early")
            out.write(data)
            left -= len(data)
    return end - start


def _copy_in_kernel(path: Path, start: int, end: int, out) -> int:
    """The bytes move inside the kernel (or are shared, on file systems that can), not through
    Python: a re-index copies every kept API's records."""
    out.flush()
    with open(path, "rb") as fh:
        src, dst = fh.fileno(), out.fileno()
        at, write_at, left = start, out.tell(), end - start
        while left > 0:
            done = os.copy_file_range(src, dst, left, at, write_at)
            if done == 0:
                raise IndexDamagedError(f"{path} ended early")
            at, write_at, left = at + done, write_at + done, left - done
        out.seek(write_at)
    return end - start


def read_header(folder: Path) -> PackHeader:
    path = folder / HEADER
    try:
        header = PackHeader.model_validate_json(path.read_bytes())
    except FileNotFoundError as exc:
        raise IndexDamagedError(f"{path} is missing") from exc
    except (OSError, ValueError, ValidationError) as exc:
        raise IndexDamagedError(f"{path} is truncated or invalid ({type(exc).__name__})") from exc
    if header.format_version != PACK_FORMAT:
        raise IndexDamagedError(f"{path} has format {header.format_version}, this version reads {PACK_FORMAT}")
    return header
