"""Publishing a corpus's index on a Chroma server, so replicas can start from it.

A replica's local index is derived from what a build leaves on the server: the vector rows (one
per distinct embed text, keyed by its hash: chroma_rows.py), and the companion ``<name>.files``
collection. That holds each API's chunks (``chunks/<file_id>``: its chunk JSON, one per line, in
chunk order, tagged with the API's ``chunks_digest``; written again only when the digest
changed), and the manifest, the catalogs the stages read and ``sources.json`` (tagged with the
generation). Each file is zlib + base64, in parts. The generation marker
(``specrag_generation`` in the vector collection's metadata) is written last: a reader that
finds files of another generation, an API whose chunks are missing or of another digest, or a
vector missing, is looking at a build in progress (or one killed midway) and keeps what it has.
One writer per corpus at a time (``specrag index`` on one replica).
"""

from __future__ import annotations

import base64
import logging
import zlib
from pathlib import Path

from specrag.core.settings import Settings
from specrag.index.collections import (
    EMBED_MODEL,
    PUBLISHED,
    files_name,
    open_collection,
    owner_metadata,
)
from specrag.index.manifest import MANIFEST_NAME

logger = logging.getLogger(__name__)

CATALOGS, SOURCES, CHUNKS = "catalogs", "sources.json", "chunks"
API = "api"  # metadata key of a chunks file's parts: the API they hold
PART_CHARS = 1 << 20  # one document per MiB of encoded file: well under the server's request limit
BATCH_CHARS = 8 << 20


def local_files(settings: Settings, manifest_json: bytes) -> dict[str, bytes]:
    """The files a replica needs beside the rows, by their published name."""
    files = {MANIFEST_NAME: manifest_json}
    sources = settings.storage.data_dir / SOURCES
    if sources.is_file():
        files[SOURCES] = sources.read_bytes()
    root = settings.catalogs_path
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        if path.is_file() and ".tmp" not in path.name:
            files[f"{CATALOGS}/{path.relative_to(root).as_posix()}"] = path.read_bytes()
    return files


def local_path(settings: Settings, name: str) -> Path | None:
    """Where a published file goes on a replica; None for a name outside the known places."""
    if name == SOURCES:
        return settings.storage.data_dir / SOURCES
    head, _, rest = name.partition("/")
    parts = Path(rest).parts
    if head != CATALOGS or not parts or any(p in ("", ".", "..") for p in parts) or Path(rest).is_absolute():
        return None
    return settings.catalogs_path.joinpath(*parts)


def publish(store) -> int | None:
    """Publish the store's committed generation (server mode, hybrid index); the generation
    published, or None when there is nothing to publish or it is published already."""
    settings, manifest = store.settings, store.manifest
    if not settings.storage.chroma_host or store.embedder is None or manifest is None or manifest.local_dir is None \
            or manifest.pending_ids() or store.local is None:
        return None
    collection = store.chroma
    if (collection.metadata or {}).get(PUBLISHED) == manifest.generation:
        return None
    generation = manifest.generation
    companion = store.chroma_call(lambda: open_collection(store.client, settings, files_name(settings)))
    old = listing(store, companion)
    kept = _publish_chunks(store, companion, manifest, old)
    files = local_files(settings, manifest.model_dump_json().encode())
    batch: list[tuple[str, str, dict]] = []
    written: set[str] = set()
    for name, data in files.items():
        for part_id, doc, meta in _parts(name, data, {"generation": generation}):
            written.add(part_id)
            batch.append((part_id, doc, meta))
            if sum(len(d) for _, d, _ in batch) >= BATCH_CHARS:
                _upsert(store, companion, batch)
    _upsert(store, companion, batch)
    # parts of files no longer published: a reader takes any file part of another generation for a
    # publish in progress, so they go before the marker
    if stale := sorted(cid for cid, meta in old.items() if API not in meta and cid not in written):
        store.chroma_call(lambda: companion.delete(ids=stale))
    marker = owner_metadata(settings) | {EMBED_MODEL: manifest.embed_model, PUBLISHED: generation}
    store.chroma_call(lambda: collection.modify(metadata=marker))  # last: the generation is now readable
    # chunks of removed APIs and leftover parts of rewritten ones: readers skip them, so after the marker
    if stale := sorted(cid for cid, meta in old.items() if API in meta and cid not in kept):
        store.chroma_call(lambda: companion.delete(ids=stale))
    logger.info("published generation %d of %s (%d files)", generation, settings.storage.data_dir.name, len(files))
    return generation


def _publish_chunks(store, companion, manifest, old: dict[str, dict]) -> set[str]:
    """Write ``chunks/<file_id>`` of every API whose published chunks are not those of
    ``manifest`` (changed, added, or a publish cut short); the ids of every chunk part now valid."""
    published = _complete_parts(old, {fid: manifest.apis[fid].chunks_digest for fid in manifest.complete_ids()})
    kept: set[str] = {cid for ids in published.values() for cid in ids}
    batch: list[tuple[str, str, dict]] = []
    for fid in sorted(manifest.complete_ids()):
        if fid in published:
            continue
        data = b"\n".join(store.local.pack.record(int(r)) for r in store.local.api_rows(fid))
        for part_id, doc, meta in _parts(f"{CHUNKS}/{fid}", data, {API: fid, "digest": manifest.apis[fid].chunks_digest}):
            kept.add(part_id)
            batch.append((part_id, doc, meta))
            if sum(len(d) for _, d, _ in batch) >= BATCH_CHARS:
                _upsert(store, companion, batch)
    _upsert(store, companion, batch)
    return kept


