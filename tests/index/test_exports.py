"""The public names of specrag.index (what the retriever, engine and CLI import)."""

import inspect

import specrag.index as index


def test_exported_members():
    # submodules show up in dir() once anything imported them; the exports are the rest
    public = {name for name in dir(index) if not name.startswith("_") and not inspect.ismodule(getattr(index, name))}
    assert set(index.__all__) == public
    params = list(inspect.signature(index.ChunkStore.vector_search).parameters)
    assert params == ["self", "query", "file_ids", "types", "top_k", "hydrate", "methods"]
    assert callable(index.ChunkStore.hydrate)
    assert list(inspect.signature(index.IndexBuilder.build).parameters) == ["self", "apis", "progress", "keep"]
