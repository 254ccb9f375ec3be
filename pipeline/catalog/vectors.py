"""Embeddings of the catalog entries (name, description, domains), for the semantic signal of
offline API selection. Cached beside the catalog, keyed by catalog version and model."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from pipeline.catalog.models import Catalog, CatalogEntry

logger = logging.getLogger(__name__)
CACHE_FILE = "catalog.vectors.npz"


def entry_text(entry: CatalogEntry) -> str:
    return f"{entry.name}: {entry.description} ({', '.join(entry.domains[:6])})"


def catalog_vectors(catalog: Catalog, embed_model, model_id: str, catalog_dir: Path) -> np.ndarray:
    """Unit vectors, one row per catalog entry in catalog order."""
    path = catalog_dir / CACHE_FILE
    key = f"{catalog.version}|{model_id}"
    if path.exists():
        try:
            cached = np.load(path)
            if str(cached["key"]) == key and cached["vectors"].shape[0] == len(catalog.apis):
                return cached["vectors"]
        except (OSError, ValueError, KeyError):
            logger.warning("ignoring unreadable %s", path)
    from pipeline.index.vector_reuse import embed_sorted

    vectors = np.asarray(embed_sorted(embed_model, [entry_text(e) for e in catalog.apis]), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    try:
        np.savez(path, key=np.array(key), vectors=vectors)
    except OSError as exc:  # a read-only catalog folder only costs the cache
        logger.warning("could not cache catalog vectors in %s: %s", path, exc)
    return vectors