def _parts(name: str, data: bytes, tags: dict) -> list[tuple[str, str, dict]]:
    """(id, document, metadata) of each part of a published file."""
    encoded = base64.b64encode(zlib.compress(data, 6)).decode()
    parts = [encoded[i:i + PART_CHARS] for i in range(0, len(encoded), PART_CHARS)] or [""]
    return [(f"{name}#{i}", part, {"path": name, "part": i, "parts": len(parts), "chars": len(part)} | tags)
            for i, part in enumerate(parts)]


def _complete_parts(listed: dict[str, dict], digests: dict[str, str]) -> dict[str, list[str]]:
    """file_id -> its chunk part ids, for the APIs of ``digests`` whose parts are all published
    with that digest."""
    found: dict[str, dict[int, str]] = {}
    counts: dict[str, set[int]] = {}
    for cid, meta in listed.items():
        fid, part, parts = meta.get(API), meta.get("part"), meta.get("parts")
        if fid in digests and meta.get("digest") == digests[fid] and isinstance(part, int) and isinstance(parts, int):
            found.setdefault(fid, {})[part] = cid
            counts.setdefault(fid, set()).add(parts)
    return {fid: [parts[i] for i in range(len(parts))] for fid, parts in found.items()
            if len(counts[fid]) == 1 and set(parts) == set(range(next(iter(counts[fid]))))}


def listing(store, companion) -> dict[str, dict]:
    """Id -> metadata of every part in the companion collection (no documents)."""
    got = store.chroma_call(lambda: companion.get(include=["metadatas"]))
    return {cid: meta or {} for cid, meta in zip(got["ids"], got["metadatas"] or [])}


def read_files(store, companion, generation: int, listed: dict[str, dict] | None = None) -> dict[str, bytes] | None:
    """The published files (not the chunks), or None when any part is of another generation or
    missing (a publish in progress)."""
    listed = listing(store, companion) if listed is None else listed
    parts: dict[str, dict[int, str]] = {}
    counts: dict[str, int] = {}
    for cid, meta in listed.items():
        if API in meta:
            continue
        if meta.get("generation") != generation:
            return None
        parts.setdefault(meta["path"], {})[int(meta["part"])] = cid
        counts[meta["path"]] = int(meta["parts"])
    if any(set(parts[name]) != set(range(counts[name])) for name in parts) or MANIFEST_NAME not in parts:
        return None
    docs = _documents(store, companion, [cid for p in parts.values() for cid in p.values()], listed)
    if docs is None:
        return None
    return {name: zlib.decompress(base64.b64decode("".join(docs[p[i]] for i in range(counts[name]))))
            for name, p in parts.items()}


def read_chunks(store, companion, manifest, listed: dict[str, dict]) -> dict[str, list[bytes]] | None:
    """file_id -> the chunk JSON lines of every API ``manifest`` holds, or None when any API's
    chunks are missing or of another digest (a publish in progress)."""
    wanted = {fid: manifest.apis[fid].chunks_digest for fid in manifest.complete_ids()}
    published = _complete_parts(listed, wanted)
    if set(published) != set(wanted):
        return None
    docs = _documents(store, companion, [cid for ids in published.values() for cid in ids], listed)
    if docs is None:
        return None
    out = {}
    for fid, ids in published.items():
        data = zlib.decompress(base64.b64decode("".join(docs[cid] for cid in ids)))
        out[fid] = data.split(b"\n") if data else []
    return out


def _documents(store, companion, ids: list[str], listed: dict[str, dict]) -> dict[str, str] | None:
    """The documents of ``ids``, in requests of about ``BATCH_CHARS``; None when a part changed or
    went since it was listed (a publish in progress)."""
    docs: dict[str, str] = {}
    batch, size = [], 0
    for cid in [*ids, None]:
        if cid is not None:
            batch.append(cid)
            size += int(listed[cid].get("chars", PART_CHARS))
        if batch and (cid is None or size >= BATCH_CHARS):
            got = store.chroma_call(lambda: companion.get(ids=batch, include=["documents", "metadatas"]))
            for got_id, doc, meta in zip(got["ids"], got["documents"] or [], got["metadatas"] or []):
                if (meta or {}) != listed[got_id]:
                    return None
                docs[got_id] = doc or ""
            batch, size = [], 0
    return docs if len(docs) == len(set(ids)) else None


def _upsert(store, companion, batch: list) -> None:
    if batch:
        store.chroma_call(lambda: companion.upsert(ids=[b[0] for b in batch], documents=[b[1] for b in batch],
                                                   metadatas=[b[2] for b in batch], embeddings=[[0.0]] * len(batch)))
        batch.clear()
