"""The public names of specrag.index (what the retriever, engine and CLI import)."""

import inspect

import specrag.index as index


def test_exported_members():
    assert set(index.__all__) == {name for name in dir(index) if not name.startswith("_")} - {
        "batching", "blas", "bounded", "builder", "chroma_rows", "collections", "embeddings", "lexical", "llama_embedding", "local", "lock", "manifest", "pack",
        "pack_writer", "publish", "replica", "store", "vector_reuse"}
    params = list(inspect.signature(index.ChunkStore.vector_search).parameters)
    assert params == ["self", "query", "file_ids", "types", "top_k", "hydrate", "methods"]
    assert callable(index.ChunkStore.hydrate)
    assert list(inspect.signature(index.IndexBuilder.build).parameters) == ["self", "apis", "progress", "keep"]
