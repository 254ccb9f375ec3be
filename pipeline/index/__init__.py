"""The persistent index: Chroma (vectors of record) + the local index that serves queries,
the embedder choice, and incremental, crash-safe builds."""

from specrag.index.builder import IndexBuilder, IndexBuildReport
from specrag.index.embeddings import build_embed_model, embed_model_id
from specrag.index.manifest import ApiEntry, ApiState, Manifest, load_manifest
from specrag.index.store import HYBRID, LEXICAL, ChunkStore

__all__ = [
    "HYBRID",
    "LEXICAL",
    "ApiEntry",
    "ApiState",
    "ChunkStore",
    "IndexBuildReport",
    "IndexBuilder",
    "Manifest",
    "build_embed_model",
    "embed_model_id",
    "load_manifest",
]
