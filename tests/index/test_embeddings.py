"""Embedder choice: the local ONNX model, 'none', and failures that degrade to lexical search."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from specrag.core.settings import Settings
from specrag.index import embeddings
from specrag.index.embeddings import (
    as_embedder,
    build_embed_model,
    embed_model_id,
    embed_queries,
)
from specrag.index.vector_reuse import embed_text
from specrag.specs.ingest import ingest_paths

from .fleet import MODEL_DIR

DEMO_SPECS = Path(__file__).resolve().parents[2] / "examples" / "specs"
QUERIES = ["create a user", "list pets by tag", "weather forecast for a city"]


def demo_texts() -> list[str]:
    """The embed texts of the demo specs' chunks: real texts, of many lengths."""
    apis = ingest_paths([DEMO_SPECS], Settings().ingest.chunk_max_tokens, progress=False).apis
    return [embed_text(chunk) for api in apis for chunk in api.chunks]


def test_local_onnx_model_embeds_short_texts(embed_model):
    vectors = embed_model.get_text_embedding_batch(["list pets", "weather forecast for a city"])
    assert [len(v) for v in vectors] == [384, 384]
    assert embed_model.embed_batch_size == embeddings.EMBED_BATCH_SIZE
    assert embed_model_id(embed_model) == "FastEmbedEmbedding:sentence-transformers/all-MiniLM-L6-v2"
    similar = sum(a * b for a, b in zip(embed_model.get_query_embedding("pets for sale"), vectors[0]))
    unrelated = sum(a * b for a, b in zip(embed_model.get_query_embedding("pets for sale"), vectors[1]))
    assert similar > unrelated


def test_build_side_and_query_side_give_identical_vectors(embed_model):
    """Builds embed through the Embedder (no LlamaIndex import); queries through its LlamaIndex
    face, which calls the same Embedder: the same text gets the same vector, bit for bit."""
    embedder = as_embedder(embed_model)
    assert embedder is not None and embedder.llama is embed_model
    texts = demo_texts()
    assert len(texts) > 20
    built = np.asarray(embedder.embed_documents(texts))
    assert np.array_equal(built, np.asarray(embed_model.get_text_embedding_batch(texts)))
    assert np.array_equal(built[:1], np.asarray([embed_model.get_text_embedding(texts[0])]))
    for query in QUERIES:
        one = embed_model.get_query_embedding(query)
        assert one == embed_queries(embedder, [query])[0] == embedder.embed_queries([query])[0]
    assert np.allclose(embed_queries(embedder, QUERIES), [embed_model.get_query_embedding(q) for q in QUERIES],
                       atol=1e-6)  # a batch of queries pads to its longest: equal up to float rounding


def test_vectors_are_those_of_llama_index_fastembed(embed_model):
    """Indexes were built through LlamaIndex's FastEmbedEmbedding and are recorded under its
    identity: the Embedder gives exactly its vectors, so they are kept, not re-embedded."""
    from llama_index.embeddings.fastembed import FastEmbedEmbedding

    embedder = as_embedder(embed_model)
    texts = demo_texts()
    library = FastEmbedEmbedding(model_name=Settings().embeddings.embed_model, embed_batch_size=embeddings.EMBED_BATCH_SIZE,
                                 specific_model_path=str(MODEL_DIR))
    assert embedder.model_id == f"{library.class_name()}:{library.model_name}"
    assert np.array_equal(np.asarray(embedder.embed_documents(texts)), np.asarray(library.get_text_embedding_batch(texts)))
    for query in QUERIES:
        assert embedder.embed_queries([query])[0] == library.get_query_embedding(query)


def test_none_means_lexical_without_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert build_embed_model(Settings(embed_model="none")) is None
    assert not caplog.records
    assert embed_model_id(None) == "none"


def test_bad_model_path_warns_once_and_returns_none(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(embeddings, "_warned", set())
    settings = Settings(embed_model_path=tmp_path / "missing-model")
    with caplog.at_level(logging.WARNING, logger="specrag.index.embeddings"):
        assert build_embed_model(settings) is None
        assert build_embed_model(settings) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "lexical-only" in warnings[0].getMessage() and "SPECRAG_EMBED_MODEL_PATH" in warnings[0].getMessage()


def test_openai_without_extra_package_names_the_install(caplog, monkeypatch):
    monkeypatch.setattr(embeddings, "_warned", set())
    settings = Settings(embed_model="openai:text-embedding-3-small", openai_api_key="sk-test")
    with caplog.at_level(logging.WARNING, logger="specrag.index.embeddings"):
        model = build_embed_model(settings)
    try:
        import llama_index.embeddings.openai  # noqa: F401
    except ImportError:
        assert model is None
        assert "pip install 'specrag[openai-embeddings]'" in caplog.text
    else:
        assert embed_model_id(model).endswith("text-embedding-3-small")


def test_model_dir_fixture_path_is_the_shared_one():
    assert MODEL_DIR.name == "all-MiniLM-L6-v2-onnx"


def test_unreachable_hub_falls_back_to_lexical_at_once(tmp_path, monkeypatch, caplog):
    """No local path, nothing cached, hub unreachable: no 40 s of fastembed retries."""
    import time

    import specrag.index.embeddings as embeddings

    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(embeddings, "HUB_HOST", "127.0.0.1")  # nothing listens on 443 here
    monkeypatch.setattr(embeddings, "_warned", set())
    start = time.perf_counter()
    with caplog.at_level("WARNING"):
        model = embeddings.build_embed_model(Settings(data_dir=tmp_path, embed_model_path=None))
    assert model is None
    assert time.perf_counter() - start < 5
    assert "hub is unreachable" in caplog.text and "SPECRAG_EMBED_MODEL_PATH" in caplog.text
