"""Embeddings of the catalog entries (name, description, domains), for the semantic signal of
offline API selection. Cached beside the catalog per entry text and model, so a changed
catalog re-embeds only the entries whose text changed.

An entry says what an API claims to be, and many say it badly (a title of "API", a description
left at the editor's placeholder); :func:`blend_with_centroids` mixes in what its operations
do, the mean of its endpoint vectors."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from specrag.catalog.models import Catalog, CatalogEntry
from specrag.index.vector_reuse import embed_sorted, text_hash

logger = logging.getLogger(__name__)
CACHE_FILE = "catalog.vectors.npz"


def entry_text(entry: CatalogEntry) -> str:
    return f"{entry.name}: {entry.description} ({', '.join(entry.domains[:6])})"


def catalog_vectors(catalog: Catalog, embedder, model_id: str, catalog_dir: Path) -> np.ndarray:
    """Unit vectors, one row per catalog entry in catalog order (``embedder``: an ``Embedder``)."""
    path = catalog_dir / CACHE_FILE
    texts = [entry_text(e) for e in catalog.apis]
    hashes = np.asarray([text_hash(t) for t in texts], dtype=np.uint64)
    known = _load(path, model_id)
    if known is not None and len(known[0]) == len(hashes) and np.array_equal(known[0], hashes):
        return known[1]
    rows = dict(zip(known[0].tolist(), known[1])) if known is not None else {}
    # each distinct text once: versions and copies of an API often share its name and description
    first: dict[int, int] = {}
    for i, h in enumerate(hashes.tolist()):
        if h not in rows:
            first.setdefault(h, i)
    missing = list(first.values())
    if missing:  # none when entries were only removed (a spec left the corpus): nothing to embed
        fresh = np.asarray(embed_sorted(embedder, [texts[i] for i in missing]), dtype=np.float32).reshape(len(missing), -1)
        fresh /= np.maximum(np.linalg.norm(fresh, axis=1, keepdims=True), 1e-9)
        rows.update(zip((int(hashes[i]) for i in missing), fresh))
    vectors = np.stack([rows[h] for h in hashes.tolist()]).astype(np.float32) if texts else np.zeros((0, 0), np.float32)
    try:
        np.savez(path, key=np.array(model_id), hashes=hashes, vectors=vectors)
    except OSError as exc:  # a read-only catalog folder only costs the cache
        logger.warning("could not cache catalog vectors in %s: %s", path, exc)
    return vectors


def blend_with_centroids(entries: np.ndarray, centroids: np.ndarray | None, weight: float) -> np.ndarray:
    """Unit rows of ``(1 - weight) * entry + weight * centroid``; an API without a centroid (a zero
    row: no endpoint) keeps its entry vector."""
    if centroids is None or not weight or entries.size == 0:
        return entries
    has = np.linalg.norm(centroids, axis=1, keepdims=True) > 0
    mixed = np.where(has, (1.0 - weight) * entries + weight * centroids, entries)
    return (mixed / np.maximum(np.linalg.norm(mixed, axis=1, keepdims=True), 1e-9)).astype(np.float32)


def _load(path: Path, model_id: str) -> tuple[np.ndarray, np.ndarray] | None:
    if not path.exists():
        return None
    try:
        cached = np.load(path)
        if str(cached["key"]) == model_id and len(cached["hashes"]) == len(cached["vectors"]):
            return cached["hashes"], cached["vectors"]
    except (OSError, ValueError, KeyError):
        logger.warning("ignoring unreadable %s", path)
    return None
