"""Publishing a corpus's index on a Chroma server, so replicas can start from it.

A replica's local index is derived from three things on the server: the chunk rows (vector,
chunk JSON and ordinal, written by the build: chroma_rows.py), the companion ``<name>.files``
collection (the manifest, the catalogs the stages read and ``sources.json``, each file zlib
+ base64 in parts, every part tagged with the generation), and the generation marker
(``specrag_generation`` in the chunk collection's metadata). The marker is written last: a
reader that finds files of another generation, or an API whose rows do not hash to the
manifest's ``chunks_digest``, is looking at a build in progress (or one killed midway) and
keeps what it has. One writer per corpus at a time (``specrag index`` on one replica).
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

CATALOGS, SOURCES = "catalogs", "sources.json"
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
            or manifest.pending_ids():
        return None
    collection = store.chroma
    if (collection.metadata or {}).get(PUBLISHED) == manifest.generation:
        return None
    generation = manifest.generation
    files = local_files(settings, manifest.model_dump_json().encode())
    companion = store.chroma_call(lambda: open_collection(store.client, settings, files_name(settings)))
    old = set(store.chroma_call(lambda: companion.get(include=[]))["ids"])
    batch: list[tuple[str, str, dict]] = []
    written: set[str] = set()
    for name, data in files.items():
        encoded = base64.b64encode(zlib.compress(data, 6)).decode()
        parts = [encoded[i:i + PART_CHARS] for i in range(0, len(encoded), PART_CHARS)] or [""]
        for i, part in enumerate(parts):
            written.add(f"{name}#{i}")
            batch.append((f"{name}#{i}", part, {"path": name, "part": i, "parts": len(parts), "generation": generation}))
            if sum(len(doc) for _, doc, _ in batch) >= BATCH_CHARS:
                _upsert(store, companion, batch)
    _upsert(store, companion, batch)
    if stale := sorted(old - written):
        store.chroma_call(lambda: companion.delete(ids=stale))
    marker = owner_metadata(settings) | {EMBED_MODEL: manifest.embed_model, PUBLISHED: generation}
    store.chroma_call(lambda: collection.modify(metadata=marker))  # last: the generation is now readable
    logger.info("published generation %d of %s (%d files)", generation, settings.storage.data_dir.name, len(files))
    return generation


def read_files(store, companion, generation: int) -> dict[str, bytes] | None:
    """The published files, or None when any part is of another generation or missing (a
    publish in progress)."""
    got = store.chroma_call(lambda: companion.get(include=["documents", "metadatas"]))
    parts: dict[str, dict[int, str]] = {}
    counts: dict[str, int] = {}
    for doc, meta in zip(got["documents"] or [], got["metadatas"] or []):
        meta = meta or {}
        if meta.get("generation") != generation:
            return None
        parts.setdefault(meta["path"], {})[int(meta["part"])] = doc or ""
        counts[meta["path"]] = int(meta["parts"])
    if any(set(parts[name]) != set(range(counts[name])) for name in parts) or MANIFEST_NAME not in parts:
        return None
    return {name: zlib.decompress(base64.b64decode("".join(p[i] for i in range(counts[name]))))
            for name, p in parts.items()}


def _upsert(store, companion, batch: list) -> None:
    if batch:
        store.chroma_call(lambda: companion.upsert(ids=[b[0] for b in batch], documents=[b[1] for b in batch],
                                                   metadatas=[b[2] for b in batch], embeddings=[[0.0]] * len(batch)))
        batch.clear()
